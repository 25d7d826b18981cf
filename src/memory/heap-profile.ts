/**
 * The profile values the heap hands out, and the pure operations on them:
 * HeapProfile (the live sites), PeakProfile (the sites at a peak),
 * SiteTimeline (the largest sites over time) and ProfilerFill (how full
 * the tables are), with the keys and the merging every reader and renderer
 * shares. They are the vocabulary of the allocator's public methods
 * (SharedHeap.heapProfile, ShardAllocator.peakProfile, ...), of the
 * profiler, which reads them from the buffer (profiler/live-profile.ts,
 * peak-profile.ts, timeline-profile.ts), and of the renderers (src/report).
 * Nothing here reads the profiler's tables: the allocator names these
 * types without importing the profiler. Site figures are already scaled
 * (sampled estimates are weighted when recorded), so merging shards adds
 * them.
 */
import { S_PROF_RATE } from "./layout.js";
import type { ShardRegion } from "./region.js";

/** One stack frame, 1-based line and column: the package root's Frame (AllocationSite.frames). */
export interface Frame {
  functionName: string;
  url: string;
  line: number;
  column: number;
}

export interface AllocationSite {
  /** Leaf first; frames[0] is the code that called shardheap. */
  frames: Frame[];
  /** Live objects (estimated, fractional, when sampled). */
  count: number;
  /** Live bytes: objectSize() of the live objects, tags excluded (estimated when sampled). */
  size: number;
  /** Cumulative since profiling began (estimated when sampled). */
  allocCount: number;
  allocSize: number;
  /** The labels in force when its objects were allocated (withHeapLabels); absent when there were none. */
  labels?: Record<string, string>;
}

export interface HeapProfile {
  shard: number | "all";
  /** The shards' common sample rate in bytes (0 off, 1 exact), or -1 when they differ. */
  sampleRate: number;
  sites: AllocationSite[];
  totalSize: number;
  totalCount: number;
  /**
   * What the site tables could not hold, folded into the "(other sites)"
   * site; absent when nothing was (a profile read from a heap, whose
   * tables fill; not a diff's, a label filter's or a pprof file's).
   */
  folded?: FoldedSites;
}

/** A profiler table that can fill up, as HeapProfile.folded names it. */
export type ProfilerTable = "sites" | "frames" | "strings";

/** A site's four figures. */
export type SiteFigures = Pick<AllocationSite, "count" | "size" | "allocCount" | "allocSize">;

/**
 * A new site of `from`'s frames and labels (when it has any) with
 * `figures` (by default its own): how every reader and renderer copies a
 * site, so a site's labels go wherever its frames go.
 */
export function siteWith(from: Pick<AllocationSite, "frames" | "labels">, figures: SiteFigures): AllocationSite {
  const site: AllocationSite = { frames: from.frames, count: figures.count, size: figures.size, allocCount: figures.allocCount, allocSize: figures.allocSize };
  if (from.labels !== undefined) site.labels = from.labels;
  return site;
}

/**
 * The allocations that went to "(other sites)" because a table was full:
 * the figures of that site (so also in `sites`), and what to raise.
 */
export interface FoldedSites {
  /** Live objects and bytes among them (estimated when sampled). */
  count: number;
  size: number;
  /** Allocations and bytes folded since profiling began (estimated when sampled). */
  allocCount: number;
  allocSize: number;
  /** Stacks each shard keeps exactly: the heap's heapprofSites (--heapprof-sites). */
  siteCapacity: number;
  /** The tables that filled: "sites", "frames", "strings" (all grow with heapprofSites). */
  full: ProfilerTable[];
}

export interface PeakProfile extends HeapProfile {
  /** The profiled live bytes at the peak: the shard's (its PK_PEAK), or the shards' sum at the heap-wide peak. */
  peakBytes: number;
  /** When, in ms since the epoch (0: no profiled byte since profiling began or the last reset). */
  peakTime: number;
}

/** A site a timeline names. */
export interface TimelineSite {
  frames: Frame[];
  labels?: Record<string, string>;
}

