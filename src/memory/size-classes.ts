/**
 * Small-object size classes and the per-class pool parameters.
 *
 * Seastar's classes: two fraction bits per power of two (sizes 4/4, 5/4,
 * 6/4, 7/4 of each power), from 8 bytes to 16 KiB; ours take a third
 * fraction bit from 4 KiB up (8/8 .. 15/8: 4096, 4608, 5120 ... 15360,
 * 16384), are rounded up to the 8-byte granule (so every object can hold a
 * Float64 and the live bitmap has one bit per possible object start) and
 * deduplicated: 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160 ...
 * 3584, 4096, 4608 ... 15360, 16384 (48 classes). Why the third bit: a
 * class rounds an object up by 12% at worst with two bits, and objects of
 * 4-16 KiB are where those bytes add up. On the size-class trace of
 * bench/fragmentation.ts (48 object types spread over 8 B .. 16 KiB), the
 * rounding was 8.1% of the peak live bytes (5.9% with the third bit from
 * 4 KiB, 5.0% from 2 KiB) and the smallest shard 1.187x the peak, 1.154x
 * the best-fit reference (1.174 and 1.141 with the third bit; from 2 KiB
 * the large trace needed 1.249 instead of 1.223, more partly used spans).
 * Everything here is a pure function of the class index, so it is not
 * stored in the buffer: a reader of a heap image of the same version
 * derives the same table.
 */
import { GRANULE, GRANULE_SHIFT, PAGE_SIZE } from "./layout.js";

export const MIN_OBJECT_SIZE = GRANULE;
/** The largest small object; anything larger is a page span. */
export const MAX_SMALL_SIZE = 4 * PAGE_SIZE;
const FRACTION_BITS = 2;
/** From this size up (a power of two), one fraction bit more. */
const FINER_FROM = PAGE_SIZE;

function buildSizes(): number[] {
  const sizes: number[] = [];
  for (let log = GRANULE_SHIFT; log <= Math.log2(MAX_SMALL_SIZE); log++) {
    const bits = 1 << log >= FINER_FROM ? FRACTION_BITS + 1 : FRACTION_BITS;
    for (let frac = 0; frac < 1 << bits; frac++) {
      const raw = ((1 << bits) + frac) << log >> bits;
      const size = Math.ceil(raw / GRANULE) * GRANULE;
      if (size <= MAX_SMALL_SIZE && sizes[sizes.length - 1] !== size) sizes.push(size);
    }
  }
  return sizes;
}

const SIZES = buildSizes();
export const CLASS_COUNT = SIZES.length;

/**
 * Pools: one per class for ordinary objects (pool c = class c), and one per
 * class for objects the heap profiler sampled (pool CLASS_COUNT + c), which
 * live in spans of their own, so an unsampled object pays nothing (Seastar
 * keeps sampled objects apart the same way). A sampled object carries a
 * 4-byte site tag: below 2 KiB, in an array at the end of its span, after
 * the objects, so objects keep the class's stride and alignment and each
 * pays exactly 4 bytes (the seed paid 8); from 2 KiB up its span holds it
 * alone and the tag sits in the span's head page record (PM_SITE, as for
 * page spans), so it pays no bytes and its span no tail (a 16 KiB object
 * with its tag at the end needed 5 pages). Every table below is indexed
 * by pool.
 */
export const POOL_COUNT = 2 * CLASS_COUNT;
export const SAMPLED_POOL_BASE = CLASS_COUNT;
/** Bytes of the site tag of a sampled small object. */
export const SITE_TAG_BYTES = 4;
/** Sampled objects from this size up are alone in their spans, tagged in the page record. */
const SAMPLED_ALONE_SIZE = PAGE_SIZE / 2;

const alignmentOf = (size: number): number => Math.min(size & -size, PAGE_SIZE);
const poolSizes = (f: (size: number, sampled: boolean) => number): Int32Array =>
  Int32Array.from({ length: POOL_COUNT }, (_, p) => f(SIZES[p % CLASS_COUNT]!, p >= CLASS_COUNT));

/** Usable bytes of each pool's objects (what objectSize reports), the class size. */
export const classSize = poolSizes((size) => size);

/** Bytes from one object to the next in a pool's spans: the class size. */
export const poolStride = poolSizes((size) => size);

/** 1 for a sampled pool whose objects keep their tag in their span's head page record (PM_SITE). */
export const tagInPageRecord = poolSizes((size, sampled) => (sampled && size >= SAMPLED_ALONE_SIZE ? 1 : 0));

