/**
 * Test helper for the store commands (store.ts) and the item cache under
 * them, on one shard's heap: a store, storage commands staged as a
 * connection on another shard stages them or reserved in place, what a get
 * would read, and the checks that nothing is left behind.
 */
import { expect } from "vitest";
import { SharedHeap } from "../dist/index.js";
import { ItemCache } from "../dist/apps/memcached/item-cache.js";
import { ItemViews, itemSize } from "../dist/apps/memcached/item.js";
import type { StoreMode } from "../dist/apps/memcached/protocol.js";
import { STAT, classCounters, createStatsBuffer, shardCounters } from "../dist/apps/memcached/stats.js";
import { ItemStore, type MetaStore } from "../dist/apps/memcached/store.js";

export const NOW = 1_800_000_000;

export function storeFixture(o: { shardBytes?: string; casEnabled?: boolean } = {}) {
  const heap = SharedHeap.create({ shards: 1, shardBytes: o.shardBytes ?? "4MiB" });
  const views = new ItemViews(heap);
  const stats = createStatsBuffer(1);
  const counters = shardCounters(stats, 0);
  const cache = new ItemCache({ heap, memory: heap.shard(0), views, counters, classes: classCounters(stats, 0), shard: 0, evict: true, prefixDelimiter: ":", itemBytes: 0 });
  const store = new ItemStore({ cache, views, counters, shard: 0, shards: 1, maxItemSize: 1 << 20, casEnabled: o.casEnabled ?? true });
  /**
   * A storage command as a connection on another shard makes it: a staging copy the store copies in, cut
   * from the staging area's ring (`ring`: here a plain malloc, which evicts nothing) or, when that is full,
   * allocated by the store (which may evict).
   */
  const staged = (mode: StoreMode, key: string, value: string, o2: { exptime?: number; flags?: number; cas?: string; meta?: MetaStore; ring?: boolean; now?: number } = {}): number => {
    const size = itemSize(key.length, o2.flags ?? 0, value.length);
    const src = o2.ring ? heap.shard(0).malloc(size) : store.allocate(size, key);
    views.writeHead(src, 0, key, o2.flags ?? 0, o2.exptime ?? 0, value.length);
    views.bytes.write(value, views.dataStart(src), "latin1");
    views.terminate(src);
    const r = store.store(mode, key, src, o2.cas ?? "", o2.now ?? NOW, o2.meta);
    store.discardUnlinked(src);
    return r;
  };
  /** The same, as the key's own shard makes it: the value written into a reservation. */
  const reserved = (mode: StoreMode, key: string, value: string, cas = ""): number => {
    const ref = store.reserve(key, itemSize(key.length, 0, value.length));
    const ptr = store.map.valuePointer(ref);
    views.writeHead(ptr, 0, key, 0, 0, value.length);
    views.bytes.write(value, views.dataStart(ptr), "latin1");
    views.terminate(ptr);
    return store.storeReserved(mode, key, ref, cas, NOW);
  };
  /** What a get would find: [value, flags, exptime, cas], or undefined. */
  const read = (key: string): [string, number, number, number] | undefined => {
    const ref = store.map.acquire(key);
    if (ref === 0) return undefined;
    const ptr = store.map.valuePointer(ref);
    const out: [string, number, number, number] = [views.value(ptr).toString("latin1"), views.flags(ptr), views.exptime(ptr), views.cas(ptr)];
    store.map.release(ref);
    return out;
  };
  const stat = (name: keyof typeof STAT): number => counters[STAT[name]]!;
  return { heap, views, cache, store, counters, staged, reserved, read, stat };
}

export type StoreFixture = ReturnType<typeof storeFixture>;

/** The cache's, the map's and the heap's checks, once everything is flushed. */
export function cleanStore(s: StoreFixture): void {
  expect(s.cache.check()).toEqual([]);
  s.cache.flushNow();
  s.cache.map.reclaim();
  expect(s.cache.map.check()).toEqual([]);
  expect(s.heap.check()).toEqual([]);
}

