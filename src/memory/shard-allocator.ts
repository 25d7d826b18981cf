/**
 * ShardAllocator: one shard's malloc / free (Seastar's cpu_pages front end).
 *
 * Only the thread that owns a shard calls its allocator; frees of other
 * shards' objects go to their owners' inboxes (cross-shard.ts). The fast
 * paths read top to bottom in malloc() and free(): they touch the pool
 * record (one cache line, counters included), the page's class byte, one
 * live/pending word pair, and the object's first word (free only stores to
 * it), and allocate nothing. Measured (bench/): ~10 ns a malloc/free pair,
 * ~15 ns a churn step at 1k live objects, ~70 ns at 100k (where cache
 * misses dominate). Every miss goes to a separately named slow path:
 *
 *   malloc -> mallocSmallSlow (drain inbox, refill pool, reclaim)  small
 *          -> mallocLarge     (page span, reclaim)                  > 16 KiB
 *   free   -> freeSlow        (validation errors, sized free, free(0),
 *                              large objects, other shards' objects)
 *
 * Fast-path contract (what lets it skip checks): a pointer inside this
 * region, 8-aligned, whose live bit is set and pending bit clear, is the
 * start of a live object of this shard, and the class map of its page tells
 * whether it is a small object (and of which class) or a page span.
 */
import { OutOfMemoryError } from "../errors.js";
import { logInfo } from "../log.js";
import { heapProfileOf, type HeapProfile } from "./heap-profile.js";
import { Sampler, sampleWeight } from "./sampler.js";
import { SiteTable, epochRate, setEpochRate } from "./site-table.js";
import { captureRawCallSites } from "./stack-capture.js";
import { formatSize } from "../units.js";
import { allocatePageSpan, freePageRange } from "./page-spans.js";
import { claimPendingFree, pushInbox, pushInboxChain, takeInbox } from "./cross-shard.js";
import * as layout from "./layout.js";

import { checkAlignment, checkSize, liveObjectRegion, ownerShardOf, type HeapGeometry } from "./pointers.js";
import { HeapViews, ShardRegion } from "./region.js";
import * as sizeClasses from "./size-classes.js";
import { refillPool, trimPool } from "./small-pool.js";
import { readStats, type MemoryStats } from "./stats.js";
import { formatDiagnostics } from "./diagnostics.js";

// V8 reads an imported binding through a module cell, with a hole check, on
// every use; a module-local const folds to a constant in optimized code.
// Measured on the 64-byte malloc/free pair: 14.5 ns with imported bindings,
// 10.6 ns with these local ones. Keep hot-path constants and tables local.
const {
  C_BYTES_ALLOCATED,
  C_CROSS_SHARD_FREES,
  C_CROSS_SHARD_RECEIVED,
  C_FAILED_ALLOCATIONS,
  C_FREES,
  C_LARGE_ALLOCATIONS,
  C_MALLOCS,
  C_RECLAIMS,
  HEAP_HEADER_BYTES,
  PAGE_INNER,
  PAGE_LARGE,
  PAGE_SHIFT,
  PAGE_SIZE,
  PM_HEAD,
  PM_SITE,
  PM_SPAN_PAGES,
  PM_STATE,
  POOL_STRIDE,
  P_FREE_COUNT,
  P_FREE_HEAD,
  P_FREES_HI,
  P_FREES_LO,
  P_MALLOCS_HI,
  P_MALLOCS_LO,
  P_MAX_FREE,
  PROF_MAX_DEPTH,
  RATE_EPOCHS,
  S_NONEMPTY_ORDERS,
  S_PROF_DEPTH,
  S_PROF_EPOCH,
  S_PROF_RATE,
  TAG_SITE_MASK
} = layout;
const {
  CLASS_COUNT,
  POOL_COUNT,
  SAMPLED_POOL_BASE,
  MAX_SMALL_SIZE,
  classAlignment,
  classTrimTarget,
  classOf,
  classSize,
  objectsPerSpan,
  SITE_TAG_BYTES
} = sizeClasses;

