/**
 * A replace made without the segment's lock (writer.ts replaceUnlocked)
 * against a backward shift that moves the very entry it replaces, in the
 * one interleaving that would lose it: the shift has copied the entry into
 * the hole and not yet emptied its old slot when the replacer swaps that
 * old slot. A worker pauses just before its swap
 * (test/fixtures/map-paused-replacer.mjs); the main thread deletes the
 * key before it in the cluster, and its own store of the copy lets the
 * worker swap. The delete must wait for the replacer to finish
 * (waitForReplacers), so the new value is there afterwards, the deleted key
 * is gone, and the map's and the heap's checks are [].
 * Also: a record left replacing by a thread that is gone (named by
 * check(), repaired by the segment's next change), the replace's steps
 * alike in WebAssembly and in Atomics, and a map replaced into through a
 * heap attached by its buffer alone (Atomics' steps, no lock taken).
 */
import { once } from "node:events";
import { Worker } from "node:worker_threads";
import { afterEach, describe, expect, it } from "vitest";
import { SharedHeap, SharedMap } from "../../../src/index.js";
import { AtomicsMapSteps, mapAtomics, type MapAtomics } from "../../../src/memory/shared-map/atomics.js";
import * as L from "../../../src/memory/shared-map/layout.js";
import { clusterKeys } from "./cluster-keys.js";

const workerUrl = new URL("../../fixtures/map-paused-replacer.mjs", import.meta.url);
const PAUSE_MS = 300;
const WAIT_MS = 5_000;

let worker: Worker | undefined;
afterEach(async () => {
  await worker?.terminate();
  worker = undefined;
});

