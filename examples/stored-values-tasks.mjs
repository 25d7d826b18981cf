// Tasks for stored-values.mjs: answers that are pointers to values in the
// shared heap, rather than copies cloned across threads.
export function describe(order, shard) {
  // A string in: one object that knows its length. The caller gets one number.
  return shard.memory.mallocString(`order ${order.id}: ${order.items.length} items for ${order.customer}`);
}

export function prices(order, shard) {
  // Bytes in: any typed array, ArrayBuffer or view, copied into the heap once.
  return shard.memory.mallocBytes(new Float64Array(order.items.map((item) => item.price)));
}

export function shout(ptr, shard) {
  // Another shard's stored string, read from the pointer alone, then freed (a cross-shard free).
  const text = shard.heap.storedString(ptr);
  shard.heap.free(ptr);
  return text.toUpperCase();
}
