/**
 * Test helper for `shardheap memcached`: a shard's memory, and whether it
 * is back where it started but for its part of the item index's growth (the index's
 * tables and descriptors only grow: store.ts, shared-map.ts).
 */
import type { MemcachedServer } from "../../../dist/apps/memcached/server.js";
import { SharedMap } from "../../../dist/index.js";

/** A shard's memory: MemoryStats' figures and its item index's own structure (SharedMap.stats), which only grows. */
export interface ShardMemory {
  liveObjects: number;
  allocatedMemory: number;
  indexObjects: number;
  indexBytes: number;
}

/** Read from this thread (no message to the shard, which would keep it from going idle and trimming). */
export async function shardMemory(server: MemcachedServer, shard: number): Promise<ShardMemory> {
  const reader = SharedMap.attach(server.smp.heap, server.index);
  const index = reader.stats();
  reader.close();
  const m = server.smp.stats(shard);
  // The cache's one index: this shard's part of it (the home's tables, every shard's descriptors).
  return { liveObjects: m.liveObjects, allocatedMemory: m.allocatedMemory, indexObjects: index.structureObjectsByShard[shard]!, indexBytes: index.structureBytesByShard[shard]! };
}

/** A pool span or a page span's rounding: what one more object of the index may add to allocatedMemory besides its bytes. */
const SPAN_SLACK = 64 << 10;

/**
 * Whether a shard's memory is back to `start` but for its index's growth:
 * exactly the objects it had then besides the index's own (nothing the
 * items took is left), and no more allocated memory than the index's new
 * structure accounts for.
 */
export function memoryBack(now: ShardMemory, start: ShardMemory): boolean {
  const grown = now.indexObjects - start.indexObjects;
  return (
    now.liveObjects - now.indexObjects === start.liveObjects - start.indexObjects &&
    now.allocatedMemory <= start.allocatedMemory + (now.indexBytes - start.indexBytes) + grown * SPAN_SLACK
  );
}

/** Wait (bounded) until memoryBack holds for `shard`; the last figures in the error. */
export async function waitForMemoryBack(server: MemcachedServer, shard: number, start: ShardMemory, timeoutMs = 10_000): Promise<void> {
  const t0 = performance.now();
  let now = await shardMemory(server, shard);
  while (!memoryBack(now, start)) {
    if (performance.now() - t0 > timeoutMs) {
      throw new Error(`waited ${timeoutMs} ms for shard ${shard}'s memory back to the start: now ${JSON.stringify(now)}, at the start ${JSON.stringify(start)}`);
    }
    await new Promise((r) => setTimeout(r, 20));
    now = await shardMemory(server, shard);
  }
}
