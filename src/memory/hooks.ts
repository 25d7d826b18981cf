/**
 * The allocator's hooks: what the allocator and the heap's public methods
 * ask of the heap profiler and of heap images, as interfaces this folder
 * owns. The profiler (profiler/plug-in.ts) and the image writer
 * (heap-image/plug-in.ts) fill them in when they load, so no file of the
 * allocator imports its sub-folders (docs/ARCHITECTURE.md) and the profiler
 * changes without the allocator.
 *
 * Who loads them: every module outside this folder that makes a heap: the
 * package root (src/index.ts), Smp (smp/smp.ts), a shard's worker
 * (smp/shard-worker.ts) and the image reader (heap-image/heap-image.ts).
 * A heap made before then would have no profiler to record into, so
 * SharedHeap refuses to make one (the getters below throw, naming the
 * missing plug-in) rather than run without: a missing import fails the
 * first test that makes a heap, not a profile read months later.
 *
 * Cost: the allocator reaches the recorder only on its slow paths (a
 * sampled allocation, the free or resize of a sampled object); the fast
 * paths read the allocator's own countdown field, as before. One class
 * implements SampleRecorder (profiler/allocation-profiler.ts), so those
 * calls stay monomorphic.
 */
import type { HeapProfile, PeakProfile, ProfilerFill, SiteTimeline } from "./heap-profile.js";
import type { RegionLayout } from "./layout.js";
import type { ShardRegion } from "./region.js";

/** A public allocation method: where a profiled stack capture starts (frames above it are shardheap's). */
export type ApiEntry = (...args: never[]) => number;

/**
 * One allocator's recorder: the sampling countdown's draws, a sampled
 * object's books (by the opaque tag the allocator keeps with the object:
 * in its sampled pool's tag word, or its page record for a page span),
 * and the shard's profiling controls.
 */
export interface SampleRecorder {
  /** Bytes until the next sample: Infinity while profiling is off, 0 when every allocation is sampled. */
  nextInterval(): number;
  /** Record a sampled allocation of `size` usable bytes made through `entry`; returns its tag (never 0). */
  recordSample(size: number, entry: ApiEntry): number;
  /** Undo recordSample for an object of `size` bytes carrying `tag` (0: never recorded). */
  unrecordSample(tag: number, size: number): void;
  /** A sampled page span carrying `tag` shrank in place from `oldSize` to `newSize` bytes. */
  recordResize(tag: number, oldSize: number, newSize: number): void;
  /** The shard's rate in bytes: 0 off, 1 every allocation, N one sample per N bytes on average. */
  rate(): number;
  /** Set the rate (validated); returns the previous one. */
  setRate(bytes: number): number;
  /** Frames recorded per allocation site (validated). */
  setDepth(depth: number): void;
  /** Restart the sampler's generator (reproducible samples in tests). */
  seed(seed: number): void;
  /** The shard's peak starts again from now. */
  resetPeak(): void;
}

/** The profiler as the allocator and SharedHeap reach it: recording, the buffer's profiler areas, and every reading. */
export interface ProfilerHooks {
  /** The recorder of the allocator over region `r` (one per ShardAllocator). */
  recorder(r: ShardRegion): SampleRecorder;
  /** A new heap's profiler areas: a region's tables and peak records, laid out as `layout` says. */
  initRegion(r: ShardRegion, layout: RegionLayout): void;
  /** A new heap's heap-wide peak, in the heap header. */
  initHeap(i32: Int32Array, f64: Float64Array): void;
  /** The heap-wide peak starts again from now. */
  resetHeapPeak(i32: Int32Array, f64: Float64Array): void;
  /** One shard's live profile, or every shard's merged when `shard` is undefined. */
  heapProfile(regions: readonly ShardRegion[], shard?: number): HeapProfile;
  /** One shard's peak, or the heap-wide one when `shard` is undefined. */
  peakProfile(regions: readonly ShardRegion[], shard?: number): PeakProfile;
  /** One shard's timeline, or every shard's summed per tick. */
  timeline(regions: readonly ShardRegion[], shard?: number): SiteTimeline;
  /** The timeline's tick at or just before `t` as a profile, or undefined when no tick is that old. */
  timelineProfile(regions: readonly ShardRegion[], shard: number | undefined, t: number): (HeapProfile & { t: number }) | undefined;
  /** How full a region's tables are. */
  fill(r: ShardRegion): ProfilerFill;
  /** What is wrong with a quiet region's profiler books, for heap.check(); undefined when nothing is. */
  booksProblem(r: ShardRegion): string | undefined;
}

/** What an image writer needs of a heap (a SharedHeap is one). */
export interface ImageSource {
  readonly buffer: SharedArrayBuffer;
  readonly shards: number;
  /** Bytes per shard region. */
  readonly shardBytes: number;
  /** Stacks each shard's profiler keeps (the size of its tables, in the image). */
  readonly profilerSites: number;
  /** The heap's format (H_VERSION): its regions' layout follows it. */
  readonly version: number;
}

/** Heap images as SharedHeap.saveImage reaches them. */
export interface ImageHooks {
  /** Write `heap`'s image to `path`, whole or not at all. */
  save(heap: ImageSource, path: string): Promise<void>;
}

let profiler: ProfilerHooks | undefined;
let image: ImageHooks | undefined;

/** The profiler plugs in (profiler/plug-in.ts, once, as it loads). */
export function plugProfiler(hooks: ProfilerHooks): void {
  profiler = hooks;
}

/** The image writer plugs in (heap-image/plug-in.ts, once, as it loads). */
export function plugHeapImage(hooks: ImageHooks): void {
  image = hooks;
}

/** The profiler's hooks; an Error naming the plug-in when it has not loaded. */
export function profilerHooks(): ProfilerHooks {
  return profiler ?? notPlugged("the heap profiler", "memory/profiler/plug-in.js");
}

/** The image writer's hooks; an Error naming the plug-in when it has not loaded. */
export function imageHooks(): ImageHooks {
  return image ?? notPlugged("the heap image writer", "memory/heap-image/plug-in.js");
}

function notPlugged(what: string, module: string): never {
  throw new Error(`shardheap: ${what} is not plugged in: import ${module} before making a heap (the package root, Smp and the image reader do)`);
}
