/**
 * Small pools: one per size class (Seastar's small_pool). The fast paths in
 * shard-allocator.ts pop and push the pool's free list directly; this file
 * is the slow side: refilling that list in a batch, trimming it in a batch,
 * and giving spans back to page-spans.ts once all their objects are free.
 *
 * Two levels of free objects, as in Seastar:
 *   - the pool's lists, both LIFO: the claimed list (P_CLAIMED_HEAD), where
 *     free() puts what it frees with the object's pending bit still set
 *     (cross-shard.ts, "Claims"), and the clean list (P_FREE_HEAD), objects
 *     with the bit clear (new, back from their spans, or out of debug
 *     pointers' quarantine: releaseClean). malloc pops the claimed list
 *     first (what was freed last is in cache) and clears the bit;
 *     P_FREE_COUNT counts both lists. Trimming sends objects back to
 *     their spans clean: settleClaims clears a whole claimed list's bits,
 *     one atomic and per bitmap word;
 *   - each span's own list (PM_FREELIST on the span head): where trimmed
 *     objects wait, so a span whose objects all come back can be released.
 * A span's PM_USED counts objects outside its own list (live, or cached in
 * the pool's list); it is released when that reaches 0. Refill takes whole
 * span freelists first (spans already partly used), then carves new spans.
 */
import {
  PAGE_INNER,
  PAGE_POOL,
  PAGE_SIZE,
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
  P_FREE_COUNT,
  P_FREE_HEAD,
  P_MAX_FREE,
  P_PAGES_IN_USE,
  P_SPAN_FREE,
  P_SPAN_LIST,
} from "./layout.js";
import { allocatePageSpan, freePageRange } from "./page-spans.js";
import type { ShardRegion } from "./region.js";
import {
  POOL_COUNT,
  SITE_TAG_BYTES,
  classFallbackSpanPages,
  classMaxFree,
  classRefillGoal,
  classTrimTarget,
  classSpanPages,
  objectsPerSpan,
  poolStride,
  tagInPageRecord,
} from "./size-classes.js";

export function poolRecord(r: ShardRegion, cls: number): number {
  return r.pools + cls * POOL_STRIDE;
}

export function initPools(r: ShardRegion): void {
  for (let c = 0; c < POOL_COUNT; c++) {
    const p = poolRecord(r, c);
    r.i32.fill(0, p, p + POOL_STRIDE);
    r.i32[p + P_SPAN_LIST] = -1;
    r.i32[p + P_MAX_FREE] = classMaxFree[c]!;
  }
}

function linkSpan(r: ShardRegion, pool: number, head: number): void {
  const i32 = r.i32;
  const first = i32[pool + P_SPAN_LIST]!;
  const m = r.pageMeta(head);
  i32[m + PM_NEXT] = first;
  i32[m + PM_PREV] = -1;
  if (first >= 0) i32[r.pageMeta(first) + PM_PREV] = head;
  i32[pool + P_SPAN_LIST] = head;
}

function unlinkSpan(r: ShardRegion, pool: number, head: number): void {
  const i32 = r.i32;
  const m = r.pageMeta(head);
  const next = i32[m + PM_NEXT]!;
  const prev = i32[m + PM_PREV]!;
  if (prev >= 0) i32[r.pageMeta(prev) + PM_NEXT] = next;
  else i32[pool + P_SPAN_LIST] = next;
  if (next >= 0) i32[r.pageMeta(next) + PM_PREV] = prev;
}

/**
 * Bring the pool's free list up to its refill goal. Returns false when no
 * object could be added at all (the page allocator is exhausted).
 * Cost: one pass over whole span freelists, or carving a new span
 * (objectsPerSpan link writes), amortized over a refill batch.
 */
