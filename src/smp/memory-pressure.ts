/**
 * Memory pressure, the main thread's side (Smp.start's memoryPressure; the
 * shards' side is memory/pressure.ts): set each region's thresholds before
 * any shard runs, then wait on the heap's pressure doorbell; when a shard
 * rings, every new crossing counted in the buffer is reported once: the
 * "memoryPressure" event and one line on stderr naming the shard, the
 * threshold, its memory and its largest sites:
 *
 *   shardheap: shard 1 reached 80% of its memory (51.2M of 64.0M used); largest sites: hoard (app.mjs:12:20) 40.0M, ...
 *
 * Reporting allocates nothing in the heap that is running out: the shard
 * only counted and rang (two atomics, memory/pressure.ts); this thread
 * reads the counts, the statistics and the profile from the buffer and
 * builds the event in its own JS heap. The wait holds nothing open (an
 * Atomics.waitAsync, as main-shard.ts measured), so an idle program exits.
 * A crossing rung while this thread is busy waits in the buffer's counts;
 * none is lost, and stop() reports what came before it.
 */
import { formatSize } from "../units.js";
import { logInfo } from "../log.js";
import { siteWhere } from "../memory/diagnostics.js";
import type { AllocationSite } from "../memory/heap-profile.js";
import { H_PRESSURE_BELL } from "../memory/layout.js";
import { readPressure, setPressureThresholds } from "../memory/pressure.js";
import type { SharedHeap } from "../memory/shared-heap.js";
import { watchDoorbell, type DoorbellWatch } from "./doorbell.js";

/** What the "memoryPressure" event carries. */
export interface MemoryPressureEvent {
  /** The shard whose memory reached the threshold (the main thread's region too, with mainShard). */
  readonly shard: number;
  /** The threshold reached, as given to Smp.start (0.8). */
  readonly threshold: number;
  /** The shard's allocatedMemory and totalMemory when this thread read them. */
  readonly usedBytes: number;
  readonly totalBytes: number;
  /** Its largest sites then, largest first, from the heap profile ([] while profiling never ran on it). */
  readonly topSites: AllocationSite[];
}

/** Sites named in the event and the line: as Redpanda's report. */
export const PRESSURE_TOP_SITES = 5;

export class PressureWatch {
  private readonly seen: number[][];
  private doorbell: DoorbellWatch | undefined;
  private report: ((event: MemoryPressureEvent) => void) | undefined;

  /** Give every region of `heap` the thresholds, before any shard allocates. */
  constructor(
    private readonly heap: SharedHeap,
    thresholds: readonly number[],
  ) {
    for (const r of heap.regions) setPressureThresholds(r, thresholds);
    this.seen = heap.regions.map((r) => readPressure(r).crossings);
  }

  /** Wait on the doorbell; `report` receives each crossing (nothing to wait for without thresholds). */
  watch(report: (event: MemoryPressureEvent) => void): void {
    this.report = report;
    if (this.doorbell !== undefined || this.seen.every((s) => s.length === 0)) return;
    this.doorbell = watchDoorbell(new Int32Array(this.heap.buffer), H_PRESSURE_BELL, () => this.check());
  }

  /** Report what was counted and not yet reported, then stop waiting. */
  stop(): void {
    this.check();
    this.doorbell?.stop();
    this.doorbell = undefined;
  }

  /** Every crossing counted since the last look, one report each. Returns how many. */
  check(): number {
    const report = this.report;
    if (report === undefined) return 0;
    let reported = 0;
    this.heap.regions.forEach((r, shard) => {
      const { thresholds, crossings } = readPressure(r);
      const seen = this.seen[shard]!;
      crossings.forEach((count, k) => {
        for (; (seen[k] ?? 0) < count; seen[k] = (seen[k] ?? 0) + 1) {
          report(this.eventOf(shard, thresholds[k]!));
          reported++;
        }
      });
    });
    return reported;
  }

  private eventOf(shard: number, threshold: number): MemoryPressureEvent {
    const stats = this.heap.stats(shard);
    const sites = this.heap.heapProfile(shard).sites.filter((s) => s.size > 0);
    return { shard, threshold, usedBytes: stats.allocatedMemory, totalBytes: stats.totalMemory, topSites: sites.slice(0, PRESSURE_TOP_SITES) };
  }
}

/** The stderr line of a crossing (without "shardheap: ", which logInfo adds). */
export function pressureLine(e: MemoryPressureEvent, shardName = `shard ${e.shard}`): string {
  const percent = `${Math.round(e.threshold * 1000) / 10}%`;
  const sites = e.topSites.length === 0 ? "no heap profile to name its sites (--heapprof)" : `largest sites: ${e.topSites.map((s) => `${siteWhere(s)} ${formatSize(Math.round(s.size))}`).join(", ")}`;
  return `${shardName} reached ${percent} of its memory (${formatSize(e.usedBytes)} of ${formatSize(e.totalBytes)} used); ${sites}`;
}

/** Write the line (SHARDHEAP_LOG=silent mutes it, as shardheap's other lines). */
export function logPressure(e: MemoryPressureEvent, shardName?: string): void {
  logInfo(pressureLine(e, shardName));
}
