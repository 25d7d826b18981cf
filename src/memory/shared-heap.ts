/**
 * SharedHeap: creates or attaches the SharedArrayBuffer, validates its
 * header, and hands out one ShardAllocator per shard. One side initializes
 * (create), every other thread attaches to the same buffer (attach); the
 * buffer is the only state they share.
 */
import { HeapFormatError, InvalidPointerError, InvalidValueError, OutOfMemoryError } from "../errors.js";
import { parseInteger, rejectUnknownKeys } from "../parse.js";
import { formatSize, parseSize, plural } from "../units.js";
import { checkLiveRegions, type LiveCheckOptions } from "./live-check.js";
import { allocateHeapMemory, isWasmMemory, type WasmMemory } from "./atomics.js";
import { claimLive, flushOutbox, pushInbox, recoverLostFrees } from "./cross-shard.js";
import { formatDiagnostics } from "./diagnostics.js";
import { adoptShard, takeShard } from "./ownership.js";
import {
  HEAP_HEADER_BYTES,
  HEAP_MAGIC0,
  HEAP_MAGIC1,
  HEAP_VERSION,
  H_HEADER_BYTES,
  H_MAGIC0,
  H_MAGIC1,
  H_PAGE_SIZE,
  H_SHARDS,
  H_SHARD_PAGES,
  H_PROF_SITES,
  H_FLAGS,
  HEAP_FLAG_DEBUG_POINTERS,
  HEAP_FLAGS_KNOWN,
  H_VERSION,
  MAX_HEAP_BYTES,
  MAX_SHARDS,
  PAGE_SIZE,
  PRE_CAPACITY_HEAP_VERSION,
  PRE_PEAK_HEAP_VERSION,
  PROFILER_BYTES_PER_SITE,
  S_DATA_OFFSET,
  S_DATA_PAGES,
  S_ID,
  S_META_OFFSET,
  S_CLASS_MAP_OFFSET,
  S_BITMAP_OFFSET,
  dataPagesFor,
  defaultProfilerSites,
  maxProfilerSites,
  profilerBytes,
  profilerCapacity,
  regionLayout,
} from "./layout.js";
import { initPageSpans, largestFreeSpanPages } from "./page-spans.js";
import { liveObjectRegion, objectSizeIn, ownerShardOf, type HeapGeometry } from "./pointers.js";
import { HeapViews, ShardRegion } from "./region.js";
import { ShardAllocator } from "./shard-allocator.js";
import { classFallbackSpanPages } from "./size-classes.js";
import { initPools } from "./small-pool.js";
import type { HeapProfile, PeakProfile, ProfilerFill, SiteTimeline } from "./heap-profile.js";
import { imageHooks, profilerHooks, type ProfilerHooks } from "./hooks.js";
import { readStats, sumStats, type MemoryStats } from "./memory-stats.js";
import { STORED_HEADER_BYTES, storedLengthIn } from "./stored-values.js";

const utf8 = new TextEncoder();

/** The smallest region: metadata plus room for the largest pool's fallback span (a 128 KiB shard has 19 object pages). */
export const MIN_SHARD_BYTES = 128 * 1024;
export { MAX_SHARDS };

export interface SharedHeapOptions {
  /** Number of shards (regions), 1 to 1024. */
  shards: number;
  /**
   * Bytes per shard region, metadata included, or a size like "64MiB"
   * (units.ts parseSize); rounded up to whole pages. At least 128 KiB.
   */
  shardBytes: number | string;
  /**
   * Distinct allocation stacks each shard's heap profiler keeps exactly
   * (further ones fold into "(other sites)"; its frame and string tables
   * grow with it, 608 bytes a stack). Default: one per 32 KiB of shard,
   * 64 to 4096. At most what a quarter of the shard holds (54,844 in
   * 128 MiB; 65,536 need 153 MiB shards).
   */
  heapprofSites?: number;
  /**
   * Debug pointers (quarantine.ts): freed objects are poisoned and held
   * back from reuse for a while, so a pointer used after its free throws
   * InvalidPointerError instead of reaching whatever took the memory next.
   * Off by default (it costs every free its slow path and holds up to a
   * quarter of each shard); SHARDHEAP_DEBUG_POINTERS=1 in the environment
   * turns it on where this option is left out.
   */
  debugPointers?: boolean;
}

