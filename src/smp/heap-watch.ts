/**
 * What the main thread of an Smp watches in the heap on the shards' behalf,
 * from the buffer: memory pressure (memory-pressure.ts: thresholds set
 * before any shard runs, crossings reported as they ring) and the ticks of
 * every shard's timeline (memory/profiler/timeline.ts: once per timelineIntervalMs,
 * and once more at each heap image and at stop, so an image ends at its
 * own moment). The tick's timer is unref'd: it never keeps a process alive.
 */
import type { SharedHeap } from "../memory/shared-heap.js";
import { TimelineWriter } from "../memory/profiler/timeline.js";
import { PressureWatch, type MemoryPressureEvent } from "./memory-pressure.js";

export class HeapWatch {
  private readonly pressure: PressureWatch;
  private readonly writer = new TimelineWriter();
  private timer: NodeJS.Timeout | undefined;
  /** The last tick's time: ticks are strictly later, so no two share one (readers sum the shards tick by tick). */
  private lastTick = 0;

  constructor(
    private readonly heap: SharedHeap,
    o: { memoryPressure: readonly number[]; timelineIntervalMs: number },
    private readonly intervalMs = o.timelineIntervalMs,
  ) {
    this.pressure = new PressureWatch(heap, o.memoryPressure);
  }

  /** Start ticking and waiting for pressure; `onPressure` receives each crossing. */
  start(onPressure: (event: MemoryPressureEvent) => void): void {
    this.pressure.watch(onPressure);
    if (this.timer !== undefined) return;
    this.tick();
    this.timer = setInterval(() => this.tick(), this.intervalMs).unref();
  }

  /** One timeline tick of every region, now. */
  tick(): void {
    const now = Math.max(Date.now(), this.lastTick + 1);
    this.lastTick = now;
    for (const r of this.heap.regions) this.writer.record(r, now);
  }

  /** A last tick and a last look for pressure, then nothing more. */
  stop(): void {
    if (this.timer === undefined) return;
    clearInterval(this.timer);
    this.timer = undefined;
    this.tick();
    this.pressure.stop();
  }
}
