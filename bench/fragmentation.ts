/**
 * "fragmentation": how much memory a shard needs for what a program keeps
 * live. Each trace (fragmentation-traces.ts) is replayed into
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
 * Targets: smallest shard / peak live <= 1.25 on every trace,
 * and within 1.15x of the reference's figure. Since stress counts objects
 * in flight to other shards against its live set (--live), its trace keeps
 * a live set between half and all of the bound with random victims, and
 * the reference needs 1.27 on it (1.12 before, when the live set dipped
 * and refilled with every slice's hand-over): no allocator of this kind
 * meets 1.25 there, so its second target is the one that judges. "size-classes, shifting" is
 * reported without targets: its live set moves wholesale from class to
 * class, which segregated size classes (Seastar's, ours) pay for by
 * design (SHIFTING_NOTE).
 * "stress, heap profiler" replays the stress trace with the profiler
 * sampling every 64 KiB (stress's default; seeded), so sampled objects'
 * memory counts too.
 *
 * "trickle": objects that never die among the ones that do; its
 * bound against the reference is 1.25x. It also reports what a long run
 * leaves of the free memory in one piece: replayed in stress's 64 MiB
 * shard (the records and the live set reach 75% of its pages), the
 * largest free span over the free memory (free page spans), sampled every
 * 10,000 events: the lowest sample, and the one where the most was live
 * (the target for stress --leak: >= 25% at the end); and the allocations that
 * failed there (the object is then left out, as stress does).
 */
import { OutOfMemoryError, PAGE_SIZE, SharedHeap } from "../src/index.js";
import { largeObjectTrace, recordStressTrace, sizeClassTrace, STRESS_SHARD_BYTES, trickleTrace, type Trace } from "./fragmentation-traces.js";
import { BestFitArena } from "./reference-allocator.js";
import type { BenchContext, BenchModule } from "./report.js";
import { collectGarbage } from "./timing.js";

const MAX_RATIO = 1.25;
const MAX_VS_REFERENCE = 1.15;
/** The trickle trace's bound against the reference. */
const TRICKLE_VS_REFERENCE = 1.25;
/** Events between two samples of the largest free span. */
const SPAN_SAMPLE_EVERY = 10_000;
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

/**
 * The trace replayed in a shard of `bytes`: the largest free span over the
 * free memory every SPAN_SAMPLE_EVERY events, the lowest sample and the
 * one taken with the most bytes live.
 */
export function freeSpanShare(trace: Trace, bytes: number): { lowest: number; atPeak: number; failed: number } {
  const heap = SharedHeap.create({ shards: 1, shardBytes: bytes });
  const a = heap.shard(0);
  const { events, sizes } = trace;
  const ptrs = new Uint32Array(trace.mallocs);
  let live = 0;
  let peak = -1;
  let lowest = 1;
  let atPeak = 1;
  let failed = 0;
  for (let k = 0; k < events.length; k++) {
    const e = events[k]!;
    if (e >= 0) {
      try {
        ptrs[e] = a.malloc(sizes[e]!);
        live += sizes[e]!;
      } catch (x) {
        if (!(x instanceof OutOfMemoryError)) throw x;
        failed++;
      }
    } else if (ptrs[~e] !== 0) {
      a.free(ptrs[~e]!);
      live -= sizes[~e]!;
    }
    if (k % SPAN_SAMPLE_EVERY === 0) {
      const free = a.stats().freeMemory;
      const share = free === 0 ? 0 : a.largestFreeSpan() / free;
      lowest = Math.min(lowest, share);
      if (live > peak) {
        peak = live;
        atPeak = share;
      }
    }
  }
  return { lowest, atPeak, failed };
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

/**
 * Why the shifting trace has no target: a span goes back to the page
 * allocator only when every object in it is free, so a class that was
 * popular keeps spans for its survivors after the program moves on. Summed
 * over classes, each class's own peak is 1.67x the trace's peak (1.09-1.15
 * on the other traces); a best-fit allocator, whose holes take any size,
 * does not pay this.
 */
const SHIFTING_NOTE = "live set moving between size classes: the sum of each class's own peak is 1.67x the peak, no target";

const MiB = 1024 * 1024;
const mib = (bytes: number): string => `${(bytes / MiB).toFixed(2)} MiB`;

interface Row {
  trace: Trace;
  label: string;
  heapprofRate: number;
  /** Whether the targets apply (the shifting trace is reported for what it shows, see below). */
  targets: boolean;
}

export const fragmentation: BenchModule = {
  name: "fragmentation",
  title: "smallest shard that replays a trace without a failed allocation / the trace's peak live bytes (Johnstone & Wilson)",
  async run(ctx: BenchContext) {
    ctx.progress("fragmentation: recording the traces");
    const stress = await recordStressTrace();
    const rows: Row[] = [
      { trace: stress, label: "stress", heapprofRate: 0, targets: true },
      { trace: stress, label: "stress, heap profiler", heapprofRate: STRESS_HEAPPROF, targets: true },
      { trace: sizeClassTrace(), label: "size-classes", heapprofRate: 0, targets: true },
      { trace: largeObjectTrace(), label: "large", heapprofRate: 0, targets: true },
      { trace: sizeClassTrace(true), label: "size-classes, shifting", heapprofRate: 0, targets: false },
      { trace: trickleTrace(), label: "trickle", heapprofRate: 0, targets: true },
    ];
    const arena = new BestFitArena();
    const reference = new Map<Trace, number>();
    for (const { trace, label, heapprofRate, targets } of rows) {
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
      // A ratio with its bound as target, or without one.
      const bound = (ratio: number, max: number): { ratio: number; target?: string; pass?: boolean } =>
        targets ? { ratio, target: `ratio <= ${max}`, pass: ratio <= max } : { ratio };
      // The trickle trace has its bound against the reference only; the reference itself needs 1.19x its peak.
      const peakBound = trace.name === "trickle" ? { ratio: ours } : bound(ours, MAX_RATIO);
      ctx.record({
        bench: "fragmentation",
        candidate: "shardheap",
        metric: label,
        value: ours,
        baseline: "peak live",
        ...peakBound,
        note: `smallest shard ${mib(s.bytes)} (${s.replays} replays)${targets ? "" : `; ${SHIFTING_NOTE}`}`,
      });
      const vsReference = trace.name === "trickle" ? TRICKLE_VS_REFERENCE : MAX_VS_REFERENCE;
      ctx.record({ bench: "fragmentation", candidate: "shardheap", metric: label, value: ours, baseline: "reference", ...bound(ours / ref, vsReference) });
      if (trace.name === "trickle") {
        const share = freeSpanShare(trace, STRESS_SHARD_BYTES);
        collectGarbage();
        ctx.record({
          bench: "fragmentation",
          candidate: "shardheap",
          metric: `${label}: largest free span / free memory`,
          value: share.atPeak,
          note:
            `in stress's ${mib(STRESS_SHARD_BYTES)} shard, sampled every ${SPAN_SAMPLE_EVERY.toLocaleString("en-US")} events: ` +
            `${(share.atPeak * 100).toFixed(1)}% with the most live, ${(share.lowest * 100).toFixed(1)}% at the lowest; ${share.failed} failed allocations`,
        });
      }
    }
  },
};
