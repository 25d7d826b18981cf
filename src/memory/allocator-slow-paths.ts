/**
 * AllocatorSlowPaths: a shard allocator's state and every path its malloc
 * and free take on a miss (shard-allocator.ts draws the map from the fast
 * paths to these). The class users get is a chain of three, one file each:
 *
 *   AllocatorSlowPaths  this file: the fields, refill, reclaim, sampled
 *                       and page-span allocations, every free but a fast one
 *   AllocatorControls   allocator-controls.ts: the public operations off
 *                       the allocation path (remote-free batching, orphans,
 *                       trim, the profiler's controls, stats and readings)
 *   ShardAllocator      shard-allocator.ts: malloc and free with their fast
 *                       paths in line, and the rest of the allocation API
 *
 * A chain of classes rather than functions over an allocator: the methods
 * keep `this` and their fields, and every allocator is a ShardAllocator of
 * one shape, so the fast paths' loads and calls stay monomorphic, as in one
 * class. Measured against the one class it was, both builds in one
 * process, rounds alternating (load 4-8, 2 cores): a 64-byte malloc/free
 * pair 1.00x (21-23 ns), churn with 1k/10k/100k live objects 0.83-1.03x.
 *
 * The profiler is reached through the hooks this folder owns (hooks.ts):
 * the recorder on a sampled allocation, free or resize, nothing else.
 */
import { HeapOwnershipError, InvalidPointerError, OutOfMemoryError } from "../errors.js";
import { formatSize } from "../units.js";
import { allocatePageSpan, freePageRange, largestFreeSpanPages } from "./page-spans.js";
import { Outbox, chainNext, claimLive, pushInbox, takeInbox } from "./cross-shard.js";
import { formatDiagnostics } from "./diagnostics.js";
import { profilerHooks, type ApiEntry, type ProfilerHooks, type SampleRecorder } from "./hooks.js";
import * as layout from "./layout.js";
import { clearMark } from "./orphans.js";
import { ownershipMessage } from "./ownership.js";
import { checkSize, liveObjectRegion, objectSizeIn, type HeapGeometry } from "./pointers.js";
import { holdInQuarantine, quarantineBudget, quarantinedBytes, takeOldest } from "./quarantine.js";
import { HeapViews, ShardRegion } from "./region.js";
import * as sizeClasses from "./size-classes.js";
import { refillPool, releaseClean, sampledTagIndex, trimPool } from "./small-pool.js";
import { readStats } from "./memory-stats.js";

// Module-local copies, as in shard-allocator.ts (which has the measurement):
// these paths run on every refill, trim, sample and page-span allocation.
const {
  C_BYTES_ALLOCATED,
  C_CROSS_SHARD_FREES,
  C_CROSS_SHARD_RECEIVED,
  C_FAILED_ALLOCATIONS,
  C_FREES,
  C_LARGE_ALLOCATIONS,
  C_MALLOCS,
  C_RECLAIMS,
  PAGE_INNER,
  PAGE_LARGE,
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
  POOL_COUNT,
  SAMPLED_POOL_BASE,
  classTrimTarget,
  classSize,
} = sizeClasses;

export abstract class AllocatorSlowPaths extends ShardRegion {
  protected readonly geometry: HeapGeometry;
  /** The heap as a Buffer, for UTF-8 written in place (mallocString). */
  protected readonly buf: Buffer;
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
  protected localBytes: number;
  /**
   * The objects an earlier owner left allocated when its thread died
   * (orphans.ts), marked until freed or let go; null when there are none
   * (always, unless this allocator was made by a takeover that asked for
   * them: SharedHeap.adoptShard(id, { orphans: true })).
   */
  protected orphanMarks: Int32Array | null = null;
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
  protected sampleCountdown = -Infinity;
  /** The profiler's recorder for this shard (hooks.ts), reached on slow paths only. */
  protected readonly profiler: SampleRecorder;
  /** The profiler's readings (heapProfile, peakProfile). */
  protected readonly profilerReads: ProfilerHooks;
  /** The public method that called malloc on the user's behalf (allocateAligned, realloc), if any. */
  protected outerEntry: ApiEntry | undefined = undefined;
  /**
   * Remote-free batching (off unless batchCrossShardFrees(true); the Smp
   * runtime turns it on in every shard): frees of other shards' objects
   * wait in this shard's outbox and are pushed as chains (cross-shard.ts).
   */
  protected batching = false;
  protected readonly outbox: Outbox;

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

