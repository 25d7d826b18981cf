/**
 * Debug pointers ("safe pointers"): with the mode on, a pointer
 * used after its free throws through every checked accessor, on any
 * thread, because freed objects are held back from reuse, poisoned; writes
 * made after a free are found; and the mode never makes an allocation fail.
 * Without it, the same stale pointer silently reaches the object that took
 * the memory next: the hazard the mode exists for.
 */
import { Worker } from "node:worker_threads";
import { describe, expect, it } from "vitest";
import { InvalidPointerError as DistInvalidPointerError, Smp } from "../../dist/index.js";
import { InvalidPointerError, InvalidValueError, SharedHeap } from "../../src/index.js";
import { POISON } from "../../src/memory/quarantine.js";
import { TASKS, waitFor } from "../helpers.js";

const USE_AFTER_FREE = /use after free/;

function debugHeap(shards = 1, shardBytes: number | string = "1MiB"): SharedHeap {
  return SharedHeap.create({ shards, shardBytes, debugPointers: true });
}

/** Every checked use of `p` that must throw once it is freed. */
function uses(heap: SharedHeap, p: number): Array<[string, () => unknown]> {
  const a = heap.shard(heap.ownerOf(p));
  return [
    ["objectBytes", () => heap.objectBytes(p)],
    ["readString", () => heap.readString(p, 1)],
    ["writeString", () => heap.writeString(p, "x")],
    ["storedString", () => heap.storedString(p)],
    ["storedView", () => heap.storedView(p)],
    ["objectSize", () => a.objectSize(p)],
    ["free", () => a.free(p)],
    ["heap.free", () => heap.free(p)],
    ["realloc", () => a.realloc(p, 10)],
  ];
}

