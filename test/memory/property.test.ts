/**
 * Model-based property tests of the allocator (fast-check, fixed seeds).
 *
 * Each run makes a fresh two-shard heap and plays a random list of
 * operations against it and against a plain model (which objects are live,
 * which are waiting in a cross-shard inbox, what each holds). After every
 * operation the heap must agree with the model: no overlapping objects,
 * sizes and alignments as asked, pointers inside their owner's region,
 * contents intact, statistics adding up, heap.check() clean. At the end
 * every object is freed, the inboxes drained and the shards trimmed, and
 * every shard must be back to all-free.
 *
 * The second property interleaves invalid calls (double free, interior,
 * misaligned and out-of-range pointers, frees of objects already pending a
 * cross-shard free, bad sizes) with valid ones: each must throw the
 * documented error and leave every byte of the buffer as it was.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  InvalidPointerError,
  MAX_SMALL_SIZE,
  OutOfMemoryError,
  PAGE_SIZE,
  SharedHeap,
  type MemoryStats,
} from "../../src/index.js";

const KiB = 1024;
const MiB = 1024 * KiB;
const SHARDS = 2;
const LARGEST_REQUEST = 200_000;
/** realloc to a multiple of the current size is capped here. */
const LARGEST_OBJECT = 2 * LARGEST_REQUEST;
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
function classFor(size: number): number {
  return CLASS_SIZES.find((c) => c >= Math.max(size, 8))!;
}

function pagesFor(size: number): number {
  return Math.max(1, Math.ceil(size / PAGE_SIZE));
}