  /** Pop an object from pool `poolIndex`, refilling its clean list first if it is empty. */
  protected mallocSmallSlow(poolIndex: number): number {
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
  protected drainInbox(): number {
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
  protected mallocNotSmall(size: number): number {
    return this.mallocLarge(checkSize(size, "malloc"), PAGE_SIZE, this.malloc);
  }

  /** The pool's lists passed maxFree: settle the claims and send a batch back to the spans. */
  protected trimAfterFree(pool: number): void {
    trimPool(this, pool, classTrimTarget[pool]!);
  }

  /**
   * The sampler chose this allocation (or this thread does not own the
   * shard: the countdown is -Infinity then): take the object from the
   * class's sampled pool, capture the stack, and tag the object with its
   * site. Cost: a V8 stack capture (a few microseconds), once per sample.
   */
  protected mallocSampled(cls: number): number {
    this.checkOwned("malloc");
    this.sampleCountdown = this.profiler.nextInterval();
    const pool = SAMPLED_POOL_BASE + cls;
    const obj = this.mallocSmallSlow(pool);
    const tag = sampledTagIndex(this, obj, pool);
    this.i32[tag] = 0; // untagged until recorded: a failed capture must not leave a stale tag
    try {
      this.i32[tag] = this.profiler.recordSample(classSize[cls]!, this.outerEntry ?? this.malloc);
    } catch (e) {
      this.freeUnpublished(obj);
      throw e;
    }
    return obj;
  }

  /** A page span of ceil(size / 4096) pages at a multiple of `align`. */
  protected mallocLarge(size: number, align: number, entry: ApiEntry): number {
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

  protected freeSlow(ptr: number, size: number | undefined): void {
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
  protected claimOwn(ptr: number): boolean {
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
  protected releaseClaimed(ptr: number): void {
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
  protected freeUnpublished(ptr: number): void {
    if (this.claimOwn(ptr)) this.releaseClaimed(ptr);
  }

  /** Return a page-span object's pages (its head no longer heads a used span). */
  private releaseLargeSpan(head: number, pages: number): void {
    this.i32[this.pageMeta(head) + PM_STATE] = PAGE_INNER;
    freePageRange(this, head, pages);
  }

  /** Hand a claimed object to its owner: batched in the outbox, or pushed at once. */
  protected sendForeign(owner: ShardRegion, ptr: number): void {
    this.f64[this.counters + C_CROSS_SHARD_FREES]++;
    if (this.batching) this.outbox.add(owner, ptr);
    else pushInbox(owner, ptr);
  }

  /** Give back the tail of a large object past `pages`. */
  protected shrinkLarge(head: number, pages: number): void {
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
    this.trimAll();
  }

  private outOfMemory(requested: number): OutOfMemoryError {
    this.f64[this.counters + C_FAILED_ALLOCATIONS]++;
    const s = readStats(this);
    return new OutOfMemoryError(
      `shard ${this.id}: cannot allocate ${requested} bytes ` +
        `(${formatSize(s.freeMemory)} free of ${formatSize(s.totalMemory)}, ` +
        `largest free span ${formatSize(largestFreeSpanPages(this) * PAGE_SIZE)})`,
      requested,
      formatDiagnostics(this),
    );
  }

  /**
   * Drain the inbox, move every object cached in a pool's lists back to its
   * span, and release every span left empty (trim() without its ownership
   * check, for reclaim). Returns the bytes returned to free spans.
   */
  protected trimAll(): number {
    const before = this.freePages();
    this.drainInbox();
    for (let pool = 0; pool < POOL_COUNT; pool++) trimPool(this, pool, 0);
    return (this.freePages() - before) * PAGE_SIZE;
  }

  /** HeapOwnershipError unless this thread owns the shard. */
  protected checkOwned(op: string): void {
    if (!this.owned) throw new HeapOwnershipError(ownershipMessage(this, op), this.id);
  }

  /** ShardAllocator's malloc (shard-allocator.ts): the entry a sampled stack starts below when no other public method called it. */
  abstract malloc(size: number): number;
}