describe("SharedMap: a replace without the lock and a backward shift of the same entry", () => {
  it("the shift waits for the replace: the new value stays, the map whole", async () => {
    const heap = SharedHeap.create({ shards: 2, shardBytes: 1 << 20 });
    heap.shard(0);
    const map = SharedMap.create(heap, { shard: 0, capacity: 16, segments: 1 }); // one table of 64 slots
    const [first, moved] = clusterKeys(map, 64, 2, "c");
    map.set(first!, "first");
    map.set(moved!, "old");
    const i32 = new Int32Array(heap.buffer);
    const T = i32[(map.handle + L.SEGMENTS + L.SG_TABLE) >>> 2]! >>> 0;
    const movedWord = i32[(T + L.TABLE_HEADER_BYTES + 4) >>> 2]!; // slot 1: `moved`, whose home is slot 0
    expect(movedWord >>> 8, "the cluster is as built").not.toBe(0);

    // The main thread's copy of `moved` into slot 0 (the shift's first store) lets the paused replacer swap slot 1 (if it still waits).
    const ctl = new Int32Array(new SharedArrayBuffer(16));
    const steps = map as unknown as { store(address: number, value: number): void };
    const store = steps.store;
    let copies = 0;
    steps.store = (address: number, value: number): void => {
      store(address, value);
      if (value === 0 || address !== T + L.TABLE_HEADER_BYTES) return; // `moved`'s word, old or new, copied into slot 0
      copies++;
      Atomics.store(ctl, 1, 1);
      Atomics.notify(ctl, 1);
      Atomics.wait(ctl, 2, 0, WAIT_MS);
    };

    worker = new Worker(workerUrl, { workerData: { heap: heap.memory, handle: map.handle, key: moved, ctl: ctl.buffer, pauseMs: PAUSE_MS } });
    const done = once(worker, "message");
    expect(Atomics.wait(ctl, 0, 0, WAIT_MS), "the replacer reached its swap").not.toBe("timed-out");
    expect(map.delete(first!)).toBe(true);
    const [{ replaced }] = (await done) as [{ replaced: boolean }];
    await worker.terminate();
    heap.adoptShard(1); // the worker's shard, to drain what destroy sends it

    expect(copies, "the shift moved the replaced key").toBe(1);
    expect(replaced).toBe(true);
    expect(map.getString(moved!)).toBe("new");
    expect(map.getString(first!)).toBeUndefined();
    expect(map.check()).toEqual([]);
    map.destroy();
    heap.shard(1).drainCrossShardFrees();
    heap.shard(0).drainCrossShardFrees();
    expect(heap.check()).toEqual([]);
  });

  it("a record left replacing by a thread that is gone: check() names it, the segment's next change repairs it", () => {
    const heap = SharedHeap.create({ shards: 2, shardBytes: 1 << 20 });
    heap.shard(0);
    const map = SharedMap.create(heap, { shard: 0, capacity: 16, segments: 1 });
    map.set("kept", "value");
    const i32 = new Int32Array(heap.buffer);
    const rec = map.handle + L.writerOffset(1, 1);
    i32[(rec + L.WR_REPLACING_SEGMENT) >>> 2] = map.handle + L.SEGMENTS;
    Atomics.store(i32, (rec + L.WR_REPLACING) >>> 2, 0x7ffff0); // the token of no thread that owns a shard
    const problems = map.check();
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/shard 1's writer .* was replacing an entry: lost until the segment's next change repairs it/);
    map.set("after", "the next change"); // takes the lock, waits, finds the replacer gone, repairs
    expect(Atomics.load(i32, (rec + L.WR_REPLACING) >>> 2)).toBe(0);
    expect(map.stats().repairs).toBe(1);
    expect(map.getString("kept")).toBe("value");
    expect(map.check()).toEqual([]);
    map.destroy();
    expect(heap.check()).toEqual([]);
  });

  it("the replace's steps do the same with WebAssembly and with Atomics (a heap attached by its buffer alone)", () => {
    for (const kind of ["WebAssembly", "Atomics"]) {
      const heap = SharedHeap.create({ shards: 2, shardBytes: 1 << 20 });
      heap.shard(0);
      const map = SharedMap.create(heap, { shard: 0, capacity: 16, segments: 1 });
      const i32 = new Int32Array(heap.buffer);
      const steps: MapAtomics = kind === "Atomics" ? new AtomicsMapSteps(i32) : mapAtomics(heap.buffer, heap.memory);
      const seg = map.handle + L.SEGMENTS;
      const first = map.handle + L.writerOffset(1, 0) + L.WR_REPLACING;
      expect(steps.findReplacer(first, 2, seg), kind).toBe(0);
      i32[(first + L.WRITER_BYTES + L.WR_REPLACING_SEGMENT - L.WR_REPLACING) >>> 2] = seg;
      expect(steps.announce(first + L.WRITER_BYTES, 77, seg + L.SG_LOCK), `${kind}: the lock read after the token`).toBe(0);
      expect(i32[(first + L.WRITER_BYTES) >>> 2], kind).toBe(77);
      expect(steps.findReplacer(first, 2, seg), `${kind}: shard 1's record`).toBe(first + L.WRITER_BYTES);
      expect(steps.findReplacer(first, 1, seg), `${kind}: not among the first one`).toBe(0);
      expect(steps.findReplacer(first, 2, seg + L.SEGMENT_BYTES), `${kind}: another segment`).toBe(0);
      // swapSteps: the state stored, then the slot swapped only from the word given.
      const d = heap.shard(0).malloc(128); // a descriptor's words and a slot, in an object of its own
      const slot = d + 64;
      i32[slot >>> 2] = 5;
      expect(steps.swapSteps(d, 9, slot, 4, 6), `${kind}: a lost swap answers what the slot held`).toBe(5);
      expect(i32[slot >>> 2]).toBe(5);
      expect(steps.swapSteps(d, 10, slot, 5, 6), kind).toBe(5);
      expect([i32[(d + L.D_STATE) >>> 2], i32[slot >>> 2]], kind).toEqual([10, 6]);
      heap.free(d);
      i32[(first + L.WRITER_BYTES) >>> 2] = 0;
      expect(map.check(), kind).toEqual([]);
      map.destroy();
      expect(heap.check(), kind).toEqual([]);
    }
  });

  it("a map written through a heap attached by its buffer alone replaces without the lock too, the map whole", () => {
    const heap = SharedHeap.create({ shards: 2, shardBytes: 1 << 20 });
    heap.shard(0);
    const map = SharedMap.create(heap, { shard: 0, capacity: 64 });
    for (let k = 0; k < 40; k++) map.set(`k${k}`, `v${k}`);
    const byBuffer = SharedMap.attach(SharedHeap.attach(heap.buffer), map.handle); // Atomics' steps: no WebAssembly memory
    const steps = byBuffer as unknown as { swapSteps(...args: number[]): number };
    const swap = steps.swapSteps;
    let swaps = 0;
    steps.swapSteps = (...args: number[]): number => (swaps++, swap(...args));
    for (let round = 0; round < 3; round++) for (let k = 0; k < 40; k++) expect(byBuffer.set(`k${k}`, `w${round}:${k}`)).toBe(true);
    expect(swaps, "every set a swap: no lock taken").toBe(120);
    for (let k = 0; k < 40; k++) expect(map.getString(`k${k}`)).toBe(`w2:${k}`);
    byBuffer.close();
    expect(map.check()).toEqual([]);
    map.destroy();
    expect(heap.check()).toEqual([]);
  });
});
