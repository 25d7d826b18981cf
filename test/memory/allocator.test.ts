import { describe, expect, it } from "vitest";
import {
  HeapFormatError,
  InvalidPointerError,
  MAX_SMALL_SIZE,
  OutOfMemoryError,
  PAGE_SIZE,
  SharedHeap,
} from "../../src/index.js";
import { CLASS_COUNT, classOf, classSize } from "../../src/memory/size-classes.js";
import { formatSize } from "../../src/units.js";
import { POOL_STRIDE, P_FREES_LO, P_MALLOCS_LO } from "../../src/memory/layout.js";
import { newHeap } from "../helpers.js";

const classOfSize = (size: number): number => classOf[(size + 7) >>> 3]!;

const MiB = 1024 * 1024;
// Every scenario must leave every shard's metadata consistent (newHeap checks it when the test ends).

/** A copy of the whole heap, compared byte for byte (Buffer.equals is fast; toEqual on MiBs is not). */
function snapshot(heap: SharedHeap): Buffer {
  return Buffer.from(new Uint8Array(heap.buffer).slice());
}

function expectUnchanged(heap: SharedHeap, before: Buffer, what = "heap"): void {
  expect(Buffer.from(heap.buffer).equals(before), `${what}: heap bytes changed`).toBe(true);
}

describe("malloc and free", () => {
  it("hands out distinct, 8-aligned, in-region pointers and counts them", () => {
    const heap = newHeap({ shards: 2 });
    const a = heap.shard(1);
    const start = a.stats();
    const ptrs = new Set<number>();
    for (let i = 0; i < 2000; i++) {
      const p = a.malloc(1 + (i % 300));
      expect(p % 8).toBe(0);
      expect(heap.ownerOf(p)).toBe(1);
      expect(ptrs.has(p)).toBe(false);
      ptrs.add(p);
    }
    const s = a.stats();
    expect(s.mallocs - start.mallocs).toBe(2000);
    expect(s.liveObjects).toBe(2000);
    expect(s.freeMemory + s.allocatedMemory).toBe(s.totalMemory);
    for (const p of ptrs) a.free(p);
    expect(a.stats().liveObjects).toBe(0);
    expect(a.stats().frees).toBe(2000);
    a.trim();
    expect(a.stats().freeMemory).toBe(start.freeMemory);
  });

  it("counts past 2^32 operations per size class (the low word carries)", () => {
    const heap = newHeap();
    const a = heap.shard(0);
    const p = a.malloc(64);
    a.free(p);
    const r = heap.regions[0]!;
    const pool = r.pools + classOfSize(64) * POOL_STRIDE;
    r.i32[pool + P_MALLOCS_LO] = -1; // 2^32 - 1 as a uint32
    r.i32[pool + P_FREES_LO] = -1;
    const q = a.malloc(64);
    expect(a.stats().mallocs).toBe(2 ** 32);
    expect(a.stats().liveObjects).toBe(1);
    a.free(q);
    expect(a.stats().frees).toBe(2 ** 32);
    expect(a.stats().liveObjects).toBe(0);
    expect(a.stats().totalBytesAllocated).toBe(2 ** 32 * 64);
  });

  it("malloc(0) returns a unique minimum-size object and free(0) does nothing", () => {
    const heap = newHeap();
    const a = heap.shard(0);
    const p = a.malloc(0);
    const q = a.malloc(0);
    expect(p).toBeGreaterThan(0);
    expect(q).not.toBe(p);
    expect(a.objectSize(p)).toBe(8);
    const before = snapshot(heap);
    a.free(0);
    expectUnchanged(heap, before);
    a.free(p);
    a.free(q);
  });

  it("serves every size-class boundary from the right class", () => {
    const heap = newHeap();
    const a = heap.shard(0);
    for (let c = 0; c < CLASS_COUNT; c++) {
      const size = classSize[c]!;
      const exact = a.malloc(size);
      expect(a.objectSize(exact)).toBe(size);
      const over = a.malloc(size + 1);
      const next = c + 1 < CLASS_COUNT ? classSize[c + 1]! : Math.ceil((size + 1) / PAGE_SIZE) * PAGE_SIZE;
      expect(a.objectSize(over)).toBe(next);
      if (size > 8) expect(a.objectSize(a.malloc(size - 1))).toBe(size);
      new Uint8Array(heap.buffer, exact, size).fill(0xab);
      new Uint8Array(heap.buffer, over, size + 1).fill(0xcd);
      expect(new Uint8Array(heap.buffer, exact, size).every((b) => b === 0xab)).toBe(true);
    }
  });

  it("serves objects above 16 KiB as exact page spans", () => {
    const heap = newHeap();
    const a = heap.shard(0);
    const before = a.stats();
    const p = a.malloc(MAX_SMALL_SIZE + 1);
    expect(p % PAGE_SIZE).toBe(0);
    expect(a.objectSize(p)).toBe(5 * PAGE_SIZE);
    const s = a.stats();
    expect(s.largeAllocations).toBe(before.largeAllocations + 1);
    expect(before.freeMemory - s.freeMemory).toBe(5 * PAGE_SIZE);
    a.free(p);
    expect(a.stats().freeMemory).toBe(before.freeMemory);
  });

  it("keeps contents of live objects intact across other allocations", () => {
    const heap = newHeap({ shards: 1, shardBytes: 32 * MiB });
    const a = heap.shard(0);
    const live: [number, number][] = [];
    for (let i = 0; i < 500; i++) {
      const size = [24, 100, 4000, 20000, 70000][i % 5]!;
      const p = a.malloc(size);
      heap.bytes(p, size).fill(i & 255);
      live.push([p, size]);
      if (i % 3 === 0) {
        const [q] = live.splice((i * 7) % live.length, 1)[0]!;
        a.free(q);
      }
    }
    for (const [p, size] of live) {
      const want = heap.bytes(p, 1)[0]!;
      expect(heap.bytes(p, size).every((b) => b === want)).toBe(true);
      a.free(p);
    }
  });

  it("sized free accepts the object's size and rejects a larger one", () => {
    const heap = newHeap();
    const a = heap.shard(0);
    const p = a.malloc(100);
    const before = snapshot(heap);
    expect(() => a.free(p, 200)).toThrow(RangeError);
    expectUnchanged(heap, before);
    a.free(p, 100);
    expect(a.stats().liveObjects).toBe(0);
  });
});