/** Served from a page span rather than a small pool (the allocator's rule). */
function isLargeRequest(size: number, align: number): boolean {
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

const shardArb = fc.integer({ min: 0, max: SHARDS - 1 });
/** Index into whatever candidate list the operation needs (taken modulo its length). */
const pickArb = fc.nat({ max: 1 << 20 });

type Op =
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

const opArb: fc.Arbitrary<Op> = fc.oneof(
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
const shardBytesArb = fc.oneof(
  { weight: 3, arbitrary: fc.constant(4 * MiB) },
  { weight: 1, arbitrary: fc.constant(1 * MiB) },
  { weight: 1, arbitrary: fc.constant(256 * KiB) },
);

/** heap.check() finds nothing wrong (its findings become the failure message). */
function expectHealthy(heap: SharedHeap): void {
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

function patternOf(id: number, length: number): Uint8Array {
  if (length > LARGEST_OBJECT) throw new Error(`test bug: no pattern for ${length} bytes`);
  const off = (id * 7919) % NOISE_SPREAD;
  return NOISE.subarray(off, off + length);
}

// ---------------------------------------------------------------------------
// The model and the harness that plays operations against heap and model.

interface Obj {
  /** Pattern identity; kept across realloc. */
  id: number;
  ptr: number;
  owner: number;
  /** Bytes asked for (the pattern's length). */
  req: number;
  /** objectSize() when last seen. */
  usable: number;
  /** Alignment the pointer must keep. */
  align: number;
  /** A page span (large object) rather than a small-pool object. */
  large: boolean;
}

interface Coverage {
  runs: number;
  ops: number;
  ooms: number;
  oomRetrySucceeded: number;
  oomLargerThanShard: number;
  spansReleasedOnFree: number;
  inPlaceLargeShrinks: number;
  inPlaceSmall: number;
  reallocMoves: number;
  crossReallocs: number;
  crossFrees: number;
  explicitDrained: number;
  implicitDrains: number;
  bigAlignments: number;
  invalidCalls: number;
  /** Small objects allocated while their shard's profiler recorded every allocation, below 2 KiB and from 2 KiB up. */
  profiledSmall: number;
  profiledAlone: number;
  /** Trims that left a shard with page-span objects only, whose free spans the model then knows exactly. */
  freeSpansChecked: number;
}

function newCoverage(): Coverage {
  return {
    runs: 0,
    ops: 0,
    ooms: 0,
    oomRetrySucceeded: 0,
    oomLargerThanShard: 0,
    spansReleasedOnFree: 0,
    inPlaceLargeShrinks: 0,
    inPlaceSmall: 0,
    reallocMoves: 0,
    crossReallocs: 0,
    crossFrees: 0,
    explicitDrained: 0,
    implicitDrains: 0,
    bigAlignments: 0,
    invalidCalls: 0,
    profiledSmall: 0,
    profiledAlone: 0,
    freeSpansChecked: 0,
  };
}

type AllocRequest = { kind: "malloc"; size: number } | { kind: "aligned"; size: number; align: number };

class Harness {
  /**
   * The heap object the current operation goes through: operations
   * alternate between the one that created the buffer and one attached to
   * it, since all allocator state must live in the buffer.
   */
  heap: SharedHeap;
  private readonly views: readonly [SharedHeap, SharedHeap];
  private opCount = 0;
  /** Live objects: allocated, not freed, not pending a cross-shard free. */
  live: Obj[] = [];
  /** Per owner shard: objects another shard freed, not yet drained. */
  pending: Obj[][] = Array.from({ length: SHARDS }, () => []);
  /** Pointers that were freed at some point (some may be live again). */
  freed: number[] = [];
  private nextId = 1;
  private readonly initial: MemoryStats[];
  /** Per shard: the profiler's rate (0 off, 1 every allocation). */
  private readonly rate: number[] = Array.from({ length: SHARDS }, () => 0);

  constructor(
    shardBytes: number,
    readonly cov: Coverage,
  ) {
    const created = SharedHeap.create({ shards: SHARDS, shardBytes });
    // This thread takes every shard now (ownership.ts), so no later call
    // writes the owner word in the middle of an "unchanged heap" check.
    for (let s = 0; s < SHARDS; s++) created.shard(s);
    this.views = [created, SharedHeap.attach(created.buffer)];
    this.heap = created;
    this.initial = Array.from({ length: SHARDS }, (_, s) => this.heap.stats(s));
    for (const st of this.initial) {
      expect(st.freeMemory).toBe(st.totalMemory);
      expect(st.liveObjects).toBe(0);
    }
    cov.runs++;
  }

  // ------------------------------------------------------------ helpers

  liveOn(s: number): Obj[] {
    return this.live.filter((o) => o.owner === s);
  }

  dataPages(s: number): number {
    return this.initial[s]!.totalMemory / PAGE_SIZE;
  }

  private pick<T>(list: readonly T[], n: number): T | undefined {
    return list.length === 0 ? undefined : list[n % list.length];
  }

  private removeLive(o: Obj): void {
    const i = this.live.indexOf(o);
    expect(i).toBeGreaterThanOrEqual(0);
    this.live.splice(i, 1);
  }

  writePattern(o: Obj): void {
    this.heap.bytes(o.ptr, o.req).set(patternOf(o.id, o.req));
  }

  /** The first `length` bytes of `o` hold its pattern. */
  verifyPattern(o: Obj, length = o.req, at = o.ptr): void {
    const actual = this.heap.bytes(at, length);
    const expected = patternOf(o.id, length);
    if (Buffer.compare(actual, expected) !== 0) {
      let i = 0;
      while (actual[i] === expected[i]) i++;
      throw new Error(
        `contents of object #${o.id} (shard ${o.owner}, ${o.req} B asked, ${o.usable} B usable) at ${at} ` +
          `changed at byte ${i} (address ${at + i}): ${actual[i]} != ${expected[i]}`,
      );
    }
  }

  /**
   * Account for a drain the allocator may have done by itself (allocation
   * slow paths drain the inbox; the list is taken whole, so it is all or
   * nothing). `mayDrain` false: liveObjects must match exactly.
   */
  reconcile(s: number, mayDrain: boolean): void {
    const live = this.heap.stats(s).liveObjects;
    const modelLive = this.liveOn(s).length;
    const pend = this.pending[s]!.length;
    if (live === modelLive + pend) return;
    if (mayDrain && pend > 0 && live === modelLive) {
      this.cov.implicitDrains++;
      this.markDrained(s);
      return;
    }
    throw new Error(
      `shard ${s}: liveObjects ${live}, model has ${modelLive} live + ${pend} pending cross-shard frees` +
        (mayDrain ? " (a drain would make it " + modelLive + ")" : ""),
    );
  }

  markDrained(s: number): void {
    for (const o of this.pending[s]!) this.freed.push(o.ptr);
    this.pending[s] = [];
  }

  /**
   * The model's invariants; with `deep`, also heap.check() and every live
   * object's contents. (heap.check() is linear in the heap, about 1 ms for
   * two 4 MiB shards, so the properties afford it after every operation.)
   */
  checkInvariants(deep: boolean): void {
    const heap = this.heap;
    for (let s = 0; s < SHARDS; s++) {
      const st = heap.stats(s);
      expect(st.mallocs - st.frees, `shard ${s} mallocs - frees`).toBe(st.liveObjects);
      expect(st.freeMemory + st.allocatedMemory, `shard ${s} free + allocated`).toBe(st.totalMemory);
      expect(st.totalMemory).toBe(this.initial[s]!.totalMemory);
      expect(st.liveObjects, `shard ${s} liveObjects (model: live + pending)`).toBe(
        this.liveOn(s).length + this.pending[s]!.length,
      );
      expect(st.freeMemory).toBeGreaterThanOrEqual(0);
    }
    for (const o of this.live) {
      expect(o.ptr % 8, `object #${o.id} is 8-aligned`).toBe(0);
      expect(o.ptr % o.align, `object #${o.id} at ${o.ptr} aligned to ${o.align}`).toBe(0);
      expect(heap.ownerOf(o.ptr), `owner of object #${o.id}`).toBe(o.owner);
      expect(heap.ownerOf(o.ptr + o.usable - 1), `owner of object #${o.id}'s last byte`).toBe(o.owner);
      expect(o.usable).toBeGreaterThanOrEqual(o.req);
      // Any shard may ask the size of any shard's object.
      expect(heap.shard(o.ptr % 16 === 0 ? 0 : 1).objectSize(o.ptr), `objectSize of #${o.id}`).toBe(o.usable);
    }
    // Pending objects still occupy their memory until drained.
    const all = [...this.live, ...this.pending.flat()].sort((a, b) => a.ptr - b.ptr);
    for (let i = 1; i < all.length; i++) {
      const a = all[i - 1]!;
      const b = all[i]!;
      if (a.ptr + a.usable > b.ptr) {
        throw new Error(`object #${a.id} [${a.ptr}, ${a.ptr + a.usable}) overlaps object #${b.id} at ${b.ptr}`);
      }
    }
    if (deep) {
      expectHealthy(heap);
      for (const o of this.live) this.verifyPattern(o);
    }
  }

  // ------------------------------------------------------------ allocation

  private tryAlloc(s: number, r: AllocRequest): number {
    const a = this.heap.shard(s);
    return r.kind === "malloc" ? a.malloc(r.size) : a.allocateAligned(r.align, r.size);
  }

  /**
   * A request that even an empty shard cannot hold: a page span (with its
   * alignment slack) longer than the shard. The allocator rejects it before
   * touching its inbox.
   */
  private rejectedOutright(s: number, size: number, align: number): boolean {
    if (!isLargeRequest(size, align)) return false;
    const alignPages = align > PAGE_SIZE ? align / PAGE_SIZE : 1;
    return pagesFor(size) + alignPages - 1 > this.dataPages(s);
  }

  /** After an OutOfMemoryError on shard `s`: nothing allocated, the inbox drained, the heap sound. */
  private afterOom(s: number, e: unknown, before: MemoryStats, size: number, align: number): void {
    if (!(e instanceof OutOfMemoryError)) throw e;
    this.cov.ooms++;
    expect(e.name).toBe("OutOfMemoryError");
    expect(e.report).toMatch(/Total memory:/);
    const st = this.heap.stats(s);
    expect(st.failedAllocations).toBe(before.failedAllocations + 1);
    expect(st.mallocs).toBe(before.mallocs);
    if (this.rejectedOutright(s, size, align)) this.reconcile(s, true);
    else {
      // "the shard drains its cross-shard list before giving up"
      if (this.pending[s]!.length > 0) this.cov.implicitDrains++;
      this.markDrained(s);
      this.reconcile(s, false);
    }
  }

  /** Register a fresh object from shard `s` and check its size and alignment. */
  private adopt(s: number, ptr: number, r: AllocRequest): Obj {
    const align = r.kind === "aligned" ? r.align : 8;
    const large = isLargeRequest(r.size, align);
    const o: Obj = { id: this.nextId++, ptr, owner: s, req: r.size, usable: this.heap.shard(s).objectSize(ptr), align, large };
    expect(ptr).toBeGreaterThan(0);
    expect(ptr % align, `allocation aligned to ${align}`).toBe(0);
    expect(o.usable).toBeGreaterThanOrEqual(r.size);
    if (!large && this.rate[s] === 1) {
      if (o.usable >= 2048) this.cov.profiledAlone++;
      else this.cov.profiledSmall++;
    }
    if (large) expect(o.usable, `large object of ${r.size} B is whole pages`).toBe(pagesFor(r.size) * PAGE_SIZE);
    else if (r.kind === "malloc") expect(o.usable, `small object of ${r.size} B uses its size class`).toBe(classFor(r.size));
    else expect(o.usable).toBeLessThanOrEqual(MAX_SMALL_SIZE);
    this.live.push(o);
    // Allocation slow paths may have drained the inbox: settle that first,
    // then the new object must not overlap anything live or still pending.
    this.reconcile(s, true);
    this.expectNoOverlap(o);
    this.writePattern(o);
    return o;
  }

  private expectNoOverlap(o: Obj): void {
    for (const p of [...this.live, ...this.pending.flat()]) {
      if (p !== o && o.ptr < p.ptr + p.usable && p.ptr < o.ptr + o.usable) {
        throw new Error(`new object #${o.id} at ${o.ptr} (${o.usable} B) overlaps object #${p.id} at ${p.ptr} (${p.usable} B)`);
      }
    }
  }

  /**
   * Allocate; on OutOfMemoryError free this shard's objects (largest first)
   * and retry after each, until it succeeds or the shard is empty.
   */
  allocate(s: number, r: AllocRequest): Obj | undefined {
    const align = r.kind === "aligned" ? r.align : 8;
    if (align >= 8192) this.cov.bigAlignments++;
    let before = this.heap.stats(s);
    try {
      return this.adopt(s, this.tryAlloc(s, r), r);
    } catch (e) {
      this.afterOom(s, e, before, r.size, align);
    }
    // Nothing was allocated and the heap is sound (checked once per failed request).
    this.checkInvariants(true);
    if (this.rejectedOutright(s, r.size, align)) {
      // Longer than the whole shard: no amount of freeing helps.
      this.cov.oomLargerThanShard++;
      return undefined;
    }
    for (;;) {
      const victim = this.liveOn(s).sort((a, b) => b.usable - a.usable)[0];
      if (!victim) break;
      this.freeLocal(victim);
      before = this.heap.stats(s);
      try {
        const o = this.adopt(s, this.tryAlloc(s, r), r);
        this.cov.oomRetrySucceeded++;
        return o;
      } catch (e) {
        this.afterOom(s, e, before, r.size, align);
      }
    }
    // The shard holds nothing now and reclaimed before giving up: all of
    // it is free, in one run of adjacent free blocks, so a request no
    // longer than the shard must succeed.
    const st = this.heap.stats(s);
    throw new Error(
      `${r.kind}(${r.size}, align ${align}) still fails on an empty shard of ${this.dataPages(s)} pages ` +
        `(freeMemory ${st.freeMemory} of ${st.totalMemory})`,
    );
  }

  // ------------------------------------------------------------ frees

  freeLocal(o: Obj, size?: number): void {
    this.verifyPattern(o);
    const freeBefore = this.heap.stats(o.owner).freeMemory;
    if (size === undefined) this.heap.shard(o.owner).free(o.ptr);
    else this.heap.shard(o.owner).free(o.ptr, size);
    const gained = this.heap.stats(o.owner).freeMemory - freeBefore;
    if (o.large) expect(gained, `freeing large object #${o.id} returns its pages`).toBe(o.usable);
    else {
      expect(gained).toBeGreaterThanOrEqual(0);
      // The pool's list overflowed and was trimmed back, releasing empty spans.
      if (gained > 0) this.cov.spansReleasedOnFree++;
    }
    this.removeLive(o);
    this.freed.push(o.ptr);
    this.reconcile(o.owner, false);
  }

  crossFree(o: Obj, sized: boolean): void {
    this.verifyPattern(o);
    const via = (o.owner + 1) % SHARDS;
    const sent = this.heap.stats(via).crossShardFrees;
    if (sized) this.heap.shard(via).free(o.ptr, o.req);
    else this.heap.shard(via).free(o.ptr);
    expect(this.heap.stats(via).crossShardFrees).toBe(sent + 1);
    this.removeLive(o);
    this.pending[o.owner]!.push(o);
    this.cov.crossFrees++;
    this.reconcile(o.owner, false);
    this.reconcile(via, false);
  }

  drain(s: number): void {
    const n = this.heap.shard(s).drainCrossShardFrees();
    expect(n, `drainCrossShardFrees() on shard ${s}`).toBe(this.pending[s]!.length);
    this.cov.explicitDrained += n;
    this.markDrained(s);
    this.reconcile(s, false);
  }

  trim(s: number): void {
    const before = this.heap.stats(s).freeMemory;
    const returned = this.heap.shard(s).trim();
    expect(returned).toBe(this.heap.stats(s).freeMemory - before);
    this.markDrained(s); // trim drains the inbox first
    this.reconcile(s, false);
    this.checkFreeSpans(s);
  }

  /**
   * A trimmed shard whose objects are all page spans holds no pool span,
   * so its free pages are exactly the gaps between those objects, each one
   * free span (freed pages merge with their free neighbours at once): the
   * largest free span is the largest gap.
   */
  private checkFreeSpans(s: number): void {
    const mine = this.liveOn(s);
    if (mine.some((o) => !o.large)) return;
    const region = this.heap.regions[s]!;
    const end = region.dataStart + region.dataBytes;
    let largestGap = 0;
    let at = region.dataStart;
    for (const o of [...mine].sort((a, b) => a.ptr - b.ptr)) {
      largestGap = Math.max(largestGap, o.ptr - at);
      at = o.ptr + o.usable;
    }
    largestGap = Math.max(largestGap, end - at);
    expect(this.heap.stats(s).freeMemory, `shard ${s}: free memory is all but its page-span objects`).toBe(
      region.dataBytes - mine.reduce((n, o) => n + o.usable, 0),
    );
    expect(this.heap.largestFreeSpan(s), `shard ${s}: largest free span after trim, with ${mine.length} page-span objects`).toBe(largestGap);
    this.cov.freeSpansChecked++;
  }

  /** Turn shard `s`'s profiler to `rate` through every view of the heap (each has its own sampler). */
  profile(s: number, rate: number, seed: number): void {
    for (const view of this.views) {
      const a = view.shard(s);
      a.setHeapProfilingSampleRate(rate);
      a.seedHeapProfiler(seed);
    }
    this.rate[s] = rate;
  }

  // ------------------------------------------------------------ realloc

  realloc(o: Obj, newReq: number, cross: boolean): void {
    const t = cross ? (o.owner + 1) % SHARDS : o.owner; // the shard calling realloc
    this.verifyPattern(o);
    const inPlace =
      !cross &&
      (o.large
        ? newReq > MAX_SMALL_SIZE && pagesFor(newReq) * PAGE_SIZE <= o.usable
        : newReq <= MAX_SMALL_SIZE && classFor(newReq) === o.usable);
    const ownerBefore = this.heap.stats(o.owner);
    const callerBefore = this.heap.stats(t);
    let p: number;
    try {
      p = this.heap.shard(t).realloc(o.ptr, newReq);
    } catch (e) {
      expect(inPlace, "an in-place realloc cannot run out of memory").toBe(false);
      // The old object is untouched and still live.
      this.afterOom(t, e, callerBefore, newReq, 8);
      expect(this.heap.shard(o.owner).objectSize(o.ptr)).toBe(o.usable);
      this.verifyPattern(o);
      this.checkInvariants(true);
      return;
    }
    const keep = Math.min(o.req, newReq);
    if (inPlace) {
      expect(p, `realloc(${o.ptr} of ${o.usable} B, ${newReq}) stays in place`).toBe(o.ptr);
      const usable = this.heap.shard(o.owner).objectSize(p);
      if (o.large) {
        expect(usable, `objectSize after realloc(${o.ptr} of ${o.usable} B, ${newReq}) in place`).toBe(pagesFor(newReq) * PAGE_SIZE);
        // The tail pages went straight back to the page allocator.
        expect(this.heap.stats(o.owner).freeMemory - ownerBefore.freeMemory).toBe(o.usable - usable);
        if (usable < o.usable) {
          this.cov.inPlaceLargeShrinks++;
          this.freed.push(o.ptr + usable); // the cut-off tail is no object (unless reused)
        }
      } else {
        expect(usable).toBe(o.usable);
        expect(this.heap.stats(o.owner).freeMemory).toBe(ownerBefore.freeMemory);
        this.cov.inPlaceSmall++;
      }
      expect(this.heap.stats(o.owner).mallocs).toBe(ownerBefore.mallocs);
      o.usable = usable;
      this.verifyPattern(o, keep);
      o.req = newReq;
      this.writePattern(o);
      this.reconcile(o.owner, false);
      return;
    }
    expect(p, `realloc(${o.ptr}, ${newReq}) moves`).not.toBe(o.ptr);
    expect(this.heap.ownerOf(p), "realloc's new object belongs to the calling shard").toBe(t);
    this.removeLive(o);
    if (cross) {
      this.pending[o.owner]!.push(o); // the old object went to its owner's inbox
      expect(this.heap.stats(t).crossShardFrees).toBe(callerBefore.crossShardFrees + 1);
      this.cov.crossReallocs++;
    } else {
      this.freed.push(o.ptr);
    }
    this.cov.reallocMoves++;
    const moved: Obj = {
      id: o.id,
      ptr: p,
      owner: t,
      req: newReq,
      usable: this.heap.shard(t).objectSize(p),
      align: 8,
      large: newReq > MAX_SMALL_SIZE,
    };
    expect(moved.usable).toBe(moved.large ? pagesFor(newReq) * PAGE_SIZE : classFor(newReq));
    this.verifyPattern(moved, keep); // contents preserved up to min(old, new)
    this.live.push(moved);
    this.reconcile(t, true);
    if (cross) this.reconcile(o.owner, false);
    this.expectNoOverlap(moved);
    this.writePattern(moved);
  }

  // ------------------------------------------------------------ dispatch

  run(op: Op): void {
    this.cov.ops++;
    this.heap = this.views[this.opCount++ % 2]!;
    switch (op.k) {
      case "malloc":
        this.allocate(op.shard, { kind: "malloc", size: op.size });
        break;
      case "aligned":
        this.allocate(op.shard, { kind: "aligned", size: op.size, align: 2 ** op.alignLog });
        break;
      case "free": {
        const o = this.pick(this.live, op.pick);
        if (o) this.freeLocal(o);
        break;
      }
      case "freeSized": {
        const o = this.pick(this.live, op.pick);
        if (o) this.freeLocal(o, [o.req, o.usable, 0, o.req >>> 1][op.how]!);
        break;
      }
      case "realloc": {
        const large = this.live.filter((x) => x.large);
        const o = this.pick(op.large && large.length > 0 ? large : this.live, op.pick);
        if (!o) break;
        const size = op.rel === null ? op.size : Math.floor(o.req * op.rel) + op.delta;
        this.realloc(o, Math.min(LARGEST_OBJECT, Math.max(0, size)), op.cross);
        break;
      }
      case "reallocNull": {
        // realloc(0, n) is malloc(n).
        const s = op.shard;
        const before = this.heap.stats(s);
        let p: number;
        try {
          p = this.heap.shard(s).realloc(0, op.size);
        } catch (e) {
          this.afterOom(s, e, before, op.size, 8);
          this.checkInvariants(true);
          break;
        }
        this.adopt(s, p, { kind: "malloc", size: op.size });
        break;
      }
      case "objectSize": {
        const o = this.pick(this.live, op.pick);
        if (o) expect(this.heap.shard(op.via).objectSize(o.ptr)).toBe(o.usable);
        break;
      }
      case "crossFree": {
        const o = this.pick(this.live, op.pick);
        if (o) this.crossFree(o, op.sized);
        break;
      }
      case "drain":
        this.drain(op.shard);
        break;
      case "trim":
        this.trim(op.shard);
        break;
      case "profile":
        this.profile(op.shard, op.rate, op.seed);
        break;
      case "burst": {
        const made: Obj[] = [];
        for (let i = 0; i < op.count; i++) {
          const o = this.allocate(op.shard, { kind: "malloc", size: op.size });
          if (o) made.push(o);
        }
        // Some may have been freed to make room after an OutOfMemoryError.
        const rank = (o: Obj): number => (Math.imul(o.id, 0x9e3779b1) ^ op.order) >>> 0;
        const victims = made.filter((o) => this.live.includes(o)).sort((a, b) => rank(a) - rank(b));
        for (const o of victims.slice(0, Math.ceil(victims.length * op.freeFraction))) {
          if (op.cross) this.crossFree(o, false);
          else this.freeLocal(o);
        }
        if (op.cross) this.drain(op.shard);
        break;
      }
    }
  }

  /** Free everything, drain, trim: every shard must be all-free again. */
  finish(): void {
    for (const o of this.live) this.verifyPattern(o);
    for (const o of [...this.live]) this.freeLocal(o);
    for (let s = 0; s < SHARDS; s++) this.drain(s);
    for (let s = 0; s < SHARDS; s++) {
      const a = this.heap.shard(s);
      const before = a.stats().freeMemory;
      expect(a.trim()).toBe(a.stats().freeMemory - before);
      const st = a.stats();
      expect(st.liveObjects, `shard ${s} liveObjects at the end`).toBe(0);
      expect(st.freeMemory, `shard ${s} freeMemory after free all + trim`).toBe(this.initial[s]!.freeMemory);
      expect(st.freeMemory).toBe(st.totalMemory);
      // Nothing is left behind: the whole shard is one free span, allocatable as one object.
      expect(this.heap.largestFreeSpan(s)).toBe(st.totalMemory);
      const p = a.malloc(st.totalMemory);
      expect(a.objectSize(p)).toBe(st.totalMemory);
      a.free(p);
      expect(a.stats().freeMemory).toBe(st.totalMemory);
    }
    expectHealthy(this.heap);
  }
}

// ---------------------------------------------------------------------------
// Invalid operations.

type BadCall = "free" | "freeSized" | "realloc" | "objectSize";

type BadOp =
  | { k: "doubleFree"; pick: number; via: number; call: BadCall }
  | { k: "interior"; pick: number; via: number; call: BadCall; offset: number }
  | { k: "misaligned"; pick: number; via: number; call: BadCall; delta: number }
  | { k: "outOfRange"; pick: number; via: number; call: BadCall }
  | { k: "pendingFree"; pick: number; via: number; call: BadCall }
  | { k: "badArgument"; pick: number; via: number; which: number }
  | { k: "freeNull"; via: number; sized: boolean };

const badCallArb = fc.constantFrom<BadCall>("free", "freeSized", "realloc", "objectSize");

const badOpArb: fc.Arbitrary<BadOp> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ k: fc.constant("doubleFree" as const), pick: pickArb, via: shardArb, call: badCallArb }) },
  {
    weight: 2,
    arbitrary: fc.record({ k: fc.constant("interior" as const), pick: pickArb, via: shardArb, call: badCallArb, offset: pickArb }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      k: fc.constant("misaligned" as const),
      pick: pickArb,
      via: shardArb,
      call: badCallArb,
      delta: fc.integer({ min: 1, max: 7 }),
    }),
  },
  { weight: 2, arbitrary: fc.record({ k: fc.constant("outOfRange" as const), pick: pickArb, via: shardArb, call: badCallArb }) },
  { weight: 3, arbitrary: fc.record({ k: fc.constant("pendingFree" as const), pick: pickArb, via: shardArb, call: badCallArb }) },
  { weight: 2, arbitrary: fc.record({ k: fc.constant("badArgument" as const), pick: pickArb, via: shardArb, which: pickArb }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant("freeNull" as const), via: shardArb, sized: fc.boolean() }) },
);

