/**
 * ShardAllocator: one shard's malloc / free (Seastar's cpu_pages front end).
 *
 * Only the thread that owns a shard changes its allocator state (an
 * allocator made for another thread only reads, see `owned`); frees of
 * other shards' objects go to their owners' inboxes (cross-shard.ts). The
 * fast paths read top to bottom in malloc() and free(): they touch the pool
 * record (one cache line, counters included), the page's class byte, one
 * live/pending word pair, and the object's first word (free only stores to
 * it), and allocate nothing. free() makes one atomic, its claim
 * (cross-shard.ts, "Claims"): that is what makes two racing frees of one
 * object end with exactly one success; malloc makes one more when it hands
 * out an object this shard freed, clearing that claim. The atomics are
 * WebAssembly's where the heap allows (atomics.ts). Measured (bench/, this
 * machine, a quiet moment): a malloc/free pair 13 ns without claims, 33 ns
 * with them, @thi.ng/malloc 19 ns. Every miss goes to a separately named
 * slow path:
 *
 *   malloc -> mallocSmallSlow (drain inbox, refill pool, reclaim)  small
 *          -> mallocLarge     (page span, reclaim)                  > 16 KiB
 *   free   -> freeSlow        (validation errors, sized free, free(0),
 *                              large objects, other shards' objects)
 *
 * Fast-path contract (what lets it skip checks): a pointer inside this
 * region, 8-aligned, whose live bit is set, is the start of a live object
 * of this shard; the claim then tells whether no other free got there
 * first; and the class map of its page tells whether it is a small object
 * (and of which class) or a page span.
 */
import { HeapOwnershipError, InvalidPointerError, OutOfMemoryError } from "../errors.js";
import type { HeapProfile, PeakProfile } from "./heap-profile.js";
import { formatSize } from "../units.js";
import { allocatePageSpan, freePageRange, largestFreeSpanPages } from "./page-spans.js";
import { Outbox, chainNext, claimLive, pushInbox, takeInbox } from "./cross-shard.js";
import * as layout from "./layout.js";
import { ownershipMessage } from "./ownership.js";
import { profilerHooks, type ApiEntry, type ProfilerHooks, type SampleRecorder } from "./hooks.js";
import { checkAlignment, checkSize, liveObjectRegion, objectSizeIn, ownerShardOf, type HeapGeometry } from "./pointers.js";
import { clearMark, forEachMarked, keptPointers, snapshotLiveBits, type ObjectCount } from "./orphans.js";
import { HeapViews, ShardRegion } from "./region.js";
import * as sizeClasses from "./size-classes.js";
import { refillPool, releaseClean, sampledTagIndex, trimPool } from "./small-pool.js";
import { readStats, type MemoryStats } from "./stats.js";
import { bytesOf, STORED_HEADER_BYTES, writeStoredHeader } from "./stored-values.js";
import { holdInQuarantine, quarantineBudget, quarantinedBytes, takeOldest } from "./quarantine.js";
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
  PM_SITE,
  PM_SPAN_PAGES,
  PM_STATE,
  POOL_STRIDE,
  P_CLAIMED_HEAD,
  P_FREE_COUNT,
  P_FREE_HEAD,
  P_FREES_HI,
  P_FREES_LO,
  P_MALLOCS_HI,
  P_MALLOCS_LO,
  P_MAX_FREE,
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
} = sizeClasses;