export class ShardAllocator extends ShardRegion {
  private readonly geometry: HeapGeometry;
  private readonly cMallocs: number;
  private readonly cFrees: number;
  private readonly cBytes: number;
  /**
   * Remote-free batching (off unless batchCrossShardFrees(true)): objects
   * freed for shard s wait here, claimed and linked through their first
   * words, and go to s's inbox as one chain, with one compareExchange, when
   * CROSS_SHARD_BATCH of them are waiting or at the latest in a microtask
   * after the first one (so a free is never held past the current turn of
   * the event loop). This thread's own state, not shared: only it reads these.
   */
  private batching = false;
  /**
   * Bytes until the next heap-profiler sample; Infinity while profiling is
   * off, so the fast path's one subtraction never reaches zero. Measured
   * alternatives: an integer countdown re-armed every 2^30 bytes (11.8 ns a
   * malloc/free pair) and a Float64 slot in the buffer (10.7 ns) were both
   * slower than this field (10.0 ns; 9.5 ns without any sampling check).
   */
  private sampleCountdown = Infinity;
  private readonly sampler: Sampler;
  /** The public method that called malloc on the user's behalf (allocateAligned, realloc), if any. */
  private outerEntry: ApiEntry | undefined = undefined;
  /** The site table, made on first use (it rebuilds its caches from the buffer). */
  private siteTable: SiteTable | undefined;
  private readonly batchHead: Float64Array;
  private readonly batchTail: Float64Array;
  private readonly batchCount: Int32Array;
  private flushQueued = false;
  private readonly flushSoon = (): void => {
    this.flushQueued = false;
    this.flushCrossShardFrees();
  };

  /** @internal Made by SharedHeap.shard(); one per shard and heap object. */
  constructor(views: HeapViews, id: number, geometry: HeapGeometry) {
    super(views, id, geometry.shardBytes);
    this.geometry = geometry;
    const shards = geometry.regions.length;
    this.batchHead = new Float64Array(shards);
    this.batchTail = new Float64Array(shards);
    this.batchCount = new Int32Array(shards);
    this.sampler = new Sampler(Date.now() ^ (id * 0x9e3779b1));
    // A thread taking over a shard (attach, restart) carries on its rate.
    this.sampler.rate = this.headerSlot(S_PROF_RATE);
    this.cMallocs = this.counters + C_MALLOCS;
    this.cFrees = this.counters + C_FREES;
    this.cBytes = this.counters + C_BYTES_ALLOCATED;
    this.sampleCountdown = this.sampler.nextInterval();
  }

  /**
   * Allocate `size` bytes (8-aligned; malloc(0) gives a unique 8-byte
   * object). Throws OutOfMemoryError when the shard is exhausted even after
   * draining its inbox and returning cached spans; TypeError / RangeError
   * for a size that is not a non-negative safe integer.
   */
  malloc(size: number): number {
    if ((size >>> 0) === size && size <= MAX_SMALL_SIZE) {
      const cls = classOf[(size + 7) >>> 3]!;
      if ((this.sampleCountdown -= classSize[cls]!) <= 0) return this.mallocSampled(cls);
      const pool = this.pools + cls * POOL_STRIDE;
      // One view for the whole fast path (links are stored through Int32 and
      // read back with >>> 0): a second typed-array view cost ~0.8 ns a pair.
      const i32 = this.i32;
      const obj = i32[pool + P_FREE_HEAD]! >>> 0;
      if (obj !== 0) {
        i32[pool + P_FREE_HEAD] = i32[obj >>> 2]!;
        i32[pool + P_FREE_COUNT]--;
        if (++i32[pool + P_MALLOCS_LO]! === 0) i32[pool + P_MALLOCS_HI]++;
        const rel = obj - this.dataStart;
        i32[this.bitmap + ((rel >>> 8) << 1)] |= 1 << ((rel >>> 3) & 31);
        return obj;
      }
      return this.mallocSmallSlow(cls);
    }
    return this.mallocNotSmall(size);
  }

