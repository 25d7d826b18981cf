/**
 * Page spans: the page allocator under everything (Seastar's cpu_pages
 * span lists, with TLSF's placement instead of buddies). Owns the
 * free-span lists, their bitmap and S_FREE_PAGES; hands whole spans to
 * small-pool.ts (pool spans) and shard-allocator.ts (large objects).
 *
 * A free span is any run of pages, as long as it is: its head page is
 * PAGE_FREE with the length, its last page's PM_HEAD names the head (a
 * boundary tag), and freeing pages merges them at once with a free span
 * on either side, so no two free spans ever touch. Free spans sit in
 * segregated lists (Masmano et al., "TLSF", 2004): one list per exact
 * page count below 32 pages, then 16 lists per power of two, and a bitmap
 * says which lists are non-empty. Taking n pages takes the first span of
 * the first non-empty list whose spans all hold n (a bitmap search), after
 * a short look through n's own list when that list also holds shorter
 * spans; the rest of the span stays free. So a request is placed in the
 * smallest free span that holds it, to within 1/16 of its size, and every
 * call is O(1): a few list operations and bit searches, no scanning.
 *
 * Where a span goes:
 *   - a large object (shard-allocator.ts) takes the lists' good fit above,
 *     carved from the high end of the free span chosen;
 *   - a pool span takes the lowest free span that holds it (address-
 *     ordered first fit, among the LOWEST_LOOKS lowest free spans, found
 *     through free-span-index.ts; the lists' good fit when none of those
 *     holds it), carved from its low end.
 * So pool spans pack at the bottom of the shard and large objects at the
 * top, and the free pages between stay one run. The objects that outlive
 * their neighbours (caches, sessions, leaks) are mostly small, so they end
 * up packed in the pool spans at the bottom instead of pinning spans all
 * over the shard (Johnstone and Wilson, 1998: address-ordered placement
 * keeps objects allocated together together). Measured on bench/
 * fragmentation.ts's trickle trace (stress's live set with random
 * victims and every 25th malloc a 1 KiB record that never dies) in
 * stress's 64 MiB shard: the largest free span over the free memory at the
 * live peak went from 41.8% (pool spans by good fit) to 76.6%, its lowest
 * from 17.0% to 30.4%; the smallest shard for the trace from 1.31x its
 * peak (1.10x the best-fit reference) to 1.22x (1.03x); stress 1.44 ->
 * 1.39x (1.13 -> 1.09x the reference), the size-class trace 1.174 ->
 * 1.182x, the large-object trace unchanged (1.217x). `shardheap stress
 * --leak 128K --duration 120` ended with 11-19% of the free memory in its
 * largest span after 60 s before, 49-51% after 120 s now, no failed
 * allocation. LOWEST_LOOKS: 16 looks left 29.5% at the lowest sample, 64
 * and 256 30.4% (the bottom's small holes are seldom more than a few
 * dozen).
 *
 * Why not buddies (what Seastar and this file did before): a
 * power-of-two block that is naturally aligned is a strong demand, and a
 * churning shard could not meet it: the stress workload's shards failed
 * 128-256 KiB allocations with 22 MiB of 60 MiB free, the largest free
 * block 128 KiB, the rest in 4-64 KiB pieces between pool spans.
 */
import {
  PAGE_FREE,
  PAGE_INNER,
  PM_HEAD,
  PM_NEXT,
  PM_PREV,
  PM_SPAN_PAGES,
  PM_STATE,
  SPAN_BITMAP_WORDS,
  SPAN_LIST_COUNT,
  S_FREE_PAGES,
  S_PRESSURE_LEVEL,
  S_PRESSURE_RISE,
  S_SPAN_BITMAP,
  S_SPAN_SUMMARY,
} from "./layout.js";
import { FreeSpanIndex, lowestBit } from "./free-span-index.js";
import { pressureFell, pressureRose } from "./pressure.js";
import type { ShardRegion } from "./region.js";

/** Lists below this hold one exact page count each (list n: spans of n pages). */
export const EXACT_SPAN_LISTS = 32;
/** Spans of n's own list looked at before moving to a list whose spans all fit (n >= 32). */
const OWN_LIST_LOOKS = 8;

/** The list a free span of `pages` pages sits in. */
export function spanListOf(pages: number): number {
  if (pages < EXACT_SPAN_LISTS) return pages;
  const log = 31 - Math.clz32(pages); // >= 5
  return EXACT_SPAN_LISTS + ((log - 5) << 4) + ((pages >>> (log - 4)) & 15);
}

/** The fewest pages a span in list `list` has. */
export function spanListMinPages(list: number): number {
  if (list < EXACT_SPAN_LISTS) return list;
  const log = ((list - EXACT_SPAN_LISTS) >>> 4) + 5;
  return (16 + ((list - EXACT_SPAN_LISTS) & 15)) << (log - 4);
}


