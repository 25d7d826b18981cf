/**
 * Peaks: what each shard's sites held at the moment its profiled live bytes
 * were highest, and what every shard's sites held at the moment the shards'
 * sum was highest, kept in the buffer at O(1) per profiled allocation or
 * free (memray's HighWaterMarkAggregator, in shared memory).
 *
 * A new high would have every site copied if done naively; instead a peak
 * has an epoch, and each site's peak record (layout.ts PR_*) holds its
 * figures as of one epoch:
 *   - before a site's figures change, touch() looks at its record: if it
 *     belongs to an older epoch, the peak moved since the site last
 *     changed, so what the site holds now is what it held at the peak:
 *     copied into the record, which takes the current epoch;
 *   - after the change, moved() adds it to the shard's live bytes; past
 *     the peak, the peak takes them, the time, and a new epoch.
 * So at any moment, site s held at the peak:
 *   its record's figures   if the record's epoch is the current one
 *                          (s changed since the peak; the record was
 *                          filled just before its first change),
 *   its live figures       otherwise (s has not changed since).
 * Exact mode: the peak profile is the live profile at the peak moment, to
 * the byte. Sampled: the same estimates the live profile had then (every
 * figure is on the books' grid, site-table.ts COUNT_QUANTUM, so copying
 * and adding lose nothing). Nothing else is copied at a new high: the
 * cost is a compare per touched site and, at each new high, Date.now().
 *
 * The heap-wide peak works the same way with a second half of each record
 * (PR_HEAP) and an epoch in the heap header, bumped by whichever shard
 * sees the sum pass it. The sum is one word every shard adds its change to
 * (Atomics.add, in 8-byte units: PEAK_UNIT_BYTES), so "the moment the sum
 * was highest" is exact up to what the other shards were doing at that
 * instant: each other shard may have the one allocation or free it was
 * recording counted on one side of the moment and not the other, and its
 * figures are rounded down to 8 bytes in the sum (not in the profile).
 * That is the tolerance the docs state.
 *
 * One writer per peak record and PK slot: the shard's owner (SiteTable
 * calls in here). The heap header's words are shared, through Atomics.
 * Readers (peak-profile.ts) are any thread or an image.
 */
import {
  H_PEAK_EPOCH,
  H_PEAK_LIVE,
  H_PEAK_SINCE_F64,
  H_PEAK_TIME_F64,
  H_PEAK_UNITS,
  PEAK_STRIDE,
  PEAK_UNIT_BYTES,
  PK_EPOCH,
  PK_LIVE,
  PK_PEAK,
  PK_SINCE,
  PK_TIME,
  PR_ALLOC_COUNT,
  PR_ALLOC_SIZE,
  PR_COUNT,
  PR_EPOCH,
  PR_HEAP,
  PR_SIZE,
  SRF_ALLOC_COUNT,
  SRF_ALLOC_SIZE,
  SRF_COUNT,
  SRF_SIZE,
  S_PROF_HEAP_UNITS,
  S_PROF_MAX_SITES,
} from "../layout.js";
import type { ShardRegion } from "../region.js";

/** The books of one shard's peaks, on its owner's thread. Allocates nothing per call. */
export class PeakBooks {
  private readonly f64: Float64Array;
  private readonly i32: Int32Array;
  /** Float64 index of the shard's PK slots. */
  private readonly pk: number;
  /** Float64 index of peak record 0. */
  private readonly records: number;
  /** Int32 index of S_PROF_HEAP_UNITS. */
  private readonly units: number;
  /**
   * The heap's atomic add (atomics.ts: WebAssembly's where the heap allows,
   * ~7.6 ns against Atomics.add's ~20 ns in Node 20, where an Atomics call
   * is a builtin call). The only atomic a profiled operation makes here;
   * the epochs and the peak are read plainly: a read a moment stale only
   * moves which operation in flight lands on which side of a new high.
   */
  private readonly add: (address: number, value: number) => number;

  constructor(r: ShardRegion) {
    this.f64 = r.f64;
    this.i32 = r.i32;
    this.pk = r.peak;
    this.records = r.peaksOffset >>> 3;
    this.units = r.hdr + S_PROF_HEAP_UNITS;
    this.add = r.atomics.add;
  }

