/**
 * The live HeapProfile, read from the buffer alone (any thread, or a saved
 * heap image), for one shard or all shards merged by stack; and
 * profileOfSites, how every reader of a profile (live, peak-profile.ts,
 * a timeline's tick in timeline-profile.ts) shapes one. The values and
 * their keys are the allocator's (heap-profile.ts).
 */
import { sampleRateOf, siteWith, sitesByFrames, type AllocationSite, type FoldedSites, type HeapProfile } from "../heap-profile.js";
import type { ShardRegion } from "../region.js";
import { readProfilerFill, readSites } from "./site-table.js";

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
