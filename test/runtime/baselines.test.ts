/**
 * Named baselines (runtime/baselines.ts), on a heap of this thread: set,
 * list, growth since a name for one shard or all, delete by name and
 * shard, the errors that say what to do (no such baseline 409, nothing to
 * delete 404, a bad name 400), and the bounds: MAX_BASELINES names and
 * MAX_BASELINE_BYTES of estimated profile memory, past which a POST is
 * refused and nothing held changes. The same through the REST API is in
 * test/runtime/admin-leak.test.ts.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { HttpError, InvalidValueError } from "../../src/errors.js";
import type { HeapProfile } from "../../src/index.js";
import { Baselines, DEFAULT_BASELINE, MAX_BASELINES, MAX_BASELINE_BYTES, baselineName, estimatedProfileBytes, type ProfileSource } from "../../src/runtime/baselines.js";
import { newHeap, profileOf, siteOf } from "../helpers.js";

beforeAll(() => {
  process.env.SHARDHEAP_LOG = "silent";
});

const RECORD = 1000; // 1024-byte class
const RECORD_BYTES = 1024;

function keepRecords(heap: ReturnType<typeof newHeap>, shard: number, count: number): number[] {
  const a = heap.shard(shard);
  return Array.from({ length: count }, () => a.malloc(RECORD));
}

/** A profiled heap of two shards, both owned by this thread. */
function profiledHeap(): ReturnType<typeof newHeap> {
  const heap = newHeap({ shards: 2, shardBytes: "4MiB" });
  for (const s of [0, 1]) heap.shard(s).setHeapProfilingEnabled(true);
  return heap;
}

const codeOf = (f: () => unknown): string | undefined => {
  try {
    f();
  } catch (e) {
    return (e as { code?: string }).code;
  }
  return undefined;
};

