/**
 * "fragmentation": how much memory a shard needs for what a program keeps
 * live (issue 12). Each trace (fragmentation-traces.ts) is replayed into
 * one-shard heaps of decreasing size; the smallest shard that completes it
 * without an OutOfMemoryError, divided by the trace's peak live bytes, is
 * Johnstone and Wilson's measure ("The Memory Fragmentation Problem:
 * Solved?", ISMM 1998): 1.0 would be a perfect allocator with no metadata.
 * The shard size is SharedHeap's shardBytes, so the shard's own metadata
 * (page records, live/pending bitmap, the profiler's tables: ~5.4% of a
 * shard) and the size classes' rounding are part of the figure, as they
 * are part of what a user must provision.
 *
 * The reference allocator (reference-allocator.ts: address-ordered best
 * fit, an 8-byte boundary tag per object, nothing else) replays the same
 * traces in the same way, its arena in place of the shard.
 *
 * The search: from a size that fits, shrink by 4% while the trace still
 * completes, then by 0.5% from the last size that did; the answer is the
 * last size that completed before the first that failed (an allocator need
 * not be monotonic in arena size; the first failure ends the search).
 * Sizes are whole pages. Every completed shardheap replay ends with
 * heap.check() == [] and no live objects.
 *
 * Targets (issue 12): smallest shard / peak live <= 1.25 on every trace,
 * and within 1.15x of the reference's figure.
 * "stress, heap profiler" replays the stress trace with the profiler
 * sampling every 64 KiB (stress's default; seeded), so sampled objects'
 * memory counts too.
 */
import { OutOfMemoryError, PAGE_SIZE, SharedHeap } from "../src/index.js";
import { largeObjectTrace, recordStressTrace, sizeClassTrace, type Trace } from "./fragmentation-traces.js";
import { BestFitArena } from "./reference-allocator.js";
import type { BenchContext, BenchModule } from "./report.js";
import { collectGarbage } from "./timing.js";

const MAX_RATIO = 1.25;
const MAX_VS_REFERENCE = 1.15;
const COARSE_STEP = 0.96;
const FINE_STEP = 0.995;
/** The stress command's default sample rate (src/cli.ts). */
const STRESS_HEAPPROF = 64 * 1024;
const PROFILER_SEED = 0x5eed_f4a9;

/** One replay: true when the trace completed in `bytes`. */
type Fits = (trace: Trace, bytes: number) => boolean;

export function shardheapFits(heapprofRate: number): Fits {
  return (trace, bytes) => {
    const heap = SharedHeap.create({ shards: 1, shardBytes: bytes });
    const a = heap.shard(0);
    if (heapprofRate > 0) {
      a.setHeapProfilingSampleRate(heapprofRate);
      a.seedHeapProfiler(PROFILER_SEED);
    }
    const { events, sizes } = trace;
    const ptrs = new Uint32Array(trace.mallocs);
    try {
      for (let k = 0; k < events.length; k++) {
        const e = events[k]!;
        if (e >= 0) ptrs[e] = a.malloc(sizes[e]!);
        else a.free(ptrs[~e]!);
      }
    } catch (e) {
      if (e instanceof OutOfMemoryError) return false;
      throw e;
    }
    const problems = heap.check();
    if (problems.length > 0) throw new Error(`fragmentation: ${trace.name} in ${bytes} bytes: heap check failed: ${problems.slice(0, 5).join("; ")}`);
    if (a.stats().liveObjects !== 0) throw new Error(`fragmentation: ${trace.name}: ${a.stats().liveObjects} objects live after the trace`);
    return true;
  };
}

export function referenceFits(arena: BestFitArena): Fits {
  return (trace, bytes) => {
    arena.reset(bytes);
    const { events, sizes } = trace;
    const blocks = new Int32Array(trace.mallocs);
    for (let k = 0; k < events.length; k++) {
      const e = events[k]!;
      if (e >= 0) {
        const b = arena.malloc(sizes[e]!);
        if (b < 0) return false;
        blocks[e] = b;
      } else {
        arena.free(blocks[~e]!);
      }
    }
    return true;
  };
}

