// When a shard's thread dies: its pending calls reject, a new thread takes
// the shard over (fresh module state, same memory), and what the dead
// thread had allocated is still allocated: its "orphans". The "replaced"
// event counts them; ask the other shards which they still use, and
// free the rest with smp.freeOrphans(shard, { keep }).
// (Smp.start({ orphans: "free" }) frees them all at once, for shards that
// hand no pointers to others.)
// Run: node examples/orphans.mjs
// Output: shard 1 failed: ...
// Output: shard 1 replaced: 103 objects left by the dead thread, 100 freed, 3 kept (shard 0 still uses them)
// Output: shard 1's new thread remembers 0 objects
// Output: shard 1's live objects at the end: 0, heap.check(): []
import { Smp } from "shardheap";

const smp = await Smp.start({ shards: 2, memoryPerShard: "8MiB", module: new URL("./orphans-tasks.mjs", import.meta.url) });
smp.on("error", (e) => console.log(e.message)); // "shard 1 failed: its worker thread exited"
const recovered = new Promise((resolve, reject) => {
  smp.on("replaced", async ({ shard, orphans }) => {
    try {
      const inUse = (await smp.invokeOnAll("pointersInto", shard)).flat(); // every shard says what it still uses
      const freed = await smp.freeOrphans(shard, { keep: inUse });
      resolve(`shard ${shard} replaced: ${orphans.objects} objects left by the dead thread, ${freed.objects} freed, ${freed.kept} kept (shard 0 still uses them)`);
    } catch (e) {
      reject(e);
    }
  });
});

await smp.submitTo(0, "hold", await smp.submitTo(1, "make", 100)); // 100 kept by shard 1, 3 handed to shard 0
await smp.submitTo(1, "crash").catch(() => {}); // the call rejects: its thread is gone
console.log(await recovered);

// The new thread takes calls, with fresh module state; the kept objects are ordinary objects now.
console.log(`shard 1's new thread remembers ${await smp.submitTo(1, "remembered")} objects`);
await smp.submitTo(0, "release"); // shard 0 is done with the three it kept: freed as any object
await smp.stop();
console.log(`shard 1's live objects at the end: ${smp.stats(1).liveObjects}, heap.check(): ${JSON.stringify(smp.heap.check())}`);
