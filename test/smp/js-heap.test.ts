/** Each shard's JavaScript heap: V8's sampling heap profiler in the shard's own isolate, switched per shard; its V8 figures. */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import type { HeapProfile, JsHeapStats } from "../../dist/index.js";
import { startSmp, waitFor } from "../helpers.js";

const JS_TASKS = new URL("../fixtures/js-heap-tasks.mjs", import.meta.url);
/** The 1-based line of `retainKnownObjects`'s declaration in the fixture (V8 names a function by where it starts). */
const RETAIN_LINE = readFileSync(fileURLToPath(JS_TASKS), "utf8").split("\n").findIndex((l) => l.includes("function retainKnownObjects")) + 1;
/** 20,000 objects of ~100 bytes (object, string, array): ~2 MB retained. */
const COUNT = 20_000;
const KNOWN_BYTES = COUNT * 100;

beforeAll(() => {
  process.env.SHARDHEAP_LOG = "silent";
});

const top = (p: HeapProfile): string | undefined => p.sites[0]?.frames[0]?.functionName;
const bytesIn = (p: HeapProfile, fn: string): number => p.sites.filter((s) => s.frames.some((f) => f.functionName === fn)).reduce((n, s) => n + s.size, 0);

/** A function of the main thread's own, so its objects live in the main thread's JS heap. */
const mainKept: object[] = [];
function retainOnMainThread(count: number): void {
  for (let i = 0; i < count; i++) mainKept.push({ id: i, tag: `main-${String(i).padStart(9, "0")}`, list: [i, i, i, i] });
}

