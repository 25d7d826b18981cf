/**
 * The operations the allocator's property tests play (property.test.ts,
 * property-invalid.test.ts): the size classes derived independently of
 * src/, the operations and their generators, and the contents each object
 * holds.
 */
import fc from "fast-check";
import { MAX_SMALL_SIZE, PAGE_SIZE, type SharedHeap } from "../../src/index.js";

export const KiB = 1024;
export const MiB = 1024 * KiB;
export const SHARDS = 2;
const LARGEST_REQUEST = 200_000;
/** realloc to a multiple of the current size is capped here. */
export const LARGEST_OBJECT = 2 * LARGEST_REQUEST;
const MAX_ALIGN_LOG = 20;

// ---------------------------------------------------------------------------
// Size classes (Seastar's 2 fraction bits per power of two, a third from
// 4 KiB up, 8 B ... 16 KiB, rounded up to the 8-byte granule),
// derived here independently of src/ so the test checks the implementation's table.

const CLASS_SIZES: number[] = (() => {
  const out: number[] = [];
  for (let log = 3; log <= 14; log++) {
    // Two fraction bits per power of two, three from 4 KiB up.
    const steps = log >= 12 ? 8 : 4;
    for (let frac = 0; frac < steps; frac++) {
      const size = Math.ceil((((steps + frac) << log) / steps) / 8) * 8;
      if (size <= MAX_SMALL_SIZE && out[out.length - 1] !== size) out.push(size);
    }
  }
  return out;
})();

/** The size class malloc(size) must use (size <= 16 KiB). */
export function classFor(size: number): number {
  return CLASS_SIZES.find((c) => c >= Math.max(size, 8))!;
}

export function pagesFor(size: number): number {
  return Math.max(1, Math.ceil(size / PAGE_SIZE));
}

/** Served from a page span rather than a small pool (the allocator's rule). */
export function isLargeRequest(size: number, align: number): boolean {
  return size > MAX_SMALL_SIZE || align > PAGE_SIZE;
}

// ---------------------------------------------------------------------------
// Generators.

const SIZE_CLASS_BOUNDARIES = [
  ...new Set(CLASS_SIZES.flatMap((c) => [c - 1, c, c + 1]).filter((s) => s >= 1 && s <= MAX_SMALL_SIZE + 1)),
];

const sizeArb: fc.Arbitrary<number> = fc.oneof(
  { weight: 1, arbitrary: fc.constant(0) },
  { weight: 4, arbitrary: fc.integer({ min: 1, max: 64 }) },
  { weight: 3, arbitrary: fc.integer({ min: 65, max: MAX_SMALL_SIZE }) },
  { weight: 3, arbitrary: fc.constantFrom(...SIZE_CLASS_BOUNDARIES) },
  { weight: 2, arbitrary: fc.integer({ min: MAX_SMALL_SIZE + 1, max: LARGEST_REQUEST }) },
  // Page boundaries of large objects.
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.integer({ min: 5, max: Math.floor(LARGEST_REQUEST / PAGE_SIZE) }), fc.integer({ min: -1, max: 1 }))
      .map(([pages, d]) => pages * PAGE_SIZE + d),
  },
);

export const shardArb = fc.integer({ min: 0, max: SHARDS - 1 });
/** Index into whatever candidate list the operation needs (taken modulo its length). */
export const pickArb = fc.nat({ max: 1 << 20 });

export type Op =
  | { k: "malloc"; shard: number; size: number }
  | { k: "aligned"; shard: number; alignLog: number; size: number }
  | { k: "free"; pick: number }
  | { k: "freeSized"; pick: number; how: number }
  | { k: "realloc"; pick: number; large: boolean; size: number; rel: number | null; delta: number; cross: boolean }
  | { k: "reallocNull"; shard: number; size: number }
  | { k: "objectSize"; pick: number; via: number }
  | { k: "crossFree"; pick: number; sized: boolean }
  | { k: "drain"; shard: number }
  | { k: "trim"; shard: number }
  | { k: "profile"; shard: number; rate: number; seed: number }
  | { k: "burst"; shard: number; size: number; count: number; freeFraction: number; order: number; cross: boolean };