  /**
   * Free the object at `ptr`: locally, or by pushing it onto its owner's
   * inbox when another shard owns it. free(0) does nothing. `size`, when
   * given, must not exceed the object's size (a check, as sized delete).
   * Anything that is not a live object: InvalidPointerError, heap unchanged.
   */
  free(ptr: number, size?: number): void {
    if (typeof ptr === "number" && size === undefined) {
      const rel = ptr - this.dataStart;
      if ((rel >>> 0) === rel && rel < this.dataBytes && (rel & 7) === 0) {
        const i32 = this.i32;
        const w = this.bitmap + ((rel >>> 8) << 1);
        const bit = 1 << ((rel >>> 3) & 31);
        const live = i32[w]!;
        // Live, and not pending a cross-shard free. Loads nothing from the object (layout.ts).
        if ((live & ~i32[w + 1]! & bit) !== 0) {
          const pool1 = this.u8[this.classMap + (rel >>> PAGE_SHIFT)]!;
          // An ordinary pool (1..CLASS_COUNT); 0 (a page span) and the
          // sampled pools, whose objects carry a site tag, take the slow path.
          if ((pool1 - 1) >>> 0 < CLASS_COUNT) {
            i32[w] = live ^ bit;
            const pool = this.pools + (pool1 - 1) * POOL_STRIDE;
            i32[ptr >>> 2] = i32[pool + P_FREE_HEAD]!;
            i32[pool + P_FREE_HEAD] = ptr;
            const count = ++i32[pool + P_FREE_COUNT]!;
            if (++i32[pool + P_FREES_LO]! === 0) i32[pool + P_FREES_HI]++;
            if (count > i32[pool + P_MAX_FREE]!) this.trimAfterFree(pool1 - 1);
            return;
          }
        }
      } else if (this.freeForeignFast(ptr)) {
        return;
      }
    }
    this.freeSlow(ptr, size);
  }

  /**
   * Allocate `size` bytes at an address that is a multiple of `align` (a
   * power of two). Small sizes with align <= 4096 come from the first size
   * class whose objects are that aligned; others are page spans cut to
   * alignment.
   */
  allocateAligned(align: number, size: number): number {
    checkAlignment(align, "allocateAligned");
    checkSize(size, "allocateAligned");
    if (size <= MAX_SMALL_SIZE && align <= PAGE_SIZE) {
      let cls = classOf[(size + 7) >>> 3]!;
      while (classAlignment[cls]! < align) cls++;
      return this.mallocFor(ShardAllocator.prototype.allocateAligned, classSize[cls]!);
    }
    return this.mallocLarge(size, align, ShardAllocator.prototype.allocateAligned);
  }

  /**
   * Resize the object at `ptr` to `size` bytes, keeping its contents up to
   * the smaller size. realloc(0, n) is malloc(n). A large object shrinks in
   * place; a small one stays when the new size falls in its class; otherwise
   * the contents move to a new object (of this shard) and the old one is
   * freed. On OutOfMemoryError the old object is untouched and still live.
   * realloc(ptr, 0) shrinks to a minimum-size object (it does not free).
   */
  realloc(ptr: number, size: number): number {
    checkSize(size, "realloc");
    if (ptr === 0) return this.mallocFor(ShardAllocator.prototype.realloc, size);
    const owner = liveObjectRegion(this.geometry, ptr, "realloc");
    const oldSize = objectSizeIn(owner, ptr);
    if (owner.id === this.id) {
      const pool1 = this.poolOfPage(this.pageOf(ptr)) + 1;
      if (pool1 !== 0) {
        if (size <= MAX_SMALL_SIZE && classOf[(size + 7) >>> 3] === pool1 - 1) return ptr;
      } else if (size > MAX_SMALL_SIZE) {
        const pages = Math.ceil(size / PAGE_SIZE);
        const oldPages = oldSize / PAGE_SIZE;
        if (pages === oldPages) return ptr;
        if (pages < oldPages) {
          this.shrinkLarge(this.pageOf(ptr), pages);
          return ptr;
        }
      }
    }
    const moved = this.mallocFor(ShardAllocator.prototype.realloc, size);
    this.u8.copyWithin(moved, ptr, ptr + Math.min(oldSize, size));
    this.free(ptr);
    return moved;
  }

