// Tasks for examples/messaging.mjs: a key-value store sharded by key, as a
// Seastar service is. Every shard owns the keys that hash to it; a task
// that lands on the wrong shard sends the work to the owner through
// currentShard.tasks() (this module's tasks as calls: kv.put(shard, arg) is
// submitTo(shard, "put", arg)), shard to shard, without the main thread.
// Values live in the shared heap: what travels between threads is a pointer.
import { currentShard } from "shardheap";

/** This shard's keys -> { ptr, length } of the value's bytes in the heap. */
const store = new Map();
/** This module's tasks on any shard (made now, used once the exports exist). */
const kv = currentShard.tasks();

function ownerOf(key) {
  let h = 0;
  for (let i = 0; i < key.length; i++) h = (Math.imul(h, 31) + key.charCodeAt(i)) | 0;
  return (h >>> 0) % currentShard.shards;
}

export function put({ key, value }, shard) {
  const home = ownerOf(key);
  if (home !== shard.id) return kv.put(home, { key, value }); // not ours: ask the owner
  const bytes = new TextEncoder().encode(value);
  const ptr = shard.memory.malloc(bytes.length);
  shard.heap.bytes(ptr, bytes.length).set(bytes);
  const old = store.get(key);
  if (old) shard.memory.free(old.ptr);
  store.set(key, { ptr, length: bytes.length });
  return home;
}

/** Where the value is ({ ptr, length } in the shared heap), or null: the caller reads it without a copy. */
export function get(key, shard) {
  const home = ownerOf(key);
  if (home !== shard.id) return kv.get(home, key);
  return store.get(key) ?? null;
}

/** Keys in the whole store: every shard counts its own. */
export async function count() {
  const counts = await kv.localCount.onAll();
  return counts.reduce((a, b) => a + b, 0);
}

export function localCount() {
  return store.size;
}

/** Free every value (before stop, so the heap ends empty). */
export function clear(_arg, shard) {
  for (const { ptr } of store.values()) shard.memory.free(ptr);
  const n = store.size;
  store.clear();
  return n;
}