/** Whether `debugPointers` is on: the option, else SHARDHEAP_DEBUG_POINTERS (1/true/yes/on), else off. */
export function debugPointersOption(value: unknown, field: string): boolean {
  if (value === undefined) return /^(1|true|yes|on)$/i.test(process.env.SHARDHEAP_DEBUG_POINTERS ?? "");
  if (typeof value !== "boolean") throw new InvalidValueError(field, `${field} must be true or false, got ${typeof value === "string" ? JSON.stringify(value) : String(value)}`);
  return value;
}

/**
 * `sites` as the profiler's capacity for shards of `shardBytes` (rounded
 * up to whole pages, as create() makes them), the default when
 * undefined: a whole number from 1 to maxProfilerSites, else
 * an InvalidValueError naming `what`, and `memoryWhat` (the shard size's
 * own name: "--memory", "options.memoryPerShard") when the shard is too
 * small for it, with the size that would do.
 */
export function profilerSitesFor(sites: number | string | undefined, bytes: number, what: string, memoryWhat: string): number {
  const shardBytes = Math.ceil(bytes / PAGE_SIZE) * PAGE_SIZE;
  if (sites === undefined) return defaultProfilerSites(shardBytes);
  const n = parseInteger(sites, what, 1, maxProfilerSites(MAX_HEAP_BYTES - HEAP_HEADER_BYTES));
  const max = maxProfilerSites(shardBytes);
  if (n > max) {
    // The smallest shard whose quarter holds n stacks' tables (and its timeline), in whole MiB.
    let needed = Math.ceil((4 * profilerBytes(profilerCapacity(n))) / 2 ** 20) * 2 ** 20;
    while (maxProfilerSites(needed) < n) needed += 2 ** 20;
    throw new InvalidValueError(
      what,
      `${what} ${n} does not fit shards of ${formatSize(shardBytes)}: the profiler's tables (${PROFILER_BYTES_PER_SITE} bytes a site) may take a quarter of a shard, ` +
        `${max} sites in this one; ${n} need ${memoryWhat} of ${formatSize(needed)} or more`,
    );
  }
  return n;
}

export class SharedHeap implements HeapGeometry {
  readonly buffer: SharedArrayBuffer;
  /**
   * The shared WebAssembly.Memory whose buffer this heap is, when it is one
   * (SharedHeap.create makes one where the runtime can): pass it, rather
   * than `buffer`, to another thread's SharedHeap.attach, and that thread's
   * frees use WebAssembly atomics, ~2.5x cheaper than Atomics (atomics.ts).
   */
  readonly memory: WasmMemory | undefined;
  readonly shards: number;
  /** Bytes per shard region (a multiple of PAGE_SIZE). */
  readonly shardBytes: number;
  /** Distinct stacks each shard's profiler keeps exactly before it folds new ones into "(other sites)". */
  readonly profilerSites: number;
  /** @internal The heap's format (H_VERSION): HEAP_VERSION for a heap made here; an image may be older. */
  readonly version: number;
  /** @internal Read-only views of each region. */
  readonly regions: readonly ShardRegion[];
  private readonly views: HeapViews;
  /** The profiler's hooks (hooks.ts): its readings, and the recorder each allocator gets. */
  private readonly profiler: ProfilerHooks;
  private readonly allocators: (ShardAllocator | undefined)[];
  /** A shard this thread owns, which sends this thread's frees of other shards' objects. */
  private sender: ShardAllocator | undefined;

  private constructor(buffer: SharedArrayBuffer, memory: WasmMemory | undefined, shards: number, shardBytes: number, profilerSites: number) {
    this.buffer = buffer;
    this.memory = memory;
    this.shards = shards;
    this.shardBytes = shardBytes;
    this.profilerSites = profilerSites;
    this.profiler = profilerHooks();
    imageHooks(); // plugged in too, or no heap: saveImage must not be the first to find out
    this.views = new HeapViews(buffer, memory);
    this.version = this.views.i32[H_VERSION]!;
    this.regions = Array.from({ length: shards }, (_, id) => new ShardRegion(this.views, id, shardBytes, profilerSites));
    this.allocators = new Array<ShardAllocator | undefined>(shards).fill(undefined);
  }