  /**
   * Site `site`, whose counters start at Float64 index `f` (site-table.ts
   * SRF_*), is about to change: keep what it held at each peak that moved
   * since its last change.
   */
  touch(site: number, f: number): void {
    const f64 = this.f64;
    const p = this.records + site * PEAK_STRIDE;
    const epoch = f64[this.pk + PK_EPOCH]!;
    if (f64[p + PR_EPOCH] !== epoch) keepFigures(f64, f, p, epoch);
    const heapEpoch = this.i32[H_PEAK_EPOCH]!;
    if (f64[p + PR_HEAP + PR_EPOCH] !== heapEpoch) keepFigures(f64, f, p + PR_HEAP, heapEpoch);
  }

  /** The shard's profiled live bytes changed by `delta` (a touched site's change): a new high becomes the peak. */
  moved(delta: number): void {
    const f64 = this.f64;
    const pk = this.pk;
    const live = f64[pk + PK_LIVE]! + delta;
    f64[pk + PK_LIVE] = live;
    if (live > f64[pk + PK_PEAK]!) {
      f64[pk + PK_PEAK] = live;
      f64[pk + PK_TIME] = Date.now();
      f64[pk + PK_EPOCH]++;
    }
    const i32 = this.i32;
    const units = Math.floor(live / PEAK_UNIT_BYTES);
    const d = units - i32[this.units]!;
    if (d !== 0) {
      i32[this.units] = units;
      const sum = (this.add(H_PEAK_LIVE << 2, d) + d) >>> 0;
      if (sum > i32[H_PEAK_UNITS]! >>> 0) raiseHeapPeak(i32, this.f64, sum);
    }
  }
}

/** Copy the site's four figures (counters at `f`) into the peak record half at `p`, as of peak epoch `epoch`. */
function keepFigures(f64: Float64Array, f: number, p: number, epoch: number): void {
  f64[p + PR_COUNT] = f64[f + SRF_COUNT]!;
  f64[p + PR_SIZE] = f64[f + SRF_SIZE]!;
  f64[p + PR_ALLOC_COUNT] = f64[f + SRF_ALLOC_COUNT]!;
  f64[p + PR_ALLOC_SIZE] = f64[f + SRF_ALLOC_SIZE]!;
  f64[p + PR_EPOCH] = epoch;
}

/**
 * The shards' sum passed the heap-wide peak: take it (unless another shard
 * took a higher one meanwhile), then its time and a new epoch. Cost: a
 * compareExchange and Date.now(), at each new heap-wide high.
 */
function raiseHeapPeak(i32: Int32Array, f64: Float64Array, sum: number): void {
  for (;;) {
    const current = Atomics.load(i32, H_PEAK_UNITS);
    if (sum <= current >>> 0) return;
    if (Atomics.compareExchange(i32, H_PEAK_UNITS, current, sum | 0) === current) break;
  }
  f64[H_PEAK_TIME_F64] = Date.now();
  Atomics.add(i32, H_PEAK_EPOCH, 1);
}

/** A fresh region's peak: nothing yet; epoch 1, so a record never written (epoch 0) never reads as current. */
export function initPeaks(r: ShardRegion): void {
  if (r.peaksOffset === 0) return;
  r.f64.fill(0, r.peak, r.peak + PK_SINCE + 1);
  r.f64[r.peak + PK_EPOCH] = 1;
  r.i32[r.hdr + S_PROF_HEAP_UNITS] = 0;
}

/** A fresh heap's heap-wide peak (its header page is zeroed): epoch 1, kept from now. */
export function initHeapPeak(i32: Int32Array, f64: Float64Array, now = Date.now()): void {
  Atomics.store(i32, H_PEAK_EPOCH, 1);
  f64[H_PEAK_SINCE_F64] = now;
}

/** The shard's peak starts again from now (its owner only): the peak is what it holds now. */
export function resetShardPeak(r: ShardRegion, now = Date.now()): void {
  if (r.peaksOffset === 0) return;
  const f64 = r.f64;
  f64[r.peak + PK_PEAK] = f64[r.peak + PK_LIVE]!;
  f64[r.peak + PK_TIME] = now;
  f64[r.peak + PK_SINCE] = now;
  f64[r.peak + PK_EPOCH]++;
}

/** Profiling starts on the shard: its peak is kept from now, unless it was already. */
export function startPeaks(r: ShardRegion, now = Date.now()): void {
  if (r.peaksOffset !== 0 && r.f64[r.peak + PK_SINCE] === 0) r.f64[r.peak + PK_SINCE] = now;
}

/**
 * The heap-wide peak starts again from now, from any thread: the shards'
 * sum now becomes it. A shard raising it at the same moment may win; either
 * way the peak is one the shards' sum reached since.
 */
