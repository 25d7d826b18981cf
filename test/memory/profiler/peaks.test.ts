/**
 * Peak profiles on one thread (peaks.ts, peak-profile.ts): at every step of
 * a random run the live profile is read, and the one read at the highest
 * profiled live bytes is kept by the test; the heap's peak profile must be
 * that one, to the byte in exact mode and to the same estimates when
 * sampled. Then resets, the heap-wide peak of two shards, heap images, and
 * heap.check() catching books that disagree. (Threads: peaks-threads.test.ts.)
 */
import { beforeAll, describe, expect, it } from "vitest";
import { HeapFormatError, SharedHeap, decodeHeapImage, type HeapProfile, type PeakProfile, type ShardAllocator } from "../../../src/index.js";
import { encodeHeapImage } from "../../../src/memory/heap-image/heap-image-writer.js";
import { PK_LIVE } from "../../../src/memory/layout.js";
import { newHeap, siteNamed, thrown } from "../../helpers.js";

beforeAll(() => {
  process.env.SHARDHEAP_LOG = "silent";
});

/** xorshift32: the same run every time. */
function prng(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 2 ** 32;
  };
}

// Four named allocation sites, so the profile has stacks to tell apart.
const keepSmall = (a: ShardAllocator, size: number): number => a.malloc(size);
const keepMedium = (a: ShardAllocator, size: number): number => a.malloc(size * 8);
const keepLarge = (a: ShardAllocator, size: number): number => a.malloc(20_000 + size * 40);
const keepAligned = (a: ShardAllocator, size: number): number => a.allocateAligned(64, size);
const SITES = [keepSmall, keepMedium, keepLarge, keepAligned];

/** A peak profile without its peak fields: what the live profile at the peak holds. */
function asLive(p: PeakProfile): HeapProfile {
  const { peakBytes: _bytes, peakTime: _time, ...live } = p;
  return live;
}

/**
 * Run `steps` random allocations, frees (local and, with two shards,
 * from the other shard, drained later) and in-place shrinks on shard 0,
 * reading the live profile after each; returns the profile read at the
 * highest profiled live bytes and that figure.
 */
function randomRun(heap: SharedHeap, steps: number, seed: number): { atPeak: HeapProfile; highest: number } {
  const a = heap.shard(0);
  const other = heap.shards > 1 ? heap.shard(1) : undefined;
  const random = prng(seed);
  const live: number[] = [];
  let atPeak = heap.heapProfile(0);
  let highest = atPeak.totalSize;
  for (let step = 0; step < steps; step++) {
    const r = random();
    // Grow in waves, so the peak is passed, left and passed again.
    const growing = Math.floor(step / 150) % 2 === 0;
    if (live.length === 0 || r < (growing ? 0.65 : 0.3)) {
      live.push(SITES[Math.floor(random() * SITES.length)]!(a, 1 + Math.floor(random() * 2000)));
    } else if (r < 0.9) {
      const ptr = live.splice(Math.floor(random() * live.length), 1)[0]!;
      if (other !== undefined && random() < 0.3) other.free(ptr);
      else a.free(ptr);
    } else if (r < 0.95) {
      const i = Math.floor(random() * live.length);
      if (a.objectSize(live[i]!) > 16384) live[i] = a.realloc(live[i]!, 17_000); // a page span shrinks in place
    } else {
      a.drainCrossShardFrees();
    }
    const now = heap.heapProfile(0);
    if (now.totalSize > highest) {
      highest = now.totalSize;
      atPeak = now;
    }
  }
  return { atPeak, highest };
}

