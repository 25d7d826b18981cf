/**
 * Prometheus metrics through prom-client, with Seastar's memory metric names
 * under `shardheap_memory_` and a `shard` label, read from the heap's
 * buffer at scrape time (no shard is asked). One table maps MemoryStats
 * fields to metric names, so the names live in one place.
 */
import { Counter, Gauge, Registry } from "prom-client";
import type { SharedHeap } from "../memory/shared-heap.js";
import { MEMORY_STAT_FIELDS, type MemoryStatName } from "../memory/stats.js";

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

export function memoryMetricsRegistry(heap: SharedHeap): Registry {
  const registry = new Registry();
  for (const field of MEMORY_STAT_FIELDS) {
    const suffix = METRIC_NAMES[field.name];
    if (!suffix) continue;
    const name = `shardheap_memory_${suffix}`;
    if (field.kind === "counter") {
      new Counter({
        name,
        help: field.help,
        labelNames: ["shard"],
        registers: [registry],
        collect() {
          this.reset();
          for (let s = 0; s < heap.shards; s++) this.inc({ shard: String(s) }, heap.stats(s)[field.name]);
        },
      });
    } else {
      new Gauge({
        name,
        help: field.help,
        labelNames: ["shard"],
        registers: [registry],
        collect() {
          for (let s = 0; s < heap.shards; s++) this.set({ shard: String(s) }, heap.stats(s)[field.name]);
        },
      });
    }
  }
  return registry;
}
