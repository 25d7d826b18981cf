/**
 * The Prometheus metrics, read from the heap's buffer at scrape time:
 * every contract name with a `shard` label and its type, failed
 * allocations counted exactly as MemoryStats counts them, and the largest
 * free span per shard: the whole shard on a fresh one, what fragmentation
 * leaves once spans pin the memory, and 0 when the shard is full.
 */
import { describe, expect, it } from "vitest";
import { OutOfMemoryError } from "../../src/index.js";
import { setPressureThresholds } from "../../src/memory/pressure.js";
import { MEMORY_METRIC_NAMES, memoryMetricsRegistry } from "../../src/runtime/metrics.js";
import { newHeap } from "../helpers.js";

/** name{shard="N"} -> value, from the text format. */
function samples(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const [, series, value] of text.matchAll(/^(shardheap_\w+\{shard="\d+"\}) (\S+)$/gm)) out.set(series!, Number(value));
  return out;
}

describe("/metrics", () => {
  it("serves every contract name per shard, with its type, failed allocations and the largest free span among them", async () => {
    const heap = newHeap({ shards: 2, shardBytes: "1MiB" });
    const text = await memoryMetricsRegistry(heap).metrics();
    const contract = ["malloc_operations_total", "free_operations_total", "cross_cpu_free_operations_total", "malloc_live_objects", "free_memory_bytes", "total_memory_bytes", "allocated_memory_bytes", "reclaims_operations_total", "malloc_failed_total"];
    expect([...MEMORY_METRIC_NAMES].sort()).toEqual([...contract, "largest_free_span_bytes", "pressure_events_total"].map((n) => `shardheap_memory_${n}`).sort());
    for (const name of MEMORY_METRIC_NAMES) {
      expect(text).toMatch(new RegExp(`^# TYPE ${name} ${name.endsWith("_total") ? "counter" : "gauge"}$`, "m"));
      for (const shard of [0, 1]) expect(text, name).toMatch(new RegExp(`^${name}\\{shard="${shard}"\\} \\d+$`, "m"));
    }
    const m = samples(text);
    // A fresh shard is one free span: all of it.
    expect(m.get('shardheap_memory_largest_free_span_bytes{shard="1"}')).toBe(heap.stats(1).freeMemory);
    expect(m.get('shardheap_memory_malloc_failed_total{shard="0"}')).toBe(0);
  });

  it("counts each failed allocation once and follows the largest free span as spans pin the shard", async () => {
    const heap = newHeap({ shards: 2, shardBytes: "1MiB" });
    const registry = memoryMetricsRegistry(heap);
    const a = heap.shard(0);
    // Fill the shard with 32 KiB objects, then free every other one: the free memory is half the shard, in 32 KiB pieces.
    const held: number[] = [];
    let failed = 0;
    for (;;) {
      try {
        held.push(a.malloc(32 * 1024));
      } catch (e) {
        expect(e).toBeInstanceOf(OutOfMemoryError);
        failed++;
        break;
      }
    }
    for (let i = 0; i < 4; i++) expect(() => a.malloc(32 * 1024)).toThrow(OutOfMemoryError);
    failed += 4;
    let m = samples(await registry.metrics());
    expect(m.get('shardheap_memory_malloc_failed_total{shard="0"}')).toBe(failed);
    expect(m.get('shardheap_memory_malloc_failed_total{shard="0"}')).toBe(heap.stats(0).failedAllocations);
    expect(m.get('shardheap_memory_malloc_failed_total{shard="1"}')).toBe(0);
    expect(m.get('shardheap_memory_largest_free_span_bytes{shard="0"}')).toBe(heap.largestFreeSpan(0));
    expect(heap.largestFreeSpan(0)).toBeLessThan(32 * 1024);

    for (let i = 0; i < held.length; i += 2) a.free(held[i]!);
    m = samples(await registry.metrics());
    const free = m.get('shardheap_memory_free_memory_bytes{shard="0"}')!;
    const largest = m.get('shardheap_memory_largest_free_span_bytes{shard="0"}')!;
    expect(largest).toBe(heap.largestFreeSpan(0));
    expect(free).toBeGreaterThan(10 * 32 * 1024);
    // Fragmented: half the shard free, no piece much larger than one object.
    expect(largest).toBeGreaterThanOrEqual(32 * 1024);
    expect(largest).toBeLessThan(free / 4);
    // An allocation one page past the largest span finds no room: counted as failed.
    expect(() => a.malloc(largest + 4096)).toThrow(OutOfMemoryError);
    expect(samples(await registry.metrics()).get('shardheap_memory_malloc_failed_total{shard="0"}')).toBe(failed + 1);
    for (let i = 1; i < held.length; i += 2) a.free(held[i]!);
    expect(samples(await registry.metrics()).get('shardheap_memory_largest_free_span_bytes{shard="0"}')).toBe(heap.stats(0).freeMemory);
  });

  it("counts memory-pressure crossings per shard, and serves each shard's peak", async () => {
    const heap = newHeap({ shards: 2, shardBytes: "1MiB" });
    setPressureThresholds(heap.regions[1]!, [0.5, 0.75]);
    const registry = memoryMetricsRegistry(heap);
    const a = heap.shard(1);
    a.setHeapProfilingEnabled(true);
    const held: number[] = [];
    while (a.stats().allocatedMemory < 0.8 * a.stats().totalMemory) held.push(a.malloc(20_000));
    let m = samples(await registry.metrics());
    expect(m.get('shardheap_memory_pressure_events_total{shard="1"}')).toBe(2);
    expect(m.get('shardheap_memory_pressure_events_total{shard="0"}')).toBe(0);
    expect(m.get('shardheap_profiler_peak_bytes{shard="1"}')).toBe(a.peakProfile().peakBytes);
    for (const p of held.splice(Math.floor((held.length * 3) / 4))) a.free(p); // to about 60%
    while (a.stats().allocatedMemory < 0.8 * a.stats().totalMemory) held.push(a.malloc(20_000));
    m = samples(await registry.metrics());
    expect(m.get('shardheap_memory_pressure_events_total{shard="1"}')).toBe(3); // 0.75 again; 0.5 was never left
    for (const p of held) a.free(p);
  });
});