describe("a shard's peak profile", () => {
  it("exact: equals, to the byte, the live profile at the moment of the highest profiled live bytes", () => {
    const heap = newHeap({ shards: 2, shardBytes: "16MiB" });
    heap.shard(0).setHeapProfilingEnabled(true);
    const { atPeak, highest } = randomRun(heap, 1500, 0x5eed);
    const peak = heap.peakProfile(0);
    expect(peak.peakBytes).toBe(highest);
    expect(asLive(peak)).toEqual(atPeak);
    expect(peak.totalSize).toBe(highest);
    expect(peak.peakTime).toBeGreaterThan(0);
    // The run left the peak behind: the live profile now differs.
    expect(heap.heapProfile(0).totalSize).toBeLessThan(highest);
    expect(heap.shard(0).peakProfile()).toEqual(peak);
    expect(heap.check()).toEqual([]);
  });

  it("sampled at 16 KiB: the same estimates the live profile had at its highest", () => {
    const heap = newHeap({ shards: 1, shardBytes: "16MiB" });
    const a = heap.shard(0);
    a.seedHeapProfiler(7);
    a.setHeapProfilingSampleRate(16 * 1024);
    const { atPeak, highest } = randomRun(heap, 3000, 0xbee);
    const peak = heap.peakProfile(0);
    expect(peak.sampleRate).toBe(16 * 1024);
    expect(peak.peakBytes).toBe(highest);
    expect(asLive(peak)).toEqual(atPeak);
    expect(heap.check()).toEqual([]);
  });

  it("names the first, larger phase after most of it was freed and a smaller phase built", () => {
    const heap = newHeap({ shards: 1, shardBytes: "16MiB" });
    const a = heap.shard(0);
    a.setHeapProfilingEnabled(true);
    function buildFirstPhase(): number[] {
      const out: number[] = [];
      for (let i = 0; i < 200; i++) out.push(a.malloc(4000));
      return out;
    }
    function buildSecondPhase(): number[] {
      const out: number[] = [];
      for (let i = 0; i < 100; i++) out.push(a.malloc(1000));
      return out;
    }
    const first = buildFirstPhase();
    const objectSize = a.objectSize(first[0]!);
    for (const p of first.slice(20)) a.free(p);
    buildSecondPhase();
    const peak = a.peakProfile();
    expect(peak.sites.map((s) => s.frames[0]!.functionName)).toEqual(["buildFirstPhase"]);
    expect([peak.sites[0]!.count, peak.sites[0]!.size, peak.peakBytes]).toEqual([200, 200 * objectSize, 200 * objectSize]);
    // The live profile says what is there now, the second phase first.
    expect(a.heapProfile().sites[0]!.frames[0]!.functionName).toBe("buildSecondPhase");
  });

  it("resetPeak() starts the peak again from what the shard holds now", () => {
    const heap = newHeap({ shards: 1, shardBytes: "16MiB" });
    const a = heap.shard(0);
    a.setHeapProfilingEnabled(true);
    const big = Array.from({ length: 50 }, () => a.malloc(8000));
    const kept = big.splice(0, 5);
    for (const p of big) a.free(p);
    const before = a.peakProfile();
    expect(before.peakBytes).toBe(50 * a.objectSize(kept[0]!));
    a.resetPeak();
    const reset = a.peakProfile();
    expect(reset.peakBytes).toBe(5 * a.objectSize(kept[0]!));
    expect(asLive(reset)).toEqual(a.heapProfile());
    expect(reset.peakTime).toBeGreaterThanOrEqual(before.peakTime);
    function afterReset(): number {
      return a.malloc(100);
    }
    const p = afterReset();
    const size = a.objectSize(p);
    a.free(p);
    const again = a.peakProfile();
    expect(again.peakBytes).toBe(5 * a.objectSize(kept[0]!) + size);
    expect(siteNamed(again, "afterReset")).toMatchObject({ count: 1, allocCount: 1 });
    // Only the owner resets: another thread's allocator reads (HeapOwnershipError), tested in ownership's terms.
    expect(heap.check()).toEqual([]);
  });

  it("is empty while nothing was profiled, and reads without the shard's help", () => {
    const heap = newHeap({ shards: 2, shardBytes: "1MiB" });
    heap.shard(1).malloc(100);
    expect(heap.peakProfile(1)).toEqual({ shard: 1, sampleRate: 0, sites: [], totalSize: 0, totalCount: 0, peakBytes: 0, peakTime: 0 });
    expect(() => heap.peakProfile(2)).toThrow(RangeError);
  });
});

