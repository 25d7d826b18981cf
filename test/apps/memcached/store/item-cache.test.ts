/**
 * The item cache on its own (item-cache.ts, lru-order.ts), on one shard's
 * heap: the LRU order and what eviction takes from it (second chance,
 * bounded), expired items reclaimed at the tail, -M, flush and the
 * operator walks, and the order, the map, the budget and the counts in
 * step after any mix of links, replaces, unlinks and hits (check()).
 */
import { describe, expect, it } from "vitest";
import { SharedHeap } from "../../../../dist/index.js";
import { createIndex, indexBytes, indexCapacity, shardBytesForItems } from "../../../../dist/apps/memcached/store/cache-memory.js";
import { ANY, LINKED } from "../../../../dist/apps/memcached/store/item-cache.js";
import { ItemViews, itemSize } from "../../../../dist/apps/memcached/store/item.js";
import { itemClass } from "../../../../dist/apps/memcached/stats/item-classes.js";
import { STAT, createStatsBuffer, shardCounters } from "../../../../dist/apps/memcached/stats/stats.js";
import { cacheOn } from "../store-fixture.js";

const VALUE = "v".repeat(1000);

function setup(o: { shardBytes?: string | number; evict?: boolean; itemBytes?: number } = {}) {
  const heap = SharedHeap.create({ shards: 1, shardBytes: o.shardBytes ?? "2MiB" });
  const views = new ItemViews(heap);
  const stats = createStatsBuffer(1);
  const counters = shardCounters(stats, 0);
  const cache = cacheOn(heap, views, stats, { evict: o.evict ?? true, itemBytes: o.itemBytes ?? 0 });
  const now = Math.floor(Date.now() / 1000);
  let cas = 1;
  /** Link `value` under `key` as a store command would: false when there was no room. */
  const put = (key: string, value = VALUE, exptime = 0): boolean => {
    const ref = cache.reserve(key, itemSize(key.length, 0, value.length));
    if (ref === 0) return false;
    const ptr = cache.map.valuePointer(ref);
    views.writeHead(ptr, 0, key, 0, exptime, value.length);
    views.bytes.write(value, views.dataStart(ptr), "latin1");
    views.terminate(ptr);
    return cache.link(key, ref, now, cas++, ANY) === LINKED;
  };
  /** The item of `key` (its address, while it is linked), 0 if none. */
  const item = (key: string): number => {
    const ref = cache.map.acquire(key);
    if (ref === 0) return 0;
    const ptr = cache.map.valuePointer(ref);
    cache.map.release(ref);
    return ptr;
  };
  /** A get's hit, as a reader on any shard marks it. */
  const hit = (key: string): void => {
    const ref = cache.map.acquire(key);
    expect(ref).not.toBe(0);
    cache.markHit(cache.map.valuePointer(ref));
    cache.map.release(ref);
  };
  const stat = (name: keyof typeof STAT): number => counters[STAT[name]]!;
  /** Keys k0, k1, ... until the first eviction: how many were linked (the first one evicted). */
  const fill = (): number => {
    let n = 0;
    while (stat("evictions") === 0) expect(put(`k${n++}`)).toBe(true);
    return n;
  };
  return { heap, views, cache, now, put, item, hit, stat, fill };
}

/**
 * A cache whose budget is its items alone (-m's share), for the tests that
 * count to the item what fits. Under --memory the budget also counts the
 * index, whose tables grow at a moment the map's hash seed (random per map)
 * decides: in 200 fills, 2 grew a table during the test's puts and took one
 * eviction more; under -M, in 3 fills of 3,000 the key that did not fit
 * was followed by one that did (its segment's table had room).
 */
function setupItemsOnly(o: { evict?: boolean } = {}) {
  const itemBytes = 1 << 20;
  return setup({ shardBytes: shardBytesForItems(itemBytes, 1), itemBytes, ...o });
}

function clean(s: ReturnType<typeof setup>): void {
  expect(s.cache.check()).toEqual([]);
  s.cache.flushNow();
  s.cache.map.reclaim();
  expect(s.cache.check()).toEqual([]);
  expect(s.stat("curr_items")).toBe(0);
  expect(s.stat("bytes")).toBe(0);
  expect(s.cache.map.check()).toEqual([]);
  expect(s.heap.check()).toEqual([]);
}

