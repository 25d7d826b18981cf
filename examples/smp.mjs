// Shards on worker threads: each shard allocates, the next shard frees
// what it allocated (cross-shard frees through the owners' lock-free
// inboxes), and the statistics show every object came home.
// Run: node examples/smp.mjs
// Output: freed by the next shard: 10000 foreign, 10000 foreign, 10000 foreign
// Output: heap.check(): []
import { Smp, formatSize } from "shardheap";

const smp = await Smp.start({ shards: 3, memoryPerShard: "32MiB", module: new URL("./tasks.mjs", import.meta.url) });
smp.on("error", (e) => console.error(`shard ${e.shard} failed:`, e.message));

const made = await Promise.all([0, 1, 2].map((s) => smp.submitTo(s, "allocate", { count: 10_000, size: 48 })));
console.log("allocated:", made.map((ptrs, s) => `shard ${s}: ${ptrs.length}`).join(", "));

const freed = await Promise.all(made.map((ptrs, s) => smp.submitTo((s + 1) % 3, "release", ptrs)));
console.log("freed by the next shard:", freed.map((f) => `${f.foreign} foreign`).join(", "));

await smp.stop(); // drains what is still in flight
for (let s = 0; s < 3; s++) {
  const st = smp.stats(s);
  console.log(`shard ${s}: mallocs ${st.mallocs}, frees ${st.frees}, sent to others ${st.crossShardFrees}, live ${st.liveObjects}, used ${formatSize(st.allocatedMemory)}`);
}
console.log("heap.check():", smp.heap.check());
