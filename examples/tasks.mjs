// Tasks for examples/smp.mjs. Every exported function is a task that
// Smp.submitTo runs on one shard's thread as (arg, shard) => value.
export function allocate({ count, size }, shard) {
  const ptrs = [];
  for (let i = 0; i < count; i++) {
    const p = shard.memory.malloc(size);
    shard.heap.bytes(p, 4).set([shard.id, i & 255, 0xab, 0xcd]); // mark who made it
    ptrs.push(p);
  }
  return ptrs;
}

export function release(ptrs, shard) {
  let foreign = 0;
  for (const p of ptrs) {
    if (shard.heap.ownerOf(p) !== shard.id) foreign++;
    shard.memory.free(p); // another shard's object goes to its owner's inbox
  }
  return { freed: ptrs.length, foreign };
}
