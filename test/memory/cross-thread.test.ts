/**
 * Cross-shard frees from a real second thread (the Smp runtime arrives
 * later; this drives the primitive with a raw worker_threads peer).
 */
import { once } from "node:events";
import { Worker } from "node:worker_threads";
import { afterEach, describe, expect, it } from "vitest";
import { SharedHeap } from "../../src/index.js";

const workerUrl = new URL("../fixtures/remote-free-worker.mjs", import.meta.url);
let workers: Worker[] = [];
afterEach(async () => {
  await Promise.all(workers.map((w) => w.terminate()));
  workers = [];
});

function spawn(heap: SharedHeap, shard: number): Worker {
  const w = new Worker(workerUrl, { workerData: { buffer: heap.buffer, shard } });
  workers.push(w);
  return w;
}

describe("cross-shard free from another thread", () => {
  it("every object pushed by the peer is drained once, patterns intact, counters balanced", async () => {
    const heap = SharedHeap.create({ shards: 2, shardBytes: 16 << 20 });
    const owner = heap.shard(0);
    const start = owner.stats();
    const peer = spawn(heap, 1);
    const seen = new Set<number>();
    let sent = 0;
    let drained = 0;
    let ringing = 0;
    const doorbell = heap.regions[0]!.doorbell;
    for (let round = 0; round < 20; round++) {
      const objects = [];
      for (let i = 0; i < 500; i++) {
        const size = 1 + ((round * 500 + i) * 37) % (i % 50 === 0 ? 40000 : 2000);
        const ptr = owner.malloc(size);
        expect(seen.has(ptr), "pointer handed out twice while live").toBe(false);
        seen.add(ptr);
        const pattern = (ptr >>> 3) & 255;
        const bytes = heap.bytes(ptr, size);
        for (let k = 0; k < size; k++) bytes[k] = (pattern + k) & 255;
        objects.push({ ptr, size, pattern });
      }
      const bellBefore = Atomics.load(heap.regions[0]!.i32, doorbell);
      peer.postMessage({ type: "free", objects });
      const [reply] = (await once(peer, "message")) as [{ count: number; bad: number; crossShardFrees: number }];
      expect(reply.bad).toBe(0);
      sent += reply.count;
      expect(reply.crossShardFrees).toBe(sent);
      if (Atomics.load(heap.regions[0]!.i32, doorbell) !== bellBefore) ringing++;
      // Objects stay live (and unique) until the owner drains them.
      expect(owner.stats().liveObjects).toBe(sent - drained);
      const n = owner.drainCrossShardFrees();
      drained += n;
      for (const o of objects) seen.delete(o.ptr);
      expect(n).toBe(500);
    }
    expect(ringing).toBe(20); // each round pushed onto an empty inbox
    expect(heap.stats(1).crossShardFrees).toBe(10000);
    const s = owner.stats();
    expect(s.mallocs - s.frees).toBe(s.liveObjects);
    expect(s.liveObjects).toBe(0);
    expect(heap.check()).toEqual([]);
    owner.trim();
    expect(owner.stats().freeMemory).toBe(start.freeMemory);
  });

  it("the owner drains concurrently with the peer's pushes, woken by the doorbell", async () => {
    const heap = SharedHeap.create({ shards: 2, shardBytes: 32 << 20 });
    const owner = heap.shard(0);
    const r0 = heap.regions[0]!;
    const peer = spawn(heap, 1);
    const total = 60000;
    const objects = Array.from({ length: total }, (_, i) => {
      const size = 8 + (i % 120);
      const ptr = owner.malloc(size);
      heap.bytes(ptr, size).fill(0);
      return { ptr, size, pattern: 0 };
    });
    let drained = 0;
    let wakeups = 0;
    const reply = once(peer, "message");
    // Split into batches so pushes and drains interleave for real.
    for (let i = 0; i < total; i += 2000) peer.postMessage({ type: "free", objects: objects.slice(i, i + 2000) });
    while (drained < total) {
      const bell = Atomics.load(r0.i32, r0.doorbell);
      const n = owner.drainCrossShardFrees();
      drained += n;
      if (n === 0) {
        const w = Atomics.waitAsync(r0.i32, r0.doorbell, bell, 5000);
        const outcome = await w.value;
        expect(outcome, "the doorbell must ring well before the timeout").not.toBe("timed-out");
        wakeups++; // "ok": woken by a notify; "not-equal": rung between load and wait
      }
    }
    await reply;
    expect(drained).toBe(total);
    expect(wakeups).toBeGreaterThan(0);
    expect(owner.stats().liveObjects).toBe(0);
    expect(heap.check()).toEqual([]);
  });

  it("a second free of a pending object is rejected, on the owner's thread and on the freeing one", async () => {
    const heap = SharedHeap.create({ shards: 2, shardBytes: 1 << 20 });
    const owner = heap.shard(0);
    const peer = spawn(heap, 1);
    try {
      const ptr = owner.malloc(64);
      heap.bytes(ptr, 64).fill(7);
      peer.postMessage({ type: "free", objects: [{ ptr, size: 64, pattern: 7 }] });
      await once(peer, "message"); // pending on shard 0's inbox now
      expect(() => owner.free(ptr)).toThrow(/already freed \(its cross-shard free is pending\)/);
      peer.postMessage({ type: "double-free", ptr });
      const [reply] = (await once(peer, "message")) as [{ error: { name: string; message: string } | null }];
      expect(reply.error?.name).toBe("InvalidPointerError");
      expect(reply.error?.message).toMatch(/pending/);
      expect(owner.drainCrossShardFrees()).toBe(1);
      expect(heap.check()).toEqual([]);
    } finally {
      await peer.terminate();
    }
  });

});