describe("allocateAligned", () => {
  it.each([1, 8, 16, 64, 256, 4096, 8192, 65536, 1 << 20])("aligns to %i", (align) => {
    const heap = newHeap({ shards: 1, shardBytes: 16 * MiB });
    const a = heap.shard(0);
    for (const size of [1, 24, 100, 3000, 16384, 20000, 300000]) {
      const p = a.allocateAligned(align, size);
      expect(p % align).toBe(0);
      expect(a.objectSize(p)).toBeGreaterThanOrEqual(size);
      heap.bytes(p, size).fill(7);
      a.free(p);
    }
    a.trim();
    expect(a.stats().freeMemory).toBe(a.stats().totalMemory);
  });

  it("rejects alignments that are not powers of two", () => {
    const heap = newHeap();
    const a = heap.shard(0);
    const before = snapshot(heap);
    expect(() => a.allocateAligned(3, 8)).toThrow(RangeError);
    expect(() => a.allocateAligned(0, 8)).toThrow(RangeError);
    expect(() => a.allocateAligned("8" as unknown as number, 8)).toThrow(TypeError);
    expectUnchanged(heap, before);
  });
});

describe("realloc", () => {
  it("shrinks a large object in place and returns the tail pages", () => {
    const heap = newHeap();
    const a = heap.shard(0);
    const p = a.malloc(10 * PAGE_SIZE);
    heap.bytes(p, 10 * PAGE_SIZE).fill(9);
    const free0 = a.stats().freeMemory;
    expect(a.realloc(p, 6 * PAGE_SIZE)).toBe(p);
    expect(a.objectSize(p)).toBe(6 * PAGE_SIZE);
    expect(a.stats().freeMemory - free0).toBe(4 * PAGE_SIZE);
    expect(heap.bytes(p, 6 * PAGE_SIZE).every((b) => b === 9)).toBe(true);
    a.free(p);
  });

  it("moves and copies when growing, keeping the contents", () => {
    const heap = newHeap();
    const a = heap.shard(0);
    const p = a.malloc(40);
    heap.bytes(p, 40).set(Array.from({ length: 40 }, (_, i) => i));
    const q = a.realloc(p, 50000);
    expect(Array.from(heap.bytes(q, 40))).toEqual(Array.from({ length: 40 }, (_, i) => i));
    expect(() => a.objectSize(p)).toThrow(InvalidPointerError);
    const r = a.realloc(q, 30);
    expect(Array.from(heap.bytes(r, 30))).toEqual(Array.from({ length: 30 }, (_, i) => i));
    expect(a.objectSize(r)).toBe(32);
    expect(a.realloc(r, 31)).toBe(r); // same class: in place
    expect(a.stats().liveObjects).toBe(1);
    a.free(r);
  });

  it("realloc(0, n) allocates and realloc(p, 0) keeps a minimum object", () => {
    const heap = newHeap();
    const a = heap.shard(0);
    const p = a.realloc(0, 100);
    expect(a.objectSize(p)).toBe(112);
    const q = a.realloc(p, 0);
    expect(a.objectSize(q)).toBe(8);
    a.free(q);
  });

  it("leaves the old object live when the new one does not fit", () => {
    const heap = newHeap({ shards: 1, shardBytes: 1 * MiB });
    const a = heap.shard(0);
    const p = a.malloc(1000);
    heap.bytes(p, 1000).fill(3);
    expect(() => a.realloc(p, 4 * MiB)).toThrow(OutOfMemoryError);
    expect(a.objectSize(p)).toBe(1024);
    expect(heap.bytes(p, 1000).every((b) => b === 3)).toBe(true);
    a.free(p);
  });
});

