/**
 * The heap-wide peak on real shard threads (peaks.ts): shards that fill at
 * the same time (met on spin barriers) and then free everything leave a
 * heap-wide peak holding both fills, to the byte, though neither shard's
 * own peak does; shards churning at once keep the books whole (heap.check(),
 * the shared sum equals the shards' shares) and a heap-wide peak between
 * the largest shard's own and the sum of all of theirs, within the stated
 * tolerance.
 */
import { describe, expect, it } from "vitest";
import { H_PEAK_LIVE, PEAK_UNIT_BYTES, S_PROF_HEAP_UNITS } from "../../../src/memory/layout.js";
import { siteNamed, startSmp } from "../../helpers.js";

process.env.SHARDHEAP_LOG = "silent";
const RACE_TASKS = new URL("../../fixtures/peak-race-tasks.mjs", import.meta.url);

describe("the heap-wide peak across threads", () => {
  it("shards filling at once: the heap-wide peak holds every shard's whole fill", async () => {
    const parties = 3;
    const smp = await startSmp({ shards: parties, memoryPerShard: "16MiB", heapprof: true, module: RACE_TASKS });
    const count = 2000;
    const size = 1000;
    const buffer = new SharedArrayBuffer(8);
    await smp.invokeOnAll("fillTogether", { buffer, parties, count, size });
    expect(smp.heapProfile().totalSize).toBe(0); // all freed again
    const peak = smp.peakProfile();
    const site = siteNamed(peak, "fillTogether")!;
    expect([site.count, site.size]).toEqual([parties * count, parties * count * 1024]);
    expect(peak.peakBytes).toBe(parties * count * 1024);
    for (let s = 0; s < parties; s++) expect(smp.peakProfile(s).peakBytes).toBe(count * 1024);
    expect(smp.heap.check()).toEqual([]);
  });

  it("shards churning at once: whole books, and a heap-wide peak between the largest shard's and the sum of theirs", async () => {
    const parties = 2;
    const smp = await startSmp({ shards: parties, memoryPerShard: "64MiB", heapprof: true, module: RACE_TASKS });
    const buffer = new SharedArrayBuffer(8);
    await Promise.all([0, 1].map((s) => smp.submitTo(s, "churnTogether", { buffer, parties, steps: 4000, seed: 17 + s })));
    expect(smp.heap.check()).toEqual([]);
    const i32 = new Int32Array(smp.heap.buffer);
    const shares = smp.heap.regions.reduce((n, r) => n + r.headerSlot(S_PROF_HEAP_UNITS), 0);
    expect(i32[H_PEAK_LIVE]! >>> 0).toBe(shares);
    const own = [0, 1].map((s) => smp.peakProfile(s).peakBytes);
    const heapWide = smp.peakProfile();
    // Each other shard's operation in flight at the moment (at most a 40 KiB object here), and 8 bytes of rounding a shard.
    const tolerance = 40_960 + parties * PEAK_UNIT_BYTES;
    expect(heapWide.peakBytes).toBeGreaterThanOrEqual(Math.max(...own) - tolerance);
    expect(heapWide.peakBytes).toBeLessThanOrEqual(own[0]! + own[1]! + tolerance);
    expect(heapWide.peakTime).toBeGreaterThan(0);
    await smp.invokeOnAll("freeHeld");
    expect(smp.heap.check()).toEqual([]);
  });
});
