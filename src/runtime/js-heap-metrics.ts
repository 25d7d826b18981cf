/**
 * Each shard's V8 heap in /metrics, beside its shared-heap region's
 * figures (metrics.ts), with the same `shard="N"` label: what the shard's
 * thread last posted on the JS heap board (smp.jsHeapStats: every 500 ms,
 * read without asking the shard; the main thread's, with mainShard, read
 * as it is now). The names follow Node's own process metrics
 * (nodejs_heap_size_used_bytes, ...) under `shardheap_js_heap_`. A shard
 * that has not posted yet has no sample.
 */
import { Gauge, type Registry } from "prom-client";
import type { JsHeapStats } from "../smp/js-heap-board.js";
import type { Smp } from "../smp/smp.js";

const JS_HEAP_METRICS: ReadonlyArray<{ name: string; help: string; read(s: JsHeapStats): number }> = [
  { name: "shardheap_js_heap_used_bytes", help: "V8 heap in use in the shard's own isolate (its thread's heapUsed)", read: (s) => s.used },
  { name: "shardheap_js_heap_total_bytes", help: "V8 heap reserved by the shard's own isolate (heapTotal)", read: (s) => s.total },
  { name: "shardheap_js_heap_external_bytes", help: "Memory of C++ objects bound to the shard's JS objects (external), array buffers included", read: (s) => s.external },
  { name: "shardheap_js_heap_array_buffers_bytes", help: "Memory of the shard's ArrayBuffers and Buffers (arrayBuffers)", read: (s) => s.arrayBuffers },
  { name: "shardheap_js_heap_sampling_interval_bytes", help: "The shard's JS heap profiler: mean bytes between samples, 0 off", read: (s) => s.sampleRate },
];

/** Every JS heap metric's full name, in the order served. */
export const JS_HEAP_METRIC_NAMES: readonly string[] = JS_HEAP_METRICS.map((m) => m.name);

/** Add the JS heap gauges to `registry` (returned, for chaining). */
export function registerJsHeapMetrics(registry: Registry, smp: Smp): Registry {
  for (const m of JS_HEAP_METRICS) {
    new Gauge({
      name: m.name,
      help: m.help,
      labelNames: ["shard"],
      registers: [registry],
      collect() {
        this.reset();
        for (let s = 0; s < smp.heap.shards; s++) {
          const stats = smp.jsHeapStats(s);
          if (stats !== undefined) this.set({ shard: String(s) }, m.read(stats));
        }
      },
    });
  }
  return registry;
}
