/**
 * Validation of a region that came from outside (a heap image): every
 * value a reader follows or shows, checked against its bounds before the
 * heap is handed to statistics, diagnostics, the checker or the profile
 * readers. The shard's own writer keeps these by construction; a file
 * keeps nothing, and a valid CRC only proves the bytes were not damaged
 * by accident.
 *
 * Only per-field bounds are required, never relations between fields that
 * a shard updates one after the other (a pool's cached and span-free
 * counts, say): an image of a running heap is copied while shards work,
 * and must still read. The exception is mallocs >= frees, which sit in
 * one cache line and are copied together.
 *
 * The profiler's tables are validated by site-table.ts, which owns them.
 */
import {
  C_BASE,
  PAGE_POOL,
  PM_FREELIST,
  PM_HEAD,
  PM_NEXT,
  PM_PREV,
  PM_SITE,
  PM_SPAN_PAGES,
  PM_STATE,
  PM_USED,
  POOL_STRIDE,
  P_CAPACITY,
  P_CLAIMED_HEAD,
  P_FREES_HI,
  P_FREE_COUNT,
  P_FREE_HEAD,
  P_MALLOCS_HI,
  P_MAX_FREE,
  P_PAGES_IN_USE,
  P_SPAN_FREE,
  P_SPAN_LIST,
  S_BITMAP_OFFSET,
  S_CLASS_MAP_OFFSET,
  S_DATA_OFFSET,
  S_DATA_PAGES,
  S_FREE_PAGES,
  S_ID,
  S_META_OFFSET,
  S_OWNER,
  S_SPAN_LISTS,
  SPAN_LIST_COUNT,
  TAG_SITE_MASK,
  regionLayout,
} from "../layout.js";
import { outboxHead } from "../cross-shard.js";
import type { ShardRegion } from "../region.js";
import { POOL_COUNT } from "../size-classes.js";
import { siteTableProblem } from "../profiler/site-table.js";
import { peaksProblem } from "../profiler/peaks.js";
import { timelineProblem } from "../profiler/timeline.js";
import { pressureProblem } from "../pressure.js";
import { readStats } from "../memory-stats.js";

/** Float64 shard counters (layout.ts C_*): mallocs through cross-shard frees received. */
const SHARD_COUNTERS = 8;
/** A pool count's carry word: counts stay below 2^53, so the carry below 2^21. */
const MAX_CARRY = 2 ** 21;

/**
 * What is wrong with region `r` of a heap of `shardBytes` regions whose
 * profilers keep `profilerSites` stacks, as a sentence, or undefined when
 * every reader can follow it. Cost: linear in pages and used profiler
 * records (~1 ms for a 64 MiB shard).
 */
