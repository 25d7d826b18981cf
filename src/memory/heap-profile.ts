/**
 * HeapProfile: what the profiler knows, read from the buffer alone (any
 * thread, or a saved heap image), for one shard or all shards merged.
 * Site figures are already scaled (sampled estimates are weighted when
 * recorded), so merging shards adds them; the tree and the other renderers
 * (src/report) take it from here.
 */
import { S_PROF_RATE } from "./layout.js";
import type { ShardRegion } from "./region.js";
import { readSites } from "./site-table.js";
import type { Frame } from "./stack-capture.js";

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
}

/**
 * A key that is the same for two sites exactly when their frames and
 * labels are (a site is its frames plus its labels: DESIGN "Labels").
 */
export function siteKey(frames: readonly Frame[], labels?: Readonly<Record<string, string>>): string {
  const stack = frames.map((f) => `${f.functionName}\0${f.url}\0${f.line}\0${f.column}`).join("\x01");
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
 * not changed.
 */
export function sitesByFrames(sites: Iterable<AllocationSite>): Map<string, AllocationSite> {
  const byKey = new Map<string, AllocationSite>();
  for (const s of sites) {
    const key = siteKey(s.frames, s.labels);
    const seen = byKey.get(key);
    if (seen) {
      seen.count += s.count;
      seen.size += s.size;
      seen.allocCount += s.allocCount;
      seen.allocSize += s.allocSize;
    } else {
      const site: AllocationSite = { frames: s.frames, count: s.count, size: s.size, allocCount: s.allocCount, allocSize: s.allocSize };
      if (s.labels !== undefined) site.labels = s.labels;
      byKey.set(key, site);
    }
  }
  return byKey;
}

export function sampleRateOf(r: ShardRegion): number {
  return r.headerSlot(S_PROF_RATE);
}

/** One shard's profile (`shard` given), or every shard's merged by stack. */
export function heapProfileOf(regions: readonly ShardRegion[], shard?: number): HeapProfile {
  const chosen = shard === undefined ? regions : [regions[shard]!];
  const merged = sitesByFrames(chosen.flatMap((r) => readSites(r)));
  const rates = new Set(chosen.map(sampleRateOf));
  const sites = [...merged.values()].sort((a, b) => b.size - a.size);
  return {
    shard: shard === undefined ? "all" : shard,
    sampleRate: rates.size === 1 ? [...rates][0]! : -1,
    sites,
    totalSize: sites.reduce((n, s) => n + s.size, 0),
    totalCount: sites.reduce((n, s) => n + s.count, 0),
  };
}