type Step = { valid: Op } | { invalid: BadOp };

const stepArb: fc.Arbitrary<Step> = fc.oneof(
  { weight: 3, arbitrary: opArb.map((valid): Step => ({ valid })) },
  { weight: 2, arbitrary: badOpArb.map((invalid): Step => ({ invalid })) },
);

/** Call `call` on `ptr` through shard `via`; a valid size is passed where one is needed. */
function callOn(heap: SharedHeap, via: number, call: BadCall, ptr: number): void {
  const a = heap.shard(via);
  if (call === "free") a.free(ptr);
  else if (call === "freeSized") a.free(ptr, 8);
  else if (call === "realloc") a.realloc(ptr, 16);
  else a.objectSize(ptr);
}

function describeCall(via: number, call: BadCall, ptr: number): string {
  const args = call === "freeSized" ? `${ptr}, 8` : call === "realloc" ? `${ptr}, 16` : `${ptr}`;
  return `shard(${via}).${call === "freeSized" ? "free" : call}(${args})`;
}

/** Pointers that are no object's start: outside every region, in metadata, not integers. */
function outOfRangePointers(heap: SharedHeap): number[] {
  const end = heap.buffer.byteLength;
  const regionBase = (s: number): number => PAGE_SIZE + s * heap.shardBytes;
  return [
    -8,
    -1,
    8,
    PAGE_SIZE - 8,
    regionBase(0) + 8, // shard 0's header
    regionBase(0) + 2 * PAGE_SIZE, // shard 0's page metadata
    regionBase(1) + 64, // shard 1's inbox word
    end,
    end + 8,
    end + PAGE_SIZE,
    2 ** 32,
    2 ** 32 + 8,
    2 ** 53 + 8,
    0.5,
    PAGE_SIZE + 0.5,
    Number.NaN,
    Number.POSITIVE_INFINITY,
    Number.NEGATIVE_INFINITY,
  ];
}

