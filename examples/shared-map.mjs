// SharedMap: a hash map in the shared heap. One shard makes and fills it;
// every other thread finds it by its handle (a number) and reads it in
// place, without asking the owner. A reader holding a value keeps it alive
// while a writer replaces it.
// Run: node examples/shared-map.mjs
// Output: shard 1 read shard 0's map: sku-42 costs 420
// Output: the main thread still holds the old value: 70; the map now says 99
// Output: entries: 1000, heap.check(): []
import { SharedMap, Smp } from "shardheap";

const smp = await Smp.start({ shards: 2, memoryPerShard: "16MiB", module: new URL("./shared-map-tasks.mjs", import.meta.url) });
smp.on("error", (e) => console.error(`shard ${e.shard}:`, e.message));

const handle = await smp.submitTo(0, "fill", 1000);
console.log(`shard 1 read shard 0's map: sku-42 costs ${await smp.submitTo(1, "lookup", { handle, key: "sku-42" })}`);

// The main thread reads it too: acquire a reference, view the value in place, release it.
const map = SharedMap.attach(smp.heap, handle);
const ref = map.acquire("sku-7"); // 0 if absent
const view = map.value(ref); // a Uint8Array over shard 0's memory, no copy
await smp.submitTo(0, "reprice", { key: "sku-7", price: 99 }); // replaced while we hold the old entry
const held = JSON.parse(new TextDecoder().decode(view)).price;
map.release(ref); // from here on `view` must not be read: the old entry is freed
console.log(`the main thread still holds the old value: ${held}; the map now says ${JSON.parse(map.getString("sku-7")).price}`);
console.log(`entries: ${map.stats().entries}, heap.check(): ${JSON.stringify(smp.heap.check())}`);

// Tear down: every reader lets go, then the maker frees the map.
map.close();
await smp.submitTo(1, "close");
await smp.submitTo(0, "destroy");
await smp.stop();
