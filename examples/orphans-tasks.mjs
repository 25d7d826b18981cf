// Tasks for orphans.mjs: a shard that keeps objects in its own module state
// (lost if its thread dies) and hands a few to another shard.
const mine = []; // this thread's own state
let borrowed = []; // pointers into other shards' memory

export function make(n, shard) {
  for (let i = 0; i < n; i++) mine.push(shard.memory.malloc(100));
  return Array.from({ length: 3 }, () => shard.memory.mallocString("shared with another shard"));
}
/** How many objects this thread's module state remembers. */
export function remembered() {
  return mine.length;
}
export function hold(ptrs) {
  borrowed = ptrs;
}
/** Which of `deadShard`'s objects this shard still uses. */
export function pointersInto(deadShard, shard) {
  return borrowed.filter((p) => shard.heap.ownerOf(p) === deadShard);
}
export function release(_arg, shard) {
  for (const p of borrowed.splice(0)) shard.heap.free(p);
}
export function crash() {
  process.exit(1); // in a worker thread: ends this shard's thread, not the process
}