class InvalidOpRunner {
  constructor(readonly h: Harness) {}

  /** Run `fn`; it must throw `expected` and leave every byte of the buffer as it was. */
  private expectRejected(what: string, expected: "InvalidPointerError" | "RangeError" | "TypeError" | null, fn: () => void): void {
    const heap = this.h.heap;
    const before = new Uint8Array(heap.buffer).slice();
    let thrown: unknown = undefined;
    try {
      fn();
    } catch (e) {
      thrown = e;
    }
    if (expected === null) {
      if (thrown !== undefined) throw new Error(`${what} should do nothing but threw ${String(thrown)}`);
    } else {
      if (thrown === undefined) throw new Error(`${what} should throw ${expected} but returned`);
      const err = thrown as Error;
      if (expected === "InvalidPointerError") {
        if (!(err instanceof InvalidPointerError)) throw new Error(`${what} threw ${err.name}: ${err.message}, not InvalidPointerError`);
      } else if (err.constructor.name !== expected) {
        throw new Error(`${what} threw ${err.name}: ${err.message}, not ${expected}`);
      }
      expect(err.name).toBe(expected);
    }
    const after = new Uint8Array(heap.buffer);
    if (Buffer.compare(before, after) !== 0) {
      let i = 0;
      while (before[i] === after[i]) i++;
      throw new Error(`${what} changed the heap: first difference at byte ${i} (${before[i]} -> ${after[i]})`);
    }
    this.h.cov.invalidCalls++;
  }