export class ShardAllocator extends ShardRegion {
  private readonly geometry: HeapGeometry;
  /** The heap as a Buffer, for UTF-8 written in place (mallocString). */
  private readonly buf: Buffer;
  private readonly cMallocs: number;
  private readonly cFrees: number;
  private readonly cBytes: number;
  /**
   * @internal Whether this thread owns the shard (SharedHeap.shard decides,
   * with the header's owner word). An allocator that does not own its
   * shard reads (stats, diagnostics, heapProfile, objectSize) and throws
   * HeapOwnershipError on anything that would change the shard's state.
   */
  readonly owned: boolean;
  /**
   * dataBytes when owned, 0 otherwise: free()'s fast-path range check then
   * sends every pointer of a shard this thread does not own to the slow
   * path, which throws, so the ownership rule costs the fast path nothing.
   * 0 too while orphans are tracked: every local free then takes the slow
   * path, which ends in releaseClaimed, where an orphan's mark is cleared;
   * and always in a heap with debug pointers, whose frees go to the
   * quarantine from there (quarantine.ts).
   */
  private localBytes: number;
  /**
   * The objects an earlier owner left allocated when its thread died
   * (orphans.ts), marked until freed or let go; null when there are none
   * (always, unless this allocator was made by a takeover that asked for
   * them: SharedHeap.adoptShard(id, { orphans: true })).
   */
  private orphanMarks: Int32Array | null = null;
  /**
   * Bytes until the next heap-profiler sample; Infinity while profiling is
   * off, so the fast path's one subtraction never reaches zero, and
   * -Infinity when this thread does not own the shard, so every malloc
   * reaches mallocSampled, which throws. Measured alternatives: an integer
   * countdown re-armed every 2^30 bytes (11.8 ns a malloc/free pair) and a
   * Float64 slot in the buffer (10.7 ns) were both slower than this field
   * (10.0 ns; 9.5 ns without any sampling check). Initialized here, to a
   * number: declared bare, the field starts as undefined, V8 then stores
   * it tagged, and every countdown allocates a HeapNumber (measured: 198
   * scavenges and ~50 ns a pair instead of 4 and ~17 ns).
   */
  private sampleCountdown = -Infinity;
  /** The profiler's recorder for this shard (hooks.ts), reached on slow paths only. */
  private readonly profiler: SampleRecorder;
  /** The profiler's readings (heapProfile, peakProfile). */
  private readonly profilerReads: ProfilerHooks;
  /** The public method that called malloc on the user's behalf (allocateAligned, realloc), if any. */
  private outerEntry: ApiEntry | undefined = undefined;
  /**
   * Remote-free batching (off unless batchCrossShardFrees(true); the Smp
   * runtime turns it on in every shard): frees of other shards' objects
   * wait in this shard's outbox and are pushed as chains (cross-shard.ts).
   */
  private batching = false;
  private readonly outbox: Outbox;

  /** @internal Made by SharedHeap.shard(); one per shard and heap object. */
  constructor(views: HeapViews, id: number, geometry: HeapGeometry, owned: boolean) {
    super(views, id, geometry.shardBytes, geometry.profilerSites);
    this.geometry = geometry;
    this.buf = views.buf;
    this.owned = owned;
    this.localBytes = owned && !this.debugPointers ? this.dataBytes : 0;
    this.outbox = new Outbox(this, geometry.regions);
    this.profilerReads = profilerHooks();
    this.profiler = this.profilerReads.recorder(this);
    this.cMallocs = this.counters + C_MALLOCS;
    this.cFrees = this.counters + C_FREES;
    this.cBytes = this.counters + C_BYTES_ALLOCATED;
    this.sampleCountdown = owned ? this.profiler.nextInterval() : -Infinity;
  }

  /**
   * Allocate `size` bytes (8-aligned; malloc(0) gives a unique 8-byte
   * object). Throws OutOfMemoryError when the shard is exhausted even after
   * draining its inbox and returning cached spans; TypeError / RangeError
   * for a size that is not a non-negative safe integer; HeapOwnershipError
   * on a thread that does not own the shard.
   */
  malloc(size: number): number {
    if ((size >>> 0) === size && size <= MAX_SMALL_SIZE) {
      const cls = classOf[(size + 7) >>> 3]!;
      if ((this.sampleCountdown -= classSize[cls]!) <= 0) return this.mallocSampled(cls);
      const pool = this.pools + cls * POOL_STRIDE;
      // One view for the whole fast path (links are stored through Int32 and
      // read back with >>> 0): a second typed-array view cost ~0.8 ns a pair.
      const i32 = this.i32;
      // What this shard freed last first (LIFO: still in cache), then the
      // clean list; a claimed object's pending bit is this shard's to clear.
      let list = pool + P_CLAIMED_HEAD;
      let obj = i32[list]! >>> 0;
      if (obj === 0) {
        list = pool + P_FREE_HEAD;
        obj = i32[list]! >>> 0;
        if (obj === 0) return this.mallocSmallSlow(cls);
      }
      const rel = obj - this.dataStart;
      const w = this.bitmap + ((rel >>> 8) << 1);
      const bit = 1 << ((rel >>> 3) & 31);
      // Before this path's stores: an atomic waits for earlier stores to drain.
      if (list !== pool + P_FREE_HEAD) this.atomicAnd((w + 1) << 2, ~bit);
      i32[list] = i32[obj >>> 2]!;
      i32[pool + P_FREE_COUNT]--;
      if (++i32[pool + P_MALLOCS_LO]! === 0) i32[pool + P_MALLOCS_HI]++;
      i32[w] |= bit;
      return obj;
    }
    return this.mallocNotSmall(size);
  }