  /**
   * Batch frees of other shards' objects per destination (see batchHead)
   * instead of pushing each with its own compareExchange. The Smp runtime
   * turns it on in every shard; a heap used from one thread keeps it off,
   * so a remote free is in the owner's inbox as soon as free() returns.
   * Turning it off flushes.
   */
  batchCrossShardFrees(enabled: boolean): void {
    if (!enabled) this.flushCrossShardFrees();
    this.batching = enabled;
  }

  /** Push every batched remote free to its owner now. Returns how many were pushed. */
  flushCrossShardFrees(): number {
    let pushed = 0;
    for (let s = 0; s < this.batchCount.length; s++) {
      if (this.batchCount[s] !== 0) pushed += this.flushBatch(s);
    }
    return pushed;
  }

  /** Usable bytes of the live object at `ptr` (>= the size asked for); any shard's object. */
  objectSize(ptr: number): number {
    return objectSizeIn(liveObjectRegion(this.geometry, ptr, "objectSize"), ptr);
  }

  /**
   * Free everything other shards pushed onto this shard's inbox. Returns
   * the number of objects freed. Cheap (one atomic load) when it is empty.
   */
  drainCrossShardFrees(): number {
    let ptr = takeInbox(this);
    if (ptr === 0) return 0;
    const i32 = this.i32;
    let n = 0;
    // Pending bits are cleared with one Atomics.and per bitmap word rather
    // than per object (objects freed together usually share words). Safe to
    // defer to the end of the run: nothing is allocated while we drain.
    let word = -1;
    let mask = 0;
    while (ptr !== 0) {
      const next = i32[ptr >>> 2]! >>> 0;
      const rel = ptr - this.dataStart;
      const pending = this.bitmap + ((rel >>> 8) << 1) + 1;
      if (pending !== word) {
        if (mask !== 0) Atomics.and(i32, word, ~mask);
        word = pending;
        mask = 0;
      }
      mask |= 1 << ((rel >>> 3) & 31);
      this.freeLocal(ptr);
      ptr = next;
      n++;
    }
    Atomics.and(i32, word, ~mask);
    this.f64[this.counters + C_CROSS_SHARD_RECEIVED] += n;
    return n;
  }

  /**
   * Return what the shard caches to the page allocator (glibc's
   * malloc_trim): drain the inbox, move every object cached in a pool's
   * free list back to its span, and release every span left empty. After
   * freeing everything and trimming, freeMemory is back at totalMemory.
   * Runs by itself before OutOfMemoryError; a shard's runtime also runs it
   * when the shard goes idle. Returns the bytes returned to free spans.
   */
  trim(): number {
    const before = this.freePages();
    this.drainCrossShardFrees();
    for (let pool = 0; pool < POOL_COUNT; pool++) trimPool(this, pool, 0);
    return (this.freePages() - before) * PAGE_SIZE;
  }

  /**
   * Heap profiling on this shard (the seed's set_heap_profiling_enabled):
   * true records every allocation (rate 1), false stops recording. Objects
   * recorded earlier keep being accounted for when they are freed.
   */
  setHeapProfilingEnabled(enabled: boolean): void {
    if (typeof enabled !== "boolean") throw new TypeError("setHeapProfilingEnabled: enabled must be a boolean");
    this.setHeapProfilingSampleRate(enabled ? 1 : 0);
  }

  /**
   * 0 off, 1 every allocation (exact), N: sample one allocation per N bytes
   * on average (Poisson by bytes). Takes effect at once; live objects keep
   * the weight they were sampled with, so counts stay consistent.
   */
  setHeapProfilingSampleRate(bytes: number): void {
    checkSize(bytes, "setHeapProfilingSampleRate", "rate");
    if (bytes > 0x7fffffff) throw new RangeError(`setHeapProfilingSampleRate: rate must be at most ${0x7fffffff} bytes, got ${bytes}`);
    const old = this.headerSlot(S_PROF_RATE);
    if (bytes !== old) {
      const epoch = (this.headerSlot(S_PROF_EPOCH) + 1) % RATE_EPOCHS;
      setEpochRate(this, epoch, bytes);
      this.i32[this.hdr + S_PROF_EPOCH] = epoch;
      this.i32[this.hdr + S_PROF_RATE] = bytes;
      if (old === 0) logInfo(`shard ${this.id}: Enabling heap profiler${bytes > 1 ? ` (sampling every ${bytes} bytes on average)` : ""}`);
      if (bytes === 0) {
        logInfo(`shard ${this.id}: Disabling heap profiler`);
        // Nothing will be sampled for a while: give back the sampled pools' cached spans.
        for (let pool = SAMPLED_POOL_BASE; pool < POOL_COUNT; pool++) trimPool(this, pool, 0);
      }
    }
    this.sampler.rate = bytes;
    this.sampleCountdown = this.sampler.nextInterval();
  }

