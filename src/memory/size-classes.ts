/**
 * Small-object size classes and the per-class pool parameters.
 *
 * Seastar's classes: two fraction bits per power of two (sizes 4/4, 5/4,
 * 6/4, 7/4 of each power), from 8 bytes to 16 KiB. Ours are additionally
 * rounded up to the 8-byte granule (so every object can hold a Float64 and
 * the live bitmap has one bit per possible object start) and deduplicated:
 * 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160 ... 12288, 14336, 16384.
 * Everything here is a pure function of the class index, so it is not
 * stored in the buffer: a reader of a heap image of the same version
 * derives the same table.
 */
import { GRANULE, GRANULE_SHIFT, PAGE_SIZE } from "./layout.js";

export const MIN_OBJECT_SIZE = GRANULE;
/** The largest small object; anything larger is a page span. */
export const MAX_SMALL_SIZE = 4 * PAGE_SIZE;
const FRACTION_BITS = 2;
/** Largest span a pool asks for, in pages (Seastar: 32). */
const MAX_POOL_SPAN_PAGES = 32;

function buildSizes(): number[] {
  const sizes: number[] = [];
  for (let log = GRANULE_SHIFT; log <= Math.log2(MAX_SMALL_SIZE); log++) {
    for (let frac = 0; frac < 1 << FRACTION_BITS; frac++) {
      const raw = ((1 << FRACTION_BITS) + frac) << log >> FRACTION_BITS;
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
 * keeps sampled objects apart the same way). A sampled span keeps its
 * objects' 4-byte site tags in an array at its end, after the objects, so
 * objects keep the class's stride and alignment and each pays exactly 4
 * bytes (the seed paid 8). Every table below is indexed by pool.
 */
export const POOL_COUNT = 2 * CLASS_COUNT;
export const SAMPLED_POOL_BASE = CLASS_COUNT;
/** Bytes of the site tag at the end of a sampled small object. */
export const SITE_TAG_BYTES = 4;

const alignmentOf = (size: number): number => Math.min(size & -size, PAGE_SIZE);
const poolSizes = (f: (size: number, sampled: boolean) => number): Int32Array =>
  Int32Array.from({ length: POOL_COUNT }, (_, p) => f(SIZES[p % CLASS_COUNT]!, p >= CLASS_COUNT));

/** Usable bytes of each pool's objects (what objectSize reports), the class size. */
export const classSize = poolSizes((size) => size);

/** Bytes from one object to the next in a pool's spans: the class size. */
export const poolStride = poolSizes((size) => size);

/** Bytes each object takes from its span: the class size, plus its tag in a sampled pool. */
const poolFootprint = poolSizes((size, sampled) => size + (sampled ? SITE_TAG_BYTES : 0));

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

/**
 * Span length per pool, in pages: Seastar's rule: the smallest power of two
 * (up to 32 pages) that holds at least 4 objects and wastes under 5% at its
 * tail, else the one that wastes least.
 */
export const classSpanPages = Int32Array.from(poolFootprint, (stride) => {
  let best = 0;
  let bestWaste = Infinity;
  for (let pages = 1; pages <= MAX_POOL_SPAN_PAGES; pages *= 2) {
    const bytes = pages * PAGE_SIZE;
    if (bytes / stride < 4) continue;
    const waste = (bytes % stride) / bytes;
    if (waste < bestWaste) {
      bestWaste = waste;
      best = pages;
      if (waste < 0.05) break;
    }
  }
  return best || MAX_POOL_SPAN_PAGES;
});

/**
 * The span a pool falls back to when the page allocator has no block of the
 * preferred size (a small or fragmented shard): the fewest pages, as a
 * power of two, that hold one object (Seastar's _span_sizes.fallback).
 */
export const classFallbackSpanPages = Int32Array.from(poolFootprint, (stride) => {
  const pages = Math.ceil(stride / PAGE_SIZE);
  return pages === 1 ? 1 : 2 ** (32 - Math.clz32(pages - 1));
});

/** Objects a span of `pages` pages holds in pool `pool` (in a sampled pool, tags included). */
export function objectsPerSpan(pool: number, pages: number): number {
  return Math.floor((pages * PAGE_SIZE) / poolFootprint[pool]!);
}

/**
 * Pool free-list bounds (Seastar's _max_free / _min_free): a free past
 * maxFree sends objects back to their spans in a batch, down to 3/4 of
 * maxFree; an empty list refills to half of maxFree (at least one span's
 * objects), so a malloc/free pair at either boundary does not move a span
 * back and forth. Seastar's floor of 100 cached objects is capped at 64 KiB
 * of objects here, because our shards are often a few MiB, not GiBs.
 */
export const classMaxFree = Int32Array.from(poolFootprint, (stride, p) =>
  Math.max(2 * objectsPerSpan(p, classSpanPages[p]!), Math.min(100, Math.floor(65536 / stride))),
);
export const classRefillGoal = Int32Array.from(classMaxFree, (max) => max >>> 1);
export const classTrimTarget = Int32Array.from(classMaxFree, (max) => (3 * max) >>> 2);