export const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ k: fc.constant("malloc" as const), shard: shardArb, size: sizeArb }) },
  {
    weight: 2,
    arbitrary: fc.record({
      k: fc.constant("aligned" as const),
      shard: shardArb,
      alignLog: fc.integer({ min: 0, max: MAX_ALIGN_LOG }),
      size: sizeArb,
    }),
  },
  { weight: 3, arbitrary: fc.record({ k: fc.constant("free" as const), pick: pickArb }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant("freeSized" as const), pick: pickArb, how: fc.nat({ max: 3 }) }) },
  {
    weight: 3,
    arbitrary: fc.record({
      k: fc.constant("realloc" as const),
      pick: pickArb,
      large: fc.boolean(), // pick among large objects (page spans) when there are any
      size: sizeArb,
      // Relative to the current size (shrink / same / grow, then +- a byte,
      // a granule or a page), or an absolute size.
      rel: fc.option(fc.constantFrom(0, 0.25, 0.5, 0.9, 1, 1.1, 2), { nil: null, freq: 2 }),
      delta: fc.constantFrom(0, 0, 0, -1, 1, -8, 8, -PAGE_SIZE, PAGE_SIZE),
      cross: fc.nat({ max: 4 }).map((n) => n === 0), // 1 in 5: realloc through the other shard
    }),
  },
  { weight: 1, arbitrary: fc.record({ k: fc.constant("reallocNull" as const), shard: shardArb, size: sizeArb }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant("objectSize" as const), pick: pickArb, via: shardArb }) },
  { weight: 3, arbitrary: fc.record({ k: fc.constant("crossFree" as const), pick: pickArb, sized: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant("drain" as const), shard: shardArb }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant("trim" as const), shard: shardArb }) },
  // The heap profiler on (every allocation, or sampled) or off: sampled
  // objects live in pools of their own, tagged at their span's end or,
  // from 2 KiB up, in their span's page record.
  {
    weight: 1,
    arbitrary: fc.record({ k: fc.constant("profile" as const), shard: shardArb, rate: fc.constantFrom(0, 1, 1, 16384), seed: fc.nat() }),
  },
  // Many objects of one class, then most of them freed (locally, or through
  // the other shard and drained): overflows the pool's free list so it
  // trims in a batch and releases spans.
  {
    weight: 1,
    arbitrary: fc.record({
      k: fc.constant("burst" as const),
      shard: shardArb,
      size: fc.oneof(fc.constantFrom(8, 100, 1024, 2048, 4096, 12288, 16384), fc.integer({ min: 1, max: MAX_SMALL_SIZE })),
      count: fc.integer({ min: 1, max: 40 }),
      freeFraction: fc.constantFrom(0.5, 0.9, 1),
      order: pickArb,
      cross: fc.boolean(),
    }),
  },
);

/** Mostly a 4 MiB shard; sometimes tiny ones, where OutOfMemoryError is common. */
export const shardBytesArb = fc.oneof(
  { weight: 3, arbitrary: fc.constant(4 * MiB) },
  { weight: 1, arbitrary: fc.constant(1 * MiB) },
  { weight: 1, arbitrary: fc.constant(256 * KiB) },
);

/** heap.check() finds nothing wrong (its findings become the failure message). */
export function expectHealthy(heap: SharedHeap): void {
  const problems = heap.check();
  if (problems.length > 0) throw new Error(`heap.check() found:\n  ${problems.join("\n  ")}`);
}

// ---------------------------------------------------------------------------
// Contents: object #id holds NOISE[off(id) .. off(id) + requested size).

const NOISE_SPREAD = 65_521;
const NOISE: Uint8Array = (() => {
  const a = new Uint8Array(LARGEST_OBJECT + NOISE_SPREAD);
  let x = 0x9e3779b9;
  for (let i = 0; i < a.length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    a[i] = x & 0xff;
  }
  return a;
})();

export function patternOf(id: number, length: number): Uint8Array {
  if (length > LARGEST_OBJECT) throw new Error(`test bug: no pattern for ${length} bytes`);
  const off = (id * 7919) % NOISE_SPREAD;
  return NOISE.subarray(off, off + length);
}