/** Bytes each object takes from its span: the class size, plus its tag where the span holds tags. */
const poolFootprint = poolSizes((size, sampled) => size + (sampled && size < SAMPLED_ALONE_SIZE ? SITE_TAG_BYTES : 0));

/** The largest power of two dividing the class size (at most a page): the alignment its objects get. */
export const classAlignment = poolSizes((size) => alignmentOf(size));

/** classOf[(size + 7) >> 3] is the smallest class holding `size` bytes (size <= 16 KiB). */
export const classOf = new Uint8Array((MAX_SMALL_SIZE >>> GRANULE_SHIFT) + 1);
{
  let c = 0;
  for (let g = 0; g < classOf.length; g++) {
    while (SIZES[c]! < Math.max(g << GRANULE_SHIFT, MIN_OBJECT_SIZE)) c++;
    classOf[g] = c;
  }
}

/** Largest span a pool asks for, in pages. */
const MAX_POOL_SPAN_PAGES = 16;
/** Tail a span may leave unused, as a share of the span: the fewest pages that waste less win. */
const MAX_SPAN_TAIL = 1 / 32;

/**
 * Span length per pool, in pages: the fewest pages (any count, not only
 * powers of two) that hold one object and leave less than 1/32 of the span
 * unused at its tail, else the count up to 16 pages that leaves least:
 * 1 page up to 256 bytes, 5 pages (16 objects) for 1280, 7 pages (2) for
 * 14336, 15 pages (4) for 15360, 4 pages (1) for 16384. Small spans strand little: a span goes
 * back to the page allocator only once every object in it is free, and a
 * class whose objects die at random keeps a span for each survivor. With
 * Seastar's rule (powers of two up to 32 pages, at least 4 objects), 14336
 * took 128 KiB spans, and a replay of a shifting small-object trace
 * (bench/fragmentation.ts) found 12 MiB of its 19 MiB of spans unused.
 * Sampled pools: one page below 2 KiB, else one object's pages.
 */
export const classSpanPages = Int32Array.from(poolFootprint, (stride, pool) => {
  const least = Math.ceil(stride / PAGE_SIZE);
  if (pool >= SAMPLED_POOL_BASE) return least;
  let best = least;
  let bestWaste = Infinity;
  for (let pages = least; pages <= MAX_POOL_SPAN_PAGES; pages++) {
    const bytes = pages * PAGE_SIZE;
    const waste = (bytes % stride) / bytes;
    if (waste < bestWaste) {
      bestWaste = waste;
      best = pages;
    }
    if (waste < MAX_SPAN_TAIL) break;
  }
  return best;
});

/**
 * The span a pool falls back to when the page allocator has no free span
 * of the preferred length (a small or fragmented shard): the fewest pages
 * that hold one object (Seastar's _span_sizes.fallback).
 */
export const classFallbackSpanPages = Int32Array.from(poolFootprint, (stride) => Math.ceil(stride / PAGE_SIZE));

/** Objects a span of `pages` pages holds in pool `pool` (in a sampled pool, tags included). */
export function objectsPerSpan(pool: number, pages: number): number {
  return Math.floor((pages * PAGE_SIZE) / poolFootprint[pool]!);
}

/**
 * Pool free-list bounds (Seastar's _max_free / _min_free): a free past
 * maxFree sends objects back to their spans in a batch, down to 3/4 of
 * maxFree; an empty list refills to half of maxFree, so a malloc/free pair
 * at either boundary does not move a span back and forth. maxFree is at
 * least two spans' objects (a refill takes a span's whole freelist), and
 * Seastar's floor of 100 cached objects is capped at CACHED_BYTES of
 * objects here: cached objects hold their spans, and our shards are often
 * a few MiB, not GiBs. Sampled pools keep at most a span's objects and
 * send them all back when they pass that: a sampled free already takes
 * the slow path, and a sampled span left empty goes back at once.
 */
const CACHED_BYTES = 64 * 1024;
export const classMaxFree = Int32Array.from(poolFootprint, (stride, p) => {
  const perSpan = objectsPerSpan(p, classSpanPages[p]!);
  if (p >= SAMPLED_POOL_BASE) return perSpan;
  return Math.max(2 * perSpan, Math.min(100, Math.floor(CACHED_BYTES / stride)));
});
export const classRefillGoal = Int32Array.from(classMaxFree, (max, p) => (p >= SAMPLED_POOL_BASE ? 1 : max >>> 1));
export const classTrimTarget = Int32Array.from(classMaxFree, (max, p) => (p >= SAMPLED_POOL_BASE ? 0 : (3 * max) >>> 2));
