/** The heap profiler across real shard threads: per-shard toggling, cross-shard frees, reading from outside. */
import { beforeAll, describe, expect, it } from "vitest";
import type { AllocationSite, HeapProfile } from "../../dist/index.js";
import { siteNamed, startSmp, waitFor } from "../helpers.js";

beforeAll(() => {
  process.env.SHARDHEAP_LOG = "silent"; // inherited by the shard threads
});
const site = (p: HeapProfile): AllocationSite | undefined => siteNamed(p, "allocateForProfile");

describe("heap profiling on shards", () => {
  it("--heapprof at start applies to every shard; RATE is kept", async () => {
    const smp = await startSmp({ shards: 2, heapprof: 4096 });
    expect(await Promise.all([0, 1].map((s) => smp.submitTo(s, "sampleRate")))).toEqual([4096, 4096]);
    expect(smp.heapProfile().sampleRate).toBe(4096);
  });

  it("toggled per shard at run time: only the enabled shard records", async () => {
    const smp = await startSmp({ shards: 2 });
    await smp.setHeapProfiling(1, true);
    const [p0, p1] = await Promise.all([0, 1].map((s) => smp.submitTo<number[]>(s, "allocateForProfile", { count: 100, size: 64 })));
    expect(site(smp.heapProfile(0))).toBeUndefined();
    expect(site(smp.heapProfile(1))).toMatchObject({ count: 100, size: 6400 });
    expect(smp.heapProfile(0).sampleRate).toBe(0);
    expect(smp.heapProfile().sampleRate).toBe(-1); // the shards differ
    // Switch while objects are live: shard 0 on, shard 1 off.
    await smp.setHeapProfiling(0, 1);
    await smp.setHeapProfiling(1, false);
    const more0 = await smp.submitTo<number[]>(0, "allocateForProfile", { count: 10, size: 64 });
    await smp.submitTo(1, "allocateForProfile", { count: 10, size: 64 }); // not recorded
    expect(site(smp.heapProfile(0))).toMatchObject({ count: 10 });
    expect(site(smp.heapProfile(1))).toMatchObject({ count: 100 });
    await smp.submitTo(0, "freeAll", [...p0!, ...more0]);
    await smp.submitTo(1, "freeAll", p1);
    expect(site(smp.heapProfile(0))).toMatchObject({ count: 0, size: 0, allocCount: 10 });
    expect(site(smp.heapProfile(1))).toMatchObject({ count: 0, size: 0, allocCount: 100 });
    await expect(smp.setHeapProfiling(2, true)).rejects.toThrow(RangeError);
    await expect(smp.setHeapProfiling("all", -3)).rejects.toThrow(RangeError);
  });

  it("a free on another shard reaches the allocating shard's site after the drain", async () => {
    const smp = await startSmp({ shards: 2, heapprof: true });
    const ptrs = await smp.submitTo<number[]>(0, "allocateForProfile", { count: 500, size: 200 });
    expect(site(smp.heapProfile(0))).toMatchObject({ count: 500 });
    await smp.submitTo(1, "freeAll", ptrs);
    await waitFor(() => site(smp.heapProfile(0))!.count === 0, "the remote frees drained into the site");
    expect(site(smp.heapProfile(0))!.size).toBe(0);
    expect(smp.heapProfile(1).sites).toEqual([]);
  });

  it("the profile read from the main thread equals the one the shard computes", async () => {
    const smp = await startSmp({ shards: 1, heapprof: true });
    await smp.submitTo(0, "allocateForProfile", { count: 50, size: 3000 });
    const own = await smp.submitTo<HeapProfile>(0, "ownProfile");
    expect(smp.heapProfile(0)).toEqual(own);
    expect(own.sites[0]!.frames[0]!.url).toMatch(/shard-tasks\.mjs$/);
  });
});