  heapProfilingSampleRate(): number {
    return this.headerSlot(S_PROF_RATE);
  }

  /** Frames recorded per allocation site, 1 to 32 (default 16). */
  setHeapProfilingDepth(depth: number): void {
    if (!Number.isInteger(depth) || depth < 1 || depth > PROF_MAX_DEPTH) {
      throw new RangeError(`setHeapProfilingDepth: depth must be an integer from 1 to ${PROF_MAX_DEPTH}, got ${String(depth)}`);
    }
    this.i32[this.hdr + S_PROF_DEPTH] = depth;
  }

  /** @internal Reseed the sampler (reproducible samples in tests). */
  seedHeapProfiler(seed: number): void {
    this.sampler.seed(seed);
    this.sampleCountdown = this.sampler.nextInterval();
  }

  /** This shard's heap profile, from the buffer. */
  heapProfile(): HeapProfile {
    return heapProfileOf(this.geometry.regions, this.id);
  }

  stats(): MemoryStats {
    return readStats(this);
  }

  /** Seastar-style report: used/free/total, small pools, page spans. */
  diagnostics(): string {
    return formatDiagnostics(this);
  }

  // ---------------------------------------------------------------- slow paths

  /**
   * The pool's list was empty. Drain the inbox (its objects may refill the
   * list), refill from partly used spans or new spans, and as a last resort
   * reclaim every cached span. Cost: a refill batch, amortized.
   */
  private mallocSmallSlow(poolIndex: number): number {
    const pool = this.pools + poolIndex * POOL_STRIDE;
    this.drainCrossShardFrees();
    if (this.u32[pool + P_FREE_HEAD] === 0 && !refillPool(this, poolIndex)) {
      this.reclaim();
      if (!refillPool(this, poolIndex)) throw this.outOfMemory(classSize[poolIndex]!);
    }
    const obj = this.u32[pool + P_FREE_HEAD]!;
    this.u32[pool + P_FREE_HEAD] = this.u32[obj >>> 2]!;
    this.i32[pool + P_FREE_COUNT]--;
    if (++this.i32[pool + P_MALLOCS_LO]! === 0) this.i32[pool + P_MALLOCS_HI]++;
    this.setLive(obj);
    return obj;
  }

  /**
   * malloc's path for anything but a small size: validation errors, then a
   * page span. Kept out of malloc so malloc stays small enough for V8 to
   * inline into its callers (331 -> 291 bytecodes; inlining is what makes
   * a 10 ns pair).
   */
  private mallocNotSmall(size: number): number {
    return this.mallocLarge(checkSize(size, "malloc"), PAGE_SIZE, ShardAllocator.prototype.malloc);
  }

  /** A free pushed the pool's list past maxFree: send a batch back to the spans. */
  private trimAfterFree(pool: number): void {
    trimPool(this, pool, classTrimTarget[pool]!);
  }

  /**
   * malloc on behalf of another public method (`entry`): a sample taken
   * inside starts its stack below `entry`, so V8 builds no CallSites for
   * shardheap's frames.
   */
  private mallocFor(entry: ApiEntry, size: number): number {
    this.outerEntry = entry;
    try {
      return this.malloc(size);
    } finally {
      this.outerEntry = undefined;
    }
  }