  /**
   * Free the object at `ptr`: locally, or by handing it to its owner when
   * another shard owns it. free(0) does nothing. `size`, when given, must
   * not exceed the object's size (a check, as sized delete). Anything that
   * is not a live object, or an object another free has already claimed
   * (from any thread, however the two interleave): InvalidPointerError,
   * heap unchanged.
   */
  free(ptr: number, size?: number): void {
    if (typeof ptr === "number" && size === undefined) {
      const rel = ptr - this.dataStart;
      if ((rel >>> 0) === rel && rel < this.localBytes && (rel & 7) === 0) {
        const i32 = this.i32;
        const w = this.bitmap + ((rel >>> 8) << 1);
        const bit = 1 << ((rel >>> 3) & 31);
        const live = i32[w]!;
        // Loads nothing from the object (layout.ts).
        if ((live & bit) !== 0) {
          const pool1 = this.u8[this.classMap + (rel >>> PAGE_SHIFT)]!;
          // An ordinary pool (1..CLASS_COUNT); 0 (a page span) and the
          // sampled pools, whose objects carry a site tag, take the slow
          // path. The claim (cross-shard.ts): clear before means no other
          // free got there first; set means one did, and the slow path
          // throws. The bit stays set while the object sits on the
          // claimed list (small-pool.ts settleClaims clears it).
          if ((pool1 - 1) >>> 0 < CLASS_COUNT && (this.atomicOr((w + 1) << 2, bit) & bit) === 0) {
            i32[w] = live ^ bit; // the owner is the live word's only writer: `live` is current
            const pool = this.pools + (pool1 - 1) * POOL_STRIDE;
            i32[ptr >>> 2] = i32[pool + P_CLAIMED_HEAD]!;
            i32[pool + P_CLAIMED_HEAD] = ptr;
            const cached = ++i32[pool + P_FREE_COUNT]!;
            if (++i32[pool + P_FREES_LO]! === 0) i32[pool + P_FREES_HI]++;
            if (cached > i32[pool + P_MAX_FREE]!) this.trimAfterFree(pool1 - 1);
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
   * A new object holding `text` as UTF-8 and its length (stored-values.ts):
   * one call instead of Buffer.byteLength, malloc and writeString, and one
   * number to hand over. Read it back from any thread with
   * heap.storedString(ptr); free it with free(ptr). TypeError for a
   * `text` that is not a string; OutOfMemoryError as malloc.
   */
  mallocString(text: string): number {
    if (typeof text !== "string") throw new TypeError(`mallocString: text must be a string, got ${typeof text}`);
    const length = Buffer.byteLength(text, "utf8");
    const ptr = this.mallocFor(ShardAllocator.prototype.mallocString, STORED_HEADER_BYTES + length);
    writeStoredHeader(this.u32, ptr, length);
    this.buf.write(text, ptr + STORED_HEADER_BYTES, length, "utf8");
    return ptr;
  }

  /**
   * A new object holding a copy of `bytes` (a Uint8Array, Buffer, any
   * ArrayBuffer view, an ArrayBuffer or a SharedArrayBuffer) and its
   * length. Read it back with heap.storedBytes(ptr) (a copy) or
   * heap.storedView(ptr) (in place); free it with free(ptr).
   */
  mallocBytes(bytes: ArrayBufferView | ArrayBuffer | SharedArrayBuffer): number {
    const src = bytesOf(bytes, "mallocBytes");
    const ptr = this.mallocFor(ShardAllocator.prototype.mallocBytes, STORED_HEADER_BYTES + src.byteLength);
    writeStoredHeader(this.u32, ptr, src.byteLength);
    this.u8.set(src, ptr + STORED_HEADER_BYTES);
    return ptr;
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
   * freed. On OutOfMemoryError the old object is untouched and still live;
   * when another free of `ptr` wins a race with this realloc, realloc
   * throws InvalidPointerError and leaves nothing allocated. realloc(ptr, 0)
   * shrinks to a minimum-size object (it does not free).
   */
  realloc(ptr: number, size: number): number {
    checkSize(size, "realloc");
    this.checkOwned("realloc");
    if (ptr === 0) return this.mallocFor(ShardAllocator.prototype.realloc, size);
    const owner = liveObjectRegion(this.geometry, ptr, "realloc");
    const oldSize = objectSizeIn(owner, ptr);
    if (owner.id === this.id) {
      const pool1 = this.poolOfPage(this.pageOf(ptr)) + 1;
      if (pool1 !== 0) {
        // A sampled object's pool is its class's sampled pool: it stays too.
        const cls = pool1 - 1 >= SAMPLED_POOL_BASE ? pool1 - 1 - SAMPLED_POOL_BASE : pool1 - 1;
        if (size <= MAX_SMALL_SIZE && classOf[(size + 7) >>> 3] === cls) return ptr;
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
    // Allocate first (an OutOfMemoryError leaves the old object untouched),
    // then claim the old object like any free; the claim decides a race
    // with another free of it, and the copy is made only once it is ours.
    // The claim re-reads the live bit (claimLive): the allocation may have
    // drained this shard's inbox, freeing `ptr` for a remote free that won,
    // and may even have handed the same address back as `moved` (a page
    // span freed and taken again). Claiming on the earlier look let both
    // calls succeed in 14 of 50,000 races, with the pools' lists corrupt.
    const moved = this.mallocFor(ShardAllocator.prototype.realloc, size);
    if (moved === ptr || !claimLive(owner, ptr)) {
      this.freeUnpublished(moved);
      liveObjectRegion(this.geometry, ptr, "realloc"); // throws why, as it is now
      throw new InvalidPointerError(`realloc(${ptr}): freed by another thread while it was being resized`, ptr);
    }
    this.u8.copyWithin(moved, ptr, ptr + Math.min(oldSize, size));
    if (owner.id === this.id) this.releaseClaimed(ptr);
    else this.sendForeign(owner, ptr);
    return moved;
  }

  /**
   * Batch frees of other shards' objects per destination (in this shard's
   * outbox, cross-shard.ts) instead of pushing each with its own
   * compareExchange. The Smp runtime turns it on in every shard; a heap
   * used from one thread keeps it off, so a remote free is in the owner's
   * inbox as soon as free() returns. Turning it off flushes.
   */
  batchCrossShardFrees(enabled: boolean): void {
    this.checkOwned("batchCrossShardFrees");
    if (!enabled) this.outbox.flush();
    this.batching = enabled;
  }

  /** Push every batched remote free to its owner now. Returns how many were pushed. */
  flushCrossShardFrees(): number {
    this.checkOwned("flushCrossShardFrees");
    return this.outbox.flush();
  }

  /**
   * What the shard's earlier owner left allocated when its thread died and
   * this thread took the shard over, and is still allocated: objects and
   * their usable bytes (orphans.ts). 0 and 0 when none.
   */
  orphans(): ObjectCount {
    const marks = this.orphanMarks;
    const count = { objects: 0, bytes: 0 };
    if (marks !== null) {
      forEachMarked(this, marks, (ptr) => {
        count.objects++;
        count.bytes += objectSizeIn(this, ptr);
      });
    }
    return count;
  }

  /**
   * Free what the shard's dead earlier owner left allocated (orphans()),
   * but the objects in `keep`, which become this shard's like any other
   * object: an orphan another shard still uses must be kept, since every
   * other pointer into the orphans is invalid afterwards, as after any
   * free. An orphan some thread is freeing at this moment is left to that
   * free; `keep` may name objects freed meanwhile (they are passed over).
   * Returns what was freed, and how many orphans were kept. TypeError for a
   * `keep` that is not an iterable of numbers.
   */
  freeOrphans(keep: Iterable<number> = []): ObjectCount & { kept: number } {
    this.checkOwned("freeOrphans");
    const kept = keptPointers(keep);
    const marks = this.orphanMarks;
    const freed = { objects: 0, bytes: 0, kept: 0 };
    if (marks === null) return freed;
    // Let go of the marks first: releaseClaimed below must not look them up.
    this.orphanMarks = null;
    this.localBytes = this.debugPointers ? 0 : this.dataBytes;
    forEachMarked(this, marks, (ptr) => {
      if (kept.has(ptr)) {
        freed.kept++;
        return;
      }
      // Claimed by another free already: that free has it.
      if (!this.claimOwn(ptr)) return;
      const size = objectSizeIn(this, ptr);
      this.releaseClaimed(ptr);
      freed.objects++;
      freed.bytes += size;
    });
    return freed;
  }

  /**
   * @internal This thread has just taken the shard over from a thread that
   * died: every object live now is an orphan (orphans.ts). Returns them.
   */
  trackOrphans(): ObjectCount {
    this.checkOwned("trackOrphans");
    this.orphanMarks = snapshotLiveBits(this);
    if (this.orphanMarks !== null) this.localBytes = 0;
    return this.orphans();
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
    this.checkOwned("drainCrossShardFrees");
    return this.drainInbox();
  }

  /**
   * Return what the shard caches to the page allocator (glibc's
   * malloc_trim): drain the inbox, move every object cached in a pool's
   * lists back to its span, and release every span left empty. After
   * freeing everything and trimming, freeMemory is back at totalMemory.
   * Runs by itself before OutOfMemoryError; a shard's runtime also runs it
   * when the shard goes idle. Returns the bytes returned to free spans.
   */
  trim(): number {
    this.checkOwned("trim");
    const before = this.freePages();
    this.drainInbox();
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
    this.checkOwned("setHeapProfilingSampleRate");
    const old = this.profiler.setRate(bytes);
    if (bytes === 0 && old !== 0) {
      // Nothing will be sampled for a while: give back the sampled pools' cached spans.
      for (let pool = SAMPLED_POOL_BASE; pool < POOL_COUNT; pool++) trimPool(this, pool, 0);
    }
    this.sampleCountdown = this.profiler.nextInterval();
  }

  heapProfilingSampleRate(): number {
    return this.profiler.rate();
  }

  /** Frames recorded per allocation site, 1 to 32 (default 16). */
  setHeapProfilingDepth(depth: number): void {
    this.checkOwned("setHeapProfilingDepth");
    this.profiler.setDepth(depth);
  }

  /** @internal Reseed the sampler (reproducible samples in tests). */
  seedHeapProfiler(seed: number): void {
    this.checkOwned("seedHeapProfiler");
    this.profiler.seed(seed);
    this.sampleCountdown = this.profiler.nextInterval();
  }

  /** This shard's heap profile, from the buffer. */
  heapProfile(): HeapProfile {
    return this.profilerReads.heapProfile(this.geometry.regions, this.id);
  }

  /** The sites live at this shard's profiled peak (peaks.ts), from the buffer; from any thread. */
  peakProfile(): PeakProfile {
    return this.profilerReads.peakProfile(this.geometry.regions, this.id);
  }

  /** This shard's peak starts again from now: the peak is what it holds now. */
  resetPeak(): void {
    this.checkOwned("resetPeak");
    this.profiler.resetPeak();
  }

  stats(): MemoryStats {
    return readStats(this);
  }

  /**
   * Bytes in this shard's longest free page span: the largest page-span
   * object it could allocate now without reclaiming. Next to freeMemory,
   * how fragmented the free memory is. From any thread.
   */
  largestFreeSpan(): number {
    return largestFreeSpanPages(this) * PAGE_SIZE;
  }

  /** Seastar-style report: used/free/total, small pools, page spans. */
  diagnostics(): string {
    return formatDiagnostics(this);
  }

  // ---------------------------------------------------------------- slow paths

  /** Pop an object from pool `poolIndex`, refilling its clean list first if it is empty. */
  private mallocSmallSlow(poolIndex: number): number {
    const pool = this.pools + poolIndex * POOL_STRIDE;
    if (this.u32[pool + P_CLAIMED_HEAD] === 0 && this.u32[pool + P_FREE_HEAD] === 0) this.refillSlow(poolIndex);
    const claimed = this.u32[pool + P_CLAIMED_HEAD] !== 0;
    const list = claimed ? pool + P_CLAIMED_HEAD : pool + P_FREE_HEAD;
    const obj = this.u32[list]!;
    this.u32[list] = this.u32[obj >>> 2]!;
    this.i32[pool + P_FREE_COUNT]--;
    if (++this.i32[pool + P_MALLOCS_LO]! === 0) this.i32[pool + P_MALLOCS_HI]++;
    if (claimed) this.atomicAnd(this.pendingWord(obj) << 2, ~this.liveBit(obj));
    this.setLive(obj);
    return obj;
  }

  /**
   * The pool's lists are empty. Drain the inbox (its objects join the
   * claimed lists), then refill from partly used spans or new spans, and as
   * a last resort reclaim every cached span. Cost: a batch, amortized over
   * its objects.
   */
  private refillSlow(poolIndex: number): void {
    const pool = this.pools + poolIndex * POOL_STRIDE;
    this.drainInbox();
    if (this.u32[pool + P_CLAIMED_HEAD] !== 0) return;
    if (!refillPool(this, poolIndex)) {
      this.reclaim();
      if (!refillPool(this, poolIndex)) throw this.outOfMemory(classSize[poolIndex]!);
    }
  }

  /** Take the inbox and free what it holds: claimed by the remotes that pushed them, now ours. */
  private drainInbox(): number {
    let ptr = takeInbox(this);
    if (ptr === 0) return 0;
    let n = 0;
    while (ptr !== 0) {
      const next = chainNext(this, ptr);
      this.releaseClaimed(ptr);
      ptr = next;
      n++;
    }
    this.f64[this.counters + C_CROSS_SHARD_RECEIVED] += n;
    return n;
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

  /** The pool's lists passed maxFree: settle the claims and send a batch back to the spans. */
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
   * The sampler chose this allocation (or this thread does not own the
   * shard: the countdown is -Infinity then): take the object from the
   * class's sampled pool, capture the stack, and tag the object with its
   * site. Cost: a V8 stack capture (a few microseconds), once per sample.
   */
  private mallocSampled(cls: number): number {
    this.checkOwned("malloc");
    this.sampleCountdown = this.profiler.nextInterval();
    const pool = SAMPLED_POOL_BASE + cls;
    const obj = this.mallocSmallSlow(pool);
    const tag = sampledTagIndex(this, obj, pool);
    this.i32[tag] = 0; // untagged until recorded: a failed capture must not leave a stale tag
    try {
      this.i32[tag] = this.profiler.recordSample(classSize[cls]!, this.outerEntry ?? ShardAllocator.prototype.malloc);
    } catch (e) {
      this.freeUnpublished(obj);
      throw e;
    }
    return obj;
  }

  /** A page span of ceil(size / 4096) pages at a multiple of `align`. */
  private mallocLarge(size: number, align: number, entry: ApiEntry): number {
    this.checkOwned(entry.name);
    const pages = Math.max(1, Math.ceil(size / PAGE_SIZE));
    const alignPages = align > PAGE_SIZE ? align / PAGE_SIZE : 1;
    const span = pages + alignPages - 1;
    if (span > this.dataPages) throw this.outOfMemory(size);
    let first = allocatePageSpan(this, span, true);
    if (first < 0) {
      this.reclaim();
      first = allocatePageSpan(this, span, true);
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
      this.sampleCountdown = this.profiler.nextInterval();
      try {
        this.i32[m + PM_SITE] = this.profiler.recordSample(bytes, this.outerEntry ?? entry);
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
    this.checkOwned("free");
    const owner = liveObjectRegion(this.geometry, ptr, "free");
    if (size !== undefined && size > objectSizeIn(owner, ptr)) {
      throw new RangeError(
        `free(${ptr}, ${size}): size is larger than the object (${objectSizeIn(owner, ptr)} bytes)`,
      );
    }
    if (owner.id === this.id) {
      if (!this.claimOwn(ptr)) throw this.lostClaim(ptr, "free");
      this.releaseClaimed(ptr);
    } else {
      if (!claimLive(owner, ptr)) throw this.lostClaim(ptr, "free");
      this.sendForeign(owner, ptr);
    }
  }

  /** Claim a live object of this shard (cross-shard.ts): false when another free claimed it first. */
  private claimOwn(ptr: number): boolean {
    const bit = this.liveBit(ptr);
    return (this.atomicOr(this.pendingWord(ptr) << 2, bit) & bit) === 0;
  }

  /** A claim lost to another free: the precise error for `ptr` as it is now. */
  private lostClaim(ptr: number, op: string): InvalidPointerError {
    try {
      liveObjectRegion(this.geometry, ptr, op);
    } catch (e) {
      if (e instanceof InvalidPointerError) return e;
      throw e;
    }
    return new InvalidPointerError(`${op}(${ptr}): already freed by another thread`, ptr);
  }

  /**
   * Free a live object of this shard that this shard holds the claim on
   * (its own free's claim, or a remote's taken from the inbox): count the
   * free, then give the memory back for reuse, or, with debug pointers,
   * hold it in the quarantine first.
   */
  private releaseClaimed(ptr: number): void {
    const pool1 = this.retire(ptr);
    if (this.debugPointers) this.quarantine(ptr);
    else this.recycle(ptr, pool1);
  }

  /**
   * Count a claimed object's free: its live bit, its orphan mark, its
   * profiler site and the free counters. Returns its pool + 1 (0: a page
   * span). Its claim (pending bit) stays: recycle settles it.
   */
  private retire(ptr: number): number {
    this.i32[this.liveWord(ptr)] &= ~this.liveBit(ptr);
    if (this.orphanMarks !== null) clearMark(this, this.orphanMarks, ptr);
    const page = this.pageOf(ptr);
    const pool1 = this.poolOfPage(page) + 1;
    if (pool1 !== 0) {
      const pool = this.pools + (pool1 - 1) * POOL_STRIDE;
      if (pool1 - 1 >= SAMPLED_POOL_BASE) {
        this.profiler.unrecordSample(this.i32[sampledTagIndex(this, ptr, pool1 - 1)]!, classSize[pool1 - 1]!);
      }
      if (++this.i32[pool + P_FREES_LO]! === 0) this.i32[pool + P_FREES_HI]++;
      return pool1;
    }
    const m = this.pageMeta(page);
    const tag = this.i32[m + PM_SITE]!;
    if (tag !== 0) {
      this.profiler.unrecordSample(tag, this.i32[m + PM_SPAN_PAGES]! * PAGE_SIZE);
      this.i32[m + PM_SITE] = 0;
    }
    this.f64[this.cFrees]++;
    return 0;
  }

  /**
   * Give a retired object's memory back: a pool object to the pool's
   * claimed list with its pending bit still set (malloc or a trim clears
   * it), a page span's pages to the free spans, its bit cleared at once.
   */
  private recycle(ptr: number, pool1: number): void {
    if (pool1 !== 0) {
      const pool = this.pools + (pool1 - 1) * POOL_STRIDE;
      this.u32[ptr >>> 2] = this.u32[pool + P_CLAIMED_HEAD]!;
      this.u32[pool + P_CLAIMED_HEAD] = ptr;
      if (++this.i32[pool + P_FREE_COUNT]! > this.i32[pool + P_MAX_FREE]!) this.trimAfterFree(pool1 - 1);
      return;
    }
    const page = this.pageOf(ptr);
    this.releaseLargeSpan(page, this.i32[this.pageMeta(page) + PM_SPAN_PAGES]!);
    this.atomics.and(this.pendingWord(ptr) << 2, ~this.liveBit(ptr));
  }

  /**
   * Debug pointers: hold a retired object back from reuse, poisoned
   * (quarantine.ts), and let the oldest go while the quarantine holds more
   * than its budget.
   */
  private quarantine(ptr: number): void {
    holdInQuarantine(this, ptr, objectSizeIn(this, ptr));
    const budget = quarantineBudget(this);
    while (quarantinedBytes(this) > budget && this.releaseOldest());
  }

  /**
   * The quarantine's oldest object goes back for reuse, checked for writes
   * after its free (takeOldest reports them). A pool object gives its claim
   * up at once, onto the clean list: a freed object with its claim kept is
   * then exactly a held one, which a damaged chain is rebuilt from
   * (quarantine.ts). False when the quarantine is empty.
   */
  private releaseOldest(): boolean {
    const ptr = takeOldest(this);
    if (ptr === 0) return false;
    const pool1 = this.poolOfPage(this.pageOf(ptr)) + 1;
    if (pool1 === 0) this.recycle(ptr, 0);
    else releaseClean(this, pool1 - 1, ptr);
    return true;
  }

  /**
   * Free an object this shard allocated and never handed out (a failed
   * sample, a realloc that lost its race). It is claimed like any free: a
   * remote free holding a stale pointer equal to it may have claimed it
   * meanwhile, and then that free has it.
   */
  private freeUnpublished(ptr: number): void {
    if (this.claimOwn(ptr)) this.releaseClaimed(ptr);
  }

  /** Return a page-span object's pages (its head no longer heads a used span). */
  private releaseLargeSpan(head: number, pages: number): void {
    this.i32[this.pageMeta(head) + PM_STATE] = PAGE_INNER;
    freePageRange(this, head, pages);
  }

  /**
   * The remote free's fast path: the same checks as liveObjectRegion, in
   * line, for a pointer of another shard, then the claim. Returns false,
   * having changed nothing, for anything it does not handle (the slow path
   * then throws the precise error). Measured: validation through
   * liveObjectRegion was ~25 of the ~65 ns a remote free cost
   * (bench/cross-shard.ts).
   */
  private freeForeignFast(ptr: number): boolean {
    if (!this.owned) return false;
    const regions = this.geometry.regions;
    const shard = Math.floor((ptr - HEAP_HEADER_BYTES) / this.geometry.shardBytes);
    if (shard === this.id || !(shard >= 0 && shard < regions.length)) return false;
    const owner = regions[shard]!;
    const rel = ptr - owner.dataStart;
    if (!((rel >>> 0) === rel && rel < owner.dataBytes && (rel & 7) === 0)) return false;
    if (!claimLive(owner, ptr)) return false;
    this.sendForeign(owner, ptr);
    return true;
  }

  /** Hand a claimed object to its owner: batched in the outbox, or pushed at once. */
  private sendForeign(owner: ShardRegion, ptr: number): void {
    this.f64[this.counters + C_CROSS_SHARD_FREES]++;
    if (this.batching) this.outbox.add(owner, ptr);
    else pushInbox(owner, ptr);
  }

  /** Give back the tail of a large object past `pages`. */
  private shrinkLarge(head: number, pages: number): void {
    const m = this.pageMeta(head);
    const oldPages = this.i32[m + PM_SPAN_PAGES]!;
    this.i32[m + PM_SPAN_PAGES] = pages;
    this.profiler.recordResize(this.i32[m + PM_SITE]!, oldPages * PAGE_SIZE, pages * PAGE_SIZE);
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
    // Debug pointers must never make an allocation fail: the quarantine goes back first.
    while (this.releaseOldest());
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

  /** HeapOwnershipError unless this thread owns the shard. */
  private checkOwned(op: string): void {
    if (!this.owned) throw new HeapOwnershipError(ownershipMessage(this, op), this.id);
  }

  /** @internal The owner of `ptr` (-1 outside every region). */
  ownerOf(ptr: number): number {
    return ownerShardOf(this.geometry, ptr);
  }
}

