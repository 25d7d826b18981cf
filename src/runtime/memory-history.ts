/**
 * What the dashboard draws over time, kept by the admin server: once per
 * sampleIntervalMs (1 s by default), every shard's statistics (used,
 * free, live objects, cross-shard frees sent, failed allocations, the
 * largest free span: what fragmentation leaves), profiler rate and V8 heap
 * figures (each shard's own isolate, as it last posted them: smp.jsHeapStats), and every
 * site's live bytes, all read from the SharedArrayBuffer on the server's
 * thread, so the shards do nothing for it (a busy or stuck shard is
 * sampled all the same). Bounded rings: the statistics of the last
 * historySeconds (15 minutes), the sites' bytes of the last
 * growthWindowSeconds (5 minutes, what growing-sites.ts fits lines to), at
 * most MAX_TRACKED_SITES distinct sites (further ones are not followed),
 * a Float32 of bytes and one of objects per site and shard: 300 samples x
 * 1024 sites x 8 bytes = 2.4 MiB per shard at worst. The shards are the heap's regions: with
 * Smp.start({ mainShard: true }) the main thread's is the last.
 */
import { InvalidValueError } from "../errors.js";
import { siteKey, type Frame } from "../memory/heap-profile.js";
import type { Smp } from "../smp/smp.js";
import type { GrowingSite, HistorySample, ShardSample } from "./dashboard/api.js"; // the admin API's answers, declared once there
import { rankGrowingSites, type GrowthMeasure, type SiteSeries } from "./growing-sites.js";

export interface HistoryOptions {
  /** How often to sample, in ms (default 1000; 50 to 60000). */
  sampleIntervalMs?: number;
  /** How far back the statistics go, in seconds (default 900). */
  historySeconds?: number;
  /** The window growing sites are fitted over, in seconds (default 300; at most historySeconds). */
  growthWindowSeconds?: number;
}

type FilledHistoryOptions = Required<HistoryOptions>;

export const DEFAULT_HISTORY_OPTIONS: FilledHistoryOptions = { sampleIntervalMs: 1000, historySeconds: 900, growthWindowSeconds: 300 };

/** Distinct sites whose bytes are followed, at most. */
export const MAX_TRACKED_SITES = 1024;

/** A fixed-capacity ring, oldest first when read. */
class Ring<T> {
  private readonly items: T[] = [];
  private head = 0;
  constructor(readonly capacity: number) {}
  push(item: T): void {
    if (this.items.length < this.capacity) this.items.push(item);
    else {
      this.items[this.head] = item;
      this.head = (this.head + 1) % this.capacity;
    }
  }
  toArray(): T[] {
    return [...this.items.slice(this.head), ...this.items.slice(0, this.head)];
  }
}

export function fillHistoryOptions(o: HistoryOptions = {}): FilledHistoryOptions {
  const f = { ...DEFAULT_HISTORY_OPTIONS, ...o };
  const check = (field: keyof HistoryOptions, min: number, max: number): void => {
    const v = f[field];
    if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max) {
      throw new InvalidValueError(`options.dashboard.${field}`, `options.dashboard.${field} must be a whole number from ${min} to ${max}, got ${String(v)}`);
    }
  };
  check("sampleIntervalMs", 50, 60_000);
  check("historySeconds", 1, 7 * 24 * 3600);
  check("growthWindowSeconds", 1, f.historySeconds);
  return f;
}

interface SiteSample {
  t: number;
  /** Per shard: live bytes by tracked site index (shorter when sites were added later: 0 before). */
  sizes: Float32Array[];
  /** Per shard: live objects, likewise. */
  counts: Float32Array[];
}

export class MemoryHistory {
  readonly options: FilledHistoryOptions;
  private readonly stats: Ring<HistorySample>;
  private readonly sites: Ring<SiteSample>;
  private readonly siteIndex = new Map<string, number>();
  private readonly siteFrames: Frame[][] = [];
  /** Each tracked site's labels (undefined: none), by index as siteFrames. */
  private readonly siteLabels: Array<Record<string, string> | undefined> = [];
  private timer: NodeJS.Timeout | undefined;
  /** How long the last sample took on this thread, in ms. */
  lastSampleMs = 0;