  /**
   * The sampler chose this allocation: take the object from the class's
   * sampled pool, capture the stack, and tag the object with its site.
   * Cost: a V8 stack capture (a few microseconds), once per sample.
   */
  private mallocSampled(cls: number): number {
    this.sampleCountdown = this.sampler.nextInterval();
    const pool = SAMPLED_POOL_BASE + cls;
    const obj = this.mallocSmallSlow(pool);
    const tag = this.tagAddress(obj, pool) >>> 2;
    this.i32[tag] = 0; // untagged until recorded: a failed capture must not leave a stale tag
    try {
      this.i32[tag] = this.recordSample(classSize[cls]!, ShardAllocator.prototype.malloc);
    } catch (e) {
      this.freeLocal(obj);
      throw e;
    }
    return obj;
  }

  /** Where a sampled pool object's 4-byte site tag is: the tag array at the end of its span. */
  private tagAddress(obj: number, pool: number): number {
    const head = this.i32[this.pageMeta(this.pageOf(obj)) + PM_HEAD]!;
    const start = this.pageAddress(head);
    const size = classSize[pool]!;
    const objects = objectsPerSpan(pool, this.i32[this.pageMeta(head) + PM_SPAN_PAGES]!);
    return start + objects * size + SITE_TAG_BYTES * ((obj - start) / size);
  }

  /**
   * Record a sampled allocation of `size` usable bytes at the stack below
   * `entry` (the public method the user called); returns its tag.
   */
  private recordSample(size: number, entry: ApiEntry): number {
    const sites = (this.siteTable ??= new SiteTable(this));
    // The capture starts below the public method the user called, so V8
    // builds CallSites for the user's frames only (shardheap's are filtered
    // anyway, should any remain).
    const depth = this.headerSlot(S_PROF_DEPTH);
    const site = sites.siteOfCallSites(captureRawCallSites(depth, this.outerEntry ?? entry), depth);
    const epoch = this.headerSlot(S_PROF_EPOCH);
    sites.recordAlloc(site, sampleWeight(size, epochRate(this, epoch)), size);
    return (epoch << 24) | (site + 1);
  }

  /** Undo recordSample for an object of `size` bytes carrying `tag` (0: never recorded). */
  private unrecordSample(tag: number, size: number): void {
    if (tag === 0) return;
    const sites = (this.siteTable ??= new SiteTable(this));
    sites.recordFree((tag & TAG_SITE_MASK) - 1, sampleWeight(size, epochRate(this, tag >>> 24)), size);
  }

  /** A page span of ceil(size / 4096) pages at a multiple of `align`. */
  private mallocLarge(size: number, align: number, entry: ApiEntry): number {
    const pages = Math.max(1, Math.ceil(size / PAGE_SIZE));
    const alignPages = align > PAGE_SIZE ? align / PAGE_SIZE : 1;
    const span = pages + alignPages - 1;
    if (span > this.dataPages) throw this.outOfMemory(size);
    let first = allocatePageSpan(this, span);
    if (first < 0) {
      this.reclaim();
      first = allocatePageSpan(this, span);
      if (first < 0) throw this.outOfMemory(size);
    }
    let head = first;
    if (alignPages > 1) {
      const addr = this.pageAddress(first);
      head = first + (Math.ceil(addr / align) * align - addr) / PAGE_SIZE;
      if (head > first) freePageRange(this, first, head - first);
      const tail = first + span - (head + pages);
      if (tail > 0) freePageRange(this, head + pages, tail);
    }
    const m = this.pageMeta(head);
    this.i32[m + PM_STATE] = PAGE_LARGE;
    this.i32[m + PM_SPAN_PAGES] = pages;
    // Page spans carry their site tag in the page metadata, not in the object.
    const bytes = pages * PAGE_SIZE;
    this.i32[m + PM_SITE] = 0;
    const obj = this.pageAddress(head);
    if ((this.sampleCountdown -= bytes) <= 0) {
      this.sampleCountdown = this.sampler.nextInterval();
      try {
        this.i32[m + PM_SITE] = this.recordSample(bytes, entry);
      } catch (e) {
        this.releaseLargeSpan(head, pages);
        throw e;
      }
    }
    this.setLive(obj); // after the sample: a failed capture leaves nothing to undo but the pages
    this.f64[this.cMallocs]++;
    this.f64[this.cBytes] += pages * PAGE_SIZE;
    this.f64[this.counters + C_LARGE_ALLOCATIONS]++;
    return obj;
  }

