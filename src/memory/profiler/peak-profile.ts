/**
 * PeakProfile: the sites and figures live at a peak (peaks.ts), read from
 * the buffer alone (any thread, or a heap image), shaped as the live
 * HeapProfile is (heap-profile.ts) so every report renders it: one
 * shard's peak, or the heap-wide one (the moment the shards' sum was
 * highest) when no shard is named.
 */
import { HeapFormatError } from "../../errors.js";
import { siteWith, sitesByFrames, type AllocationSite, type FoldedSites, type PeakProfile } from "../heap-profile.js";
import { profileOfSites } from "./live-profile.js";
import { OTHER_SITES, PEAK_UNIT_BYTES, S_PROF_HEAP_UNITS } from "../layout.js";
import { figuresAtPeak, readHeapPeakTimes, readPeakSlots, type PeakKind } from "./peaks.js";
import type { ShardRegion } from "../region.js";
import { readProfilerFill, readSites, siteCounters } from "./site-table.js";

/** The sites of region `r` with their figures at the peak of `kind` (those with no allocation by then left out). */
function sitesAtPeak(r: ShardRegion, kind: PeakKind): { sites: AllocationSite[]; folded: AllocationSite | undefined } {
  const sites: AllocationSite[] = [];
  let folded: AllocationSite | undefined;
  for (const raw of readSites(r)) {
    const figures = figuresAtPeak(r, raw.id, siteCounters(r, raw.id), kind);
    if (figures.allocCount === 0) continue;
    const site = siteWith(raw, figures);
    sites.push(site);
    if (raw.id === OTHER_SITES) folded = site;
  }
  return { sites, folded };
}

/** HeapFormatError unless the heap keeps peaks (a heap image written before them does not). */
function checkHasPeaks(regions: readonly ShardRegion[]): void {
  const r = regions[0];
  if (r !== undefined && r.peaksOffset === 0) {
    throw new HeapFormatError(`this heap (format version ${r.version}) was written before shardheap kept peaks: it holds no peak profile`);
  }
}

/**
 * Shard `shard`'s peak profile, or the heap-wide one when `shard` is
 * undefined. Exact when the shards are quiet; a busy shard may be read a
 * few operations apart, as its live profile may.
 */
export function peakProfileOf(regions: readonly ShardRegion[], shard?: number): PeakProfile {
  checkHasPeaks(regions);
  const chosen = shard === undefined ? regions : [regions[shard]!];
  const kind: PeakKind = shard === undefined ? "heap" : "shard";
  const read = chosen.map((r) => ({ r, ...sitesAtPeak(r, kind) }));
  const profile = profileOfSites(chosen, shard, read.length === 1 ? read[0]!.sites : [...sitesByFrames(read.flatMap((x) => x.sites)).values()]);
  const folded = foldedAtPeak(read);
  const times = shard === undefined ? readHeapPeakTimes(regions[0]!.f64) : undefined;
  return {
    ...profile,
    ...(folded === undefined ? {} : { folded }),
    peakBytes: times === undefined ? readPeakSlots(chosen[0]!).peakBytes : profile.totalSize,
    peakTime: times === undefined ? readPeakSlots(chosen[0]!).peakTime : times.peakTime,
  };
}

/** What "(other sites)" held at the peak, as HeapProfile.folded says it (undefined when nothing was folded by then). */
function foldedAtPeak(read: ReadonlyArray<{ r: ShardRegion; folded: AllocationSite | undefined }>): FoldedSites | undefined {
  const all = read.filter((x) => x.folded !== undefined);
  if (all.length === 0) return undefined;
  const fills = all.map((x) => readProfilerFill(x.r));
  const full = new Set(fills.flatMap((f) => f.full));
  const sum = (field: "count" | "size" | "allocCount" | "allocSize"): number => all.reduce((n, x) => n + x.folded![field], 0);
  return {
    count: sum("count"),
    size: sum("size"),
    allocCount: sum("allocCount"),
    allocSize: sum("allocSize"),
    siteCapacity: Math.min(...fills.map((f) => f.siteCapacity)),
    full: (["sites", "frames", "strings"] as const).filter((t) => full.has(t)),
  };
}

/**
 * heap.check()'s look at the books (check.ts): the shard's live figure is
 * the sum of its sites' live bytes (both on the books' grid, so exactly),
 * at most its peak, and its share of the heap-wide sum is that figure in
 * PEAK_UNIT_BYTES units.
 */
export function peakBooksProblem(r: ShardRegion): string | undefined {
  if (r.peaksOffset === 0) return undefined;
  const s = readPeakSlots(r);
  let sum = 0;
  for (const site of readSites(r)) sum += site.size;
  if (s.live !== sum) return `the peak's books count ${s.live} profiled live bytes, the sites hold ${sum}`;
  if (s.live > s.peakBytes) return `the peak (${s.peakBytes} bytes) is below the profiled live bytes (${s.live})`;
  const units = r.i32[r.hdr + S_PROF_HEAP_UNITS];
  if (units !== Math.floor(s.live / PEAK_UNIT_BYTES)) return `the heap-wide sum holds ${units} units of this shard, its live bytes make ${Math.floor(s.live / PEAK_UNIT_BYTES)}`;
  return undefined;
}
