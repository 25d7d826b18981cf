// Shards that talk to each other: a key-value store sharded by key
// (examples/kv-tasks.mjs). Every request goes to shard 0; shard 0 passes
// it to the shard that owns the key (currentShard.tasks()), and the
// answer comes back the same way. Values stay in the shared heap; the main
// thread reads them through the pointer it gets back.
// Run: node examples/messaging.mjs
// Output: get("cherry") on shard 1: "cherry (6 letters)" at pointer ..., owned by shard 2
// Output: keys in the store: 7
import { Smp } from "shardheap";

const smp = await Smp.start({ shards: 3, memoryPerShard: "8MiB", module: new URL("./kv-tasks.mjs", import.meta.url) });
smp.on("error", (e) => console.error(`shard ${e.shard} failed:`, e.message));
const kv = smp.tasks(); // the module's tasks as calls: kv.put(shard, arg) is smp.submitTo(shard, "put", arg)

const fruit = ["apple", "banana", "cherry", "damson", "elderberry", "fig", "grape"];
const homes = await Promise.all(fruit.map((key) => kv.put(0, { key, value: `${key} (${key.length} letters)` })));
console.log("stored by shard 0, kept by:", fruit.map((key, i) => `${key} -> shard ${homes[i]}`).join(", "));

const where = await kv.get(1, "cherry"); // asked on shard 1, answered by cherry's owner
const text = new TextDecoder().decode(smp.heap.bytes(where.ptr, where.length));
console.log(`get("cherry") on shard 1: ${JSON.stringify(text)} at pointer ${where.ptr}, owned by shard ${smp.heap.ownerOf(where.ptr)}`);

console.log("keys in the store:", await kv.count(1));
await kv.clear.onAll();
await smp.stop();
console.log("heap.check():", smp.heap.check());
