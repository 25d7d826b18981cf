/**
 * The heap profiler on one thread: exact and sampled recording, every path
 * that keeps the books, run-time rate changes. (Per-shard toggling and
 * cross-shard frees on real threads: smp/smp-profiler.test.ts.)
 */
import { beforeAll, describe, expect, it } from "vitest";
import { formatTree, toCollapsed, toFlamegraphSvg, toHeapprofile, type ShardAllocator } from "../../../src/index.js";
import { newHeap, siteNamed } from "../../helpers.js";

beforeAll(() => {
  process.env.SHARDHEAP_LOG = "silent";
});

function allocateSmallObjects(a: ShardAllocator, n: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push(a.malloc(100));
  return out;
}
function allocateLargeObjects(a: ShardAllocator, n: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push(a.malloc(50_000));
  return out;
}

describe("exact mode (setHeapProfilingEnabled(true))", () => {
  it("records two sites with exact counts and object sizes, and keeps the history after frees", () => {
    const heap = newHeap({ shardBytes: 16 << 20 });
    const a = heap.shard(0);
    a.setHeapProfilingEnabled(true);
    expect(a.heapProfilingSampleRate()).toBe(1);
    const small = allocateSmallObjects(a, 300);
    const large = allocateLargeObjects(a, 7);
    const p = a.heapProfile();
    expect(p.sampleRate).toBe(1);
    expect(p.sites).toHaveLength(2);
    const s = siteNamed(p, "allocateSmallObjects")!;
    const l = siteNamed(p, "allocateLargeObjects")!;
    expect([s.count, s.size, s.allocCount, s.allocSize]).toEqual([300, 300 * 112, 300, 300 * 112]);
    expect([l.count, l.size]).toEqual([7, 7 * a.objectSize(large[0]!)]);
    expect(a.objectSize(small[0]!)).toBe(112); // the tag is not part of the object
    expect(s.frames[0]!.url).toMatch(/profiler\.test\.ts$/);
    expect(p.totalSize).toBe(s.size + l.size);
    expect(p.totalCount).toBe(307);
    expect(p.sites[0]).toBe(l); // largest first
    for (const ptr of [...small, ...large]) a.free(ptr);
    const after = a.heapProfile();
    const s2 = siteNamed(after, "allocateSmallObjects")!;
    expect([s2.count, s2.size, s2.allocCount, s2.allocSize]).toEqual([0, 0, 300, 300 * 112]);
    expect(after.totalSize).toBe(0);
    // What one thread records, the heap reads from the buffer alike.
    expect(heap.heapProfile(0)).toEqual(after);
  });

  it("diagnostics() lists the top allocation sites while profiling is on", () => {
    const a = newHeap({ shardBytes: 16 << 20 }).shard(0);
    expect(a.diagnostics()).not.toMatch(/Top allocation sites/);
    a.setHeapProfilingEnabled(true);
    const ptrs = allocateSmallObjects(a, 10);
    const report = a.diagnostics();
    expect(report).toMatch(/^Top allocation sites \(heap profiler, every allocation\):$/m);
    expect(report).toMatch(/^ +1\.1K +10  allocateSmallObjects \(.*profiler\.test\.ts:\d+:\d+\)$/m);
    for (const p of ptrs) a.free(p);
  });

  it("keeps the books on realloc (move and in-place shrink) and allocateAligned", () => {
    const heap = newHeap({ shardBytes: 16 << 20 });
    const a = heap.shard(0);
    a.setHeapProfilingEnabled(true);
    const p = a.malloc(40); // site A
    const q = a.realloc(p, 2000); // moves: A freed, a new site (realloc's caller) allocated
    const big = a.malloc(10 * 4096);
    expect(a.realloc(big, 5 * 4096)).toBe(big); // shrinks in place (still a page span)
    const aligned = a.allocateAligned(4096, 100);
    expect(aligned % 4096).toBe(0);
    const sites = a.heapProfile().sites;
    const live = sites.reduce((n, s) => n + s.size, 0);
    expect(live).toBe(a.objectSize(q) + 5 * 4096 + a.objectSize(aligned));
    expect(sites.reduce((n, s) => n + s.count, 0)).toBe(3);
    for (const x of [q, big, aligned]) a.free(x);
    expect(a.heapProfile().totalSize).toBe(0);
    expect(a.heapProfile().sites.every((s) => s.count === 0 && s.size === 0)).toBe(true);
  });

  it("sampled objects keep their class's alignment, and writing all of an object cannot touch its tag", () => {
    const heap = newHeap({ shardBytes: 16 << 20 });
    const a = heap.shard(0);
    a.setHeapProfilingEnabled(true);
    const ptrs: number[] = [];
    for (const align of [8, 16, 64, 256, 4096]) {
      for (let i = 0; i < 20; i++) {
        const p = a.allocateAligned(align, 48);
        expect(p % align).toBe(0);
        heap.bytes(p, a.objectSize(p)).fill(0xff);
        ptrs.push(p);
      }
    }
    expect(a.heapProfile().totalCount).toBe(100);
    for (const p of ptrs) a.free(p);
    const after = a.heapProfile();
    expect(after.totalCount).toBe(0);
    expect(after.totalSize).toBe(0);
  });

  it("objects recorded while on are accounted for when freed after it is turned off", () => {
    const heap = newHeap({ shardBytes: 16 << 20 });
    const a = heap.shard(0);
    a.setHeapProfilingEnabled(true);
    const ptrs = allocateSmallObjects(a, 50);
    a.setHeapProfilingEnabled(false);
    expect(a.heapProfilingSampleRate()).toBe(0);
    const unrecorded = allocateLargeObjects(a, 3);
    for (const ptr of [...ptrs, ...unrecorded]) a.free(ptr);
    const p = a.heapProfile();
    expect(p.sites).toHaveLength(1);
    expect(p.totalCount).toBe(0);
    expect(p.sampleRate).toBe(0);
  });

  it("a cross-shard free decrements the allocating shard's site when its owner drains", () => {
    const heap = newHeap({ shards: 2, shardBytes: 16 << 20 });
    const owner = heap.shard(0);
    owner.setHeapProfilingEnabled(true);
    const ptrs = allocateSmallObjects(owner, 20);
    for (const ptr of ptrs) heap.shard(1).free(ptr);
    expect(siteNamed(owner.heapProfile(), "allocateSmallObjects")!.count).toBe(20); // until drained
    owner.drainCrossShardFrees();
    expect(siteNamed(owner.heapProfile(), "allocateSmallObjects")!.count).toBe(0);
    expect(heap.heapProfile(1).sites).toEqual([]);
  });

  it("logs Enabling / Disabling heap profiler on the transitions, as the seed does, and every change of mode", () => {
    const a = newHeap({ shardBytes: 16 << 20 }).shard(0);
    const lines: string[] = [];
    const write = process.stderr.write.bind(process.stderr);
    const saved = process.env.SHARDHEAP_LOG;
    delete process.env.SHARDHEAP_LOG;
    process.stderr.write = ((chunk: string) => (lines.push(String(chunk)), true)) as typeof process.stderr.write;
    try {
      a.setHeapProfilingEnabled(true);
      a.setHeapProfilingSampleRate(4096); // exact -> sampled: says so
      a.setHeapProfilingSampleRate(4096); // unchanged: nothing
      a.setHeapProfilingEnabled(false);
      a.setHeapProfilingEnabled(false); // already off
    } finally {
      process.stderr.write = write;
      process.env.SHARDHEAP_LOG = saved;
    }
    expect(lines).toEqual([
      "shardheap: shard 0: Enabling heap profiler\n",
      "shardheap: shard 0: Heap profiler now sampling every 4096 bytes on average (was recording every allocation)\n",
      "shardheap: shard 0: Disabling heap profiler\n",
    ]);
  });

  it("a stack capture that throws leaves no object allocated and the heap consistent", () => {
    const heap = newHeap({ shardBytes: 16 << 20 });
    const a = heap.shard(0);
    a.setHeapProfilingEnabled(true);
    const before = a.stats();
    const capture = Error.captureStackTrace;
    Error.captureStackTrace = () => {
      throw new Error("no stacks today");
    };
    try {
      expect(() => a.malloc(64)).toThrow("no stacks today");
      expect(() => a.malloc(100_000)).toThrow("no stacks today");
    } finally {
      Error.captureStackTrace = capture;
    }
    expect(a.stats().liveObjects).toBe(before.liveObjects);
    expect(heap.check()).toEqual([]);
    a.free(a.malloc(64)); // and it works again
  });

  it("validates its arguments", () => {
    const a = newHeap({ shardBytes: 16 << 20 }).shard(0);
    expect(() => a.setHeapProfilingSampleRate(-1)).toThrow(RangeError);
    expect(() => a.setHeapProfilingSampleRate(1.5)).toThrow(RangeError);
    expect(() => a.setHeapProfilingSampleRate("1" as unknown as number)).toThrow(TypeError);
    expect(() => a.setHeapProfilingEnabled(1 as unknown as boolean)).toThrow(TypeError);
    expect(() => a.setHeapProfilingDepth(0)).toThrow(RangeError);
    expect(a.heapProfilingSampleRate()).toBe(0);
  });

  it("records at most the configured depth", () => {
    const a = newHeap({ shardBytes: 16 << 20 }).shard(0);
    a.setHeapProfilingDepth(1);
    a.setHeapProfilingEnabled(true);
    a.free(allocateSmallObjects(a, 1)[0]!);
    expect(a.heapProfile().sites[0]!.frames).toHaveLength(1);
  });
});