export function refillPool(r: ShardRegion, cls: number): boolean {
  const i32 = r.i32;
  const u32 = r.u32;
  const pool = poolRecord(r, cls);
  const goal = classRefillGoal[cls]!;
  let head = u32[pool + P_FREE_HEAD]!;
  let count = i32[pool + P_FREE_COUNT]!;
  // Partly used spans first: it keeps the number of spans down.
  while (count < goal && i32[pool + P_SPAN_LIST]! >= 0) {
    const span = i32[pool + P_SPAN_LIST]!;
    const m = r.pageMeta(span);
    unlinkSpan(r, pool, span);
    let obj = u32[m + PM_FREELIST]!;
    let moved = 0;
    while (obj !== 0) {
      const next = u32[obj >>> 2]!;
      u32[obj >>> 2] = head;
      head = obj;
      obj = next;
      moved++;
    }
    u32[m + PM_FREELIST] = 0;
    i32[m + PM_USED] += moved;
    i32[pool + P_SPAN_FREE] -= moved;
    count += moved;
  }
  while (count < goal) {
    let spanPages = classSpanPages[cls]!;
    let span = allocatePageSpan(r, spanPages, false);
    if (span < 0 && classFallbackSpanPages[cls]! < spanPages) {
      spanPages = classFallbackSpanPages[cls]!;
      span = allocatePageSpan(r, spanPages, false);
    }
    if (span < 0) break;
    const size = poolStride[cls]!;
    const perSpan = objectsPerSpan(cls, spanPages);
    for (let p = span; p < span + spanPages; p++) {
      const m = r.pageMeta(p);
      i32[m + PM_STATE] = PAGE_POOL;
      r.u8[r.classMap + p] = cls + 1;
      i32[m + PM_HEAD] = span;
    }
    const m = r.pageMeta(span);
    i32[m + PM_SPAN_PAGES] = spanPages;
    u32[m + PM_FREELIST] = 0;
    i32[m + PM_USED] = perSpan;
    // Carve from the top down so the list hands objects out in address order.
    const start = r.pageAddress(span);
    for (let k = perSpan - 1; k >= 0; k--) {
      const obj = start + k * size;
      u32[obj >>> 2] = head;
      head = obj;
    }
    count += perSpan;
    i32[pool + P_PAGES_IN_USE] += spanPages;
    i32[pool + P_CAPACITY] += perSpan;
  }
  u32[pool + P_FREE_HEAD] = head;
  i32[pool + P_FREE_COUNT] = count;
  return count > 0;
}

/**
 * Make the pool's claimed objects clean: clear their pending bits (which
 * this shard holds, see cross-shard.ts) and move them onto the clean list.
 * Returns how many moved. Cost: one pass over the list (objects freed
 * lately, so in cache) and one Atomics.and per bitmap word it touches
 * (a word covers 256 bytes: 4 objects of 64 bytes, 32 of 8).
 */
export function settleClaims(r: ShardRegion, cls: number): number {
  const u32 = r.u32;
  const pool = poolRecord(r, cls);
  const first = u32[pool + P_CLAIMED_HEAD]!;
  if (first === 0) return 0;
  // Locals, not fields, in the loop: the atomics call inside it makes V8
  // reload every field on every turn.
  const dataStart = r.dataStart;
  const bitmap = r.bitmap;
  const atomics = r.atomics;
  let word = -1;
  let mask = 0;
  let last = first;
  let n = 0;
  for (let obj = first; obj !== 0; obj = u32[obj >>> 2]!) {
    const rel = obj - dataStart;
    const pending = bitmap + ((rel >>> 8) << 1) + 1;
    if (pending !== word) {
      if (mask !== 0) atomics.and(word << 2, ~mask);
      word = pending;
      mask = 0;
    }
    mask |= 1 << ((rel >>> 3) & 31);
    last = obj;
    n++;
  }
  atomics.and(word << 2, ~mask);
  u32[last >>> 2] = u32[pool + P_FREE_HEAD]!;
  u32[pool + P_FREE_HEAD] = first;
  u32[pool + P_CLAIMED_HEAD] = 0;
  return n;
}

/**
 * Give a freed object of pool `cls` whose claim this shard holds back
 * clean: clear its pending bit and push it on the clean list, trimming
 * past maxFree. For debug pointers' quarantine (a claim kept off the
 * claimed list would look like a held object, quarantine.ts). Cost: one
 * atomic, beside the object's fill and scan the quarantine already paid.
 */
