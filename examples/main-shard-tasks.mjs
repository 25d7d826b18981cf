// Tasks for main-shard.mjs: shards read what the main thread wrote in its
// own region, and free it when done (a cross-shard free back to the main thread).
export function total(batch, shard) {
  let sum = 0;
  for (const { ptr, count } of batch) {
    sum += new Float64Array(shard.heap.buffer, ptr, count).reduce((a, b) => a + b, 0); // read in place
    shard.heap.free(ptr); // onto the main thread's inbox; it drains it itself
  }
  return sum;
}