describe("sampled mode", () => {
  // Deterministic workload generator (mulberry32).
  function rng(seed: number): () => number {
    let t = seed >>> 0;
    return () => {
      t = (t + 0x6d2b79f5) >>> 0;
      let x = Math.imul(t ^ (t >>> 15), 1 | t);
      x ^= x + Math.imul(x ^ (x >>> 7), 61 | x);
      return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
    };
  }
  type Live = { ptr: number; size: number };
  function smallObjects(a: ShardAllocator, n: number, out: Live[]): void {
    for (let i = 0; i < n; i++) out.push({ ptr: a.malloc(48), size: 48 });
  }
  function kilobyteBuffers(a: ShardAllocator, n: number, out: Live[]): void {
    for (let i = 0; i < n; i++) out.push({ ptr: a.malloc(1000), size: 1024 });
  }
  function largeBuffers(a: ShardAllocator, n: number, out: Live[]): void {
    for (let i = 0; i < n; i++) out.push({ ptr: a.malloc(65536), size: 65536 });
  }
  function mixedObjects(a: ShardAllocator, n: number, out: Live[], random: () => number): void {
    for (let i = 0; i < n; i++) {
      const ptr = a.malloc(16 + Math.floor(random() * 8000));
      out.push({ ptr, size: a.objectSize(ptr) });
    }
  }

  it("estimates each large site's live bytes within 10% (fixed seed, >= 50 MiB allocated)", () => {
    const heap = newHeap({ shardBytes: 256 << 20 });
    const a = heap.shard(0);
    a.setHeapProfilingSampleRate(8 * 1024);
    a.seedHeapProfiler(12345);
    const random = rng(7);
    const bySite: Record<string, Live[]> = { smallObjects: [], kilobyteBuffers: [], largeBuffers: [], mixedObjects: [] };
    for (let round = 0; round < 4; round++) {
      smallObjects(a, 60_000, bySite.smallObjects!);
      kilobyteBuffers(a, 5_000, bySite.kilobyteBuffers!);
      largeBuffers(a, 100, bySite.largeBuffers!);
      mixedObjects(a, 2_000, bySite.mixedObjects!, random);
      // Free about half of everything, chosen at random, so live != allocated.
      for (const [fn, live] of Object.entries(bySite)) {
        bySite[fn] = live.filter((o) => {
          if (random() >= 0.5) return true;
          a.free(o.ptr);
          return false;
        });
      }
    }
    const s = a.stats();
    expect(s.totalBytesAllocated).toBeGreaterThan(50 * 2 ** 20);
    const profile = a.heapProfile();
    const heapLive = Object.values(bySite).flat().reduce((n, o) => n + o.size, 0);
    let checked = 0;
    for (const [fn, live] of Object.entries(bySite)) {
      const truth = live.reduce((n, o) => n + o.size, 0);
      if (truth < 0.05 * heapLive) continue;
      const estimate = siteNamed(profile, fn)?.size ?? 0;
      expect(Math.abs(estimate - truth) / truth, `${fn}: estimated ${estimate}, truth ${truth}`).toBeLessThan(0.1);
      checked++;
    }
    expect(checked).toBeGreaterThanOrEqual(3);
    for (const o of Object.values(bySite).flat()) a.free(o.ptr);
    const end = a.heapProfile();
    expect(end.sites.map((site) => [site.count, site.size])).toEqual(end.sites.map(() => [0, 0]));
    expect([end.totalCount, end.totalSize]).toEqual([0, 0]);
  });

  it("freeing every sampled object, in another order than allocated, leaves exactly zero, and no report draws a frame", () => {
    const heap = newHeap({ shardBytes: 64 << 20 });
    const a = heap.shard(0);
    a.setHeapProfilingSampleRate(3000); // most objects sampled, each with its own fractional weight
    a.seedHeapProfiler(99);
    const random = rng(3);
    const live: Live[] = [];
    mixedObjects(a, 5000, live, random);
    smallObjects(a, 5000, live);
    const during = a.heapProfile();
    expect(during.totalCount).toBeGreaterThan(5000);
    expect(Number.isInteger(during.totalCount)).toBe(false); // fractional weights were summed
    // Free in a shuffled order: float sums that depend on order would leave residue.
    for (let i = live.length - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      [live[i], live[j]] = [live[j]!, live[i]!];
    }
    for (const o of live) a.free(o.ptr);
    const end = a.heapProfile();
    expect(end.sites.length).toBeGreaterThan(0); // kept for their history
    for (const site of end.sites) expect([site.count, site.size], site.frames[0]?.functionName).toEqual([0, 0]);
    expect([end.totalCount, end.totalSize]).toEqual([0, 0]);
    expect(formatTree(end)).toBe("All (0, #0)\n");
    expect(toCollapsed(end)).toBe("");
    expect(toFlamegraphSvg(end).match(/<g class="frame"/g)).toHaveLength(1); // the root only
    expect(toHeapprofile(end).samples).toEqual([]);
  });

  it("changing the rate while objects are live keeps every figure exact: on the books' grid, never negative, 0 when all is freed", () => {
    const heap = newHeap({ shardBytes: 64 << 20 });
    const a = heap.shard(0);
    const live: Live[] = [];
    const onGrid = (x: number): boolean => Number.isInteger(x * 2 ** 16);
    for (const rate of [1, 4096, 0, 100_000, 1, 0]) {
      a.setHeapProfilingSampleRate(rate);
      smallObjects(a, 2000, live);
      largeBuffers(a, 20, live);
      for (let i = live.length - 1; i >= 0; i -= 3) a.free(live.splice(i, 1)[0]!.ptr);
      for (const site of a.heapProfile().sites) {
        // No clamp hides an over-subtraction any more: a negative figure would show here.
        expect(site.count).toBeGreaterThanOrEqual(0);
        expect(site.size).toBeGreaterThanOrEqual(0);
        expect([site.count, site.size, site.allocCount, site.allocSize].every(onGrid)).toBe(true);
      }
    }
    for (const o of live) a.free(o.ptr);
    const p = a.heapProfile();
    expect(p.sites.every((site) => site.count === 0 && site.size === 0)).toBe(true);
    expect([p.totalCount, p.totalSize]).toEqual([0, 0]);
  });
});
