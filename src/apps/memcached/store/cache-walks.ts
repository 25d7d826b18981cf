/**
 * The operator's walks over one shard's LRU order (item-cache.ts keeps
 * it): `stats items` ages, `stats detail dump bytes`, `stats cachedump`.
 * Each is asked for rarely, by people and monitors, so a set pays nothing
 * for them; each runs on the shard's own thread, which alone moves the
 * order's links.
 */
import type { SharedMap } from "../../../memory/shared-map/shared-map.js";
import type { ItemViews } from "./item.js";
import { classSlot, itemClass } from "../stats/item-classes.js";
import type { LruOrder } from "./lru-order.js";
import { MAX_PREFIXES, keyPrefix } from "../stats/prefix-stats.js";

/** What a walk reads: the order, the index its links name entries of, the items' views, the shard's per-class counts. */
export interface Walked {
  readonly order: LruOrder;
  readonly map: SharedMap;
  readonly views: ItemViews;
  readonly classes: Float64Array;
}

/**
 * `stats items` age: per class id, seconds since the least recently used
 * item of that class took its place in the order (0 for a class without
 * items). One walk from the tail, stopping once every class with items
 * has been seen: the whole order at worst (a class whose only items are
 * the newest).
 */
export function classAges(w: Walked, now: number, classCount: number): number[] {
  const ages = new Array<number>(classCount + 1).fill(0);
  let missing = 0;
  for (let id = 1; id <= classCount; id++) if (w.classes[classSlot(id, "number")]! > 0) missing++;
  const seen = new Uint8Array(classCount + 1);
  const v = w.views;
  for (let ref = w.order.tail; ref !== 0 && missing > 0; ) {
    const ptr = w.map.valuePointer(ref);
    ref = v.newer(ptr);
    const id = itemClass(v.allocated(ptr));
    if (seen[id] !== 0) continue;
    seen[id] = 1;
    missing--;
    ages[id] = Math.max(0, now - v.accessed(ptr));
  }
  return ages;
}

/**
 * The bytes of the shard's items (as `bytes` counts them) per key prefix
 * (prefix-stats.ts keyPrefix, with the cache's -D `delimiter`); keys
 * without one are left out; the prefixes in the order of their oldest
 * items; at most MAX_PREFIXES prefixes, as stats detail's own bound.
 */
export function bytesByPrefix(w: Walked, delimiter: string): Map<string, number> {
  const v = w.views;
  const out = new Map<string, number>();
  for (let ref = w.order.tail; ref !== 0; ) {
    const ptr = w.map.valuePointer(ref);
    ref = v.newer(ptr);
    const prefix = keyPrefix(v.key(ptr), delimiter);
    if (prefix === undefined) continue;
    const seen = out.get(prefix);
    if (seen === undefined && out.size >= MAX_PREFIXES) continue;
    out.set(prefix, (seen ?? 0) + v.itemBytes(ptr));
  }
  return out;
}

/**
 * `stats cachedump`: up to `limit` (0: all) items of class `id`, the most
 * recently placed first (memcached lists its LRU from the head), as [key,
 * value bytes, absolute exptime (0: never)]; at most `budget` bytes of
 * answer lines.
 */
export function dump(w: Walked, id: number, limit: number, budget: number): Array<[string, number, number]> {
  const v = w.views;
  const out: Array<[string, number, number]> = [];
  let bytes = 0;
  for (let ref = w.order.head; ref !== 0 && (limit === 0 || out.length < limit); ) {
    const ptr = w.map.valuePointer(ref);
    ref = v.older(ptr);
    if (itemClass(v.allocated(ptr)) !== id) continue;
    const row: [string, number, number] = [v.key(ptr), v.length(ptr), v.exptime(ptr)];
    // "ITEM <key> [<bytes> b; <exptime> s]\r\n"
    bytes += 16 + row[0].length + String(row[1]).length + String(row[2]).length;
    if (bytes > budget) break;
    out.push(row);
  }
  return out;
}
