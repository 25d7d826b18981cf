// Tasks for shared-map.mjs, loaded by every shard on its own thread.
import { SharedMap } from "shardheap";

let prices; // the map this shard made (fill), if it made one
const attached = new Map(); // handle -> this thread's SharedMap object for it: attach once, then reuse

/** Make a map in this shard's memory and fill it. Its handle is a plain number: post it anywhere. */
export function fill(count, shard) {
  prices = SharedMap.create(shard.heap, { shard: shard.id, capacity: count });
  for (let i = 0; i < count; i++) prices.set(`sku-${i}`, JSON.stringify({ sku: i, price: i * 10 }));
  return prices.handle;
}

/** Read another shard's map in place: no message to its owner, no lock, no copy of the table. */
export function lookup({ handle, key }, shard) {
  let map = attached.get(handle);
  if (map === undefined) attached.set(handle, (map = SharedMap.attach(shard.heap, handle)));
  const text = map.getString(key);
  return text === undefined ? null : JSON.parse(text).price;
}

/** Any shard may write; the new entry lives in the writer's own memory. */
export function reprice({ key, price }) {
  prices.set(key, JSON.stringify({ sku: Number(key.slice(4)), price }));
}

/** Let go of this thread's readers; the maker then frees the map and every entry. */
export function close() {
  for (const map of attached.values()) map.close();
  attached.clear();
}
export function destroy() {
  prices.destroy();
}