  /**
   * Make a new heap: a fresh buffer, every shard's pages free. Bad options
   * are InvalidValueError naming the field (a heap past 4 GiB included, as
   * Smp.start says it); options that are not an object, a TypeError; a
   * heap the process cannot get the memory for, OutOfMemoryError.
   */
  static create(o: SharedHeapOptions): SharedHeap {
    if (o === null || typeof o !== "object") throw new TypeError("SharedHeap.create: options must be an object");
    rejectUnknownKeys(o, ["shards", "shardBytes", "heapprofSites", "debugPointers"], "SharedHeap.create: options");
    const shardsField = "SharedHeap.create: options.shards";
    const bytesField = "SharedHeap.create: options.shardBytes";
    const shards = parseInteger(o.shards, shardsField, 1, MAX_SHARDS);
    const shardBytes = parseSize(o.shardBytes, bytesField, { min: MIN_SHARD_BYTES });
    const regionBytes = Math.ceil(shardBytes / PAGE_SIZE) * PAGE_SIZE;
    const profilerSites = profilerSitesFor(o.heapprofSites, regionBytes, "SharedHeap.create: options.heapprofSites", "options.shardBytes");
    const debugPointers = debugPointersOption(o.debugPointers, "SharedHeap.create: options.debugPointers");
    const total = HEAP_HEADER_BYTES + shards * regionBytes;
    if (total > MAX_HEAP_BYTES) {
      throw new InvalidValueError(
        bytesField,
        `${bytesField}: ${plural(shards, "shard")} of ${regionBytes} bytes need ${total} bytes; a heap holds at most ${MAX_HEAP_BYTES} (4 GiB)`,
      );
    }
    let heapMemory: ReturnType<typeof allocateHeapMemory>;
    try {
      heapMemory = allocateHeapMemory(total);
    } catch (e) {
      // new SharedArrayBuffer's RangeError "Array buffer allocation failed": the process's memory, not a value, is short.
      if (!(e instanceof RangeError)) throw e;
      throw new OutOfMemoryError(`SharedHeap.create: could not get ${total} bytes for the heap (${plural(shards, "shard")} of ${regionBytes} bytes): ${e.message}`, total, "");
    }
    const { buffer, memory } = heapMemory;
    const h = new Int32Array(buffer, 0, HEAP_HEADER_BYTES / 4);
    h[H_MAGIC0] = HEAP_MAGIC0;
    h[H_MAGIC1] = HEAP_MAGIC1;
    h[H_VERSION] = HEAP_VERSION;
    h[H_SHARDS] = shards;
    h[H_SHARD_PAGES] = regionBytes / PAGE_SIZE;
    h[H_PAGE_SIZE] = PAGE_SIZE;
    h[H_HEADER_BYTES] = HEAP_HEADER_BYTES;
    h[H_PROF_SITES] = profilerSites;
    h[H_FLAGS] = debugPointers ? HEAP_FLAG_DEBUG_POINTERS : 0;
    const heap = new SharedHeap(buffer, memory, shards, regionBytes, profilerSites);
    for (const r of heap.regions) initRegion(r, regionBytes, profilerSites, heap.profiler);
    heap.profiler.initHeap(heap.views.i32, heap.views.f64);
    return heap;
  }

  /**
   * Attach to a heap another thread created, given its buffer or (better:
   * its frees are cheaper) its WebAssembly.Memory (`heap.memory`).
   * HeapFormatError if it is not a heap.
   */
  static attach(source: SharedArrayBuffer | WasmMemory): SharedHeap {
    const memory = isWasmMemory(source) ? source : undefined;
    const buffer: unknown = memory ? memory.buffer : source;
    if (!(buffer instanceof SharedArrayBuffer)) {
      throw new HeapFormatError("SharedHeap.attach: expected a SharedArrayBuffer (or shared WebAssembly.Memory) holding a shardheap heap");
    }
    if ((buffer as { growable?: boolean }).growable === true) {
      // Regions sit at fixed offsets computed from the header: a buffer that
      // can grow was not made by SharedHeap.create and would not stay a heap.
      throw new HeapFormatError("SharedHeap.attach: the buffer is growable; a shardheap heap is a fixed-length SharedArrayBuffer");
    }
    const { shards, shardBytes, profilerSites } = readHeader(buffer);
    return new SharedHeap(buffer, memory, shards, shardBytes, profilerSites);
  }

  /** Made with debug pointers (SharedHeap.create's option): every thread of the heap follows it, as each region reads it from the header. */
  get debugPointers(): boolean {
    return this.regions[0]!.debugPointers;
  }

