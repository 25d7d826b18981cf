/**
 * The profiler's site capacity (heapprofSites, --heapprof-sites): N
 * distinct stacks within it are each their own site with exact figures and
 * nothing folded; past it, exactly the new stacks' allocations go to
 * "(other sites)", and the profile, the tree, pprof and /metrics say how
 * much. A 65,536-site shard works and its heap image keeps the capacity; a
 * version 3 image (before the option) still reads.
 *
 * Distinct stacks come from bench/fixtures/distinct-stacks.mjs (as the
 * profiler-sites bench's): stack n (0 <= n < 65,536) is eight levels of
 * recursion by n's base-4 digits, five frames in all, so the site table is
 * what fills. The heaps record LEVELS + 1 frames, so where the test calls
 * it from is not part of the stack.
 */
import { readFileSync } from "node:fs";
import { gunzipSync } from "node:zlib";
import { Profile } from "pprof-format";
import { describe, expect, it } from "vitest";
import { SharedHeap, decodeHeapImage, formatTree, readHeapImage, toPprof, type HeapProfile, type ShardAllocator } from "../../../src/index.js";
import { encodeHeapImage } from "../../../src/memory/heap-image/heap-image-writer.js";
import { H_PROF_SITES, H_VERSION, PRE_CAPACITY_HEAP_VERSION, defaultProfilerSites, maxProfilerSites, regionLayout } from "../../../src/memory/layout.js";
import { OTHER_SITES_NAME } from "../../../src/memory/profiler/site-table.js";
import { PATH_BASE_COMMENT } from "../../../src/report/pprof.js";
import { memoryMetricsRegistry } from "../../../src/runtime/metrics.js";
// @ts-expect-error a plain .mjs fixture, shared with the bench's shards
import * as distinct from "../../../bench/fixtures/distinct-stacks.mjs";
import { tempDir } from "../../helpers.js";

process.env.SHARDHEAP_LOG = "silent";

const LEVELS = distinct.LEVELS as number;
/** Distinct stacks allocateAtStack makes. */
const STACKS = distinct.STACKS as number;
/** malloc(size) from stack number `n` (0 to STACKS - 1). */
const allocateAtStack = distinct.allocateAtStack as (a: ShardAllocator, n: number, size: number) => number;

/** A stack none of allocateAtStack's is. */
function allocateElsewhere(a: ShardAllocator, size: number): number {
  return a.malloc(size);
}

/** An exactly profiled heap of one shard whose profiler keeps `sites` stacks of allocateAtStack's depth. */
function profiledHeap(shardBytes: number | string, sites: number): { heap: SharedHeap; a: ShardAllocator } {
  const heap = SharedHeap.create({ shards: 1, shardBytes, heapprofSites: sites });
  const a = heap.shard(0);
  a.setHeapProfilingDepth(LEVELS + 1);
  a.setHeapProfilingEnabled(true);
  return { heap, a };
}

const other = (p: HeapProfile) => p.sites.find((s) => s.frames[0]?.functionName === OTHER_SITES_NAME);