  constructor(
    private readonly smp: Smp,
    o: HistoryOptions = {},
  ) {
    this.options = fillHistoryOptions(o);
    this.stats = new Ring(Math.max(1, Math.ceil((this.options.historySeconds * 1000) / this.options.sampleIntervalMs)));
    this.sites = new Ring(Math.max(2, Math.ceil((this.options.growthWindowSeconds * 1000) / this.options.sampleIntervalMs)));
  }

  start(): void {
    if (this.timer) return;
    this.sample();
    // unref: the history never keeps a process alive.
    this.timer = setInterval(() => this.sample(), this.options.sampleIntervalMs).unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Take one sample now (the timer calls this). */
  sample(): void {
    const started = performance.now();
    const t = Date.now();
    const shards: ShardSample[] = [];
    const sizes: Float32Array[] = [];
    const counts: Float32Array[] = [];
    try {
      for (let s = 0; s < this.smp.heap.shards; s++) {
        const st = this.smp.stats(s);
        const profile = this.smp.heapProfile(s);
        const fill = this.smp.heap.profilerFill(s);
        shards.push({
          used: st.allocatedMemory,
          free: st.freeMemory,
          liveObjects: st.liveObjects,
          crossShardFrees: st.crossShardFrees,
          failedAllocations: st.failedAllocations,
          largestFreeSpan: this.smp.heap.largestFreeSpan(s),
          sampleRate: profile.sampleRate,
          foldedAllocations: fill.folded.allocCount,
          siteCapacity: fill.siteCapacity,
          js: this.smp.jsHeapStats(s) ?? null,
        });
        const row: Array<[number, number, number]> = [];
        for (const site of profile.sites) {
          const i = this.indexOf(site.frames, site.labels);
          if (i !== undefined) row.push([i, site.size, site.count]);
        }
        const bytes = new Float32Array(this.siteFrames.length);
        const objects = new Float32Array(this.siteFrames.length);
        for (const [i, size, count] of row) {
          bytes[i] = size;
          objects[i] = count;
        }
        sizes.push(bytes);
        counts.push(objects);
      }
    } catch {
      return; // a heap being torn down: skip this sample, the next one tells
    }
    this.stats.push({ t, shards });
    this.sites.push({ t, sizes, counts });
    this.lastSampleMs = performance.now() - started;
  }

  /** Samples taken after `since` (ms since the epoch), oldest first. */
  since(since = 0): HistorySample[] {
    return this.stats.toArray().filter((s) => s.t > since);
  }

  /** The sites whose live bytes (or objects: `by`) grew steadily over the growth window, of one shard or all, fastest first. */
  growing(shard?: number, limit = 20, by: GrowthMeasure = "bytes"): GrowingSite[] {
    const samples = this.sites.toArray();
    const t0 = samples[0]?.t ?? 0;
    const t = samples.map((s) => (s.t - t0) / 1000);
    const shards = shard === undefined ? [...Array(this.smp.heap.shards).keys()] : [shard];
    const series = (i: number): SiteSeries => ({
      frames: this.siteFrames[i]!,
      ...(this.siteLabels[i] === undefined ? {} : { labels: this.siteLabels[i] }),
      y: samples.map((s) => shards.reduce((n, sh) => n + (s.sizes[sh]?.[i] ?? 0), 0)),
      counts: samples.map((s) => shards.reduce((n, sh) => n + (s.counts[sh]?.[i] ?? 0), 0)),
    });
    return rankGrowingSites(t, (function* (count: number) {
      for (let i = 0; i < count; i++) yield series(i);
    })(this.siteFrames.length), limit, by);
  }

  /** A site's index in the series, by frames and labels (a site is both). */
  private indexOf(frames: Frame[], labels: Record<string, string> | undefined): number | undefined {
    const key = siteKey(frames, labels);
    let i = this.siteIndex.get(key);
    if (i === undefined && this.siteFrames.length < MAX_TRACKED_SITES) {
      i = this.siteFrames.length;
      this.siteIndex.set(key, i);
      this.siteFrames.push(frames);
      this.siteLabels.push(labels);
    }
    return i;
  }
}