  /** Bytes of the heap: its header and regions (its buffer may be longer, rounded up to whole WebAssembly pages). */
  get byteLength(): number {
    return HEAP_HEADER_BYTES + this.shards * this.shardBytes;
  }

  /**
   * The allocator of shard `id`. The first thread to ask for a shard takes
   * it (ownership.ts); on every other thread the allocator reads (stats,
   * diagnostics, heapProfile, objectSize) and throws HeapOwnershipError on
   * anything that would change the shard. Asking again after the owner gave
   * the shard up takes it.
   */
  shard(id: number): ShardAllocator {
    this.checkShardId(id, "shard");
    const cached = this.allocators[id];
    if (cached?.owned) return cached;
    if (takeShard(this.regions[id]!)) return this.ownAllocator(id);
    if (cached) return cached;
    const view = new ShardAllocator(this.views, id, this, false);
    this.allocators[id] = view;
    return view;
  }

  /**
   * @internal Make this thread shard `id`'s owner, whoever owned it: for a
   * runtime that knows the previous owner stopped or died (Smp's shard
   * threads, Smp.stop). Pushes the batches the previous owner left in the
   * shard's outbox, so a thread that died holding remote frees loses none.
   */
  adoptShard(id: number): ShardAllocator {
    this.checkShardId(id, "adoptShard");
    adoptShard(this.regions[id]!);
    flushOutbox(this.regions[id]!, this.regions);
    return this.ownAllocator(id);
  }

  /**
   * @internal Hand every claimed object that no chain holds to its owner's
   * inbox: frees cut short by a thread terminated between its claim and its
   * chain. Only while no thread uses the heap (Smp.stop calls it once its
   * threads are gone). Returns how many it recovered.
   */
  recoverLostFrees(): number {
    return recoverLostFrees(this.regions);
  }

  private ownAllocator(id: number): ShardAllocator {
    let a = this.allocators[id];
    if (!a?.owned) {
      a = new ShardAllocator(this.views, id, this, true);
      this.allocators[id] = a;
    }
    this.sender ??= a;
    return a;
  }

  /**
   * Free `ptr` from any thread: locally when this thread owns its shard;
   * otherwise as a cross-shard free (through a shard this thread owns, so
   * it is batched and counted there, or pushed straight onto the owner's
   * inbox). free(0) does nothing; anything that is not a live object, or
   * an object another free claimed first: InvalidPointerError.
   */
  free(ptr: number): void {
    if (ptr === 0) return;
    const owner = liveObjectRegion(this, ptr, "free");
    const local = this.allocators[owner.id];
    if (local?.owned) return local.free(ptr);
    if (this.sender) return this.sender.free(ptr);
    if (!claimLive(owner, ptr)) {
      liveObjectRegion(this, ptr, "free"); // throws why, as it is now
      throw new InvalidPointerError(`free(${ptr}): already freed by another thread`, ptr);
    }
    pushInbox(owner, ptr);
  }

  /** The shard owning byte offset `ptr`; RangeError outside every region. */
  ownerOf(ptr: number): number {
    const shard = ownerShardOf(this, ptr);
    if (shard < 0) throw new RangeError(`ownerOf(${ptr}): not inside any shard's region`);
    return shard;
  }

  /**
   * A raw view of `length` bytes at `ptr` (no copy), checked only against
   * the heap's bounds: it may run past an object into its neighbours, over
   * freed memory or metadata. For an object's own bytes, objectBytes checks
   * the pointer and the length. RangeError outside the heap.
   */
  bytes(ptr: number, length: number): Uint8Array {
    if (!Number.isSafeInteger(ptr) || !Number.isSafeInteger(length) || ptr < HEAP_HEADER_BYTES || length < 0 || ptr + length > this.byteLength) {
      throw new RangeError(`bytes(${ptr}, ${length}): outside the heap's object space`);
    }
    return new Uint8Array(this.buffer, ptr, length);
  }

  /**
   * A view of the live object at `ptr` (no copy), from any thread: its
   * first `length` bytes, all of its usable size by default.
   * InvalidPointerError unless `ptr` is a live object; RangeError for a
   * length past its end. The view is the object's while it lives; after it
   * is freed the same bytes are somebody else's.
   */
  objectBytes(ptr: number, length?: number): Uint8Array {
    const size = objectSizeIn(liveObjectRegion(this, ptr, "objectBytes"), ptr);
    if (length === undefined) return new Uint8Array(this.buffer, ptr, size);
    if (!Number.isSafeInteger(length) || length < 0 || length > size) {
      throw new RangeError(`objectBytes(${ptr}, ${String(length)}): the object holds ${size} bytes`);
    }
    return new Uint8Array(this.buffer, ptr, length);
  }