describe("the profiler's site capacity", () => {
  it("keeps the shard-derived default: one site per 32 KiB, 64 to 4096, frames and strings sized with it", () => {
    for (const [bytes, sites] of [[128 << 10, 64], [8 << 20, 256], [64 << 20, 2048], [128 << 20, 4096], [1 << 30, 4096]] as const) {
      const heap = SharedHeap.create({ shards: 1, shardBytes: bytes });
      expect(heap.profilerSites, `${bytes}`).toBe(sites);
      expect(defaultProfilerSites(bytes)).toBe(sites);
      expect(heap.profilerFill(0)).toEqual({ sites: 0, siteCapacity: sites, full: [], folded: { count: 0, size: 0, allocCount: 0, allocSize: 0 } });
      expect(regionLayout(0, bytes, sites).profiler).toEqual({ sites: sites + 1, frames: 4 * (sites + 1), stringBytes: 256 * (sites + 1) });
    }
    // At most a quarter of the shard: the layout leaves three quarters for objects.
    for (const bytes of [1 << 20, 64 << 20, 160 << 20]) {
      const l = regionLayout(0, bytes, maxProfilerSites(bytes));
      expect(l.dataPages * 4096, `${bytes}`).toBeGreaterThan(0.7 * bytes);
    }
  });

  it("N distinct stacks within the capacity: N sites, exact figures, nothing folded; K more: exactly their allocations folded, and said", () => {
    const N = 300;
    const K = 37;
    const { heap, a } = profiledHeap("4MiB", N);
    const sizeOf = (n: number): number => 16 * (1 + (n % 5));
    const countOf = (n: number): number => 1 + (n % 3);
    const kept: number[] = [];
    for (let n = 0; n < N; n++) for (let k = 0; k < countOf(n); k++) kept.push(allocateAtStack(a, n, sizeOf(n)));
    let p = heap.heapProfile(0);
    expect(p.folded).toBeUndefined();
    expect(other(p)).toBeUndefined();
    expect(p.sites).toHaveLength(N);
    const live = a.stats().liveObjects;
    expect(p.totalCount).toBe(live);
    expect(p.totalSize).toBe(kept.reduce((n, ptr) => n + a.objectSize(ptr), 0));
    // Every stack its own site, with its own exact figures.
    const bySize = new Map<string, number>();
    for (const s of p.sites) bySize.set(`${s.count}x${s.size / s.count}`, (bySize.get(`${s.count}x${s.size / s.count}`) ?? 0) + 1);
    for (let n = 0; n < N; n++) expect(bySize.get(`${countOf(n)}x${sizeOf(n)}`)).toBeGreaterThan(0);
    expect(formatTree(p)).not.toMatch(/Folded/);
    expect(heap.profilerFill(0)).toMatchObject({ sites: N, siteCapacity: N, full: [] });

    // K new stacks, two 48-byte objects each: all 2K allocations, and only they, are folded.
    const folded: number[] = [];
    for (let n = N; n < N + K; n++) folded.push(allocateAtStack(a, n, 48), allocateAtStack(a, n, 48));
    // A stack the table holds still goes to its own site after the table filled.
    kept.push(allocateAtStack(a, 7, sizeOf(7)));
    p = heap.heapProfile(0);
    expect(p.folded).toEqual({ count: 2 * K, size: 2 * K * 48, allocCount: 2 * K, allocSize: 2 * K * 48, siteCapacity: N, full: ["sites"] });
    expect(other(p)).toMatchObject({ count: 2 * K, size: 2 * K * 48, allocCount: 2 * K });
    expect(p.sites).toHaveLength(N + 1);
    expect(p.totalCount).toBe(a.stats().liveObjects);
    expect(heap.profilerFill(0)).toMatchObject({ sites: N, siteCapacity: N, full: ["sites"], folded: { allocCount: 2 * K } });
    const allocations = kept.length + folded.length;
    const tree = formatTree(p);
    expect(tree).toMatch(
      new RegExp(`\\n\\nFolded into \\(other sites\\): ${2 * K} of ${allocations} allocations \\(${((100 * 2 * K) / allocations).toFixed(1)}%\\), .* live .*: the site table was full at ${N} sites a shard\\. Raise that with --heapprof-sites N \\(heapprofSites in Smp\\.start or SharedHeap\\.create\\)\\.\\n$`),
    );
    const pprof = Profile.decode(gunzipSync(toPprof(p)));
    // The folded note first; then, as this test's frames sit under the working directory, where their short paths start.
    expect(pprof.comment.map((i) => pprof.stringTable.strings[Number(i)])).toEqual([tree.trim().split("\n").pop(), PATH_BASE_COMMENT + process.cwd()]);

    // Freeing the folded objects empties (other sites)' live figures; its history stays.
    for (const ptr of folded) a.free(ptr);
    p = heap.heapProfile(0);
    expect(p.folded).toMatchObject({ count: 0, size: 0, allocCount: 2 * K });
    expect(heap.check()).toEqual([]);
  });

  it("says which table filled: stacks of new frames fill a small frame table first, and fold as a full site table does", () => {
    // Two sites hold 12 frame records (4 a record, site 0's included); each stack here is 16 frames deep.
    const { heap, a } = profiledHeap("1MiB", 2);
    a.setHeapProfilingDepth(16);
    const fns = Array.from({ length: 12 }, (_, i) => new Function("a", `return function frameFiller${i}(n) { return a.malloc(n); }`)(a) as (n: number) => number);
    for (const f of fns) f(32);
    const p = heap.heapProfile(0);
    expect(p.folded!.full).toEqual(["frames"]);
    const recorded = p.sites.filter((s) => s !== other(p));
    expect(recorded.length).toBeLessThan(2);
    expect(p.folded!.allocCount).toBe(12 - recorded.length);
    expect(p.totalCount).toBe(12);
    expect(formatTree(p)).toMatch(/: the frame table was full at 2 sites a shard\. Raise that with --heapprof-sites N/);
  });

  it("counts folded allocations in /metrics under shardheap_profiler_", async () => {
    const { heap, a } = profiledHeap("1MiB", 4);
    const size = a.objectSize(allocateAtStack(a, 0, 100));
    for (let n = 1; n < 10; n++) allocateAtStack(a, n, 100);
    const text = await memoryMetricsRegistry(heap).metrics();
    expect(text).toMatch(/^shardheap_profiler_sites\{shard="0"\} 4$/m);
    expect(text).toMatch(/^shardheap_profiler_site_capacity\{shard="0"\} 4$/m);
    expect(text).toMatch(/^shardheap_profiler_folded_allocations_total\{shard="0"\} 6$/m);
    expect(text).toMatch(new RegExp(`^shardheap_profiler_folded_bytes_total\\{shard="0"\\} ${6 * size}$`, "m"));
    expect(text).toMatch(/^shardheap_profiler_folded_live_objects\{shard="0"\} 6$/m);
    expect(text).toMatch(new RegExp(`^shardheap_profiler_folded_live_bytes\\{shard="0"\\} ${6 * size}$`, "m"));
    expect(text).toMatch(/^# TYPE shardheap_profiler_folded_allocations_total counter$/m);
  });

  it("a shard of 65,536 sites records 65,536 stacks exactly, folds the next, and its heap image keeps the capacity", async () => {
    const { heap, a } = profiledHeap("153MiB", STACKS);
    expect(heap.profilerSites).toBe(65_536);
    for (let n = 0; n < STACKS; n++) allocateAtStack(a, n, 24);
    let p = heap.heapProfile(0);
    expect(p.sites).toHaveLength(STACKS);
    expect(p.folded).toBeUndefined();
    expect(p.sites.every((s) => s.count === 1 && s.size === 24)).toBe(true);
    allocateElsewhere(a, 24);
    p = heap.heapProfile(0);
    expect(p.sites).toHaveLength(STACKS + 1);
    expect(p.folded).toMatchObject({ allocCount: 1, count: 1, size: 24, siteCapacity: STACKS, full: ["sites"] });
    expect(heap.check()).toEqual([]);

    const path = `${tempDir("shardheap-capacity-")}/heap.img`;
    await heap.saveImage(path);
    const read = await readHeapImage(path);
    expect(read.profilerSites).toBe(STACKS);
    const again = read.heapProfile(0);
    expect(again.sites).toHaveLength(STACKS + 1);
    expect(again.folded).toEqual(p.folded);
    expect([again.totalCount, again.totalSize]).toEqual([p.totalCount, p.totalSize]);
  });

  it("a heap image round trip keeps a small capacity and what it folded", () => {
    const { heap, a } = profiledHeap("2MiB", 5);
    for (let n = 0; n < 9; n++) allocateAtStack(a, n, 64);
    const read = decodeHeapImage(encodeHeapImage(heap));
    expect(read.profilerSites).toBe(5);
    expect(read.heapProfile()).toEqual(heap.heapProfile());
    expect(read.heapProfile().folded).toMatchObject({ allocCount: 4, siteCapacity: 5 });
  });

  it("reads a version 3 heap (before the option) as one whose tables the shard size chose", () => {
    // A version 3 region of 128 KiB had 64 site records, site 0 included: 63
    // stacks in today's terms. Version 4 kept that layout, with the capacity
    // in the header: a real version 4 image of 63 sites, relabelled, is one.
    const v4 = decodeHeapImage(gunzipSync(readFileSync(new URL("../../fixtures/heap-v4.img.gz", import.meta.url))));
    expect(v4.profilerSites).toBe(defaultProfilerSites(128 * 1024) - 1);
    const before = v4.heapProfile();
    const h = new Int32Array(v4.buffer, 0, 8);
    h[H_VERSION] = PRE_CAPACITY_HEAP_VERSION;
    h[H_PROF_SITES] = 0; // unused in version 3
    const v3 = SharedHeap.attach(v4.buffer);
    expect(v3.profilerSites).toBe(63);
    expect(v3.heapProfile()).toEqual(before);
    expect(decodeHeapImage(encodeHeapImage(v3)).heapProfile()).toEqual(before);
  });
});