describe("the item cache", () => {
  it("evicts the least recently linked item first; a replaced key starts again at the head", () => {
    const s = setupItemsOnly();
    const n = s.fill();
    expect(n).toBeGreaterThan(100);
    expect(s.item("k0")).toBe(0);
    expect(s.item("k1")).not.toBe(0);
    expect(s.put("k2", "x".repeat(990))).toBe(true); // replaced: now the newest
    for (let i = 0; i < 3; i++) expect(s.put(`new${i}`)).toBe(true);
    expect([1, 2, 3, 4, 5].map((i) => s.item(`k${i}`) !== 0)).toEqual([false, true, false, false, true]);
    expect(s.stat("evictions")).toBe(4);
    expect(s.stat("curr_items")).toBe(n - 1 + 3 - 3);
    clean(s);
  });

  it("a hit gives an item a second chance: eviction passes it over once, clearing its mark", () => {
    const s = setupItemsOnly();
    s.fill();
    s.hit("k1");
    expect(s.views.referenced(s.item("k1"))).toBe(true);
    expect(s.put("one")).toBe(true);
    expect(s.item("k1")).not.toBe(0);
    expect(s.views.referenced(s.item("k1"))).toBe(false);
    expect(s.views.fetched(s.item("k1"))).toBe(true);
    expect(s.item("k2")).toBe(0);
    clean(s);
  });

  it("one eviction gives at most 5 second chances, however many items were hit: the work of a set is bounded", () => {
    const s = setupItemsOnly();
    const n = s.fill();
    for (let i = 1; i < n; i++) s.hit(`k${i}`);
    expect(s.put("one")).toBe(true);
    expect(s.stat("evictions")).toBe(2);
    // k1..k5 passed over (their marks cleared, moved to the head), k6 evicted whatever its mark; the rest untouched.
    expect(s.item("k6")).toBe(0);
    let marked = 0;
    for (let i = 1; i < n; i++) if (i !== 6 && s.views.referenced(s.item(`k${i}`))) marked++;
    expect(marked).toBe(n - 1 - 6);
    for (let i = 1; i <= 5; i++) expect(s.views.referenced(s.item(`k${i}`))).toBe(false);
    // The next eviction starts where that one stopped: k7 (marked, passed over) ... the next unmarked one.
    expect(s.put("two")).toBe(true);
    expect(s.item("k12")).toBe(0);
    clean(s);
  });

  it("expired items at the tail give their memory back before a new item takes some; one further in waits for eviction", () => {
    const s = setup();
    const expiring = ["e0", "e1", "e2", "late"];
    for (let i = 0; i < 3; i++) expect(s.put(`e${i}`, "x", s.now + 100)).toBe(true);
    for (let i = 0; i < 5; i++) expect(s.put(`l${i}`, "x")).toBe(true);
    expect(s.put("late", "x", s.now + 100)).toBe(true); // 9th from the tail
    s.hit("e1");
    // Their time passes.
    for (const k of expiring) s.views.setExptime(s.item(k), s.now - 1);
    expect(s.put("trigger", "x")).toBe(true);
    expect(["e0", "e1", "e2", "late"].map((k) => s.item(k) !== 0)).toEqual([false, false, false, true]);
    expect(s.stat("reclaimed")).toBe(3);
    expect(s.stat("expired_unfetched")).toBe(2);
    expect(s.stat("curr_items")).toBe(7);
    clean(s);
  });

  it("-M: no live item is evicted, a store that does not fit fails; an expired item at the tail makes room", () => {
    const s = setupItemsOnly({ evict: false });
    let n = 0;
    while (s.put(`k${n}`)) n++;
    expect(n).toBeGreaterThan(100);
    expect(s.stat("evictions")).toBe(0);
    expect(s.stat("curr_items")).toBe(n);
    expect(s.put("more")).toBe(false);
    expect(s.stat("curr_items")).toBe(n);
    // Their time passes.
    for (let i = 0; i < n; i++) s.views.setExptime(s.item(`k${i}`), s.now - 1);
    expect(s.put("more")).toBe(true);
    expect(s.stat("evictions")).toBe(0);
    expect(s.stat("reclaimed")).toBeGreaterThan(0);
    expect(s.stat("curr_items")).toBe(n + 1 - s.stat("reclaimed"));
    clean(s);
  });

  it("flush unlinks every item, oldest first (expired_unfetched counts them in that order as new items reuse them); the walks read the order", () => {
    const s = setup();
    expect(s.put("a:1", "x".repeat(10))).toBe(true);
    expect(s.put("b:1", "x".repeat(3000))).toBe(true);
    expect(s.put("a:2", "x".repeat(20))).toBe(true);
    const small = itemClass(s.views.allocated(s.item("a:1")));
    expect(s.cache.dump(small, 0, 1 << 20).map((r) => r[0])).toEqual(["a:2", "a:1"]);
    expect(s.cache.dump(small, 1, 1 << 20).map((r) => r[0])).toEqual(["a:2"]);
    const bytes = (k: string): number => s.views.itemBytes(s.item(k));
    expect([...s.cache.bytesByPrefix()]).toEqual([["a", bytes("a:1") + bytes("a:2")], ["b", bytes("b:1")]]);
    const ages = s.cache.classAges(s.now + 7, 39);
    expect(ages[small]).toBe(7);
    expect(ages[itemClass(s.views.allocated(s.item("b:1")))]).toBe(7);
    s.hit("a:1");
    s.cache.flushNow();
    expect(s.stat("curr_items")).toBe(0);
    // The oldest (a:1, fetched) is reused first: not unfetched; then b:1 (unfetched).
    expect(s.put("c", "x")).toBe(true);
    expect(s.stat("expired_unfetched")).toBe(0);
    expect(s.put("d", "x")).toBe(true);
    expect([s.stat("reclaimed"), s.stat("expired_unfetched")]).toEqual([2, 1]);
    s.cache.flushedMiss("a:2");
    s.cache.flushedMiss("a:2");
    expect(s.stat("get_flushed")).toBe(1);
    clean(s);
  });

  it("told the items' bytes (a share of -m), the cache's items take that much, to within one item, the index beside them", () => {
    const itemBytes = 4 << 20;
    const s = setup({ shardBytes: shardBytesForItems(itemBytes, 1), itemBytes });
    s.fill();
    const entry = s.views.allocated(s.item("k1"));
    expect(s.stat("curr_items")).toBe(Math.floor(itemBytes / entry));
    expect(s.heap.shard(0).stats().failedAllocations).toBe(0);
    clean(s);
  });

  it("-m's region: the index it counts is what the map makes, made to a descriptor chunk's end", () => {
    const heap = SharedHeap.create({ shards: 1, shardBytes: "64MiB" });
    for (const itemBytes of [1 << 20, 40 << 20, 256 << 20]) {
      const capacity = indexCapacity(itemBytes);
      const map = createIndex(heap, 0, capacity);
      expect(map.stats().structureBytes, String(itemBytes)).toBe(indexBytes(capacity, heap.shards));
      map.destroy();
    }
    // 256 MiB of 1 KiB items: 262,144 wanted, 261,887 made (the next descriptor chunk, of 65,536, starts at 261,888).
    expect(indexCapacity(256 << 20)).toBe(261_887);
    expect(indexCapacity(200 << 20)).toBe(196_351);
    expect(indexCapacity(130 << 20)).toBe(130_815);
    expect(shardBytesForItems(256 << 20, 1)).toBeGreaterThan((256 << 20) + indexBytes(261_887, 1));
    expect(heap.check()).toEqual([]);
  });

  it("any mix of links, replaces, unlinks, hits and expiries keeps the order, the map, the budget and the counts in step", () => {
    const s = setup({ shardBytes: "1MiB" });
    let seed = 12345;
    const random = (n: number): number => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return (seed >>> 8) % n;
    };
    for (let round = 0; round < 40; round++) {
      for (let i = 0; i < 500; i++) {
        const key = `key${random(3000)}`;
        const op = random(10);
        if (op < 6) s.put(key, "y".repeat(random(4000)), random(4) === 0 ? s.now - 1 : 0);
        else if (op < 8) {
          if (s.item(key) !== 0) s.hit(key);
        } else {
          const ref = s.cache.map.acquire(key);
          if (ref !== 0) {
            s.cache.unlink(ref);
            s.cache.map.release(ref);
          }
        }
      }
      expect(s.cache.check()).toEqual([]);
      let bytes = 0;
      s.cache.map.forEach((ref) => (bytes += s.views.itemBytes(s.cache.map.valuePointer(ref))));
      expect(s.stat("bytes")).toBe(bytes);
    }
    expect(s.stat("evictions")).toBeGreaterThan(0);
    expect(s.stat("reclaimed")).toBeGreaterThan(0);
    clean(s);
  });
});