  private freeSlow(ptr: number, size: number | undefined): void {
    if (size !== undefined) checkSize(size, "free");
    if (ptr === 0) return;
    const owner = liveObjectRegion(this.geometry, ptr, "free");
    if (size !== undefined && size > objectSizeIn(owner, ptr)) {
      throw new RangeError(
        `free(${ptr}, ${size}): size is larger than the object (${objectSizeIn(owner, ptr)} bytes)`,
      );
    }
    if (owner.id === this.id) this.freeLocal(ptr);
    else this.freeForeign(owner, ptr);
  }

  /** Free a validated live object of this shard. */
  private freeLocal(ptr: number): void {
    this.i32[this.liveWord(ptr)] &= ~this.liveBit(ptr);
    const page = this.pageOf(ptr);
    const m = this.pageMeta(page);
    const pool1 = this.poolOfPage(page) + 1;
    if (pool1 !== 0) {
      const pool = this.pools + (pool1 - 1) * POOL_STRIDE;
      if (pool1 - 1 >= SAMPLED_POOL_BASE) {
        this.unrecordSample(this.i32[this.tagAddress(ptr, pool1 - 1) >>> 2]!, classSize[pool1 - 1]!);
      }
      if (++this.i32[pool + P_FREES_LO]! === 0) this.i32[pool + P_FREES_HI]++;
      this.u32[ptr >>> 2] = this.u32[pool + P_FREE_HEAD]!;
      this.u32[pool + P_FREE_HEAD] = ptr;
      if (++this.i32[pool + P_FREE_COUNT]! > this.i32[pool + P_MAX_FREE]!) this.trimAfterFree(pool1 - 1);
      return;
    }
    const pages = this.i32[m + PM_SPAN_PAGES]!;
    const tag = this.i32[m + PM_SITE]!;
    if (tag !== 0) {
      this.unrecordSample(tag, pages * PAGE_SIZE);
      this.i32[m + PM_SITE] = 0;
    }
    this.f64[this.cFrees]++;
    this.releaseLargeSpan(page, pages);
  }

  /** Return a page-span object's pages (its head no longer heads a used span). */
  private releaseLargeSpan(head: number, pages: number): void {
    this.i32[this.pageMeta(head) + PM_STATE] = PAGE_INNER;
    freePageRange(this, head, pages);
  }

  /** Hand a validated live object of another shard to its owner's inbox. */
  private freeForeign(owner: ShardRegion, ptr: number): void {
    if (!claimPendingFree(owner, ptr)) {
      liveObjectRegion(this.geometry, ptr, "free"); // throws "already freed"
    }
    this.sendForeign(owner, ptr);
  }

  /**
   * The remote free's fast path: the same checks as liveObjectRegion, in
   * line, for a pointer of another shard. Returns false, having changed
   * nothing, for anything it does not handle (the slow path then throws
   * the precise error). Measured: validation through liveObjectRegion was
   * ~25 of the ~65 ns a remote free cost (bench/cross-shard.ts).
   */
  private freeForeignFast(ptr: number): boolean {
    const regions = this.geometry.regions;
    const shard = Math.floor((ptr - HEAP_HEADER_BYTES) / this.geometry.shardBytes);
    if (shard === this.id || !(shard >= 0 && shard < regions.length)) return false;
    const owner = regions[shard]!;
    const rel = ptr - owner.dataStart;
    if (!((rel >>> 0) === rel && rel < owner.dataBytes && (rel & 7) === 0)) return false;
    const w = owner.bitmap + ((rel >>> 8) << 1);
    const bit = 1 << ((rel >>> 3) & 31);
    if ((this.i32[w]! & bit) === 0) return false;
    if ((Atomics.or(this.i32, w + 1, bit) & bit) !== 0) return false; // already pending: nothing changed
    this.sendForeign(owner, ptr);
    return true;
  }