const wholePages = (bytes: number): number => Math.ceil(bytes / PAGE_SIZE) * PAGE_SIZE;

/** The smallest size (whole pages) the trace completes in, searching downwards (see the top of this file). */
export function smallestFit(trace: Trace, fits: Fits, floor: number): { bytes: number; replays: number } {
  let replays = 0;
  const tryIt = (bytes: number): boolean => {
    replays++;
    return fits(trace, bytes);
  };
  let size = wholePages(trace.peakLiveBytes * 1.5);
  while (!tryIt(size)) size = wholePages(size * 1.25);
  for (const step of [COARSE_STEP, FINE_STEP]) {
    for (;;) {
      const next = Math.max(floor, wholePages(size * step));
      if (next >= size || !tryIt(next)) break;
      size = next;
    }
  }
  return { bytes: size, replays };
}

const MiB = 1024 * 1024;
const mib = (bytes: number): string => `${(bytes / MiB).toFixed(2)} MiB`;

interface Row {
  trace: Trace;
  label: string;
  heapprofRate: number;
}

export const fragmentation: BenchModule = {
  name: "fragmentation",
  title: "smallest shard that replays a trace without a failed allocation / the trace's peak live bytes (Johnstone & Wilson)",
  run(ctx: BenchContext) {
    ctx.progress("fragmentation: recording the traces");
    const stress = recordStressTrace();
    const rows: Row[] = [
      { trace: stress, label: "stress", heapprofRate: 0 },
      { trace: stress, label: "stress, heap profiler", heapprofRate: STRESS_HEAPPROF },
      { trace: sizeClassTrace(), label: "size-classes", heapprofRate: 0 },
      { trace: largeObjectTrace(), label: "large", heapprofRate: 0 },
    ];
    const biggest = Math.max(...rows.map((r) => r.trace.peakLiveBytes));
    const arena = new BestFitArena(biggest * 4);
    const reference = new Map<Trace, number>();
    for (const { trace, label, heapprofRate } of rows) {
      const peak = trace.peakLiveBytes;
      const about = `${trace.events.length.toLocaleString("en-US")} events, ${trace.mallocs.toLocaleString("en-US")} mallocs, peak live ${mib(peak)}`;
      let ref = reference.get(trace);
      if (ref === undefined) {
        ctx.progress(`fragmentation ${label}: reference allocator (${about})`);
        const r = smallestFit(trace, referenceFits(arena), PAGE_SIZE);
        ref = r.bytes / peak;
        reference.set(trace, ref);
        ctx.record({
          bench: "fragmentation",
          candidate: "reference",
          metric: trace.name,
          value: ref,
          note: `address-ordered best fit: ${mib(r.bytes)} for ${trace.description}; ${about} (${r.replays} replays)`,
        });
      }
      ctx.progress(`fragmentation ${label}: shardheap`);
      const s = smallestFit(trace, shardheapFits(heapprofRate), 128 * 1024);
      collectGarbage();
      const ours = s.bytes / peak;
      ctx.record({
        bench: "fragmentation",
        candidate: "shardheap",
        metric: label,
        value: ours,
        baseline: "peak live",
        ratio: ours,
        target: `ratio <= ${MAX_RATIO}`,
        pass: ours <= MAX_RATIO,
        note: `smallest shard ${mib(s.bytes)} (${s.replays} replays)`,
      });
      ctx.record({
        bench: "fragmentation",
        candidate: "shardheap",
        metric: label,
        value: ours,
        baseline: "reference",
        ratio: ours / ref,
        target: `ratio <= ${MAX_VS_REFERENCE}`,
        pass: ours / ref <= MAX_VS_REFERENCE,
      });
    }
  },
};