  /**
   * Write `text` as UTF-8 at the start of the live object at `ptr`; returns
   * the bytes written (Buffer.byteLength(text)). RangeError, with nothing
   * written, when it does not fit the object.
   */
  writeString(ptr: number, text: string): number {
    if (typeof text !== "string") throw new TypeError(`writeString(${ptr}): text must be a string, got ${typeof text}`);
    const bytes = this.objectBytes(ptr);
    const needed = Buffer.byteLength(text, "utf8");
    if (needed > bytes.length) throw new RangeError(`writeString(${ptr}): ${needed} bytes of UTF-8 do not fit a ${bytes.length}-byte object`);
    return utf8.encodeInto(text, bytes).written;
  }

  /** The UTF-8 text in the first `length` bytes of the live object at `ptr` (checked as objectBytes). */
  readString(ptr: number, length: number): string {
    this.objectBytes(ptr, length); // the checks
    return this.views.buf.toString("utf8", ptr, ptr + length);
  }

  /**
   * The length in bytes of the stored value at `ptr` (written by
   * mallocString or mallocBytes), from any thread. InvalidPointerError
   * unless `ptr` is a live object holding a stored value.
   */
  storedLength(ptr: number): number {
    return storedLengthIn(this, this.views.u32, ptr, "storedLength");
  }

  /** The string stored at `ptr` by mallocString (checked as storedLength). */
  storedString(ptr: number): string {
    const length = storedLengthIn(this, this.views.u32, ptr, "storedString");
    const start = ptr + STORED_HEADER_BYTES;
    return this.views.buf.toString("utf8", start, start + length);
  }

  /** A copy of the bytes stored at `ptr` by mallocBytes (or mallocString: its UTF-8), checked as storedLength. */
  storedBytes(ptr: number): Uint8Array {
    const length = storedLengthIn(this, this.views.u32, ptr, "storedBytes");
    const start = ptr + STORED_HEADER_BYTES;
    return this.views.u8.slice(start, start + length);
  }

  /**
   * A view (no copy) of the bytes stored at `ptr`, checked as
   * storedLength. Like objectBytes' view, it is the value's only while the
   * object lives: after free(ptr) the same bytes are somebody else's.
   */
  storedView(ptr: number): Uint8Array {
    const length = storedLengthIn(this, this.views.u32, ptr, "storedView");
    return new Uint8Array(this.buffer, ptr + STORED_HEADER_BYTES, length);
  }

  /** One shard's statistics, or every shard's summed when `shard` is omitted. */
  stats(shard?: number): MemoryStats {
    if (shard === undefined) return sumStats(this.regions.map(readStats));
    this.checkShardId(shard, "stats");
    return readStats(this.regions[shard]!);
  }

  /** Bytes in shard `shard`'s longest free page span (its free memory's largest piece); from any thread. */
  largestFreeSpan(shard: number): number {
    this.checkShardId(shard, "largestFreeSpan");
    return largestFreeSpanPages(this.regions[shard]!) * PAGE_SIZE;
  }

  /** One shard's diagnostics report (Seastar's shape), or every shard's one after another; from any thread. */
  diagnostics(shard?: number): string {
    if (shard !== undefined) this.checkShardId(shard, "diagnostics");
    const regions = shard === undefined ? this.regions : [this.regions[shard]!];
    return regions.map((r) => formatDiagnostics(r)).join("\n");
  }

  /**
   * How full shard `shard`'s profiler tables are and what it folded into
   * "(other sites)"; from any thread, a few loads (no sites read).
   */
  profilerFill(shard: number): ProfilerFill {
    this.checkShardId(shard, "profilerFill");
    return this.profiler.fill(this.regions[shard]!);
  }

  /** One shard's heap profile, or every shard's merged; read from the buffer, no shard involved. */
  heapProfile(shard?: number): HeapProfile {
    if (shard !== undefined) this.checkShardId(shard, "heapProfile");
    return this.profiler.heapProfile(this.regions, shard);
  }

