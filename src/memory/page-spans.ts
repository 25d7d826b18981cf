/**
 * Page spans: the buddy allocator under everything (Seastar's cpu_pages
 * span lists). Owns the free-span lists and S_FREE_PAGES; hands whole
 * spans to small-pool.ts (pool spans) and shard-allocator.ts (large objects).
 *
 * A free span of 2^k pages is naturally aligned and sits in list k. Taking
 * n pages pops the smallest block of >= n pages and returns its tail past n
 * as aligned pieces; freeing n pages at any start splits the run into the
 * largest aligned pieces and merges each with its buddy while it can. So
 * large objects waste no pages and everything coalesces when freed.
 * Cost: O(log pages) list operations per call, no scanning.
 */
import {
  MAX_ORDERS,
  PAGE_FREE,
  PAGE_INNER,
  PM_NEXT,
  PM_PREV,
  PM_SPAN_PAGES,
  PM_STATE,
  S_FREE_PAGES,
  S_NONEMPTY_ORDERS,
} from "./layout.js";
import type { ShardRegion } from "./region.js";

/** log2 of a power of two. */
function orderOf(pages: number): number {
  return 31 - Math.clz32(pages);
}

function pushFreeSpan(r: ShardRegion, p: number, order: number): void {
  const i32 = r.i32;
  const list = r.spanLists + order;
  const head = i32[list]!;
  const m = r.pageMeta(p);
  i32[m + PM_STATE] = PAGE_FREE;
  i32[m + PM_SPAN_PAGES] = 1 << order;
  i32[m + PM_NEXT] = head;
  i32[m + PM_PREV] = -1;
  if (head >= 0) i32[r.pageMeta(head) + PM_PREV] = p;
  i32[list] = p;
  i32[r.hdr + S_NONEMPTY_ORDERS] |= 1 << order;
}

function unlinkFreeSpan(r: ShardRegion, p: number, order: number): void {
  const i32 = r.i32;
  const m = r.pageMeta(p);
  const next = i32[m + PM_NEXT]!;
  const prev = i32[m + PM_PREV]!;
  if (prev >= 0) i32[r.pageMeta(prev) + PM_NEXT] = next;
  else {
    i32[r.spanLists + order] = next;
    if (next < 0) i32[r.hdr + S_NONEMPTY_ORDERS] &= ~(1 << order);
  }
  if (next >= 0) i32[r.pageMeta(next) + PM_PREV] = prev;
  // No longer a span head; whoever takes the page sets what it becomes.
  i32[m + PM_STATE] = PAGE_INNER;
}

/** Free one aligned block of 2^k pages, merging with free buddies. */
function freeBlock(r: ShardRegion, start: number, pages: number): void {
  const i32 = r.i32;
  i32[r.hdr + S_FREE_PAGES] += pages;
  let order = orderOf(pages);
  for (;;) {
    const buddy = start ^ pages;
    if (buddy + pages > r.dataPages) break;
    const bm = r.pageMeta(buddy);
    if (i32[bm + PM_STATE] !== PAGE_FREE || i32[bm + PM_SPAN_PAGES] !== pages) break;
    unlinkFreeSpan(r, buddy, order);
    i32[r.pageMeta(start) + PM_STATE] = PAGE_INNER;
    if (buddy < start) start = buddy;
    pages <<= 1;
    order++;
  }
  pushFreeSpan(r, start, order);
}

/**
 * Return pages [start, start + count) to the free lists, as the largest
 * naturally aligned pieces (Seastar's free_span_unaligned). The pages'
 * other metadata must already say they are not part of a used span.
 */
export function freePageRange(r: ShardRegion, start: number, count: number): void {
  while (count > 0) {
    const alignPages = start === 0 ? 0x40000000 : start & -start;
    const fitPages = 1 << orderOf(count);
    const pages = alignPages < fitPages ? alignPages : fitPages;
    freeBlock(r, start, pages);
    start += pages;
    count -= pages;
  }
}

/**
 * Take a span of exactly `count` pages; returns its first page index, or -1
 * when no free block is large enough (the caller decides whether to reclaim
 * and retry). The returned head page is PAGE_INNER; the caller marks it.
 */
export function allocatePageSpan(r: ShardRegion, count: number): number {
  if (count <= 0 || count > r.dataPages) return -1;
  const want = count === 1 ? 0 : 32 - Math.clz32(count - 1);
  if (want > 30) return -1;
  const candidates = r.i32[r.hdr + S_NONEMPTY_ORDERS]! & ~((1 << want) - 1);
  if (candidates === 0) return allocateFromAdjacentSpans(r, count, want);
  const order = orderOf(candidates & -candidates);
  const p = r.i32[r.spanLists + order]!;
  unlinkFreeSpan(r, p, order);
  r.i32[r.hdr + S_FREE_PAGES] -= 1 << order;
  if (count < 1 << order) freePageRange(r, p + count, (1 << order) - count);
  return p;
}

/**
 * Fallback when no single block of 2^want pages is free: look for `count`
 * pages made of adjacent smaller free blocks (a buddy allocator alone would
 * fail a 18-page request while plenty of unaligned runs are free). Takes
 * the run, returns what it does not need. Cost: a scan of the smaller free
 * lists, paid only when the shard is fragmented.
 */
function allocateFromAdjacentSpans(r: ShardRegion, count: number, want: number): number {
  const i32 = r.i32;
  for (let order = want - 1; order >= 0; order--) {
    for (let p = i32[r.spanLists + order]!; p >= 0; p = i32[r.pageMeta(p) + PM_NEXT]!) {
      let end = p;
      while (end - p < count && end < r.dataPages && i32[r.pageMeta(end) + PM_STATE] === PAGE_FREE) {
        end += i32[r.pageMeta(end) + PM_SPAN_PAGES]!;
      }
      if (end - p < count) continue;
      for (let q = p; q < end; ) {
        const pages = i32[r.pageMeta(q) + PM_SPAN_PAGES]!;
        unlinkFreeSpan(r, q, orderOf(pages));
        q += pages;
      }
      i32[r.hdr + S_FREE_PAGES] -= end - p;
      if (end - p > count) freePageRange(r, p + count, end - p - count);
      return p;
    }
  }
  return -1;
}

/** Initialize an empty region's lists: everything free. */
export function initPageSpans(r: ShardRegion): void {
  r.i32.fill(-1, r.spanLists, r.spanLists + MAX_ORDERS);
  r.i32[r.hdr + S_NONEMPTY_ORDERS] = 0;
  r.i32[r.hdr + S_FREE_PAGES] = 0;
  freePageRange(r, 0, r.dataPages);
}