describe("JS heap profiler per shard", () => {
  it("profiles only the shard switched on: its retained objects on top, the other shard's profile empty, nothing new once off", async () => {
    const smp = await startSmp({ shards: 2, module: JS_TASKS });
    await smp.setJsHeapProfiling(0, 4096);
    await Promise.all([0, 1].map((s) => smp.submitTo(s, "retainKnownObjects", { count: COUNT })));
    const p0 = await smp.jsHeapProfile(0);
    expect(p0).toMatchObject({ shard: 0, sampleRate: 4096 });
    expect(top(p0)).toBe("retainKnownObjects");
    const leaf = p0.sites[0]!.frames[0]!;
    expect(leaf.url).toBe(JS_TASKS.href);
    expect(leaf.line).toBe(RETAIN_LINE);
    // The runtime that ran the task is not in its stack: the task is its root.
    expect(p0.sites[0]!.frames.map((f) => f.functionName)).toEqual(["retainKnownObjects"]);
    // Sampled estimates: at least the objects' known bytes.
    expect(bytesIn(p0, "retainKnownObjects")).toBeGreaterThan(KNOWN_BYTES * 0.5);
    expect(p0.totalSize).toBeCloseTo(p0.sites.reduce((n, s) => n + s.size, 0), 3);
    expect(p0.sites.every((s) => s.allocSize === s.size && s.allocCount === s.count)).toBe(true);

    const p1 = await smp.jsHeapProfile(1);
    expect(p1).toEqual({ shard: 1, sampleRate: 0, sites: [], totalSize: 0, totalCount: 0 });

    await smp.setJsHeapProfiling(0, false);
    const off = await smp.jsHeapProfile(0);
    expect(off.sampleRate).toBe(0);
    expect(top(off)).toBe("retainKnownObjects");
    await smp.submitTo(0, "retainKnownObjects", { count: COUNT });
    expect(await smp.jsHeapProfile(0)).toEqual(off);
  });

  it("a new rate starts the profile again; setJsHeapProfiling and jsHeapProfile check their arguments", async () => {
    const smp = await startSmp({ shards: 2, module: JS_TASKS, jsHeapprof: true });
    expect((await smp.jsHeapProfile(1)).sampleRate).toBe(512 * 1024);
    await smp.setJsHeapProfiling("all", "4KiB");
    await smp.submitTo(1, "retainKnownObjects", { count: COUNT });
    expect(top(await smp.jsHeapProfile(1))).toBe("retainKnownObjects");
    await smp.setJsHeapProfiling(1, 8192);
    const again = await smp.jsHeapProfile(1);
    expect(again.sampleRate).toBe(8192);
    expect(bytesIn(again, "retainKnownObjects")).toBe(0); // those objects were sampled at the old rate
    await expect(smp.setJsHeapProfiling(2, true)).rejects.toThrow(RangeError);
    await expect(smp.setJsHeapProfiling(0, -1)).rejects.toThrow(/setJsHeapProfiling: rate/);
    await expect(smp.setJsHeapProfiling(0, 0.5)).rejects.toThrow(RangeError);
    await expect(smp.jsHeapProfile(-1)).rejects.toThrow(RangeError);
    expect(() => smp.jsHeapStats(7)).toThrow(RangeError);
  });

  it("the main thread's shard: its own JS heap, profiled on this thread, switched off by stop()", async () => {
    const smp = await startSmp({ shards: 1, module: JS_TASKS, mainShard: true });
    const main = smp.mainShard!;
    await smp.setJsHeapProfiling(main, 4096);
    retainOnMainThread(COUNT);
    const p = await smp.jsHeapProfile(main);
    expect(p.shard).toBe(main);
    expect(bytesIn(p, "retainOnMainThread")).toBeGreaterThan(KNOWN_BYTES * 0.3);
    expect(bytesIn(await smp.jsHeapProfile(0), "retainOnMainThread")).toBe(0);
    // stop() switches this thread's sampler off (it would go on costing); the profile as it stood stays.
    await smp.stop();
    const after = await smp.jsHeapProfile(main);
    expect(after.sampleRate).toBe(0);
    expect(bytesIn(after, "retainOnMainThread")).toBeGreaterThan(KNOWN_BYTES * 0.3);
    mainKept.length = 0;
    await expect(smp.setJsHeapProfiling(main, 4096)).rejects.toThrow(/stop/);
  });

  it("a shard's new thread (its old one died) profiles its JS heap at the rate last set, afresh", async () => {
    const smp = await startSmp({ shards: 2, module: JS_TASKS });
    smp.on("error", () => undefined); // the death below is expected
    await smp.setJsHeapProfiling(1, 4096);
    await smp.submitTo(1, "retainKnownObjects", { count: COUNT });
    let replaced: number | undefined;
    smp.once("replaced", (r) => (replaced = r.shard));
    await smp.submitTo(1, "exitSoon");
    await waitFor(() => replaced === 1, "shard 1 on its new thread", 15_000);
    const fresh = await smp.jsHeapProfile(1);
    expect(fresh.sampleRate).toBe(4096);
    expect(bytesIn(fresh, "retainKnownObjects")).toBe(0); // those objects died with the old thread
    await smp.submitTo(1, "retainKnownObjects", { count: COUNT });
    expect(top(await smp.jsHeapProfile(1))).toBe("retainKnownObjects");
    expect((await smp.jsHeapProfile(0)).sampleRate).toBe(0);
  });

  it("each shard posts its own V8 heap figures; a shard that retains more shows more", async () => {
    // Figures taken after a full collection each: a shard's start leaves megabytes of garbage
    // (its modules' loading), and a collection between two postings made the growth of
    // 100,000 retained objects read as 2.7 MB on a loaded machine.
    const smp = await startSmp({ shards: 2, module: JS_TASKS });
    const settled = async (): Promise<JsHeapStats[]> => {
      const posted = [smp.jsHeapStats(0)?.t ?? 0, smp.jsHeapStats(1)?.t ?? 0];
      await smp.invokeOnAll("collectGarbage");
      await waitFor(() => [0, 1].every((s) => (smp.jsHeapStats(s)?.t ?? 0) > posted[s]!), "both shards' figures after a collection");
      return [smp.jsHeapStats(0)!, smp.jsHeapStats(1)!];
    };
    const before = await settled();
    for (const st of before) {
      expect(st.used).toBeGreaterThan(0);
      expect(st.total).toBeGreaterThanOrEqual(st.used);
      expect(st.external).toBeGreaterThanOrEqual(st.arrayBuffers);
      expect(st.sampleRate).toBe(0);
    }
    await smp.submitTo(0, "retainKnownObjects", { count: COUNT * 5 });
    const after = await settled();
    const grew0 = after[0]!.used - before[0]!.used;
    const grew1 = after[1]!.used - before[1]!.used;
    expect(grew0).toBeGreaterThan(KNOWN_BYTES * 5 * 0.5);
    expect(grew1).toBeLessThan(grew0 / 4);
  });
});