  /**
   * The sites live at shard `shard`'s profiled peak (the moment its
   * profiled live bytes were highest since profiling began or its last
   * resetPeak), or, with no shard, at the heap-wide peak: the moment the
   * shards' sum was highest (profiler/peaks.ts says within what). Read from the
   * buffer, no shard involved. HeapFormatError for a heap image written
   * before shardheap kept peaks.
   */
  peakProfile(shard?: number): PeakProfile {
    if (shard !== undefined) this.checkShardId(shard, "peakProfile");
    return this.profiler.peakProfile(this.regions, shard);
  }

  /**
   * The largest sites' live bytes over time, per tick of shard `shard`'s
   * timeline or of every shard's summed (profiler/timeline.ts: the ticks are an
   * Smp's, once a second by default; a heap used without Smp has none).
   * From the buffer: any thread, or an image.
   */
  timeline(shard?: number): SiteTimeline {
    if (shard !== undefined) this.checkShardId(shard, "timeline");
    return this.profiler.timeline(this.regions, shard);
  }

  /**
   * The timeline's tick at or just before `t` (ms since the epoch) as a
   * HeapProfile (profiler/timeline-profile.ts: its largest sites and the rest as
   * one), with the tick's time; undefined when no tick is that old.
   */
  timelineProfile(t: number, shard?: number): (HeapProfile & { t: number }) | undefined {
    if (shard !== undefined) this.checkShardId(shard, "timelineProfile");
    return this.profiler.timelineProfile(this.regions, shard, t);
  }

  /** @internal The heap-wide peak starts again from now (from any thread; Smp.resetPeak("all")). */
  resetHeapPeak(): void {
    this.profiler.resetHeapPeak(this.views.i32, this.views.f64);
  }

  /**
   * Save what reports need of this heap (headers, metadata, profiler tables;
   * not the objects) to `path`, for `shardheap report` to read offline.
   */
  async saveImage(path: string): Promise<void> {
    await imageHooks().save(this, path);
  }

  /**
   * Invariant violations in every shard's metadata; [] when healthy. From
   * any thread, while shards run: a shard is judged only from passes during
   * which it stood still (live-check.ts), found violations are confirmed by
   * a second such pass, and a shard that keeps changing for `timeoutMs`
   * (default 1000) is named as not checked. Blocks the calling thread
   * meanwhile (it pauses with Atomics.wait); on a quiet heap one pass.
   */
  check(o?: LiveCheckOptions): string[] {
    const errors: string[] = [];
    const hdr = checkHeader(this.buffer);
    if (hdr) return [hdr];
    if (o !== undefined && (o === null || typeof o !== "object")) throw new TypeError("check: options must be an object");
    if (o !== undefined) rejectUnknownKeys(o, ["timeoutMs"], "check: options");
    const timeoutMs = o?.timeoutMs === undefined ? undefined : parseInteger(o.timeoutMs, "check: options.timeoutMs", 0, 600_000);
    errors.push(...checkLiveRegions(this.regions, timeoutMs === undefined ? {} : { timeoutMs }));
    return errors;
  }

  private checkShardId(id: number, op: string): void {
    if (!Number.isInteger(id) || id < 0 || id >= this.shards) {
      throw new RangeError(`${op}(${String(id)}): shard must be an integer from 0 to ${this.shards - 1}`);
    }
  }
}

function initRegion(r: ShardRegion, shardBytes: number, profilerSites: number, profiler: ProfilerHooks): void {
  const layout = regionLayout(r.id, shardBytes, profilerSites);
  const i32 = r.i32;
  i32[r.hdr + S_ID] = r.id;
  i32[r.hdr + S_DATA_PAGES] = layout.dataPages;
  i32[r.hdr + S_META_OFFSET] = layout.metaOffset;
  i32[r.hdr + S_CLASS_MAP_OFFSET] = layout.classMapOffset;
  i32[r.hdr + S_BITMAP_OFFSET] = layout.bitmapOffset;
  i32[r.hdr + S_DATA_OFFSET] = layout.dataOffset;
  initPools(r);
  initPageSpans(r);
  profiler.initRegion(r, layout);
}

/** A heap's geometry as its header gives it. */
export interface HeapHeader {
  shards: number;
  shardBytes: number;
  profilerSites: number;
  /** Its format (H_VERSION): 3 to HEAP_VERSION are read. */
  version: number;
}

