/**
 * Remote frees survive the thread that made them: a shard batches frees of
 * other shards' objects in its outbox, in the heap buffer (cross-shard.ts),
 * so a thread that exits or is terminated holding a batch loses nothing;
 * the next owner of its shard (SharedHeap.adoptShard) pushes what it finds.
 * And check() tells an object stuck pending, with no chain holding it.
 */
import { once } from "node:events";
import { Worker } from "node:worker_threads";
import { afterEach, describe, expect, it } from "vitest";
import { SharedHeap } from "../../src/index.js";

const threadUrl = new URL("../fixtures/shard-thread.mjs", import.meta.url);
let threads: Worker[] = [];
afterEach(async () => {
  await Promise.all(threads.map((t) => t.terminate()));
  threads = [];
});

interface Reply {
  ok: boolean;
  value?: unknown;
  name?: string;
  message?: string;
}

/** A thread owning `shard`, ready for ops. */
async function shardThread(heap: SharedHeap, shard: number, batch: boolean, adopt = false): Promise<Worker> {
  const t = new Worker(threadUrl, { workerData: { buffer: heap.buffer, shard, batch, adopt } });
  threads.push(t);
  const [ready] = (await once(t, "message")) as [Reply];
  expect(ready.value).toBe("ready");
  return t;
}

describe("remote frees survive their thread", () => {
  it("a thread that exits in the same turn as its frees: the batch waits in its outbox, the next owner pushes it", async () => {
    const heap = SharedHeap.create({ shards: 2, shardBytes: 1 << 20 });
    const owner = heap.shard(0);
    const ptrs = Array.from({ length: 20 }, (_, i) => owner.malloc(16 + 8 * i));
    const t = await shardThread(heap, 1, true);
    t.postMessage({ op: "freeAllThenExit", ptrs });
    const [code] = (await once(t, "exit")) as [number];
    expect(code).toBe(0);
    // Nothing reached the owner, nothing is lost: the objects are in flight.
    expect(owner.drainCrossShardFrees()).toBe(0);
    expect(owner.stats().liveObjects).toBe(20);
    expect(heap.check()).toEqual([]);
    expect(() => owner.free(ptrs[0]!)).toThrow(/pending/);
    heap.adoptShard(1); // the dead thread's shard, taken over: its batch goes out
    expect(owner.drainCrossShardFrees()).toBe(20);
    expect(owner.stats().liveObjects).toBe(0);
    expect(heap.stats(1).crossShardFrees).toBe(20);
    expect(() => owner.free(ptrs[0]!)).toThrow(/not a live object/);
    expect(heap.check()).toEqual([]);
  });

  it("threads terminated at arbitrary points while freeing: every object is freed exactly once", async () => {
    const heap = SharedHeap.create({ shards: 2, shardBytes: 8 << 20 });
    const owner = heap.shard(0);
    const start = owner.stats();
    for (let round = 0; round < 12; round++) {
      const ptrs = Array.from({ length: 6000 }, (_, i) => owner.malloc(8 + (i % 40) * 8));
      const t = await shardThread(heap, 1, round % 3 !== 0, true); // the last round's shard, taken over
      t.postMessage({ op: "freeUntilKilled", ptrs });
      await once(t, "message"); // started
      await new Promise((resolve) => setTimeout(resolve, round % 4));
      await t.terminate();
      heap.adoptShard(1);
      heap.recoverLostFrees(); // a free cut between its claim and its chain
      owner.drainCrossShardFrees();
      expect(heap.check(), `round ${round}`).toEqual([]);
      // What the thread did not reach is still live and unclaimed: free it here.
      let left = 0;
      for (const p of ptrs) {
        if (heap.regions[0]!.isLive(p)) {
          owner.free(p);
          left++;
        }
      }
      expect(owner.stats().liveObjects, `round ${round}: ${left} freed here`).toBe(0);
    }
    owner.trim();
    expect(owner.stats().freeMemory).toBe(start.freeMemory);
    expect(heap.check()).toEqual([]);
  });

  it("check() reports an object pending a cross-shard free that no inbox or outbox holds", async () => {
    const heap = SharedHeap.create({ shards: 2, shardBytes: 1 << 20 });
    const owner = heap.shard(0);
    const ptr = owner.malloc(64);
    const t = await shardThread(heap, 1, true);
    t.postMessage({ op: "freeAllThenExit", ptrs: [ptr] });
    await once(t, "exit");
    expect(heap.check()).toEqual([]);
    // Lose the chain, as a thread killed between taking a batch and pushing it would.
    const sender = heap.regions[1]!;
    sender.u32[sender.outboxSlots + 0] = 0;
    expect(heap.check()).toEqual([
      `shard 0: object ${ptr} is pending a cross-shard free but no inbox or outbox holds it (its free was lost)`,
    ]);
  });
});
