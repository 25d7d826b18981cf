/**
 * The timeline (timeline.ts, timeline-profile.ts): each tick keeps the
 * shard's allocated and profiled live bytes and its largest sites, in a
 * bounded ring in the buffer that an image carries; ticks summed across
 * shards; one tick as a profile.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { decodeHeapImage, type ShardAllocator } from "../../../src/index.js";
import { encodeHeapImage } from "../../../src/memory/heap-image/heap-image-writer.js";
import { TIMELINE_SITES } from "../../../src/memory/layout.js";
import { SMALLER_SITES_NAME } from "../../../src/memory/profiler/timeline-profile.js";
import { TimelineWriter, readTimeline } from "../../../src/memory/profiler/timeline.js";
import { newHeap } from "../../helpers.js";

beforeAll(() => {
  process.env.SHARDHEAP_LOG = "silent";
});

function growSlowly(a: ShardAllocator, n: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push(a.malloc(512));
  return out;
}
function growFast(a: ShardAllocator, n: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push(a.malloc(4096));
  return out;
}

describe("a shard's timeline", () => {
  it("keeps each tick's used and profiled live bytes and its largest sites, oldest first", () => {
    const heap = newHeap({ shards: 1, shardBytes: "4MiB" });
    const a = heap.shard(0);
    a.setHeapProfilingEnabled(true);
    const writer = new TimelineWriter();
    const r = heap.regions[0]!;
    expect(readTimeline(r)).toEqual([]);
    writer.record(r, 1000);
    growSlowly(a, 10);
    writer.record(r, 2000);
    const fast = growFast(a, 10);
    writer.record(r, 3000);
    for (const p of fast) a.free(p);
    writer.record(r, 4000);
    const entries = readTimeline(r);
    expect(entries.map((e) => e.t)).toEqual([1000, 2000, 3000, 4000]);
    expect(entries.map((e) => e.live)).toEqual([0, 5120, 5120 + 40960, 5120]);
    expect(entries[2]!.sites.map((s) => [s.size, s.count])).toEqual([[40960, 10], [5120, 10]]);
    expect(entries[3]!.used).toBe(a.stats().allocatedMemory);

    const timeline = heap.timeline(0);
    expect(timeline.sites.map((s) => s.frames[0]!.functionName)).toEqual(["growSlowly", "growFast"]);
    expect(timeline.samples[2]).toEqual({ t: 3000, used: entries[2]!.used, live: 46080, sites: [[1, 40960, 10], [0, 5120, 10]] });
    // An image carries it.
    expect(decodeHeapImage(encodeHeapImage(heap)).timeline(0)).toEqual(timeline);
  });

  it("is a bounded ring: the oldest ticks go", () => {
    const heap = newHeap({ shards: 1, shardBytes: "1MiB" });
    const r = heap.regions[0]!;
    const writer = new TimelineWriter();
    for (let t = 1; t <= r.timelineEntries + 5; t++) writer.record(r, t);
    const ts = readTimeline(r).map((e) => e.t);
    expect(ts).toHaveLength(r.timelineEntries);
    expect(ts[0]).toBe(6);
    expect(ts.at(-1)).toBe(r.timelineEntries + 5);
  });

  it("keeps the largest sites only, and a tick as a profile puts the rest in one site", () => {
    const heap = newHeap({ shards: 2, shardBytes: "4MiB" });
    const writer = new TimelineWriter();
    for (const a of [heap.shard(0), heap.shard(1)]) {
      a.setHeapProfilingEnabled(true);
      // TIMELINE_SITES + 4 sites of distinct sizes: a function of its own name for each.
      for (let k = 1; k <= TIMELINE_SITES + 4; k++) (new Function(`return function site${k}(a) { return a.malloc(${k * 64}); }`)() as (x: ShardAllocator) => number)(a);
    }
    for (const r of heap.regions) writer.record(r, 5000);
    const entry = readTimeline(heap.regions[0]!)[0]!;
    expect(entry.sites).toHaveLength(TIMELINE_SITES);
    expect(entry.sites[0]!.size).toBe((TIMELINE_SITES + 4) * 64);
    const profile = heap.timelineProfile(5000)!;
    expect(profile.t).toBe(5000);
    expect(profile.totalSize).toBe(heap.heapProfile().totalSize);
    const rest = profile.sites.find((s) => s.frames[0]!.functionName === SMALLER_SITES_NAME)!;
    expect(rest.size).toBe(2 * (1 + 2 + 3 + 4) * 64);
    expect(heap.timelineProfile(4999)).toBeUndefined();
    expect(heap.timeline().samples).toHaveLength(1);
    expect(heap.timeline().samples[0]!.live).toBe(heap.heapProfile().totalSize);
  });
});