/** Validate a heap header; returns the geometry or throws HeapFormatError. */
export function readHeader(buffer: ArrayBufferLike): HeapHeader {
  const problem = checkHeader(buffer);
  if (problem) throw new HeapFormatError(problem);
  return headerFields(new Int32Array(buffer, 0, H_FLAGS + 1));
}

/**
 * The geometry in header words `h` (not yet checked). A version 3 heap
 * predates the option: its tables were sized by the shard alone, one
 * record fewer than the default's today (PRE_CAPACITY_HEAP_VERSION).
 */
export function headerFields(h: ArrayLike<number>): HeapHeader {
  const shardBytes = h[H_SHARD_PAGES]! * PAGE_SIZE;
  const profilerSites = h[H_VERSION] === PRE_CAPACITY_HEAP_VERSION ? defaultProfilerSites(shardBytes) - 1 : h[H_PROF_SITES]!;
  return { shards: h[H_SHARDS]!, shardBytes, profilerSites, version: h[H_VERSION]! };
}

/** What is wrong with header words `h` that claim a heap, or undefined (the buffer's length is checked by the caller). */
export function headerProblem(h: ArrayLike<number>): string | undefined {
  if (h[H_MAGIC0] !== HEAP_MAGIC0 || h[H_MAGIC1] !== HEAP_MAGIC1) return "not a shardheap heap: wrong magic number";
  if (h[H_VERSION] !== HEAP_VERSION && h[H_VERSION] !== PRE_PEAK_HEAP_VERSION && h[H_VERSION] !== PRE_CAPACITY_HEAP_VERSION) {
    return `shardheap heap format version ${h[H_VERSION]} is not supported (this is version ${HEAP_VERSION}; ${PRE_CAPACITY_HEAP_VERSION} and ${PRE_PEAK_HEAP_VERSION} are read too)`;
  }
  if (h[H_PAGE_SIZE] !== PAGE_SIZE || h[H_HEADER_BYTES] !== HEAP_HEADER_BYTES) return "not a shardheap heap: page or header size differs";
  // Words a reader was not given (an older image's shorter header) read as 0, as in heaps made before them.
  const flags = h[H_FLAGS] ?? 0;
  if ((flags & ~HEAP_FLAGS_KNOWN) !== 0) return `corrupt shardheap header: unknown mode flags ${flags}`;
  const { shards, shardBytes, profilerSites, version } = headerFields(h);
  if (shards < 1 || shards > MAX_SHARDS || shardBytes < MIN_SHARD_BYTES) return `corrupt shardheap header: ${plural(shards, "shard")} of ${shardBytes} bytes`;
  if (HEAP_HEADER_BYTES + shards * shardBytes > MAX_HEAP_BYTES) return `corrupt shardheap header: ${plural(shards, "shard")} of ${shardBytes} bytes is more than 4 GiB`;
  if (profilerSites < 1 || profilerSites > maxProfilerSites(shardBytes, version)) {
    return `corrupt shardheap header: a profiler of ${profilerSites} sites (shards of ${shardBytes} bytes hold 1 to ${maxProfilerSites(shardBytes, version)})`;
  }
  // A pool takes its smaller fallback span when its preferred one does not
  // fit, so the floor is the largest fallback span (8 pages), not the
  // largest preferred span (32 pages, more than a 128 KiB shard holds).
  if (dataPagesFor(shardBytes, profilerSites, version) < Math.max(...classFallbackSpanPages)) return `corrupt shardheap header: a shard of ${shardBytes} bytes is too small`;
  return undefined;
}

function checkHeader(buffer: ArrayBufferLike): string | undefined {
  if (buffer.byteLength < HEAP_HEADER_BYTES) return `not a shardheap heap: ${buffer.byteLength} bytes is smaller than its header`;
  const h = new Int32Array(buffer, 0, H_FLAGS + 1);
  const problem = headerProblem(h);
  if (problem) return problem;
  const { shards, shardBytes } = headerFields(h);
  const expected = HEAP_HEADER_BYTES + shards * shardBytes;
  // A WebAssembly memory's buffer is whole 64 KiB pages: up to one page of padding.
  if (buffer.byteLength < expected || buffer.byteLength >= expected + 65536) {
    return `shardheap heap size mismatch: header says ${plural(shards, "shard")} of ${shardBytes} bytes (${expected} bytes), buffer has ${buffer.byteLength}`;
  }
  return undefined;
}
