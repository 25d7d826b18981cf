/**
 * A shard belongs to one thread (ownership.ts): another thread reads it but
 * gets HeapOwnershipError, with the heap unchanged, for anything that would
 * change it; heap.free(ptr) frees from any thread. Real threads.
 */
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import { afterEach, describe, expect, it } from "vitest";
import { HeapOwnershipError as BuiltOwnershipError, Smp } from "../../dist/index.js";
import { HeapOwnershipError, SharedHeap } from "../../src/index.js";

const threadUrl = new URL("../fixtures/shard-thread.mjs", import.meta.url);
const tasks = fileURLToPath(new URL("../fixtures/shard-tasks.mjs", import.meta.url));
let threads: Worker[] = [];
let smps: Smp[] = [];
afterEach(async () => {
  await Promise.all([...threads.map((t) => t.terminate()), ...smps.map((s) => s.stop())]);
  threads = [];
  smps = [];
});

interface Reply {
  ok: boolean;
  value?: unknown;
  name?: string;
  message?: string;
}

async function call(t: Worker, msg: object): Promise<Reply> {
  t.postMessage(msg);
  return ((await once(t, "message")) as [Reply])[0];
}

describe("a shard belongs to one thread", () => {
  it("another thread's allocator reads the shard and throws HeapOwnershipError, heap unchanged, on every change", async () => {
    const heap = SharedHeap.create({ shards: 2, shardBytes: 1 << 20 });
    const t = new Worker(threadUrl, { workerData: { buffer: heap.buffer, shard: 0 } });
    threads.push(t);
    await once(t, "message"); // ready: the worker took shard 0
    const p = (await call(t, { op: "malloc", size: 64 })).value as number;
    const big = (await call(t, { op: "malloc", size: 50_000 })).value as number;
    const view = heap.shard(0);
    expect(view.owned).toBe(false);
    const before = Buffer.from(new Uint8Array(heap.buffer)).toString("base64");
    const changes: Array<[string, () => unknown]> = [
      ["malloc", () => view.malloc(64)],
      ["malloc (large)", () => view.malloc(100_000)],
      ["free", () => view.free(p)],
      ["free (sized)", () => view.free(p, 8)],
      ["realloc", () => view.realloc(p, 200)],
      ["allocateAligned", () => view.allocateAligned(64, 64)],
      ["allocateAligned (large)", () => view.allocateAligned(8192, 20_000)],
      ["drainCrossShardFrees", () => view.drainCrossShardFrees()],
      ["trim", () => view.trim()],
      ["setHeapProfilingSampleRate", () => view.setHeapProfilingSampleRate(1)],
      ["setHeapProfilingEnabled", () => view.setHeapProfilingEnabled(true)],
      ["setHeapProfilingDepth", () => view.setHeapProfilingDepth(4)],
      ["batchCrossShardFrees", () => view.batchCrossShardFrees(true)],
      ["flushCrossShardFrees", () => view.flushCrossShardFrees()],
    ];
    for (const [what, change] of changes) {
      let error: unknown;
      try {
        change();
      } catch (e) {
        error = e;
      }
      expect(error, what).toBeInstanceOf(HeapOwnershipError);
      expect((error as HeapOwnershipError).code).toBe("ERR_SHARDHEAP_OWNERSHIP");
      expect((error as HeapOwnershipError).shard).toBe(0);
      expect((error as Error).message, what).toMatch(/on shard 0 from the main thread: it belongs to worker thread \d+/);
    }
    expect(Buffer.from(new Uint8Array(heap.buffer)).toString("base64"), "the heap is exactly as it was").toBe(before);
    // Reads stay open.
    expect(view.objectSize(p)).toBe(64);
    expect(view.stats().liveObjects).toBe(2);
    expect(view.diagnostics()).toMatch(/Used memory/);
    expect(heap.diagnostics(0)).toMatch(/shard 0/);
    expect(view.heapProfile().shard).toBe(0);
    // heap.free frees from any thread: a cross-shard free into shard 0's inbox.
    heap.free(p);
    expect(() => heap.free(p)).toThrow(/pending/);
    heap.free(big);
    expect((await call(t, { op: "free", ptr: p })).message).toMatch(/pending/);
    expect(heap.check()).toEqual([]);
  });

  it("two threads asking for a free shard at once: exactly one takes it", async () => {
    for (let round = 0; round < 10; round++) {
      const heap = SharedHeap.create({ shards: 1, shardBytes: 1 << 20 });
      const a = new Worker(threadUrl, { workerData: { buffer: heap.buffer, shard: 0 } });
      const b = new Worker(threadUrl, { workerData: { buffer: heap.buffer, shard: 0 } });
      threads.push(a, b);
      await Promise.all([once(a, "message"), once(b, "message")]);
      const owned = [(await call(a, { op: "owned" })).value, (await call(b, { op: "owned" })).value];
      expect(owned.filter(Boolean), `round ${round}`).toHaveLength(1);
      const loser = owned[0] ? b : a;
      expect((await call(loser, { op: "malloc", size: 8 })).name).toBe("HeapOwnershipError");
      expect(heap.check()).toEqual([]);
      await Promise.all([a.terminate(), b.terminate()]);
    }
  });

  it("the main thread cannot allocate in a running Smp shard; heap.free works from it", async () => {
    const smp = await Smp.start({ shards: 2, memoryPerShard: "1MiB", module: tasks });
    smps.push(smp);
    expect(() => smp.heap.shard(0).malloc(64)).toThrow(BuiltOwnershipError);
    const ptrs = (await smp.submitTo(0, "allocMany", { count: 10, size: 48 })) as number[];
    for (const p of ptrs) smp.heap.free(p);
    await smp.stop();
    expect(smp.heap.check()).toEqual([]);
    expect(smp.heap.stats(0).liveObjects).toBe(0);
  });
});

describe("Smp: a shard that exits holding a batch of remote frees", () => {
  it("loses none of them: its next thread (or stop) pushes them to their owner", async () => {
    const smp = await Smp.start({ shards: 2, memoryPerShard: "1MiB", module: tasks });
    smps.push(smp);
    smp.on("error", () => undefined); // the exit is reported; the test is about the frees
    const ptrs = (await smp.submitTo(0, "allocMany", { count: 20, size: 64 })) as number[];
    await expect(smp.submitTo(1, "freeAllThenExit", ptrs)).rejects.toThrow();
    await smp.stop();
    expect(smp.heap.check()).toEqual([]);
    expect(smp.heap.stats(0).liveObjects).toBe(0);
    expect(smp.heap.stats(1).crossShardFrees).toBe(20);
    expect(() => smp.heap.free(ptrs[0]!)).toThrow(/not a live object/);
  });
});
