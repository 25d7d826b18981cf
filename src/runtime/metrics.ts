/**
 * Prometheus metrics through prom-client, with Seastar's memory metric names
 * under `shardheap_memory_` and a `shard` label, read from the heap's
 * buffer at scrape time (no shard is asked). One table maps MemoryStats
 * fields to metric names, another the per-shard figures that are not
 * MemoryStats fields (the largest free span), a third the heap profiler's
 * under `shardheap_profiler_` (how full its site table is, what it folded
 * into "(other sites)"), so the names live in one place. The shards are
 * the heap's regions: with Smp.start({ mainShard: true }) the main
 * thread's is the last, shard="N" beside the workers' (as the admin API
 * lists it).
 */
import { Counter, Gauge, Registry } from "prom-client";
import type { SharedHeap } from "../memory/shared-heap.js";
import { MEMORY_STAT_FIELDS, type MemoryStatName } from "../memory/memory-stats.js";
import { readPeakSlots } from "../memory/profiler/peaks.js";
import { readPressure } from "../memory/pressure.js";
import type { ProfilerFill } from "../memory/heap-profile.js";

const METRIC_NAMES: Partial<Record<MemoryStatName, string>> = {
  mallocs: "malloc_operations_total",
  frees: "free_operations_total",
  crossShardFrees: "cross_cpu_free_operations_total",
  liveObjects: "malloc_live_objects",
  freeMemory: "free_memory_bytes",
  totalMemory: "total_memory_bytes",
  allocatedMemory: "allocated_memory_bytes",
  reclaims: "reclaims_operations_total",
  failedAllocations: "malloc_failed_total",
};

/** A per-shard figure of the heap, as a metric. */
interface ShardMetric {
  name: string;
  kind: "counter" | "gauge";
  help: string;
  read(heap: SharedHeap, shard: number): number;
}

/**
 * Figures beside MemoryStats. The largest free span is what fragmentation
 * takes away: free_memory_bytes can be high while no allocation larger than
 * this fits (a leak-hunting run's shards failed 13,000 mallocs that way). Reading
 * it walks the last non-empty free-span list: 0.36 us on a 64 MiB shard cut
 * into 534 spans, against 2.3 us for the shard's MemoryStats.
 */
const EXTRA_METRICS: readonly ShardMetric[] = [
  {
    name: "shardheap_memory_largest_free_span_bytes",
    kind: "gauge",
    help: "Bytes in the shard's longest free page span: the largest allocation it can serve without a reclaim",
    read: (heap, shard) => heap.largestFreeSpan(shard),
  },
  {
    // Counted by the shard itself in its header (memory/pressure.ts): one per upward crossing of a threshold, as smp reports them.
    name: "shardheap_memory_pressure_events_total",
    kind: "counter",
    help: "Times the shard's allocated memory reached a memory-pressure threshold going up (Smp.start's memoryPressure)",
    read: (heap, shard) => readPressure(heap.regions[shard]!).crossings.reduce((n, c) => n + c, 0),
  },
];

const SHARD_METRICS: readonly ShardMetric[] = [
  ...MEMORY_STAT_FIELDS.flatMap((field): ShardMetric[] => {
    const suffix = METRIC_NAMES[field.name];
    return suffix === undefined ? [] : [{ name: `shardheap_memory_${suffix}`, kind: field.kind, help: field.help, read: (heap, shard) => heap.stats(shard)[field.name] }];
  }),
  ...EXTRA_METRICS,
];

/**
 * The heap profiler's figures, from SharedHeap.profilerFill: a few loads
 * a shard, no site read, so a scrape costs the same at 65,536 sites as at
 * 64. Alert on folded_allocations_total rising, or on sites nearing
 * site_capacity: raise --heapprof-sites. Folded figures are estimates
 * when sampled.
 */
const profilerMetric = (name: string, kind: ShardMetric["kind"], help: string, value: (f: ProfilerFill) => number): ShardMetric => ({
  name: `shardheap_profiler_${name}`,
  kind,
  help,
  read: (heap, shard) => value(heap.profilerFill(shard)),
});

const PROFILER_METRICS: readonly ShardMetric[] = [
  profilerMetric("sites", "gauge", "Distinct allocation stacks the shard's profiler has recorded", (f) => f.sites),
  profilerMetric("site_capacity", "gauge", "Stacks the shard's profiler keeps exactly before it folds new ones into (other sites) (--heapprof-sites)", (f) => f.siteCapacity),
  profilerMetric("folded_allocations_total", "counter", "Allocations counted in (other sites) because a profiler table was full", (f) => f.folded.allocCount),
  profilerMetric("folded_bytes_total", "counter", "Bytes of the allocations counted in (other sites)", (f) => f.folded.allocSize),
  profilerMetric("folded_live_objects", "gauge", "Live objects counted in (other sites)", (f) => f.folded.count),
  profilerMetric("folded_live_bytes", "gauge", "Live bytes counted in (other sites)", (f) => f.folded.size),
  {
    name: "shardheap_profiler_peak_bytes",
    kind: "gauge",
    help: "The shard's highest profiled live bytes since profiling began or its last resetPeak (its peak profile's peakBytes)",
    read: (heap, shard) => (heap.regions[shard]!.peaksOffset === 0 ? 0 : readPeakSlots(heap.regions[shard]!).peakBytes),
  },
];

/** Every memory metric's full name (what /metrics serves), in the order served. */
export const MEMORY_METRIC_NAMES: readonly string[] = SHARD_METRICS.map((m) => m.name);
/** The profiler's, served after them. */
export const PROFILER_METRIC_NAMES: readonly string[] = PROFILER_METRICS.map((m) => m.name);

export function memoryMetricsRegistry(heap: SharedHeap): Registry {
  const registry = new Registry();
  for (const m of [...SHARD_METRICS, ...PROFILER_METRICS]) {
    const options = { name: m.name, help: m.help, labelNames: ["shard"], registers: [registry] };
    if (m.kind === "counter") {
      new Counter({
        ...options,
        collect() {
          this.reset();
          for (let s = 0; s < heap.shards; s++) this.inc({ shard: String(s) }, m.read(heap, s));
        },
      });
    } else {
      new Gauge({
        ...options,
        collect() {
          for (let s = 0; s < heap.shards; s++) this.set({ shard: String(s) }, m.read(heap, s));
        },
      });
    }
  }
  return registry;
}
