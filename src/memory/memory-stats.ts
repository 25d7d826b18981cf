/**
 * MemoryStats: one shard's counters read from the buffer, and the one
 * table of stat fields that the allocator, reports, CLI, admin API and
 * metrics all import (so a field is named and described in one place).
 */
import {
  C_BYTES_ALLOCATED,
  C_CROSS_SHARD_FREES,
  C_FAILED_ALLOCATIONS,
  C_FREES,
  C_LARGE_ALLOCATIONS,
  C_MALLOCS,
  C_RECLAIMS,
  PAGE_SIZE,
  P_FREES_HI,
  P_FREES_LO,
  P_MALLOCS_HI,
  P_MALLOCS_LO,
  POOL_STRIDE,
} from "./layout.js";
import { POOL_COUNT, classSize } from "./size-classes.js";
import type { ShardRegion } from "./region.js";

/**
 * freeMemory + allocatedMemory == totalMemory; allocatedMemory includes
 * spans held by small pools (their cached free objects too);
 * liveObjects == mallocs - frees (objects freed by another shard count as
 * live until their owner drains them).
 */
export interface MemoryStats {
  mallocs: number;
  frees: number;
  crossShardFrees: number;
  liveObjects: number;
  freeMemory: number;
  allocatedMemory: number;
  totalMemory: number;
  totalBytesAllocated: number;
  reclaims: number;
  largeAllocations: number;
  failedAllocations: number;
}

export type MemoryStatName = keyof MemoryStats;

/** Every MemoryStats field with what it means and whether it only grows. */
export const MEMORY_STAT_FIELDS: ReadonlyArray<{
  name: MemoryStatName;
  kind: "counter" | "gauge";
  unit: "objects" | "bytes" | "operations";
  help: string;
}> = [
  { name: "mallocs", kind: "counter", unit: "operations", help: "Allocations made by this shard" },
  { name: "frees", kind: "counter", unit: "operations", help: "Objects of this shard freed (locally or drained from the cross-shard list)" },
  { name: "crossShardFrees", kind: "counter", unit: "operations", help: "Frees this shard sent to other shards" },
  { name: "liveObjects", kind: "gauge", unit: "objects", help: "Objects allocated and not yet freed (mallocs - frees)" },
  { name: "freeMemory", kind: "gauge", unit: "bytes", help: "Bytes in free page spans" },
  { name: "allocatedMemory", kind: "gauge", unit: "bytes", help: "Bytes in used page spans, small-pool spans included" },
  { name: "totalMemory", kind: "gauge", unit: "bytes", help: "Bytes of object pages in this shard" },
  { name: "totalBytesAllocated", kind: "counter", unit: "bytes", help: "Sum of the sizes of every object allocated" },
  { name: "reclaims", kind: "counter", unit: "operations", help: "Times the shard drained and returned cached spans to satisfy an allocation" },
  { name: "largeAllocations", kind: "counter", unit: "operations", help: "Allocations served as page spans (> 16 KiB or page-aligned)" },
  { name: "failedAllocations", kind: "counter", unit: "operations", help: "Allocations that failed with OutOfMemoryError" },
];

export function readStats(r: ShardRegion): MemoryStats {
  // Small objects are counted per class in their pool records, page spans
  // in the shard counters; totals are the sums.
  let mallocs = r.counter(C_MALLOCS);
  let frees = r.counter(C_FREES);
  let bytes = r.counter(C_BYTES_ALLOCATED);
  for (let c = 0; c < POOL_COUNT; c++) {
    const p = r.pools + c * POOL_STRIDE;
    const n = (r.i32[p + P_MALLOCS_LO]! >>> 0) + r.i32[p + P_MALLOCS_HI]! * 2 ** 32;
    mallocs += n;
    frees += (r.i32[p + P_FREES_LO]! >>> 0) + r.i32[p + P_FREES_HI]! * 2 ** 32;
    bytes += n * classSize[c]!;
  }
  const totalMemory = r.dataPages * PAGE_SIZE;
  const freeMemory = r.freePages() * PAGE_SIZE;
  return {
    mallocs,
    frees,
    crossShardFrees: r.counter(C_CROSS_SHARD_FREES),
    liveObjects: mallocs - frees,
    freeMemory,
    allocatedMemory: totalMemory - freeMemory,
    totalMemory,
    totalBytesAllocated: bytes,
    reclaims: r.counter(C_RECLAIMS),
    largeAllocations: r.counter(C_LARGE_ALLOCATIONS),
    failedAllocations: r.counter(C_FAILED_ALLOCATIONS),
  };
}

export function sumStats(all: readonly MemoryStats[]): MemoryStats {
  const total = {} as MemoryStats;
  for (const f of MEMORY_STAT_FIELDS) total[f.name] = all.reduce((s, x) => s + x[f.name], 0);
  return total;
}
