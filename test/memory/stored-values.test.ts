/**
 * Stored values ("data in and out in one call"): mallocString and
 * mallocBytes write a value and its length into one new object, and
 * storedString / storedBytes / storedView / storedLength read it back from
 * the pointer alone, on any thread; a pointer to anything else is refused.
 */
import { Worker } from "node:worker_threads";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { InvalidPointerError, SharedHeap } from "../../src/index.js";
import { newHeap } from "../helpers.js";

describe("stored values", () => {
  it("a string goes in with one call and comes back whole: empty, ASCII, multi-byte, big", () => {
    const heap = newHeap({ shards: 2, shardBytes: "1MiB" });
    const a = heap.shard(0);
    for (const text of ["", "hello", "héllo, wörld", "日本語のテキスト", "emoji 🎉🧪", "x".repeat(100_000)]) {
      const p = a.mallocString(text);
      expect(heap.storedString(p)).toBe(text);
      expect(heap.storedLength(p)).toBe(Buffer.byteLength(text));
      expect(Buffer.from(heap.storedBytes(p)).toString("utf8")).toBe(text);
      expect(a.objectSize(p)).toBeGreaterThanOrEqual(8 + Buffer.byteLength(text));
      a.free(p);
    }
    // A lone surrogate has no UTF-8: it is stored as U+FFFD, as Buffer and TextEncoder write it.
    expect(heap.storedString(a.mallocString("a\ud800b"))).toBe("a\ufffdb");
    expect(heap.check()).toEqual([]);
  });

  it("bytes from any view or buffer, copied in; storedBytes copies out, storedView does not", () => {
    const heap = newHeap({ shards: 1, shardBytes: "1MiB" });
    const a = heap.shard(0);
    const f64 = new Float64Array([1.5, -2, Math.PI]);
    const sab = new SharedArrayBuffer(5);
    new Uint8Array(sab).set([9, 8, 7, 6, 5]);
    const sources: Array<[ArrayBufferView | ArrayBuffer | SharedArrayBuffer, number[]]> = [
      [new Uint8Array([1, 2, 3]), [1, 2, 3]],
      [Buffer.from("abc"), [97, 98, 99]],
      [new Uint8Array([0, 1, 2, 3, 4, 5]).subarray(2, 5), [2, 3, 4]],
      [new DataView(new Uint8Array([4, 5, 6, 7]).buffer, 1, 2), [5, 6]],
      [new Uint8Array([10, 11]).buffer, [10, 11]],
      [sab, [9, 8, 7, 6, 5]],
      [new Uint8Array(0), []],
    ];
    for (const [source, want] of sources) {
      const p = a.mallocBytes(source);
      expect([...heap.storedBytes(p)]).toEqual(want);
      expect(heap.storedLength(p)).toBe(want.length);
    }
    // 8-aligned: a Float64Array over the view reads the doubles back in place.
    const p = a.mallocBytes(f64);
    const view = heap.storedView(p);
    expect(view.byteOffset % 8).toBe(0);
    expect([...new Float64Array(view.buffer, view.byteOffset, 3)]).toEqual([1.5, -2, Math.PI]);
    // The view is the object's bytes; the copy is not.
    const copy = heap.storedBytes(p);
    view[0] = 0xff;
    expect(heap.storedBytes(p)[0]).toBe(0xff);
    expect(copy[0]).not.toBe(0xff);
    expect(copy.buffer).not.toBeInstanceOf(SharedArrayBuffer);
    expect(view.buffer).toBe(heap.buffer);
    expect(heap.check()).toEqual([]);
  });

  it("refuses what is no stored value, a freed one and bad arguments, the heap unchanged", () => {
    const heap = newHeap({ shards: 2, shardBytes: "1MiB" });
    const a = heap.shard(0);
    const plain = a.malloc(64);
    heap.objectBytes(plain).fill(0);
    expect(() => heap.storedString(plain)).toThrow(InvalidPointerError); // length 0 but no check word
    expect(() => heap.storedString(plain)).toThrow(/not a stored value/);
    // A header that checks but claims more than the object holds.
    const forged = a.mallocString("short");
    const u32 = new Uint32Array(heap.buffer);
    const [length, check] = [u32[forged >>> 2]!, u32[(forged >>> 2) + 1]!];
    u32[forged >>> 2] = 1000;
    u32[(forged >>> 2) + 1] = (check ^ length ^ 1000) >>> 0;
    expect(() => heap.storedView(forged)).toThrow(/not a stored value/);
    u32[forged >>> 2] = length;
    u32[(forged >>> 2) + 1] = check;
    expect(heap.storedString(forged)).toBe("short");
    const freed = a.mallocString("gone");
    a.free(freed);
    expect(() => heap.storedString(freed)).toThrow(/not a live object/);
    expect(() => heap.storedLength(forged + 8)).toThrow(InvalidPointerError);
    expect(() => heap.storedBytes(0)).toThrow(InvalidPointerError);
    expect(() => heap.storedString("1" as unknown as number)).toThrow(TypeError);
    const before = new Uint8Array(heap.buffer).slice();
    expect(() => a.mallocString(42 as unknown as string)).toThrow(TypeError);
    expect(() => a.mallocBytes([1, 2] as unknown as Uint8Array)).toThrow(/expected a Uint8Array.*got Array/);
    expect(() => a.mallocBytes(null as unknown as Uint8Array)).toThrow(TypeError);
    expect(Buffer.compare(new Uint8Array(heap.buffer), before)).toBe(0);
    expect(heap.check()).toEqual([]);
  });

  it("the profiler names the caller of mallocString and mallocBytes, as it names malloc's", () => {
    const heap = newHeap({ shards: 1, shardBytes: "1MiB" });
    const a = heap.shard(0);
    a.setHeapProfilingEnabled(true);
    function keepGreeting(): number {
      return a.mallocString("hello, profiler");
    }
    function keepPayload(): number {
      return a.mallocBytes(new Uint8Array(5000));
    }
    keepGreeting();
    keepPayload();
    const leaves = heap.heapProfile(0).sites.map((s) => s.frames[0]?.functionName);
    expect(leaves.sort()).toEqual(["keepGreeting", "keepPayload"]);
    expect(heap.check()).toEqual([]);
  });

  it("any string and any bytes round-trip, and the heap stays consistent (property)", () => {
    const heap = newHeap({ shards: 1, shardBytes: "4MiB" });
    const a = heap.shard(0);
    fc.assert(
      fc.property(fc.array(fc.oneof(fc.string({ unit: "binary", maxLength: 300 }), fc.uint8Array({ maxLength: 5000 })), { maxLength: 20 }), (values) => {
        const ptrs = values.map((v) => (typeof v === "string" ? a.mallocString(v) : a.mallocBytes(v)));
        values.forEach((v, i) => {
          if (typeof v === "string") expect(heap.storedString(ptrs[i]!)).toBe(Buffer.from(v, "utf8").toString("utf8"));
          else expect(heap.storedBytes(ptrs[i]!)).toEqual(v);
        });
        for (const p of ptrs) a.free(p);
      }),
      { numRuns: 200 },
    );
    expect(heap.stats().liveObjects).toBe(0);
    expect(heap.check()).toEqual([]);
  });

  it("another thread reads a stored value from the pointer alone", async () => {
    const heap = newHeap({ shards: 1, shardBytes: "1MiB" });
    const p = heap.shard(0).mallocString("from the main thread: ✓");
    const source = `
      const { workerData, parentPort } = require("node:worker_threads");
      import(workerData.dist).then(({ SharedHeap }) => {
        const heap = SharedHeap.attach(workerData.buffer);
        parentPort.postMessage(heap.storedString(workerData.p));
      });`;
    const worker = new Worker(source, { eval: true, workerData: { buffer: heap.buffer, p, dist: new URL("../../dist/index.js", import.meta.url).href } });
    try {
      const read = await new Promise<unknown>((resolve, reject) => {
        worker.once("message", resolve);
        worker.once("error", reject);
        setTimeout(() => reject(new Error("the worker did not answer within 10 s")), 10_000).unref();
      });
      expect(read).toBe("from the main thread: ✓");
    } finally {
      await worker.terminate();
    }
    expect(SharedHeap.attach(heap.buffer).storedLength(p)).toBe(Buffer.byteLength("from the main thread: ✓"));
  });
});
