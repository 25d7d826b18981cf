/**
 * Memory pressure on the shard's side (pressure.ts): thresholds kept as page
 * counts, each upward crossing counted once and rung on the heap's doorbell,
 * counted again only after usage fell below. (The Smp's event and stderr
 * line: smp-pressure.test.ts.)
 */
import { describe, expect, it } from "vitest";
import { decodeHeapImage } from "../../src/index.js";
import { encodeHeapImage } from "../../src/memory/heap-image/heap-image-writer.js";
import { H_PRESSURE_BELL, PAGE_SIZE } from "../../src/memory/layout.js";
import { readPressure, setPressureThresholds } from "../../src/memory/pressure.js";
import { newHeap } from "../helpers.js";

describe("memory pressure thresholds", () => {
  it("counts one crossing per threshold reached going up, again only after usage fell below it", () => {
    const heap = newHeap({ shards: 2, shardBytes: "1MiB" });
    const a = heap.shard(1);
    const r = heap.regions[1]!;
    setPressureThresholds(r, [0.5, 0.75]);
    const bell = (): number => Atomics.load(new Int32Array(heap.buffer), H_PRESSURE_BELL);
    const total = a.stats().totalMemory;
    // Page spans (past the 16 KiB of small pools, whose spans are cached): 5 pages each.
    const page = (): number => a.malloc(4 * PAGE_SIZE + 1);
    const used = (): number => a.stats().allocatedMemory / total;
    const held: number[] = [];
    while (used() < 0.5 - 1e-9) {
      expect(readPressure(r).crossings).toEqual([0, 0]);
      held.push(page());
    }
    expect(readPressure(r)).toEqual({ thresholds: [0.5, 0.75], crossings: [1, 0], level: 1 });
    const rung = bell();
    expect(rung).toBeGreaterThan(0);
    while (used() < 0.75 - 1e-9) held.push(page());
    expect(readPressure(r)).toMatchObject({ crossings: [1, 1], level: 2 });
    expect(bell()).toBe(rung + 1);
    // Down under 0.75 and up again: 0.75 counts again, 0.5 does not (never left).
    a.free(held.pop()!);
    expect(readPressure(r).level).toBe(1);
    held.push(page());
    expect(readPressure(r)).toMatchObject({ crossings: [1, 2], level: 2 });
    // Above a threshold and going higher: no new crossing.
    held.push(page());
    expect(readPressure(r).crossings).toEqual([1, 2]);
    for (const p of held) a.free(p);
    expect(readPressure(r).level).toBe(0);
    expect(heap.regions[0]!.headerSlot(0)).toBe(0); // the other shard's state is its own
    expect(readPressure(heap.regions[0]!)).toEqual({ thresholds: [], crossings: [], level: 0 });
  });

  it("a threshold usage already passed when set counts as reached, not crossed; an image keeps the counts", () => {
    const heap = newHeap({ shards: 1, shardBytes: "1MiB" });
    const a = heap.shard(0);
    const big = a.malloc(600 * 1024);
    setPressureThresholds(heap.regions[0]!, [0.25, 0.9]);
    expect(readPressure(heap.regions[0]!)).toEqual({ thresholds: [0.25, 0.9], crossings: [0, 0], level: 1 });
    const more = a.malloc(250 * 1024);
    expect(readPressure(heap.regions[0]!)).toEqual({ thresholds: [0.25, 0.9], crossings: [0, 1], level: 2 });
    expect(readPressure(decodeHeapImage(encodeHeapImage(heap)).regions[0]!)).toEqual(readPressure(heap.regions[0]!));
    a.free(big);
    a.free(more);
  });
});
