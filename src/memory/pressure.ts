/**
 * Memory pressure, the shard's side: thresholds of its memory (fractions of
 * totalMemory, used when allocatedMemory reaches them) kept in its header
 * as page counts, and each upward crossing counted there and rung on the
 * heap's pressure doorbell (H_PRESSURE_BELL), on which an Smp's main
 * thread waits to report it (smp/memory-pressure.ts). Redpanda logs its top
 * sites when free memory falls below 20% and again at 10%; this is that,
 * per shard, found where the memory is taken.
 *
 * allocatedMemory changes only where pages leave or join the free spans
 * (page-spans.ts), so that is where it is looked at: taking pages compares
 * the free pages with one header word (S_PRESSURE_RISE: below it, the next
 * threshold is reached; 0 when none is left), and returning pages looks
 * only while a threshold is reached (S_PRESSURE_LEVEL > 0). A page-span
 * operation is already a slow path (a pool refill is a batch of objects);
 * the compare is one load. Rejected: the main thread polling every shard's
 * statistics on a timer: a shard can go from 70% to out of memory between
 * two ticks (measured: a 64 MiB shard went from 70% to full in 1.3 ms of
 * 64 KiB allocations), and the tick would cost every idle process its
 * wake-ups.
 *
 * A threshold crossed again counts again only after usage fell below it
 * (the level drops when a free takes usage under a reached threshold).
 * Nothing here allocates: the ring is two atomics, and the report is made
 * on another thread from the buffer.
 */
import {
  H_PRESSURE_BELL,
  MAX_PRESSURE_THRESHOLDS,
  S_FREE_PAGES,
  S_PRESSURE_COUNT,
  S_PRESSURE_CROSSINGS,
  S_PRESSURE_LEVEL,
  S_PRESSURE_PAGES,
  S_PRESSURE_PPM,
  S_PRESSURE_RISE,
} from "./layout.js";
import type { ShardRegion } from "./region.js";

export { MAX_PRESSURE_THRESHOLDS };

/** Millionths: how a threshold is kept (a fraction of 0.8 is 800000). */
const PPM = 1_000_000;

/**
 * Set region `r`'s thresholds (ascending fractions in (0, 1], at most
 * MAX_PRESSURE_THRESHOLDS; [] for none), before its owner runs: the
 * thresholds usage is already at count as reached, not as crossed.
 */
export function setPressureThresholds(r: ShardRegion, fractions: readonly number[]): void {
  const i32 = r.i32;
  const n = Math.min(fractions.length, MAX_PRESSURE_THRESHOLDS);
  for (let k = 0; k < MAX_PRESSURE_THRESHOLDS; k++) {
    const f = k < n ? fractions[k]! : 0;
    i32[r.hdr + S_PRESSURE_PPM + k] = Math.round(f * PPM);
    i32[r.hdr + S_PRESSURE_PAGES + k] = k < n ? Math.max(1, Math.ceil(f * r.dataPages)) : 0;
    Atomics.store(i32, r.hdr + S_PRESSURE_CROSSINGS + k, 0);
  }
  i32[r.hdr + S_PRESSURE_COUNT] = n;
  const used = r.dataPages - r.freePages();
  let level = 0;
  while (level < n && used >= i32[r.hdr + S_PRESSURE_PAGES + level]!) level++;
  setLevel(r, level);
}

/** Level `level` (thresholds reached) and the free-page mark that reaches the next one. */
function setLevel(r: ShardRegion, level: number): void {
  const i32 = r.i32;
  i32[r.hdr + S_PRESSURE_LEVEL] = level;
  // Reached when used >= pages, that is free <= dataPages - pages: free < dataPages - pages + 1.
  i32[r.hdr + S_PRESSURE_RISE] = level < i32[r.hdr + S_PRESSURE_COUNT]! ? r.dataPages - i32[r.hdr + S_PRESSURE_PAGES + level]! + 1 : 0;
}

/**
 * The owner took pages and its free pages fell below S_PRESSURE_RISE:
 * every threshold now reached counts a crossing, and the doorbell rings.
 */
export function pressureRose(r: ShardRegion): void {
  const i32 = r.i32;
  const count = i32[r.hdr + S_PRESSURE_COUNT]!;
  const used = r.dataPages - i32[r.hdr + S_FREE_PAGES]!;
  let level = i32[r.hdr + S_PRESSURE_LEVEL]!;
  while (level < count && used >= i32[r.hdr + S_PRESSURE_PAGES + level]!) {
    Atomics.add(i32, r.hdr + S_PRESSURE_CROSSINGS + level, 1);
    level++;
  }
  setLevel(r, level);
  Atomics.add(i32, H_PRESSURE_BELL, 1);
  Atomics.notify(i32, H_PRESSURE_BELL);
}

/** The owner returned pages while a threshold is reached: the level falls below those usage is now under. */
export function pressureFell(r: ShardRegion): void {
  const i32 = r.i32;
  const used = r.dataPages - i32[r.hdr + S_FREE_PAGES]!;
  let level = i32[r.hdr + S_PRESSURE_LEVEL]!;
  while (level > 0 && used < i32[r.hdr + S_PRESSURE_PAGES + level - 1]!) level--;
  if (level !== i32[r.hdr + S_PRESSURE_LEVEL]) setLevel(r, level);
}

/** A region's thresholds and their upward crossings, from the buffer (any thread, an image). */
export interface PressureState {
  /** The thresholds, as the fractions given (to a millionth). */
  thresholds: number[];
  /** Upward crossings of each threshold so far. */
  crossings: number[];
  /** How many thresholds usage is at or above now. */
  level: number;
}

export function readPressure(r: ShardRegion): PressureState {
  const n = Math.max(0, Math.min(MAX_PRESSURE_THRESHOLDS, r.headerSlot(S_PRESSURE_COUNT)));
  const thresholds: number[] = [];
  const crossings: number[] = [];
  for (let k = 0; k < n; k++) {
    thresholds.push(r.headerSlot(S_PRESSURE_PPM + k) / PPM);
    crossings.push(Atomics.load(r.i32, r.hdr + S_PRESSURE_CROSSINGS + k));
  }
  return { thresholds, crossings, level: r.headerSlot(S_PRESSURE_LEVEL) };
}

/** What is wrong with a region's pressure slots, or undefined (for images: region-validation.ts). */
export function pressureProblem(r: ShardRegion): string | undefined {
  const count = r.headerSlot(S_PRESSURE_COUNT);
  const level = r.headerSlot(S_PRESSURE_LEVEL);
  if (count < 0 || count > MAX_PRESSURE_THRESHOLDS || level < 0 || level > count) return `memory pressure: ${count} thresholds, ${level} reached`;
  for (let k = 0; k < count; k++) {
    const ppm = r.headerSlot(S_PRESSURE_PPM + k);
    if (ppm <= 0 || ppm > PPM || r.headerSlot(S_PRESSURE_PAGES + k) < 0 || r.headerSlot(S_PRESSURE_CROSSINGS + k) < 0) {
      return `memory pressure threshold ${k}: ${ppm} millionths, ${r.headerSlot(S_PRESSURE_PAGES + k)} pages, ${r.headerSlot(S_PRESSURE_CROSSINGS + k)} crossings`;
    }
  }
  return undefined;
}