export function resetHeapPeak(i32: Int32Array, f64: Float64Array, now = Date.now()): void {
  Atomics.store(i32, H_PEAK_UNITS, Atomics.load(i32, H_PEAK_LIVE));
  f64[H_PEAK_TIME_F64] = now;
  f64[H_PEAK_SINCE_F64] = now;
  Atomics.add(i32, H_PEAK_EPOCH, 1);
}

/** One shard's peak as its slots say: bytes, when, since when (0 when never). */
export interface PeakSlots {
  live: number;
  peakBytes: number;
  peakTime: number;
  since: number;
}

export function readPeakSlots(r: ShardRegion): PeakSlots {
  const f64 = r.f64;
  return { live: f64[r.peak + PK_LIVE]!, peakBytes: f64[r.peak + PK_PEAK]!, peakTime: f64[r.peak + PK_TIME]!, since: f64[r.peak + PK_SINCE]! };
}

/** The heap-wide peak's time and since (ms since the epoch; 0: never). */
export function readHeapPeakTimes(f64: Float64Array): { peakTime: number; since: number } {
  return { peakTime: f64[H_PEAK_TIME_F64]!, since: f64[H_PEAK_SINCE_F64]! };
}

/** Which peak a site's figures are read at. */
export type PeakKind = "shard" | "heap";

/** The four figures site `site` (counters at Float64 index `f`) held at the peak of `kind`. */
export function figuresAtPeak(r: ShardRegion, site: number, f: number, kind: PeakKind): { count: number; size: number; allocCount: number; allocSize: number } {
  const f64 = r.f64;
  const p = (r.peaksOffset >>> 3) + site * PEAK_STRIDE + (kind === "heap" ? PR_HEAP : 0);
  const epoch = kind === "heap" ? Atomics.load(r.i32, H_PEAK_EPOCH) : f64[r.peak + PK_EPOCH]!;
  const from = f64[p + PR_EPOCH] === epoch ? p : -1;
  return from < 0
    ? { count: f64[f + SRF_COUNT]!, size: f64[f + SRF_SIZE]!, allocCount: f64[f + SRF_ALLOC_COUNT]!, allocSize: f64[f + SRF_ALLOC_SIZE]! }
    : { count: f64[from + PR_COUNT]!, size: f64[from + PR_SIZE]!, allocCount: f64[from + PR_ALLOC_COUNT]!, allocSize: f64[from + PR_ALLOC_SIZE]! };
}

/** Largest figure a peak slot may hold (site-table.ts MAX_SITE_FIGURE). */
const MAX_FIGURE = Number.MAX_SAFE_INTEGER;

const isFigure = (v: number): boolean => v >= 0 && v <= MAX_FIGURE;
const isTime = (v: number): boolean => Number.isFinite(v) && v >= 0;

/**
 * What is wrong with a region's peak slots and records, or undefined: every
 * figure a finite, non-negative number, every epoch and time finite. For
 * images (region-validation.ts); the owner keeps these by construction.
 */
export function peaksProblem(r: ShardRegion): string | undefined {
  if (r.peaksOffset === 0) return undefined;
  const f64 = r.f64;
  const s = readPeakSlots(r);
  if (!isFigure(s.live) || !isFigure(s.peakBytes)) return `peak slots hold live ${s.live}, peak ${s.peakBytes}`;
  if (!isTime(s.peakTime) || !isTime(s.since) || !Number.isFinite(f64[r.peak + PK_EPOCH])) return `peak slots hold time ${s.peakTime}, since ${s.since}, epoch ${f64[r.peak + PK_EPOCH]}`;
  const sites = r.headerSlot(S_PROF_MAX_SITES);
  const base = r.peaksOffset >>> 3;
  for (let site = 0; site < sites; site++) {
    for (const half of [0, PR_HEAP]) {
      const p = base + site * PEAK_STRIDE + half;
      for (const field of [PR_COUNT, PR_SIZE, PR_ALLOC_COUNT, PR_ALLOC_SIZE]) {
        if (!isFigure(f64[p + field]!)) return `site ${site}'s peak record holds ${f64[p + field]}`;
      }
      if (!Number.isFinite(f64[p + PR_EPOCH])) return `site ${site}'s peak record has epoch ${f64[p + PR_EPOCH]}`;
    }
  }
  return undefined;
}

/** What is wrong with the heap header's peak words, or undefined. */
export function heapPeakProblem(f64: Float64Array): string | undefined {
  const t = readHeapPeakTimes(f64);
  return isTime(t.peakTime) && isTime(t.since) ? undefined : `heap-wide peak time ${t.peakTime}, since ${t.since}`;
}
