/**
 * AllocatorControls: a shard allocator's public operations off the
 * allocation path (the middle of the chain allocator-slow-paths.ts draws):
 * remote-free batching and draining, trim, what a dead owner left
 * (orphans.ts), the heap profiler's controls for this shard (through the
 * recorder, hooks.ts), and the readings any thread may take (stats,
 * diagnostics, profiles, objectSize). Each is called far less often than
 * malloc and free, and none is on their fast paths.
 */
import type { HeapProfile, PeakProfile } from "./heap-profile.js";
import { AllocatorSlowPaths } from "./allocator-slow-paths.js";
import { formatDiagnostics } from "./diagnostics.js";
import { PAGE_SIZE } from "./layout.js";
import { forEachMarked, keptPointers, snapshotLiveBits, type ObjectCount } from "./orphans.js";
import { largestFreeSpanPages } from "./page-spans.js";
import { liveObjectRegion, objectSizeIn, ownerShardOf } from "./pointers.js";
import { POOL_COUNT, SAMPLED_POOL_BASE } from "./size-classes.js";
import { trimPool } from "./small-pool.js";
import { readStats, type MemoryStats } from "./memory-stats.js";

export abstract class AllocatorControls extends AllocatorSlowPaths {
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
    return this.trimAll();
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

  /** @internal The owner of `ptr` (-1 outside every region). */
  ownerOf(ptr: number): number {
    return ownerShardOf(this.geometry, ptr);
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
}