  /** Hand a claimed object to its owner: batched, or pushed at once. */
  private sendForeign(owner: ShardRegion, ptr: number): void {
    this.f64[this.counters + C_CROSS_SHARD_FREES]++;
    if (!this.batching) {
      pushInbox(owner, ptr);
      return;
    }
    const s = owner.id;
    const n = this.batchCount[s]!;
    if (n === 0) {
      this.batchTail[s] = ptr;
      this.u32[ptr >>> 2] = 0;
      if (!this.flushQueued) {
        this.flushQueued = true;
        queueMicrotask(this.flushSoon);
      }
    } else {
      this.u32[ptr >>> 2] = this.batchHead[s]!;
    }
    this.batchHead[s] = ptr;
    this.batchCount[s] = n + 1;
    if (n + 1 >= CROSS_SHARD_BATCH) this.flushBatch(s);
  }

  private flushBatch(s: number): number {
    const n = this.batchCount[s]!;
    pushInboxChain(this.geometry.regions[s]!, this.batchHead[s]!, this.batchTail[s]!);
    this.batchCount[s] = 0;
    return n;
  }

  /** Give back the tail of a large object past `pages`. */
  private shrinkLarge(head: number, pages: number): void {
    const m = this.pageMeta(head);
    const oldPages = this.i32[m + PM_SPAN_PAGES]!;
    this.i32[m + PM_SPAN_PAGES] = pages;
    const tag = this.i32[m + PM_SITE]!;
    if (tag !== 0) {
      const rate = epochRate(this, tag >>> 24);
      const [oldSize, newSize] = [oldPages * PAGE_SIZE, pages * PAGE_SIZE];
      (this.siteTable ??= new SiteTable(this)).recordResize(
        (tag & TAG_SITE_MASK) - 1, sampleWeight(oldSize, rate), oldSize, sampleWeight(newSize, rate), newSize);
    }
    freePageRange(this, head + pages, oldPages - pages);
  }

  private setLive(obj: number): void {
    this.i32[this.liveWord(obj)] |= this.liveBit(obj);
  }

  /**
   * Make room before giving up: drain the inbox and return every object
   * cached in pool free lists to its span, releasing spans left empty.
   */
  private reclaim(): void {
    this.f64[this.counters + C_RECLAIMS]++;
    this.trim();
  }

  private outOfMemory(requested: number): OutOfMemoryError {
    this.f64[this.counters + C_FAILED_ALLOCATIONS]++;
    const s = this.stats();
    return new OutOfMemoryError(
      `shard ${this.id}: cannot allocate ${requested} bytes ` +
        `(${formatSize(s.freeMemory)} free of ${formatSize(s.totalMemory)}, ` +
        `largest free span ${formatSize(largestFreeSpanPages(this) * PAGE_SIZE)})`,
      requested,
      this.diagnostics(),
    );
  }

  /** @internal The owner of `ptr` (-1 outside every region). */
  ownerOf(ptr: number): number {
    return ownerShardOf(this.geometry, ptr);
  }
}

/** A public allocation method: where a profiled stack capture starts. */
type ApiEntry = (this: ShardAllocator, ...args: never[]) => number;

/**
 * Remote frees per chain: snmalloc batches per destination the same way;
 * chains of 16+ halved the per-item cost of a bare list between two
 * threads (58 -> 28 ns) in the issue's measurements.
 */
const CROSS_SHARD_BATCH = 32;

/** Usable size of a live object (validated) in region `r`. */
function objectSizeIn(r: ShardRegion, ptr: number): number {
  const m = r.pageMeta(r.pageOf(ptr));
  const pool1 = r.poolOfPage(r.pageOf(ptr)) + 1;
  return pool1 !== 0 ? classSize[pool1 - 1]! : r.i32[m + PM_SPAN_PAGES]! * PAGE_SIZE;
}

function largestFreeSpanPages(r: ShardRegion): number {
  const orders = r.headerSlot(S_NONEMPTY_ORDERS);
  return orders === 0 ? 0 : 2 ** (31 - Math.clz32(orders));
}