describe("bad input", () => {
  it.each([
    ["a negative size", -1, RangeError],
    ["a fractional size", 1.5, RangeError],
    ["NaN", NaN, RangeError],
    ["Infinity", Infinity, RangeError],
    ["an unsafe integer", 2 ** 53, RangeError],
    ["a string", "64", TypeError],
    ["undefined", undefined, TypeError],
    ["a bigint", 64n, TypeError],
  ])("malloc of %s throws and changes nothing", (_what, size, type) => {
    const heap = newHeap();
    const a = heap.shard(0);
    a.malloc(10);
    const before = snapshot(heap);
    expect(() => a.malloc(size as number)).toThrow(type);
    expectUnchanged(heap, before);
  });

  it("malloc of a size no shard could hold is OutOfMemoryError", () => {
    const heap = newHeap();
    const a = heap.shard(0);
    expect(() => a.malloc(2 ** 40)).toThrow(OutOfMemoryError);
    expect(a.stats().failedAllocations).toBe(1);
  });

  it("rejects every kind of bad pointer with InvalidPointerError and an unchanged heap", () => {
    const heap = newHeap({ shards: 2 });
    const a = heap.shard(0);
    heap.shard(1); // taken now: taking it writes its owner word, which the checks below must not see
    const small = a.malloc(48);
    const large = a.malloc(50000);
    const freed = a.malloc(48);
    a.free(freed);
    const cases: [string, number, RegExp][] = [
      ["double free", freed, /not a live object/],
      ["interior of a small object", small + 8, /interior pointer, 8 bytes into a 48-byte object/],
      ["interior of a large object", large + PAGE_SIZE, /not a live object/],
      ["misaligned", small + 1, /misaligned/],
      ["out of range", heap.buffer.byteLength + 8, /outside/],
      ["the heap header", 8, /outside/],
      ["shard metadata", heap.regions[1]!.base + 64, /metadata/],
      ["negative", -8, /outside/],
      ["fractional", small + 0.5, /not an integer/],
    ];
    for (const [what, ptr, message] of cases) {
      const before = snapshot(heap);
      for (const op of [() => a.free(ptr), () => a.realloc(ptr, 10), () => a.objectSize(ptr), () => heap.shard(1).free(ptr)]) {
        let error: unknown;
        try {
          op();
        } catch (e) {
          error = e;
        }
        expect(error, what).toBeInstanceOf(InvalidPointerError);
        expect((error as Error).message, what).toMatch(message);
        expect((error as Error).name).toBe("InvalidPointerError");
      }
      expectUnchanged(heap, before, what);
    }
    expect(() => a.free("123" as unknown as number)).toThrow(TypeError);
    a.free(small);
    a.free(large);
  });

  it("detects a double free of a large object exactly", () => {
    const heap = newHeap();
    const a = heap.shard(0);
    const p = a.malloc(100000);
    a.free(p);
    const before = snapshot(heap);
    expect(() => a.free(p)).toThrow(InvalidPointerError);
    expectUnchanged(heap, before);
    // The same address handed out again is live again, and freeable once.
    const q = a.malloc(100000);
    expect(q).toBe(p);
    a.free(q);
    expect(() => a.free(q)).toThrow(InvalidPointerError);
  });
});