export function regionProblem(r: ShardRegion, shardBytes: number, profilerSites: number, regions: readonly ShardRegion[]): string | undefined {
  const layout = regionLayout(r.id, shardBytes, profilerSites, r.version);
  const slots: Array<[string, number, number]> = [
    ["shard id", S_ID, r.id],
    ["data pages", S_DATA_PAGES, layout.dataPages],
    ["page metadata offset", S_META_OFFSET, layout.metaOffset],
    ["class map offset", S_CLASS_MAP_OFFSET, layout.classMapOffset],
    ["bitmap offset", S_BITMAP_OFFSET, layout.bitmapOffset],
    ["data offset", S_DATA_OFFSET, layout.dataOffset],
  ];
  for (const [what, slot, expected] of slots) {
    if (r.headerSlot(slot) !== expected) return `${what} is ${r.headerSlot(slot)}, the layout says ${expected}`;
  }
  const pages = r.dataPages;
  const isPage = (p: number): boolean => p >= -1 && p < pages; // -1: none
  const isObject = (ptr: number): boolean => ptr === 0 || (r.contains(ptr) && ptr % 8 === 0);
  const freePages = r.headerSlot(S_FREE_PAGES);
  if (freePages < 0 || freePages > pages) return `${freePages} free pages, of ${pages}`;
  for (let k = 0; k < SPAN_LIST_COUNT; k++) {
    if (!isPage(r.headerSlot(S_SPAN_LISTS + k))) return `free-span list ${k} starts at page ${r.headerSlot(S_SPAN_LISTS + k)}, of ${pages}`;
  }
  if (!isObject(r.u32[r.inbox]!)) return `cross-shard inbox holds ${r.u32[r.inbox]}, not an object of the shard`;
  if (r.headerSlot(S_OWNER) < 0) return `owner word is ${r.headerSlot(S_OWNER)}`;
  for (const destination of regions) {
    const head = outboxHead(r, destination.id);
    if (head !== 0 && !(destination.contains(head) && head % 8 === 0)) {
      return `outbox for shard ${destination.id} starts at ${head}, not an object of that shard`;
    }
  }
  for (let c = 0; c < SHARD_COUNTERS; c++) {
    const v = r.f64[r.base / 8 + C_BASE + c]!;
    if (!(Number.isSafeInteger(v) && v >= 0)) return `counter ${c} is ${v}`;
  }
  for (let cls = 0; cls < POOL_COUNT; cls++) {
    const problem = poolProblem(r, cls, isPage, isObject);
    if (problem) return `size-class pool ${cls}: ${problem}`;
  }
  const stats = readStats(r);
  if (stats.frees > stats.mallocs) return `${stats.frees} frees but ${stats.mallocs} mallocs`;
  const siteCapacity = layout.profiler.sites;
  for (let p = 0; p < pages; p++) {
    const m = r.pageMeta(p);
    const state = r.i32[m + PM_STATE]!;
    if (state < 0 || state > PAGE_POOL) return `page ${p} has state ${state}`;
    const length = r.i32[m + PM_SPAN_PAGES]!;
    if (length < 0 || p + length > pages) return `page ${p} heads a span of ${length} pages, of ${pages}`;
    for (const [what, field] of [["next", PM_NEXT], ["previous", PM_PREV], ["head", PM_HEAD]] as const) {
      if (!isPage(r.i32[m + field]!)) return `page ${p}'s ${what} page is ${r.i32[m + field]}, of ${pages}`;
    }
    if (!isObject(r.u32[m + PM_FREELIST]!)) return `page ${p}'s free list starts at ${r.u32[m + PM_FREELIST]}, not an object of the shard`;
    if (r.i32[m + PM_USED]! < 0) return `page ${p} has ${r.i32[m + PM_USED]} objects in use`;
    // Bounded by the table's capacity, not its count: an image of a running
    // heap copies the count before the pages, so a new site's tag may be newer.
    const tag = r.i32[m + PM_SITE]!;
    if (tag !== 0 && ((tag & TAG_SITE_MASK) === 0 || (tag & TAG_SITE_MASK) > siteCapacity)) return `page ${p}'s site tag ${tag} names no site`;
    if (r.u8[r.classMap + p]! > POOL_COUNT) return `page ${p}'s class map entry ${r.u8[r.classMap + p]} names no size class`;
  }
  return siteTableProblem(r, layout) ?? peaksProblem(r) ?? timelineProblem(r) ?? pressureProblem(r);
}

function poolProblem(r: ShardRegion, cls: number, isPage: (p: number) => boolean, isObject: (ptr: number) => boolean): string | undefined {
  const p = r.pools + cls * POOL_STRIDE;
  const i32 = r.i32;
  if (!isObject(r.u32[p + P_FREE_HEAD]!)) return `free list starts at ${r.u32[p + P_FREE_HEAD]}, not an object of the shard`;
  if (!isObject(r.u32[p + P_CLAIMED_HEAD]!)) return `claimed list starts at ${r.u32[p + P_CLAIMED_HEAD]}, not an object of the shard`;
  if (!isPage(i32[p + P_SPAN_LIST]!)) return `span list starts at page ${i32[p + P_SPAN_LIST]}`;
  const pagesInUse = i32[p + P_PAGES_IN_USE]!;
  if (pagesInUse < 0 || pagesInUse > r.dataPages) return `${pagesInUse} pages in use, of ${r.dataPages}`;
  for (const [what, slot] of [["cached", P_FREE_COUNT], ["capacity", P_CAPACITY], ["span-free", P_SPAN_FREE], ["max free", P_MAX_FREE]] as const) {
    if (i32[p + slot]! < 0) return `${what} count ${i32[p + slot]}`;
  }
  for (const [what, slot] of [["malloc", P_MALLOCS_HI], ["free", P_FREES_HI]] as const) {
    if (i32[p + slot]! < 0 || i32[p + slot]! >= MAX_CARRY) return `${what} count carry ${i32[p + slot]}`;
  }
  return undefined;
}