describe("named baselines", () => {
  it("keeps several names; the growth since each; list in the order first taken; taking a name again replaces it", () => {
    const heap = profiledHeap();
    const baselines = new Baselines(heap);
    expect(baselines.set(DEFAULT_BASELINE, "all").map((b) => [b.name, b.shard])).toEqual([["default", 0], ["default", 1]]);
    keepRecords(heap, 1, 10);
    baselines.set("warm", 1);
    const warmBytes = estimatedProfileBytes(heap.heapProfile(1));
    keepRecords(heap, 1, 5);
    keepRecords(heap, 0, 3);
    expect(baselines.growth("default", 1).totalSize).toBe(15 * RECORD_BYTES);
    expect(baselines.growth("warm", 1).totalSize).toBe(5 * RECORD_BYTES);
    expect(baselines.growth("default", undefined).totalSize).toBe(18 * RECORD_BYTES);
    const list = baselines.list();
    expect(list.map((b) => `${b.name}/${b.shard}`)).toEqual(["default/0", "default/1", "warm/1"]);
    expect(list[2]).toMatchObject({ totalSize: 10 * RECORD_BYTES, sites: 1, takenAt: expect.any(Number) });
    expect(list[2]!.bytes).toBe(warmBytes);
    // Taken again: the growth counts from now, the order of names stays.
    baselines.set("default", 1);
    expect(baselines.growth("default", 1).totalSize).toBe(0);
    expect(baselines.list().map((b) => `${b.name}/${b.shard}`)).toEqual(["default/0", "default/1", "warm/1"]);
  });

  it("says what is missing: a 409 naming the shard and the POST that sets it; a 404 for nothing to delete", () => {
    const heap = profiledHeap();
    const baselines = new Baselines(heap);
    baselines.set("warm", 1);
    expect(() => baselines.growth("default", 0)).toThrow(new HttpError("ERR_SHARDHEAP_NO_BASELINE", "no baseline for shard 0: POST /v1/heapprof/baseline?shard=0 first"));
    expect(() => baselines.growth("warm", undefined)).toThrow('no baseline "warm" for shard 0: POST /v1/heapprof/baseline?shard=all&name=warm first');
    expect(() => baselines.growth("cold", undefined)).toThrow('no baseline "cold" for shards 0, 1');
    expect(codeOf(() => baselines.delete("cold"))).toBe("ERR_SHARDHEAP_NOT_FOUND");
    expect(() => baselines.delete("cold")).toThrow('no baseline "cold": the names are warm');
    expect(() => baselines.delete("warm", 0)).toThrow('no baseline "warm" for shard 0');
  });

  it("deletes one shard's or every shard's; a name with no shard left is gone", () => {
    const heap = profiledHeap();
    const baselines = new Baselines(heap);
    baselines.set("a", "all");
    baselines.set("b", "all");
    expect(baselines.delete("a", 0).map((b) => `${b.name}/${b.shard}`)).toEqual(["a/0"]);
    expect(baselines.list().map((b) => `${b.name}/${b.shard}`)).toEqual(["a/1", "b/0", "b/1"]);
    expect(baselines.delete("b").map((b) => b.shard)).toEqual([0, 1]);
    expect(baselines.delete("a").map((b) => b.shard)).toEqual([1]);
    expect(baselines.list()).toEqual([]);
    expect(() => baselines.delete("a")).toThrow('no baseline "a": none is set');
  });

  it("names: letters, digits, '.', '_', '-', 1 to 64, from a letter or digit; empty or absent is the default", () => {
    for (const good of ["a", "before-load", "v1.2_3", "0", "x".repeat(64)]) expect(baselineName(good)).toBe(good);
    expect(baselineName(null)).toBe(DEFAULT_BASELINE);
    expect(baselineName("")).toBe(DEFAULT_BASELINE);
    for (const bad of ["-a", ".", "a b", "a/b", "x".repeat(65), "naïve", "a\u0000"]) {
      expect(() => baselineName(bad), bad).toThrow(InvalidValueError);
      expect(codeOf(() => baselineName(bad))).toBe("ERR_SHARDHEAP_INVALID_VALUE");
    }
    expect(() => baselineName("a b", "baseline")).toThrow(/^baseline must be 1 to 64 letters/);
  });

  it(`holds at most ${MAX_BASELINES} names: one more is refused naming them, an existing name may still be taken again`, () => {
    const heap = profiledHeap();
    const baselines = new Baselines(heap);
    for (let i = 0; i < MAX_BASELINES; i++) baselines.set(`b${i}`, 0);
    const held = baselines.list();
    expect(codeOf(() => baselines.set("one-more", 0))).toBe("ERR_SHARDHEAP_BASELINES_FULL");
    expect(() => baselines.set("one-more", 0)).toThrow(/at most 16 baselines \(b0, b1, .*b15\): DELETE \/v1\/heapprof\/baseline\?name=NAME one first/);
    expect(baselines.list()).toEqual(held);
    expect(baselines.set("b3", "all").map((b) => b.shard)).toEqual([0, 1]);
    baselines.delete("b0");
    expect(baselines.set("one-more", 0)).toHaveLength(1);
  });

  it(`holds at most ${MAX_BASELINE_BYTES / 2 ** 20} MiB of profiles (estimated): past it a POST is refused and nothing changes; deleting makes room`, () => {
    // A source whose every profile is estimated at 25 MiB (one frame with a long name, shared: the test holds it once).
    const long = "f".repeat(25 * 2 ** 20);
    const big: HeapProfile = profileOf([{ ...siteOf(["x"], 100), frames: [{ functionName: long, url: "", line: 1, column: 1 }] }]);
    const source: ProfileSource = { shards: 2, heapProfile: () => big };
    expect(estimatedProfileBytes(big)).toBeGreaterThan(25 * 2 ** 20);
    const baselines = new Baselines(source);
    baselines.set("one", 0);
    baselines.set("two", 0);
    const held = baselines.list();
    expect(codeOf(() => baselines.set("three", 0))).toBe("ERR_SHARDHEAP_BASELINES_FULL");
    expect(() => baselines.set("three", 0)).toThrow(/^baseline "three" would take about 25M, past the 64M the server holds for baselines \(50M in 2 now\)/);
    // "all" takes two shards' worth: refused as a whole, no shard of it kept.
    expect(codeOf(() => baselines.set("one", "all"))).toBe("ERR_SHARDHEAP_BASELINES_FULL");
    expect(baselines.list()).toEqual(held);
    // Replacing a name counts what it gives back.
    expect(baselines.set("two", 0)).toHaveLength(1);
    baselines.delete("one");
    expect(baselines.set("three", 0)).toHaveLength(1);
  });

  it("estimates a profile's memory from its sites and distinct frames", () => {
    const empty = estimatedProfileBytes(profileOf([]));
    const one = estimatedProfileBytes(profileOf([siteOf(["a", "b"], 1)]));
    const shared = siteOf(["a", "b"], 1);
    const twoSharing = estimatedProfileBytes(profileOf([shared, { ...shared, size: 2 }]));
    expect(one).toBeGreaterThan(empty);
    // A second site over the same Frame objects costs its object and references, not the frames again.
    expect(twoSharing - one).toBeLessThan(one - empty);
  });
});