describe("exhaustion", () => {
  it("throws OutOfMemoryError with the diagnostics report, and recovers after frees", () => {
    const heap = newHeap({ shards: 1, shardBytes: 1 * MiB });
    const a = heap.shard(0);
    const live: number[] = [];
    let error: unknown;
    try {
      for (;;) live.push(a.malloc(3000));
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(OutOfMemoryError);
    const oom = error as OutOfMemoryError;
    expect(oom.name).toBe("OutOfMemoryError");
    expect(oom.requestedBytes).toBe(3072);
    expect(oom.report).toMatch(/^Used memory: /m);
    expect(oom.report).toMatch(/^Hard failures: 1$/m);
    expect(oom.report).toMatch(/^objsz spansz usedobj memory unused wst%$/m);
    expect(oom.report).toMatch(/^index  size  free  used spans$/m);
    expect(a.stats().failedAllocations).toBe(1);
    expect(a.stats().reclaims).toBeGreaterThanOrEqual(1);
    expect(heap.check()).toEqual([]);
    // Large and small requests both fail now...
    expect(() => a.malloc(100000)).toThrow(OutOfMemoryError);
    // ...and work again once memory comes back, even in other size classes.
    for (const p of live.splice(0, 200)) a.free(p);
    const big = a.malloc(100000);
    const small = a.malloc(16);
    a.free(big);
    a.free(small);
    for (const p of live) a.free(p);
    a.trim();
    expect(a.stats().freeMemory).toBe(a.stats().totalMemory);
  });

  it("reclaims cached pool spans for a large allocation", () => {
    const heap = newHeap({ shards: 1, shardBytes: 1 * MiB });
    const a = heap.shard(0);
    const total = a.stats().totalMemory;
    const ptrs = Array.from({ length: 3000 }, () => a.malloc(200));
    for (const p of ptrs) a.free(p);
    // Pool caches still hold spans; a large object needing most of the shard
    // must get them back through reclaim rather than fail.
    const big = a.malloc(total - 16 * PAGE_SIZE);
    expect(a.stats().reclaims).toBeGreaterThanOrEqual(1);
    a.free(big);
  });
});

describe("cross-shard frees on one thread", () => {
  it("pushes onto the owner's inbox and the owner drains them", () => {
    const heap = newHeap({ shards: 2 });
    const owner = heap.shard(0);
    const other = heap.shard(1);
    const ptrs = Array.from({ length: 1000 }, (_, i) => owner.malloc(8 + (i % 5000)));
    ptrs.push(owner.malloc(100000));
    for (const p of ptrs) other.free(p);
    expect(other.stats().crossShardFrees).toBe(1001);
    expect(owner.stats().liveObjects).toBe(1001); // live until drained
    expect(heap.check()).toEqual([]);
    // A second free of a pending object is caught, from either side.
    const before = snapshot(heap);
    expect(() => other.free(ptrs[0]!)).toThrow(/cross-shard free is pending/);
    expect(() => owner.free(ptrs[0]!)).toThrow(/cross-shard free is pending/);
    expect(() => owner.realloc(ptrs[0]!, 10)).toThrow(InvalidPointerError);
    expectUnchanged(heap, before);
    expect(owner.drainCrossShardFrees()).toBe(1001);
    expect(owner.drainCrossShardFrees()).toBe(0);
    expect(owner.stats().liveObjects).toBe(0);
    expect(() => other.free(ptrs[0]!)).toThrow(InvalidPointerError);
    owner.trim();
    expect(owner.stats().freeMemory).toBe(owner.stats().totalMemory);
  });

  it("batches remote frees per owner and flushes them within the turn", async () => {
    const heap = newHeap({ shards: 3 });
    const owner = heap.shard(0);
    const other = heap.shard(2);
    other.batchCrossShardFrees(true);
    const ptrs = Array.from({ length: 100 }, () => owner.malloc(40));
    const large = owner.malloc(50000);
    for (const p of ptrs) other.free(p);
    other.free(large);
    expect(other.stats().crossShardFrees).toBe(101);
    // Full chains of 32 went at once; the rest waits for the microtask.
    expect(owner.drainCrossShardFrees()).toBe(96);
    // Claimed already: a second free is caught while the object sits in a batch.
    expect(() => other.free(ptrs[99]!)).toThrow(/pending/);
    expect(() => owner.free(ptrs[99]!)).toThrow(/pending/);
    await Promise.resolve();
    expect(owner.drainCrossShardFrees()).toBe(5);
    expect(owner.stats().liveObjects).toBe(0);
    // Explicit flush, and turning batching off flushes too.
    const more = Array.from({ length: 5 }, () => heap.shard(1).malloc(8));
    for (const p of more) other.free(p);
    expect(other.flushCrossShardFrees()).toBe(5);
    const last = heap.shard(1).malloc(8);
    other.free(last);
    other.batchCrossShardFrees(false);
    expect(heap.shard(1).drainCrossShardFrees()).toBe(6);
    other.free(heap.shard(1).malloc(8)); // unbatched: in the inbox at once
    expect(heap.shard(1).drainCrossShardFrees()).toBe(1);
  });

  it("drains before reporting out-of-memory", () => {
    const heap = newHeap({ shards: 2, shardBytes: 1 * MiB });
    const owner = heap.shard(0);
    const other = heap.shard(1);
    const live: number[] = [];
    try {
      for (;;) live.push(owner.malloc(10000));
    } catch (e) {
      expect(e).toBeInstanceOf(OutOfMemoryError);
    }
    for (const p of live) other.free(p);
    // No explicit drain: the allocation slow path drains by itself.
    const p = owner.malloc(10000);
    expect(owner.stats().liveObjects).toBe(1);
    owner.free(p);
  });

  it("realloc of another shard's object moves it to the caller's shard", () => {
    const heap = newHeap({ shards: 2 });
    const p = heap.shard(0).malloc(64);
    heap.bytes(p, 64).fill(5);
    const q = heap.shard(1).realloc(p, 128);
    expect(heap.ownerOf(q)).toBe(1);
    expect(heap.bytes(q, 64).every((b) => b === 5)).toBe(true);
    expect(heap.shard(0).drainCrossShardFrees()).toBe(1);
    heap.shard(1).free(q);
  });
});

describe("SharedHeap", () => {
  it("validates create options", () => {
    expect(() => SharedHeap.create({ shards: 0, shardBytes: MiB })).toThrow(RangeError);
    expect(() => SharedHeap.create({ shards: 1.5, shardBytes: MiB })).toThrow(RangeError);
    expect(() => SharedHeap.create({ shards: 1, shardBytes: 1000 })).toThrow(RangeError);
    expect(() => SharedHeap.create({ shards: 8, shardBytes: 2 ** 30 })).toThrow(/at most/);
    expect(() => SharedHeap.create(null as unknown as { shards: number; shardBytes: number })).toThrow(TypeError);
  });

  it("attaches to a heap made elsewhere and sees the same objects", () => {
    const heap = newHeap({ shards: 2 });
    const p = heap.shard(0).malloc(100);
    heap.bytes(p, 4).set([1, 2, 3, 4]);
    const other = SharedHeap.attach(heap.buffer);
    expect(other.shards).toBe(2);
    expect(Array.from(other.bytes(p, 4))).toEqual([1, 2, 3, 4]);
    expect(other.shard(0).objectSize(p)).toBe(112);
    expect(other.stats(0)).toEqual(heap.stats(0));
    other.shard(0).free(p);
    expect(heap.stats(0).liveObjects).toBe(0);
  });

  it("refuses buffers that are not heaps with HeapFormatError", () => {
    const heap = newHeap();
    expect(() => SharedHeap.attach(new SharedArrayBuffer(100))).toThrow(HeapFormatError);
    expect(() => SharedHeap.attach(new SharedArrayBuffer(1 << 20))).toThrow(/wrong magic/);
    expect(() => SharedHeap.attach(new ArrayBuffer(8192) as unknown as SharedArrayBuffer)).toThrow(HeapFormatError);
    const copy = new SharedArrayBuffer(heap.buffer.byteLength);
    new Uint8Array(copy).set(new Uint8Array(heap.buffer));
    new Int32Array(copy)[2] = 99; // version
    expect(() => SharedHeap.attach(copy)).toThrow(/version 99/);
    const short = new SharedArrayBuffer(heap.byteLength - PAGE_SIZE); // the heap's bytes, not its buffer's page padding
    new Uint8Array(short).set(new Uint8Array(heap.buffer, 0, short.byteLength));
    expect(() => SharedHeap.attach(short)).toThrow(/size mismatch/);
    const long = new SharedArrayBuffer(heap.byteLength + 65536); // more than a WebAssembly page of padding
    new Uint8Array(long).set(new Uint8Array(heap.buffer, 0, heap.byteLength));
    expect(() => SharedHeap.attach(long)).toThrow(/size mismatch/);
  });

  it("sums statistics over shards when no shard is named", () => {
    const heap = newHeap({ shards: 3 });
    heap.shard(0).malloc(10);
    heap.shard(2).malloc(10);
    heap.shard(2).malloc(100000);
    const all = heap.stats();
    expect(all.mallocs).toBe(3);
    expect(all.largeAllocations).toBe(1);
    expect(all.totalMemory).toBe(3 * heap.stats(0).totalMemory);
    expect(() => heap.stats(3)).toThrow(RangeError);
    expect(() => heap.shard(-1)).toThrow(RangeError);
  });

  it("check() reports broken invariants", () => {
    const heap = SharedHeap.create({ shards: 1, shardBytes: MiB });
    const a = heap.shard(0);
    const p = a.malloc(64);
    a.malloc(100000);
    expect(heap.check()).toEqual([]);
    // Forge a live bit inside the 64-byte object: an "interior object".
    const r = heap.regions[0]!;
    const w = r.liveWord(p + 8);
    r.i32[w] |= r.liveBit(p + 8);
    expect(heap.check().join("\n")).toMatch(/inside a 64-byte object/);
    r.i32[w] &= ~r.liveBit(p + 8);
    // Break the free-pages counter.
    r.i32[r.hdr + 5] += 1;
    expect(heap.check().join("\n")).toMatch(/free pages counter/);
    r.i32[r.hdr + 5] -= 1;
    // Lose a free.
    r.f64[r.counters + 1] += 1;
    expect(heap.check().join("\n")).toMatch(/mallocs - frees/);
    r.f64[r.counters + 1] -= 1;
    expect(heap.check()).toEqual([]);
  });
});

describe("diagnostics", () => {
  it("prints Seastar's report shape", () => {
    const heap = newHeap();
    const a = heap.shard(0);
    const p = a.malloc(100);
    const d = a.diagnostics();
    expect(d).toMatch(/^Used memory: +\S+$/m);
    expect(d).toMatch(/^Free memory: +\S+$/m);
    expect(d).toMatch(/^Total memory: +\S+$/m);
    expect(d).toMatch(/^Hard failures: 0$/m);
    expect(d).toMatch(/^ {2}112 +4K +1 +\S+ +\S+ +\d+$/m);
    expect(d).toMatch(/^index  size  free  used spans$/m);
    a.free(p);
  });

  it("shows the largest free span, which largestFreeSpan() reports from any thread", () => {
    const heap = newHeap();
    const a = heap.shard(0);
    const total = a.stats().totalMemory;
    expect(a.largestFreeSpan()).toBe(total);
    expect(a.diagnostics()).toMatch(new RegExp(`^Largest free span: ${formatSize(total).replace(".", "\\.")}$`, "m"));
    // A large object in the middle splits the free memory in two; freeing it joins them again.
    const left = a.malloc(total / 2 - 3 * PAGE_SIZE);
    const middle = a.malloc(5 * PAGE_SIZE);
    a.free(left);
    expect(heap.largestFreeSpan(0)).toBeLessThan(a.stats().freeMemory);
    expect(heap.largestFreeSpan(0)).toBeGreaterThanOrEqual(total / 2 - 3 * PAGE_SIZE);
    a.free(middle);
    expect(heap.largestFreeSpan(0)).toBe(total);
    expect(SharedHeap.attach(heap.buffer).largestFreeSpan(0)).toBe(total);
    expect(heap.check()).toEqual([]);
  });
});