describe("debug pointers", () => {
  it("off (the default): a stale pointer silently reads, and frees, the object that took its memory", () => {
    const heap = SharedHeap.create({ shards: 1, shardBytes: "1MiB" });
    expect(heap.debugPointers).toBe(false);
    const a = heap.shard(0);
    const p = a.mallocString("alice's value");
    a.free(p);
    const q = a.mallocString("bob's value!!");
    expect(q).toBe(p); // the same address, handed out again at once
    expect(heap.storedString(p)).toBe("bob's value!!"); // unchecked: the stale pointer reads bob's value
    a.free(p); // and frees bob's object
    expect(heap.stats().liveObjects).toBe(0);
    expect(heap.check()).toEqual([]);
  });

  it("on: every checked use of a freed small object throws, and its memory is not handed out again", () => {
    const heap = debugHeap();
    expect(heap.debugPointers).toBe(true);
    const a = heap.shard(0);
    const p = a.mallocString("alice's value");
    const before = new Uint8Array(heap.buffer).slice();
    a.free(p);
    for (let i = 0; i < 100; i++) expect(a.mallocString("bob's value!!")).not.toBe(p);
    for (const [name, use] of uses(heap, p)) {
      expect(use, name).toThrow(InvalidPointerError);
      expect(use, name).toThrow(USE_AFTER_FREE);
    }
    // The counters say what the program did: the free counted, the 100 others live.
    expect(heap.stats().liveObjects).toBe(100);
    expect(heap.stats().frees).toBe(1);
    expect(heap.check()).toEqual([]);
    expect(before.length).toBe(heap.buffer.byteLength);
  });

  it("on: a freed page-span object likewise, and a raw read of freed memory sees poison, not data", () => {
    const heap = debugHeap(1, "4MiB");
    const a = heap.shard(0);
    const big = a.malloc(100_000);
    heap.objectBytes(big).fill(7);
    const small = a.mallocString("secret");
    const kept = heap.objectBytes(small); // a view taken while it lived
    a.free(big);
    a.free(small);
    expect(a.malloc(100_000)).not.toBe(big);
    for (const [name, use] of uses(heap, big)) expect(use, name).toThrow(USE_AFTER_FREE);
    expect([...heap.bytes(big + 8, 64)].every((b) => b === POISON)).toBe(true);
    expect([...kept.subarray(8)].every((b) => b === POISON)).toBe(true);
    expect(heap.check()).toEqual([]);
  });

  it("on: a second free of an object, its memory reused or not, is refused as a use after free", () => {
    const heap = debugHeap();
    const a = heap.shard(0);
    const ptrs = Array.from({ length: 50 }, () => a.malloc(48));
    for (const p of ptrs) a.free(p);
    Array.from({ length: 50 }, () => a.malloc(48)); // the same class, wanting memory
    for (const p of ptrs) expect(() => a.free(p)).toThrow(USE_AFTER_FREE);
    expect(heap.stats().liveObjects).toBe(50);
    expect(heap.check()).toEqual([]);
  });

  it("on: frees from another shard are held too, and another thread's use of the pointer throws", async () => {
    const heap = debugHeap(2);
    const owner = heap.shard(0);
    const other = heap.shard(1);
    const p = owner.mallocString("handed over");
    other.free(p); // a cross-shard free: pushed on shard 0's inbox
    expect(() => heap.storedString(p)).toThrow(/cross-shard free is pending/);
    expect(owner.drainCrossShardFrees()).toBe(1);
    expect(() => heap.storedString(p)).toThrow(USE_AFTER_FREE);
    expect(() => other.free(p)).toThrow(USE_AFTER_FREE);
    const source = `
      const { workerData, parentPort } = require("node:worker_threads");
      import(workerData.dist).then(({ SharedHeap }) => {
        const heap = SharedHeap.attach(workerData.buffer);
        const out = { debugPointers: heap.debugPointers };
        try { heap.storedString(workerData.p); out.read = "no error"; } catch (e) { out.read = e.name + ": " + e.message; }
        try { heap.free(workerData.p); out.free = "no error"; } catch (e) { out.free = e.name + ": " + e.message; }
        parentPort.postMessage(out);
      });`;
    const worker = new Worker(source, { eval: true, workerData: { buffer: heap.buffer, p, dist: new URL("../../dist/index.js", import.meta.url).href } });
    try {
      const out = await new Promise<{ debugPointers: boolean; read: string; free: string }>((resolve, reject) => {
        worker.once("message", resolve);
        worker.once("error", reject);
        setTimeout(() => reject(new Error("the worker did not answer within 10 s")), 10_000).unref();
      });
      expect(out.debugPointers).toBe(true);
      expect(out.read).toMatch(/^InvalidPointerError: .*use after free/);
      expect(out.free).toMatch(/^InvalidPointerError: .*use after free/);
    } finally {
      await worker.terminate();
    }
    expect(heap.check()).toEqual([]);
  });

  it("on: a write after the free is reported by check() while held, and warned about as the object leaves", async () => {
    const heap = debugHeap();
    const a = heap.shard(0);
    const p = a.malloc(64);
    const kept = heap.objectBytes(p);
    a.free(p);
    kept[20] = 1; // a write through a view kept past the free
    expect(heap.check()).toEqual([`shard 0: object ${p} (64 bytes) was written after it was freed, at byte 20 (debug pointers)`]);
    const warnings: Error[] = [];
    const onWarning = (w: Error): void => void warnings.push(w);
    process.on("warning", onWarning);
    try {
      // Free more than the quarantine holds: the oldest, p, leaves and is checked.
      for (let i = 0; i < 40; i++) a.free(a.malloc(16_000));
      await new Promise((r) => setImmediate(r)); // warnings are emitted on the next tick
    } finally {
      process.off("warning", onWarning);
    }
    expect(warnings.map((w) => (w as Error & { code?: string }).code)).toEqual(["SHARDHEAP_WRITE_AFTER_FREE"]);
    expect(warnings[0]!.message).toContain(`object ${p} (64 bytes) was written after it was freed, at byte 20`);
    expect(heap.check()).toEqual(["shard 0: 1 freed object was written after its free (debug pointers found them in the quarantine; see the SHARDHEAP_WRITE_AFTER_FREE warnings)"]);
  });

  it("on: the quarantine gives memory back past its budget, and all of it before an allocation would fail", () => {
    const heap = debugHeap(1, "2MiB");
    const a = heap.shard(0);
    const total = a.stats().totalMemory;
    // Many times the shard's memory, freed as it goes: held, then let go oldest first.
    for (let i = 0; i < 500; i++) a.free(a.malloc(16_000));
    for (let i = 0; i < 2000; i++) a.free(a.malloc(100 + (i % 900)));
    expect(a.stats().failedAllocations).toBe(0);
    // What the quarantine holds is not lost: one object of nearly all the free memory still fits.
    const reclaims = a.stats().reclaims;
    const big = a.malloc(a.stats().freeMemory + 256 * 1024);
    expect(a.stats().reclaims).toBe(reclaims + 1);
    a.free(big);
    expect(a.stats().liveObjects).toBe(0);
    expect(a.stats().totalMemory).toBe(total);
    expect(heap.check()).toEqual([]);
  });

  it("on: the profiler and the counters treat a held object as freed", () => {
    const heap = debugHeap();
    const a = heap.shard(0);
    a.setHeapProfilingEnabled(true);
    function keepRecord(): number {
      return a.malloc(200);
    }
    const ptrs = [keepRecord(), keepRecord(), a.malloc(50_000)];
    expect(heap.heapProfile(0).totalCount).toBe(3);
    for (const p of ptrs) a.free(p);
    const profile = heap.heapProfile(0);
    expect([profile.totalCount, profile.totalSize]).toEqual([0, 0]);
    const records = profile.sites.filter((s) => s.frames[0]?.functionName === "keepRecord");
    expect(records.reduce((n, s) => n + s.allocCount, 0)).toBe(2);
    expect(a.stats()).toMatchObject({ mallocs: 3, frees: 3, liveObjects: 0 });
    expect(heap.check()).toEqual([]);
  });

  it("on in Smp: a shard's use of a pointer another shard freed rejects, as InvalidPointerError, and stop leaves the heap consistent", async () => {
    const smp = await Smp.start({ shards: 2, memoryPerShard: "2MiB", module: TASKS, debugPointers: true });
    try {
      expect(smp.heap.debugPointers).toBe(true);
      const p = await smp.submitTo<number>(0, "storeString", "a value shard 1 frees");
      expect(await smp.submitTo(1, "readStored", p)).toBe("a value shard 1 frees");
      await smp.submitTo(1, "freeAll", [p]);
      // Shard 0 drains its inbox when the doorbell rings; the freed object then sits in its quarantine.
      await waitFor(() => smp.stats(0).frees === 1, "shard 0 to drain the remote free");
      const read = smp.submitTo(1, "readStored", p);
      await expect(read).rejects.toBeInstanceOf(DistInvalidPointerError);
      await expect(read).rejects.toThrow(USE_AFTER_FREE);
      await expect(smp.submitTo(0, "freeAll", [p])).rejects.toThrow(USE_AFTER_FREE);
    } finally {
      await smp.stop();
    }
    expect(smp.stats().liveObjects).toBe(0);
    expect(smp.heap.check()).toEqual([]);
  });

  it("is a mode of the heap: attached threads follow it, the environment turns it on, bad values are refused", () => {
    const heap = debugHeap();
    expect(SharedHeap.attach(heap.buffer).debugPointers).toBe(true);
    const saved = process.env.SHARDHEAP_DEBUG_POINTERS;
    try {
      process.env.SHARDHEAP_DEBUG_POINTERS = "1";
      expect(SharedHeap.create({ shards: 1, shardBytes: "1MiB" }).debugPointers).toBe(true);
      expect(SharedHeap.create({ shards: 1, shardBytes: "1MiB", debugPointers: false }).debugPointers).toBe(false);
      process.env.SHARDHEAP_DEBUG_POINTERS = "0";
      expect(SharedHeap.create({ shards: 1, shardBytes: "1MiB" }).debugPointers).toBe(false);
    } finally {
      if (saved === undefined) delete process.env.SHARDHEAP_DEBUG_POINTERS;
      else process.env.SHARDHEAP_DEBUG_POINTERS = saved;
    }
    expect(() => SharedHeap.create({ shards: 1, shardBytes: "1MiB", debugPointers: "yes" as unknown as boolean })).toThrow(InvalidValueError);
    expect(() => SharedHeap.create({ shards: 1, shardBytes: "1MiB", debugPointers: "yes" as unknown as boolean })).toThrow(/debugPointers must be true or false/);
    // A header with a mode this version does not know is not a heap it can use.
    const copy = new SharedArrayBuffer(heap.buffer.byteLength);
    new Uint8Array(copy).set(new Uint8Array(heap.buffer));
    new Int32Array(copy)[8] = 6;
    expect(() => SharedHeap.attach(copy)).toThrow(/unknown mode flags 6/);
  });
});