  /** True when `ptr` is the start of a live object (a valid argument). */
  private isLiveStart(ptr: number): boolean {
    return this.h.live.some((o) => o.ptr === ptr);
  }

  run(op: BadOp): void {
    const h = this.h;
    const heap = h.heap;
    switch (op.k) {
      case "doubleFree": {
        // Freed pointers that are not live again (they may be pending, or inside a newer object).
        const stale = h.freed.filter((p) => !this.isLiveStart(p));
        if (stale.length === 0) return this.run({ ...op, k: "outOfRange" });
        const ptr = stale[op.pick % stale.length]!;
        this.expectRejected(`double ${describeCall(op.via, op.call, ptr)}`, "InvalidPointerError", () =>
          callOn(heap, op.via, op.call, ptr),
        );
        return;
      }
      case "interior": {
        const big = h.live.filter((o) => o.usable >= 16);
        if (big.length === 0) return this.run({ ...op, k: "outOfRange" });
        const o = big[op.pick % big.length]!;
        // ptr + 8 mostly; anywhere inside the object otherwise.
        const granules = o.usable / 8 - 1;
        const k = op.offset % 2 === 0 ? 1 : 1 + (op.offset % granules);
        const ptr = o.ptr + 8 * k;
        this.expectRejected(`interior ${describeCall(op.via, op.call, ptr)} (object at ${o.ptr})`, "InvalidPointerError", () =>
          callOn(heap, op.via, op.call, ptr),
        );
        return;
      }
      case "misaligned": {
        const o = h.live[op.pick % Math.max(1, h.live.length)];
        if (!o) return this.run({ ...op, k: "outOfRange" });
        const ptr = o.ptr + op.delta;
        this.expectRejected(`misaligned ${describeCall(op.via, op.call, ptr)}`, "InvalidPointerError", () =>
          callOn(heap, op.via, op.call, ptr),
        );
        return;
      }
      case "outOfRange": {
        const list = outOfRangePointers(heap);
        const ptr = list[op.pick % list.length]!;
        this.expectRejected(`out-of-range ${describeCall(op.via, op.call, ptr)}`, "InvalidPointerError", () =>
          callOn(heap, op.via, op.call, ptr),
        );
        return;
      }
      case "pendingFree": {
        const pend = h.pending.flat();
        if (pend.length === 0) {
          // Make one: free a live object through the other shard first.
          const o = h.live[op.pick % Math.max(1, h.live.length)];
          if (!o) return this.run({ ...op, k: "outOfRange" });
          h.crossFree(o, false);
          return this.run(op);
        }
        const o = pend[op.pick % pend.length]!;
        this.expectRejected(
          `${describeCall(op.via, op.call, o.ptr)} of an object pending its cross-shard free (owner ${o.owner})`,
          "InvalidPointerError",
          () => callOn(heap, op.via, op.call, o.ptr),
        );
        return;
      }
      case "badArgument": {
        const o = h.live[op.pick % Math.max(1, h.live.length)];
        const a = heap.shard(op.via);
        const cases: Array<[string, "RangeError" | "TypeError", () => unknown]> = [
          ["malloc(-1)", "RangeError", () => a.malloc(-1)],
          ["malloc(1.5)", "RangeError", () => a.malloc(1.5)],
          ["malloc(NaN)", "RangeError", () => a.malloc(Number.NaN)],
          ["malloc(Infinity)", "RangeError", () => a.malloc(Number.POSITIVE_INFINITY)],
          ["malloc(2**53)", "RangeError", () => a.malloc(2 ** 53)],
          ['malloc("8")', "TypeError", () => a.malloc("8" as unknown as number)],
          ["allocateAligned(3, 8)", "RangeError", () => a.allocateAligned(3, 8)],
          ["allocateAligned(0, 8)", "RangeError", () => a.allocateAligned(0, 8)],
          ["allocateAligned(2**32, 8)", "RangeError", () => a.allocateAligned(2 ** 32, 8)],
          ["allocateAligned(8, -8)", "RangeError", () => a.allocateAligned(8, -8)],
          ['free("8")', "TypeError", () => a.free("8" as unknown as number)],
        ];
        if (o) {
          cases.push(
            [`free(${o.ptr}, ${o.usable + 1}) larger than the object`, "RangeError", () => a.free(o.ptr, o.usable + 1)],
            [`free(${o.ptr}, -1)`, "RangeError", () => a.free(o.ptr, -1)],
            [`free(${o.ptr}, 0.5)`, "RangeError", () => a.free(o.ptr, 0.5)],
            [`realloc(${o.ptr}, -1)`, "RangeError", () => a.realloc(o.ptr, -1)],
            [`realloc(${o.ptr}, 2.5)`, "RangeError", () => a.realloc(o.ptr, 2.5)],
          );
        }
        const [what, expected, fn] = cases[op.which % cases.length]!;
        this.expectRejected(`shard(${op.via}).${what}`, expected, fn);
        if (o) this.h.verifyPattern(o);
        return;
      }
      case "freeNull":
        this.expectRejected(`shard(${op.via}).free(0${op.sized ? ", 8" : ""})`, null, () =>
          op.sized ? heap.shard(op.via).free(0, 8) : heap.shard(op.via).free(0),
        );
        return;
    }
  }
}

