/**
 * A site's frames are the user's: none of shardheap's own, and none of the
 * Node frames its machinery puts on the stack. withHeapLabels runs its
 * callback through AsyncLocalStorage.run (`run (node:async_hooks)`), and
 * once that has enabled async hooks Node enters every callback through
 * `callbackTrampoline (node:internal/async_hooks)`: neither may appear,
 * and the same stack must stay one site before and after the first
 * withHeapLabels of a thread. Node frames the user's own code goes
 * through (an EventEmitter's emit, the user's own AsyncLocalStorage) stay.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { EventEmitter } from "node:events";
import { describe, expect, it } from "vitest";
import { SharedHeap, Smp, withHeapLabels, type AllocationSite, type ShardAllocator } from "../../../dist/index.js";

process.env.SHARDHEAP_LOG = "silent";

const names = (s: AllocationSite): string[] => s.frames.map((f) => `${f.functionName} ${f.url.startsWith("node:") ? f.url : "(test)"}`);
const siteOf = (a: ShardAllocator, leaf: string): AllocationSite => {
  const found = a.heapProfile().sites.filter((s) => s.frames[0]?.functionName === leaf);
  expect(found, leaf).toHaveLength(1);
  return found[0]!;
};

describe("the frames of a site", () => {
  it("a labeled allocation's go from the allocating function straight to withHeapLabels' caller; the user's own Node frames stay", () => {
    const heap = SharedHeap.create({ shards: 1, shardBytes: 8 << 20 });
    const a = heap.shard(0);
    a.setHeapProfilingEnabled(true);
    const kept: number[] = [];
    function callerOfLabels(): void {
      withHeapLabels({ tenant: "a" }, function labeledCallback() {
        kept.push(a.malloc(100));
      });
    }
    callerOfLabels();
    const labeled = siteOf(a, "labeledCallback");
    expect(labeled.labels).toEqual({ tenant: "a" });
    expect(names(labeled).slice(0, 2)).toEqual(["labeledCallback (test)", "callerOfLabels (test)"]);
    expect(labeled.frames.filter((f) => /async_hooks/.test(f.url))).toEqual([]);

    // The user's own AsyncLocalStorage and EventEmitter: their Node frames are the user's stack.
    const als = new AsyncLocalStorage<number>();
    function ownStorage(): void {
      als.run(1, function insideOwnRun() {
        kept.push(a.malloc(200));
      });
    }
    ownStorage();
    expect(names(siteOf(a, "insideOwnRun")).slice(0, 3)).toEqual(["insideOwnRun (test)", "run node:async_hooks", "ownStorage (test)"]);
    const events = new EventEmitter();
    events.on("e", function listener() {
      kept.push(a.malloc(300));
    });
    function emitter(): void {
      events.emit("e");
    }
    emitter();
    expect(names(siteOf(a, "listener")).slice(0, 3)).toEqual(["listener (test)", "emit node:events", "emitter (test)"]);
    for (const p of kept) a.free(p);
    expect(heap.check()).toEqual([]);
  });

  it("on a shard, one stack is one site before and after the thread's first withHeapLabels (no callbackTrampoline)", async () => {
    const smp = await Smp.start({ shards: 1, memoryPerShard: "8MiB", heapprof: true, module: new URL("../../fixtures/label-tasks.mjs", import.meta.url) });
    try {
      const sync = { count: 4, size: 100, labels: { tenant: "b" } };
      await smp.submitTo(0, "keepLabeledSync", sync); // async hooks not enabled yet in this thread
      await smp.submitTo(0, "keepLabeled", { count: 4, size: 100, labels: { tenant: "a" } }); // enables them
      await smp.submitTo(0, "keepLabeledSync", sync);
      const sites = smp.heapProfile().sites.filter((s) => s.labels?.tenant === "b");
      expect(sites.map((s) => s.frames.map((f) => f.functionName))).toHaveLength(1);
      expect(sites[0]!.count).toBe(8);
      for (const s of smp.heapProfile().sites) expect(s.frames.filter((f) => /async_hooks/.test(f.url)), JSON.stringify(s.frames)).toEqual([]);
      expect(smp.heap.check()).toEqual([]);
    } finally {
      await smp.stop();
    }
  });
});