/** The first non-empty list at or after `list`, or -1. */
export function firstNonEmptyList(r: ShardRegion, list: number): number {
  if (list >= SPAN_LIST_COUNT) return -1;
  const i32 = r.i32;
  const bitmap = r.hdr + S_SPAN_BITMAP;
  let word = list >>> 5;
  let bits = i32[bitmap + word]! & (-1 << (list & 31));
  if (bits === 0) {
    const rest = i32[r.hdr + S_SPAN_SUMMARY]! & (-2 << word);
    if (rest === 0) return -1;
    word = lowestBit(rest);
    bits = i32[bitmap + word]!;
  }
  return (word << 5) + lowestBit(bits);
}

/** The last non-empty list, or -1 when no page is free. */
export function lastNonEmptyList(r: ShardRegion): number {
  const summary = r.i32[r.hdr + S_SPAN_SUMMARY]!;
  if (summary === 0) return -1;
  const word = 31 - Math.clz32(summary);
  const bits = r.i32[r.hdr + S_SPAN_BITMAP + word]!;
  return bits === 0 ? -1 : (word << 5) + 31 - Math.clz32(bits); // 0: only in a damaged image
}

function insertFreeSpan(r: ShardRegion, p: number, pages: number): void {
  const i32 = r.i32;
  const list = spanListOf(pages);
  const head = i32[r.spanLists + list]!;
  const m = r.pageMeta(p);
  i32[m + PM_STATE] = PAGE_FREE;
  i32[m + PM_SPAN_PAGES] = pages;
  i32[m + PM_NEXT] = head;
  i32[m + PM_PREV] = -1;
  i32[r.pageMeta(p + pages - 1) + PM_HEAD] = p; // the boundary tag a left merge reads
  if (head >= 0) i32[r.pageMeta(head) + PM_PREV] = p;
  else {
    i32[r.hdr + S_SPAN_BITMAP + (list >>> 5)] |= 1 << (list & 31);
    i32[r.hdr + S_SPAN_SUMMARY] |= 1 << (list >>> 5);
  }
  i32[r.spanLists + list] = p;
  r.freeIndex?.add(p);
}

function unlinkFreeSpan(r: ShardRegion, p: number): void {
  const i32 = r.i32;
  const m = r.pageMeta(p);
  const next = i32[m + PM_NEXT]!;
  const prev = i32[m + PM_PREV]!;
  if (prev >= 0) i32[r.pageMeta(prev) + PM_NEXT] = next;
  else {
    const list = spanListOf(i32[m + PM_SPAN_PAGES]!);
    i32[r.spanLists + list] = next;
    if (next < 0) {
      const word = r.hdr + S_SPAN_BITMAP + (list >>> 5);
      i32[word] &= ~(1 << (list & 31));
      if (i32[word] === 0) i32[r.hdr + S_SPAN_SUMMARY] &= ~(1 << (list >>> 5));
    }
  }
  if (next >= 0) i32[r.pageMeta(next) + PM_PREV] = prev;
  // No longer a span head; whoever takes the page sets what it becomes.
  i32[m + PM_STATE] = PAGE_INNER;
  r.freeIndex?.remove(p);
}

/**
 * The free span that ends just before page `p`, or -1. Its last page's
 * PM_HEAD names a candidate head; the candidate is the one only if it
 * heads a free span ending at p (a stale tag, left on a page since taken,
 * fails that test: spans tile the region).
 */
function freeSpanEndingAt(r: ShardRegion, p: number): number {
  if (p === 0) return -1;
  const h = r.i32[r.pageMeta(p - 1) + PM_HEAD]!;
  if (!(h >= 0 && h < p)) return -1;
  const m = r.pageMeta(h);
  return r.i32[m + PM_STATE] === PAGE_FREE && h + r.i32[m + PM_SPAN_PAGES]! === p ? h : -1;
}

/**
 * Return pages [start, start + count) to the free lists, merged with the
 * free spans on either side. The pages' metadata must already say they
 * are not part of a used span (the head page PAGE_INNER).
 */
export function freePageRange(r: ShardRegion, start: number, count: number): void {
  const i32 = r.i32;
  i32[r.hdr + S_FREE_PAGES] += count;
  if (i32[r.hdr + S_PRESSURE_LEVEL] !== 0) pressureFell(r); // a memory-pressure threshold is reached (pressure.ts)
  const end = start + count;
  if (end < r.dataPages) {
    const m = r.pageMeta(end);
    if (i32[m + PM_STATE] === PAGE_FREE) {
      count += i32[m + PM_SPAN_PAGES]!;
      unlinkFreeSpan(r, end);
    }
  }
  const left = freeSpanEndingAt(r, start);
  if (left >= 0) {
    count += start - left;
    start = left;
    unlinkFreeSpan(r, left);
  }
  insertFreeSpan(r, start, count);
}

