/**
 * Profile arithmetic for leak hunting: `diffProfiles(base, next)` is next
 * minus base per allocation site, the question users bring ("what grew?"),
 * as pprof's -diff_base, heaptrack --diff and DevTools' comparison view
 * answer it. Sites are matched by their frames (function, url, line,
 * column, leaf first) and labels; a site found in one profile only counts as zero in
 * the other. Every figure (count, size, allocCount, allocSize) becomes a
 * signed difference, and the totals are next's minus base's, so every
 * renderer that adds site figures (tree, collapsed, pprof) adds up to the
 * difference of the totals.
 *
 * A diff is a HeapProfile with two more things: each site's live bytes in
 * next (`nextSize`: the differential flamegraph takes its widths from next,
 * as Brendan Gregg's differential flame graphs do) and both sides' totals.
 * The renderers recognise it with isProfileDiff and print signs, or the
 * differential palette. `mergeProfiles` adds profiles up by site (the admin
 * server keeps one baseline per shard and merges them for "all").
 */
import { siteWith, sitesByFrames, type AllocationSite, type HeapProfile } from "../memory/heap-profile.js";

export interface DiffSite extends AllocationSite {
  /** The site's live bytes in the next profile (0 when it is only in base). */
  nextSize: number;
}

/** One side of a diff, as it was. */
export interface ProfileSide {
  shard: number | "all";
  sampleRate: number;
  totalSize: number;
  totalCount: number;
}

/** next minus base: every site figure and total is a signed difference. */
export interface ProfileDiff extends HeapProfile {
  sites: DiffSite[];
  base: ProfileSide;
  next: ProfileSide;
}

export function isProfileDiff(p: HeapProfile): p is ProfileDiff {
  const d = p as Partial<ProfileDiff>;
  return typeof d.base === "object" && d.base !== null && typeof d.next === "object" && d.next !== null;
}

/**
 * Whether a diff's site changed at all. pprof and json leave unchanged
 * sites out (they are no difference); the flamegraph keeps them, as its
 * widths come from next.
 */
export const siteChanged = (s: AllocationSite): boolean => s.count !== 0 || s.size !== 0 || s.allocCount !== 0 || s.allocSize !== 0;

const side = (p: HeapProfile): ProfileSide => ({ shard: p.shard, sampleRate: p.sampleRate, totalSize: p.totalSize, totalCount: p.totalCount });

/** Sites of `p` added up by frames (a hand-built or merged profile may list one stack twice). */
function sitesByKey(p: HeapProfile): Map<string, AllocationSite> {
  return sitesByFrames(p.sites);
}

export function diffProfiles(base: HeapProfile, next: HeapProfile): ProfileDiff {
  const before = sitesByKey(base);
  const after = sitesByKey(next);
  const sites: DiffSite[] = [];
  for (const [key, n] of after) {
    const b = before.get(key);
    const change = { count: n.count - (b?.count ?? 0), size: n.size - (b?.size ?? 0), allocCount: n.allocCount - (b?.allocCount ?? 0), allocSize: n.allocSize - (b?.allocSize ?? 0) };
    sites.push({ ...siteWith(n, change), nextSize: n.size });
  }
  for (const [key, b] of before) {
    if (after.has(key)) continue;
    sites.push({ ...siteWith(b, { count: -b.count, size: -b.size, allocCount: -b.allocCount, allocSize: -b.allocSize }), nextSize: 0 });
  }
  // Growth first, shrinkage last: the order a leak hunter reads in.
  sites.sort((a, b) => b.size - a.size);
  return {
    shard: base.shard === next.shard ? next.shard : "all",
    sampleRate: base.sampleRate === next.sampleRate ? next.sampleRate : -1,
    sites,
    totalSize: next.totalSize - base.totalSize,
    totalCount: next.totalCount - base.totalCount,
    base: side(base),
    next: side(next),
  };
}

/** Profiles (of different shards) added up by site: what heapProfile() gives for all shards. */
export function mergeProfiles(profiles: readonly HeapProfile[]): HeapProfile {
  const all: HeapProfile = { shard: "all", sampleRate: 0, sites: profiles.flatMap((p) => p.sites), totalSize: 0, totalCount: 0 };
  const sites = [...sitesByKey(all).values()].sort((a, b) => b.size - a.size);
  const rates = new Set(profiles.map((p) => p.sampleRate));
  return {
    shard: profiles.length === 1 ? profiles[0]!.shard : "all",
    sampleRate: rates.size === 1 ? [...rates][0]! : -1,
    sites,
    totalSize: profiles.reduce((n, p) => n + p.totalSize, 0),
    totalCount: profiles.reduce((n, p) => n + p.totalCount, 0),
  };
}