// ---------------------------------------------------------------------------

/**
 * A passing run takes a few seconds. A failing one shrinks, which can take
 * minutes on long operation lists: stop after this long and report the
 * smallest counterexample found so far.
 */
const TIME_LIMIT_MS = 40_000;
/** SHARDHEAP_TEST_VERBOSE=1 prints how often each interesting path was taken. */
const VERBOSE = Boolean(process.env.SHARDHEAP_TEST_VERBOSE);
const plugins = [fc.interruptAfterTimeLimit(TIME_LIMIT_MS, { failOnInterrupt: true })];

describe("allocator properties", () => {
  it("random malloc / free / realloc / aligned / cross-shard sequences agree with a model", () => {
    const cov = newCoverage();
    fc.assert(
      fc.property(shardBytesArb, fc.array(opArb, { minLength: 1, maxLength: 100, size: "max" }), (shardBytes, ops) => {
        const h = new Harness(shardBytes, cov);
        for (const op of ops) {
          h.run(op);
          h.checkInvariants(true);
        }
        h.finish();
      }),
      { seed: 0x5eed_0001, numRuns: 50, plugins },
    );
    if (VERBOSE) console.log("allocator model coverage:", JSON.stringify(cov));
    // The generators must reach the interesting paths, not just pass vacuously.
    expect(cov.ooms).toBeGreaterThan(0);
    expect(cov.oomRetrySucceeded).toBeGreaterThan(0);
    expect(cov.inPlaceLargeShrinks).toBeGreaterThan(0);
    expect(cov.inPlaceSmall).toBeGreaterThan(0);
    expect(cov.reallocMoves).toBeGreaterThan(0);
    expect(cov.crossReallocs).toBeGreaterThan(0);
    expect(cov.crossFrees).toBeGreaterThan(0);
    expect(cov.explicitDrained).toBeGreaterThan(0);
    expect(cov.implicitDrains).toBeGreaterThan(0);
    expect(cov.bigAlignments).toBeGreaterThan(0);
    expect(cov.spansReleasedOnFree).toBeGreaterThan(0);
    expect(cov.profiledSmall).toBeGreaterThan(0);
    expect(cov.profiledAlone).toBeGreaterThan(0);
    expect(cov.freeSpansChecked).toBeGreaterThan(0);
  });

  it("invalid pointers and arguments throw and leave every byte of the heap unchanged", () => {
    const cov = newCoverage();
    fc.assert(
      fc.property(
        fc.constantFrom(256 * KiB, 1 * MiB),
        fc.array(stepArb, { minLength: 5, maxLength: 80, size: "max" }),
        (shardBytes, steps) => {
          const h = new Harness(shardBytes, cov);
          const bad = new InvalidOpRunner(h);
          for (const step of steps) {
            if ("valid" in step) h.run(step.valid);
            else bad.run(step.invalid);
            h.checkInvariants(true);
          }
          h.finish();
        },
      ),
      { seed: 0x5eed_0002, numRuns: 60, plugins },
    );
    expect(cov.invalidCalls).toBeGreaterThan(0);
    if (VERBOSE) console.log("invalid-operation coverage:", JSON.stringify(cov));
  });
});
