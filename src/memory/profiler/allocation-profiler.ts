/**
 * The heap profiler's side of an allocator (Seastar's maybe_sample and the
 * costly part behind it): the sampling countdown's draws, the stack capture
 * of a sampled allocation, and the books a sampled object's free or resize
 * keeps: the allocator's SampleRecorder (hooks.ts). The allocator calls in
 * here only on its slow paths; the one thing on its fast path is its own
 * `sampleCountdown` field, which it refills from nextInterval().
 *
 * A sampled object's tag (layout.ts) names its site and the rate epoch it
 * was sampled in, so its free subtracts exactly the weight its allocation
 * added, whatever the rate is by then. Where a small sampled object's tag
 * sits: small-pool.ts sampledTagIndex; page spans keep it in their page record.
 */
import { logInfo } from "../../log.js";
import { recordedHeapLabels } from "./heap-labels.js";
import { PROF_MAX_DEPTH, RATE_EPOCHS, S_PROF_DEPTH, S_PROF_EPOCH, S_PROF_RATE, TAG_SITE_MASK } from "../layout.js";
import { checkSize } from "../pointers.js";
import { resetShardPeak, startPeaks } from "./peaks.js";
import type { ApiEntry, SampleRecorder } from "../hooks.js";
import type { ShardRegion } from "../region.js";
import { MAX_SAMPLE_RATE, Sampler, sampleWeight } from "./sampler.js";
import { SiteTable, epochRate, setEpochRate } from "./site-table.js";
import { captureRawCallSites } from "./stack-capture.js";

export class AllocationProfiler implements SampleRecorder {
  private readonly sampler: Sampler;
  /** The site table, made on first use (it rebuilds its caches from the buffer). */
  private siteTable: SiteTable | undefined;

  constructor(private readonly r: ShardRegion) {
    this.sampler = new Sampler(Date.now() ^ (r.id * 0x9e3779b1));
    // A thread taking over a shard (attach, restart) carries on its rate.
    this.sampler.rate = r.headerSlot(S_PROF_RATE);
  }

  /** Bytes until the next sample: Infinity while profiling is off, 0 when exact. */
  nextInterval(): number {
    return this.sampler.nextInterval();
  }

  /** The shard's rate in bytes: 0 off, 1 every allocation, N one sample per N bytes on average. */
  rate(): number {
    return this.r.headerSlot(S_PROF_RATE);
  }

  /**
   * Set the rate (validated here); opens a new rate epoch when it changes
   * and logs each transition, as the seed's "Enabling heap profiler".
   * Returns the previous rate.
   */
  setRate(bytes: number): number {
    checkSize(bytes, "setHeapProfilingSampleRate", "rate");
    if (bytes > MAX_SAMPLE_RATE) throw new RangeError(`setHeapProfilingSampleRate: rate must be at most ${MAX_SAMPLE_RATE} bytes, got ${bytes}`);
    const r = this.r;
    const old = r.headerSlot(S_PROF_RATE);
    if (bytes !== old) {
      const epoch = (r.headerSlot(S_PROF_EPOCH) + 1) % RATE_EPOCHS;
      setEpochRate(r, epoch, bytes);
      r.i32[r.hdr + S_PROF_EPOCH] = epoch;
      r.i32[r.hdr + S_PROF_RATE] = bytes;
      if (bytes !== 0) startPeaks(r);
      logInfo(`shard ${r.id}: ${rateTransition(old, bytes)}`);
    }
    this.sampler.rate = bytes;
    return old;
  }

  /** Frames recorded per allocation site, 1 to 32 (default 16). */
  setDepth(depth: number): void {
    if (!Number.isInteger(depth) || depth < 1 || depth > PROF_MAX_DEPTH) {
      throw new RangeError(`setHeapProfilingDepth: depth must be an integer from 1 to ${PROF_MAX_DEPTH}, got ${String(depth)}`);
    }
    this.r.i32[this.r.hdr + S_PROF_DEPTH] = depth;
  }

  /** The shard's peak starts again from now (peaks.ts). */
  resetPeak(): void {
    resetShardPeak(this.r);
  }

  /** @internal Keep the peaks' books or not (SiteTable.setPeakBooks): bench/profiler.ts times both in one run. */
  setPeakTracking(on: boolean): void {
    (this.siteTable ??= new SiteTable(this.r)).setPeakBooks(on);
  }

  /** Restart the sampler's generator (reproducible samples in tests). */
  seed(seed: number): void {
    this.sampler.seed(seed);
  }

  /**
   * Record a sampled allocation of `size` usable bytes at the stack below
   * `entry` (the public method the user called), so V8 builds CallSites
   * for the user's frames only. Returns its tag. Cost: a V8 stack capture,
   * once per sample. Measured (a loop freeing and allocating 1.0-1.2 KiB
   * objects at rate 2 MiB, --cpu-prof): ~16 us a capture, one per ~1,900
   * allocations, 11% of that loop's time; in `shardheap memcached` under
   * memcaslap at the same rate, 0.06% of the shards' CPU (a request costs
   * ~45 us there, and only a set allocates). Nothing else of the profiler
   * is paid per allocation: the fast path's countdown is there either way.
   */
  recordSample(size: number, entry: ApiEntry): number {
    const r = this.r;
    const sites = (this.siteTable ??= new SiteTable(r));
    const depth = r.headerSlot(S_PROF_DEPTH);
    // The labels in force (withHeapLabels): read here only, so an allocation nobody samples never looks.
    const site = sites.siteOfCallSites(captureRawCallSites(depth, entry), depth, recordedHeapLabels());
    const epoch = r.headerSlot(S_PROF_EPOCH);
    sites.recordAlloc(site, sampleWeight(size, epochRate(r, epoch)), size);
    return (epoch << 24) | (site + 1);
  }

  /** Undo recordSample for an object of `size` bytes carrying `tag` (0: never recorded). */
  unrecordSample(tag: number, size: number): void {
    if (tag === 0) return;
    const sites = (this.siteTable ??= new SiteTable(this.r));
    sites.recordFree((tag & TAG_SITE_MASK) - 1, sampleWeight(size, epochRate(this.r, tag >>> 24)), size);
  }

  /** A sampled page span carrying `tag` shrank in place from `oldSize` to `newSize` bytes. */
  recordResize(tag: number, oldSize: number, newSize: number): void {
    if (tag === 0) return;
    const rate = epochRate(this.r, tag >>> 24);
    (this.siteTable ??= new SiteTable(this.r)).recordResize(
      (tag & TAG_SITE_MASK) - 1, sampleWeight(oldSize, rate), oldSize, sampleWeight(newSize, rate), newSize);
  }
}

/** The log line for a rate change: every transition says what the profiler does now. */
function rateTransition(old: number, next: number): string {
  const mode = (rate: number): string => (rate === 1 ? "recording every allocation" : `sampling every ${rate} bytes on average`);
  if (next === 0) return "Disabling heap profiler";
  if (old === 0) return next === 1 ? "Enabling heap profiler" : `Enabling heap profiler (${mode(next)})`; // the seed's words
  return `Heap profiler now ${mode(next)} (was ${mode(old)})`;
}