export function releaseClean(r: ShardRegion, cls: number, obj: number): void {
  const u32 = r.u32;
  const pool = poolRecord(r, cls);
  r.atomicAnd(r.pendingWord(obj) << 2, ~r.liveBit(obj));
  u32[obj >>> 2] = u32[pool + P_FREE_HEAD]!;
  u32[pool + P_FREE_HEAD] = obj;
  if (++r.i32[pool + P_FREE_COUNT]! > r.i32[pool + P_MAX_FREE]!) trimPool(r, cls, classTrimTarget[cls]!);
}

/**
 * Move objects from the pool's lists back to their spans until at most
 * `target` remain, releasing every span whose objects are all back.
 * Claimed objects are settled first, so every object in a span's own
 * freelist has its pending bit clear.
 * Cost: a few metadata reads per object, one page-span free per span released.
 */
export function trimPool(r: ShardRegion, cls: number, target: number): void {
  const i32 = r.i32;
  const u32 = r.u32;
  const pool = poolRecord(r, cls);
  settleClaims(r, cls);
  let head = u32[pool + P_FREE_HEAD]!;
  let count = i32[pool + P_FREE_COUNT]!;
  while (count > target && head !== 0) {
    const obj = head;
    head = u32[obj >>> 2]!;
    count--;
    const span = i32[r.pageMeta(r.pageOf(obj)) + PM_HEAD]!;
    const m = r.pageMeta(span);
    const spanList = u32[m + PM_FREELIST]!;
    if (spanList === 0) linkSpan(r, pool, span);
    u32[obj >>> 2] = spanList;
    u32[m + PM_FREELIST] = obj;
    i32[pool + P_SPAN_FREE]++;
    if (--i32[m + PM_USED] === 0) releaseSpan(r, cls, pool, span);
  }
  u32[pool + P_FREE_HEAD] = head;
  i32[pool + P_FREE_COUNT] = count;
}

function releaseSpan(r: ShardRegion, cls: number, pool: number, span: number): void {
  const i32 = r.i32;
  const spanPages = i32[r.pageMeta(span) + PM_SPAN_PAGES]!;
  const perSpan = objectsPerSpan(cls, spanPages);
  unlinkSpan(r, pool, span);
  i32[pool + P_SPAN_FREE] -= perSpan;
  i32[pool + P_CAPACITY] -= perSpan;
  i32[pool + P_PAGES_IN_USE] -= spanPages;
  for (let p = span; p < span + spanPages; p++) {
    const m = r.pageMeta(p);
    i32[m + PM_STATE] = PAGE_INNER;
    r.u8[r.classMap + p] = 0;
    i32[m + PM_HEAD] = 0;
  }
  i32[r.pageMeta(span) + PM_FREELIST] = 0;
  i32[r.pageMeta(span) + PM_SITE] = 0;
  freePageRange(r, span, spanPages);
}

/**
 * Int32 index of the site tag of object `obj` of sampled pool `pool`: in
 * its span's head page record when the pool keeps tags there, else in the
 * array after the span's objects (size-classes.ts).
 */
export function sampledTagIndex(r: ShardRegion, obj: number, pool: number): number {
  const head = r.i32[r.pageMeta(r.pageOf(obj)) + PM_HEAD]!;
  if (tagInPageRecord[pool] === 1) return r.pageMeta(head) + PM_SITE;
  const start = r.pageAddress(head);
  const size = poolStride[pool]!;
  const objects = objectsPerSpan(pool, r.i32[r.pageMeta(head) + PM_SPAN_PAGES]!);
  return (start + objects * size + SITE_TAG_BYTES * ((obj - start) / size)) >>> 2;
}

/** Objects in use from the pool (live, or freed remotely and not yet drained). */
export function poolObjectsInUse(r: ShardRegion, cls: number): number {
  return r.i32[poolRecord(r, cls) + P_CAPACITY]! - poolObjectsCached(r, cls) - r.i32[poolRecord(r, cls) + P_SPAN_FREE]!;
}

/** Free objects the pool holds in its lists (clean and claimed), ready for malloc. */
export function poolObjectsCached(r: ShardRegion, cls: number): number {
  const pool = poolRecord(r, cls);
  return r.i32[pool + P_FREE_COUNT]!;
}

/** Bytes of the pool's spans, used or not. */
export function poolBytes(r: ShardRegion, cls: number): number {
  return r.i32[poolRecord(r, cls) + P_PAGES_IN_USE]! * PAGE_SIZE;
}