describe("the heap-wide peak", () => {
  it("is the moment the shards' sum was highest, with every shard's sites as they were then", () => {
    const heap = newHeap({ shards: 2, shardBytes: "8MiB" });
    const [a, b] = [heap.shard(0), heap.shard(1)];
    a.setHeapProfilingEnabled(true);
    b.setHeapProfilingEnabled(true);
    function fillA(n: number): number[] {
      const out: number[] = [];
      for (let i = 0; i < n; i++) out.push(a.malloc(1024));
      return out;
    }
    function fillB(n: number): number[] {
      const out: number[] = [];
      for (let i = 0; i < n; i++) out.push(b.malloc(2048));
      return out;
    }
    // A peaks alone first, then falls; B climbs while A holds a little: the
    // heap's highest sum is neither shard's own peak moment.
    const aObjects = fillA(100);
    const aSize = a.objectSize(aObjects[0]!);
    for (const p of aObjects.slice(40)) a.free(p);
    const bObjects = fillB(50);
    const bSize = b.objectSize(bObjects[0]!);
    const atPeak = heap.heapProfile();
    for (const p of bObjects.slice(10)) b.free(p);
    fillA(10);

    const peak = heap.peakProfile();
    expect(peak.shard).toBe("all");
    expect(peak.peakBytes).toBe(40 * aSize + 50 * bSize);
    expect(asLive(peak)).toEqual(atPeak);
    expect(siteNamed(peak, "fillA")).toMatchObject({ count: 40, size: 40 * aSize });
    // Each shard's own peak is its own moment.
    expect(heap.peakProfile(0).peakBytes).toBe(100 * aSize);
    expect(heap.peakProfile(1).peakBytes).toBe(50 * bSize);

    heap.resetHeapPeak();
    expect(heap.peakProfile().peakBytes).toBe(heap.heapProfile().totalSize);
    expect(asLive(heap.peakProfile())).toEqual(heap.heapProfile());
    expect(heap.check()).toEqual([]);
  });
});

describe("peaks in heap images", () => {
  it("an image carries every shard's peak and the heap-wide one", () => {
    const heap = newHeap({ shards: 2, shardBytes: "4MiB" });
    heap.shard(0).setHeapProfilingEnabled(true);
    randomRun(heap, 400, 99);
    const read = decodeHeapImage(encodeHeapImage(heap));
    expect(read.peakProfile(0)).toEqual(heap.peakProfile(0));
    expect(read.peakProfile()).toEqual(heap.peakProfile());
    expect(read.peakProfile(0).peakBytes).toBeGreaterThan(read.heapProfile(0).totalSize);
  });

  it("an image refuses peak figures that are not figures", () => {
    const heap = SharedHeap.create({ shards: 1, shardBytes: "1MiB" });
    heap.shard(0).setHeapProfilingEnabled(true);
    heap.shard(0).malloc(64);
    heap.regions[0]!.f64[heap.regions[0]!.peak + PK_LIVE] = -1;
    expect(thrown(() => decodeHeapImage(encodeHeapImage(heap))).message).toMatch(/peak slots hold live -1/);
  });
});

describe("heap.check() and the peak's books", () => {
  it("reports a live figure that is not the sites' sum", () => {
    const heap = SharedHeap.create({ shards: 1, shardBytes: "1MiB" });
    const a = heap.shard(0);
    a.setHeapProfilingEnabled(true);
    a.malloc(64);
    expect(heap.check()).toEqual([]);
    heap.regions[0]!.f64[heap.regions[0]!.peak + PK_LIVE] += 8;
    expect(heap.check().join("\n")).toMatch(/the peak's books count 72 profiled live bytes, the sites hold 64/);
  });
});

describe("a heap made before peaks (format 4)", () => {
  it("reads its profiles, and says it has no peak", () => {
    const heap = SharedHeap.create({ shards: 1, shardBytes: "1MiB" });
    const e = thrown(() => {
      const h = new Int32Array(heap.buffer, 0, 8);
      h[2] = 4; // H_VERSION: what its layout would be is tested with a real version 4 image (heap-image-versions.test.ts)
      return SharedHeap.attach(heap.buffer).peakProfile(0);
    });
    expect(e).toBeInstanceOf(HeapFormatError);
    expect(e.message).toMatch(/format version 4\) was written before shardheap kept peaks/);
  });
});