/** One tick: when, allocated memory, profiled live bytes, and the largest sites' live bytes and objects. */
export interface TimelineSample {
  /** ms since the epoch. */
  t: number;
  used: number;
  live: number;
  /** [index into SiteTimeline.sites, live bytes, live objects], largest first (estimates when sampled). */
  sites: Array<[site: number, bytes: number, objects: number]>;
}

/** The largest sites' live bytes over time, per tick of one shard's timeline or of every shard's summed. */
export interface SiteTimeline {
  shard: number | "all";
  /** How many sites each shard's ticks keep. */
  sitesPerSample: number;
  sites: TimelineSite[];
  samples: TimelineSample[];
}

/**
 * How full a region's profiler is: the stacks it keeps and may keep, the
 * tables that refused an entry (S_PROF_FULL), and what it folded into
 * "(other sites)" (site 0's raw figures: estimates when sampled).
 */
export interface ProfilerFill {
  /** Stacks recorded (site records but site 0). */
  sites: number;
  /** Stacks it keeps exactly at most. */
  siteCapacity: number;
  full: ProfilerTable[];
  folded: { count: number; size: number; allocCount: number; allocSize: number };
}

/*
 * Keys by object: a profile's sites share frame objects and a region's
 * reader keeps each site's frame list from one read to the next
 * (site-table.ts readSites), so a key is built once per frame and once per
 * site, not once per site and read. At 50,000 sites of 13 frames, building
 * every key anew made heapProfile() 0.9 s and the dashboard's
 * once-a-second sample 1.5 s. Frames are values nobody changes.
 */
const frameKeys = new WeakMap<Frame, string>();
const siteKeys = new WeakMap<readonly Frame[], string>();

/** A key that is the same for two frames exactly when their fields are. */
export function frameKey(f: Frame): string {
  let key = frameKeys.get(f);
  if (key === undefined) frameKeys.set(f, (key = `${f.functionName}\0${f.url}\0${f.line}\0${f.column}`));
  return key;
}

/**
 * A key that is the same for two sites exactly when their frames and
 * labels are (a site is its frames plus its labels: DESIGN "Labels").
 */
export function siteKey(frames: readonly Frame[], labels?: Readonly<Record<string, string>>): string {
  let stack = siteKeys.get(frames);
  if (stack === undefined) siteKeys.set(frames, (stack = frames.map(frameKey).join("\x01")));
  return labels === undefined ? stack : `${stack}\x02${labelKey(labels)}`;
}

/** Labels as one string, the same for the same labels in any order. */
export function labelKey(labels: Readonly<Record<string, string>>): string {
  return Object.keys(labels)
    .sort()
    .map((k) => `${k}\0${labels[k]}`)
    .join("\x01");
}

/**
 * Sites added up by frames and labels (shards share a stack; a hand-built
 * or merged profile may list one twice), as new objects: the inputs are
 * not changed. The map's keys are siteKey's (so two calls' maps match up,
 * as a diff needs); the sites are grouped first by frame numbers given
 * here (one per distinct frame), so a site's key is a few digits a frame
 * rather than its text, and siteKey runs once a group.
 */
export function sitesByFrames(sites: Iterable<AllocationSite>): Map<string, AllocationSite> {
  const byKey = new Map<string, AllocationSite>();
  const frameIds = new Map<string, number>();
  const idOf = (f: Frame): number => {
    const k = frameKey(f);
    let id = frameIds.get(k);
    if (id === undefined) frameIds.set(k, (id = frameIds.size));
    return id;
  };
  for (const s of sites) {
    const stack = s.frames.map(idOf).join(",");
    const key = s.labels === undefined ? stack : `${stack}\x02${labelKey(s.labels)}`;
    const seen = byKey.get(key);
    if (seen) {
      seen.count += s.count;
      seen.size += s.size;
      seen.allocCount += s.allocCount;
      seen.allocSize += s.allocSize;
    } else {
      byKey.set(key, siteWith(s, s));
    }
  }
  return new Map([...byKey.values()].map((s) => [siteKey(s.frames, s.labels), s]));
}

/** A region's sample rate in bytes (0 off, 1 exact), from its header. */
export function sampleRateOf(r: ShardRegion): number {
  return r.headerSlot(S_PROF_RATE);
}
