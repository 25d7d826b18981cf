/**
 * Test helper for the store commands (store.ts) and the item cache under
 * them, on one shard's heap: a store, storage commands as a connection
 * makes them (the value written into a reservation), what a get would
 * read, and the checks that nothing is left behind.
 */
import { expect } from "vitest";
import { SharedHeap } from "../../../dist/index.js";
import { createIndex, indexShare } from "../../../dist/apps/memcached/store/cache-memory.js";
import { createInboxes } from "../../../dist/apps/memcached/store/hand-over.js";
import { ItemCache } from "../../../dist/apps/memcached/store/item-cache.js";
import { ItemViews, itemSize } from "../../../dist/apps/memcached/store/item.js";
import type { StoreMode } from "../../../dist/apps/memcached/protocol/protocol.js";
import { STAT, classCounters, createStatsBuffer, shardCounters } from "../../../dist/apps/memcached/stats/stats.js";
import { ItemStore, type MetaStore, type Stored } from "../../../dist/apps/memcached/store/store.js";

export const NOW = 1_800_000_000;

/** An item cache on shard 0 of a one-shard `heap`, over an index of its own, as shard.ts makes it (`itemBytes` 0: --memory). */
export function cacheOn(heap: SharedHeap, views: ItemViews, stats: SharedArrayBuffer, o: { evict?: boolean; itemBytes?: number } = {}): ItemCache {
  const itemBytes = o.itemBytes ?? 0;
  const map = createIndex(heap, 0, indexShare(itemBytes, heap.shard(0).stats().totalMemory));
  return new ItemCache({ heap, memory: heap.shard(0), views, map, inboxes: createInboxes(1), counters: shardCounters(stats, 0), classes: classCounters(stats, 0), shard: 0, evict: o.evict ?? true, prefixDelimiter: ":", itemBytes });
}

export function storeFixture(o: { shardBytes?: string; casEnabled?: boolean } = {}) {
  const heap = SharedHeap.create({ shards: 1, shardBytes: o.shardBytes ?? "4MiB" });
  const views = new ItemViews(heap);
  const stats = createStatsBuffer(1);
  const counters = shardCounters(stats, 0);
  const cache = cacheOn(heap, views, stats);
  const store = new ItemStore({ cache, views, counters, shard: 0, shards: 1, maxItemSize: 1 << 20, casEnabled: o.casEnabled ?? true });
  /** A storage command as a connection makes it: the value written into a reservation the store then links or gives up. */
  const staged = (mode: StoreMode, key: string, value: string, o2: { exptime?: number; flags?: number; cas?: string; meta?: MetaStore; now?: number } = {}): number => {
    const ref = filled(key, value, o2.flags ?? 0, o2.exptime ?? 0);
    return ref === 0 ? -1 : store.storeReserved(mode, key, ref, o2.cas ?? "", o2.now ?? NOW, o2.meta);
  };
  /** An ms's store (store.ts storeMeta): the result, and the cas and length of the item it linked. */
  const metaStored = (mode: StoreMode, key: string, value: string, meta: MetaStore, cas = ""): Stored => store.storeMeta(mode, key, filled(key, value, 0, 0), cas, NOW, meta);
  /** A reservation for `key` filled with `value`, as a connection fills one from its socket. */
  const filled = (key: string, value: string, flags: number, exptime: number): number => {
    const ref = store.reserve(key, itemSize(key.length, flags, value.length));
    if (ref === 0) return 0;
    const ptr = store.map.valuePointer(ref);
    views.writeHead(ptr, 0, key, flags, exptime, value.length);
    views.bytes.write(value, views.dataStart(ptr), "latin1");
    views.terminate(ptr);
    return ref;
  };
  /** The address of `key`'s item in the map now, 0 if none. */
  const item = (key: string): number => {
    const ref = store.map.acquire(key);
    if (ref === 0) return 0;
    const ptr = store.map.valuePointer(ref);
    store.map.release(ref);
    return ptr;
  };
  /** The same, with the defaults and a compared `cas`. */
  const reserved = (mode: StoreMode, key: string, value: string, cas = ""): number => staged(mode, key, value, { cas });
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
  return { heap, views, cache, store, counters, staged, reserved, metaStored, item, read, stat };
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