/** The head of a free span of at least `count` pages (the good fit above), or -1. */
function findFreeSpan(r: ShardRegion, count: number): number {
  const i32 = r.i32;
  let list = spanListOf(count);
  if (spanListMinPages(list) < count) {
    // This list also holds shorter spans: look at a few before going up.
    let p = i32[r.spanLists + list]!;
    for (let k = 0; p >= 0 && k < OWN_LIST_LOOKS; k++, p = i32[r.pageMeta(p) + PM_NEXT]!) {
      if (i32[r.pageMeta(p) + PM_SPAN_PAGES]! >= count) return p;
    }
    list++;
  }
  list = firstNonEmptyList(r, list);
  return list < 0 ? -1 : i32[r.spanLists + list]!;
}

/**
 * Take a span of exactly `count` pages; returns its first page index, or -1
 * when no free span is long enough (the caller decides whether to reclaim
 * and retry). `high`: from the high end of the free span chosen (large
 * objects), else from its low end (pool spans). The returned head page is
 * PAGE_INNER; the caller marks it.
 */
export function allocatePageSpan(r: ShardRegion, count: number, high: boolean): number {
  if (!(count > 0 && count <= r.dataPages)) return -1;
  const p = high ? findFreeSpan(r, count) : lowestFreeSpan(r, count);
  if (p < 0) return -1;
  const pages = r.i32[r.pageMeta(p) + PM_SPAN_PAGES]!;
  unlinkFreeSpan(r, p);
  const free = (r.i32[r.hdr + S_FREE_PAGES] -= count);
  if (free < r.i32[r.hdr + S_PRESSURE_RISE]!) pressureRose(r); // the next memory-pressure threshold is reached (pressure.ts)
  if (pages === count) return p;
  if (high) {
    insertFreeSpan(r, p, pages - count);
    return p + pages - count;
  }
  insertFreeSpan(r, p + count, pages - count);
  return p;
}

/** Free spans looked at from the lowest address up before the lists decide (see the top of this file). */
const LOWEST_LOOKS = 64;

/** The lowest free span of at least `count` pages among the first LOWEST_LOOKS, else the lists' good fit, or -1. */
function lowestFreeSpan(r: ShardRegion, count: number): number {
  const index = r.freeIndex ?? buildFreeIndex(r);
  const i32 = r.i32;
  let p = index.next(0);
  for (let k = 0; p >= 0 && k < LOWEST_LOOKS; k++) {
    const m = r.pageMeta(p);
    if (i32[m + PM_STATE] !== PAGE_FREE) {
      index.remove(p); // stale: see free-span-index.ts
      p = index.next(p + 1);
      continue;
    }
    const pages = i32[m + PM_SPAN_PAGES]!;
    if (pages >= count) return p;
    p = index.next(p + pages);
  }
  return findFreeSpan(r, count);
}

/** The index of the free spans, from the page records: a walk of every span. */
function buildFreeIndex(r: ShardRegion): FreeSpanIndex {
  const index = new FreeSpanIndex(r.dataPages);
  const i32 = r.i32;
  for (let p = 0; p < r.dataPages; ) {
    const m = r.pageMeta(p);
    const state = i32[m + PM_STATE]!;
    const pages = i32[m + PM_SPAN_PAGES]!;
    if (state === PAGE_FREE) index.add(p);
    // Every span's head knows its length; anything else (a damaged record) moves on by one page.
    p += state !== PAGE_INNER && pages > 0 ? pages : 1;
  }
  r.freeIndex = index;
  return index;
}

/**
 * Pages in the longest free span (0 when none). Cost: a walk of the last
 * non-empty list (0.36 us on a 64 MiB shard cut into 534 free spans).
 * Read from other threads too (the admin server's metrics and history,
 * stress's progress line) while the owner changes the lists: a link read
 * mid-change may name a page that no longer heads a free span, so the walk
 * stays inside the region and counts only free heads, and the answer is a
 * span that was free at some moment of the walk, never past the region.
 */
export function largestFreeSpanPages(r: ShardRegion): number {
  const list = lastNonEmptyList(r);
  if (list < 0) return 0;
  const i32 = r.i32;
  let most = 0;
  let n = 0;
  for (let p = i32[r.spanLists + list]!; p >= 0 && p < r.dataPages && n < r.dataPages; p = i32[r.pageMeta(p) + PM_NEXT]!, n++) {
    const m = r.pageMeta(p);
    if (i32[m + PM_STATE] === PAGE_FREE) most = Math.max(most, Math.min(i32[m + PM_SPAN_PAGES]!, r.dataPages - p));
  }
  return most;
}

/** Initialize an empty region's lists: everything free, one span. */
export function initPageSpans(r: ShardRegion): void {
  r.i32.fill(-1, r.spanLists, r.spanLists + SPAN_LIST_COUNT);
  r.i32.fill(0, r.hdr + S_SPAN_BITMAP, r.hdr + S_SPAN_BITMAP + SPAN_BITMAP_WORDS);
  r.i32[r.hdr + S_SPAN_SUMMARY] = 0;
  r.i32[r.hdr + S_FREE_PAGES] = 0;
  freePageRange(r, 0, r.dataPages);
}
