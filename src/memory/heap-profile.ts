/**
 * HeapProfile: what the profiler knows, read from the buffer alone (any
 * thread, or a saved heap image), for one shard or all shards merged.
 * Site figures are already scaled (sampled estimates are weighted when
 * recorded), so merging shards adds them; the tree and the other renderers
 * (src/report) take it from here.
 */
import { S_PROF_RATE } from "./layout.js";
import type { ShardRegion } from "./region.js";
import { readProfilerFill, readSites, type ProfilerTable } from "./profiler/site-table.js";
import type { Frame } from "./profiler/stack-capture.js";

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

export type { ProfilerTable };

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

export function sampleRateOf(r: ShardRegion): number {
  return r.headerSlot(S_PROF_RATE);
}

/**
 * One shard's profile (`shard` given), or every shard's merged by stack. A
 * shard's own sites need no merging: its table holds each stack once.
 */
export function heapProfileOf(regions: readonly ShardRegion[], shard?: number): HeapProfile {
  const chosen = shard === undefined ? regions : [regions[shard]!];
  const read = (r: ShardRegion): AllocationSite[] => readSites(r).map((s) => siteWith(s, s));
  const sites = chosen.length === 1 ? read(chosen[0]!) : [...sitesByFrames(chosen.flatMap(read)).values()];
  const folded = foldedOf(chosen);
  return { ...profileOfSites(chosen, shard, sites), ...(folded === undefined ? {} : { folded }) };
}

/**
 * The profile of `sites` (sorted here, largest first), read from regions
 * `chosen`, of shard `shard` (undefined: all): the shards' common rate,
 * the totals. How every reader of a profile (live, peak, a timeline's
 * tick) shapes it.
 */
export function profileOfSites(chosen: readonly ShardRegion[], shard: number | undefined, sites: AllocationSite[]): HeapProfile {
  const rates = new Set(chosen.map(sampleRateOf));
  sites.sort((a, b) => b.size - a.size);
  return {
    shard: shard === undefined ? "all" : shard,
    sampleRate: rates.size === 1 ? [...rates][0]! : -1,
    sites,
    totalSize: sites.reduce((n, s) => n + s.size, 0),
    totalCount: sites.reduce((n, s) => n + s.count, 0),
  };
}

/** The regions' folded figures added up, or undefined when none folded anything. */
export function foldedOf(regions: readonly ShardRegion[]): FoldedSites | undefined {
  const all = regions.map(readProfilerFill).filter((f) => f.folded.allocCount > 0);
  if (all.length === 0) return undefined;
  const full = new Set(all.flatMap((f) => f.full));
  return {
    count: all.reduce((n, f) => n + f.folded.count, 0),
    size: all.reduce((n, f) => n + f.folded.size, 0),
    allocCount: all.reduce((n, f) => n + f.folded.allocCount, 0),
    allocSize: all.reduce((n, f) => n + f.folded.allocSize, 0),
    siteCapacity: Math.min(...all.map((f) => f.siteCapacity)),
    full: (["sites", "frames", "strings"] as const).filter((t) => full.has(t)),
  };
}
