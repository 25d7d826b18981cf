// The main thread's own shard: Smp.start({ mainShard: true }) gives the
// thread that starts the runtime a region of its own, after the workers'.
// It allocates there with smp.memory (no task, no round trip), hands the
// pointers to the shards, and they read and free the objects in place.
// Run: node examples/main-shard.mjs
// Output: the main thread's shard is 2 of 3 regions; its batch lives there: true
// Output: shards 0 and 1 summed 2000 readings: 1999000
// Output: after stop: the main thread's shard holds 0 objects, heap.check(): []
import { Smp } from "shardheap";

const smp = await Smp.start({ shards: 2, memoryPerShard: "8MiB", mainShard: true, module: new URL("./main-shard-tasks.mjs", import.meta.url) });
smp.on("error", (e) => console.error(`shard ${e.shard}:`, e.message));

// Write a batch of readings straight into shared memory, on this thread.
const batches = [[], []];
for (let i = 0; i < 20; i++) {
  const count = 100;
  const ptr = smp.memory.malloc(count * 8); // 8-aligned
  const readings = new Float64Array(smp.heap.buffer, ptr, count);
  for (let j = 0; j < count; j++) readings[j] = i * count + j;
  batches[i % 2].push({ ptr, count });
}
const first = batches[0][0].ptr;
console.log(`the main thread's shard is ${smp.mainShard} of ${smp.heap.shards} regions; its batch lives there: ${smp.heap.ownerOf(first) === smp.mainShard}`);

// Each shard sums its half and frees it: only pointers travel.
const sums = await Promise.all(batches.map((batch, shard) => smp.submitTo(shard, "total", batch)));
console.log(`shards 0 and 1 summed 2000 readings: ${sums[0] + sums[1]}`);

await smp.stop(); // drains the main thread's inbox last
console.log(`after stop: the main thread's shard holds ${smp.stats(smp.mainShard).liveObjects} objects, heap.check(): ${JSON.stringify(smp.heap.check())}`);
