// Stored values: mallocString and mallocBytes put a string or bytes in the
// shared heap with their length, so a single number (the pointer) is all
// another thread needs to read them: heap.storedString, storedView (no
// copy), storedBytes (a copy), storedLength. Each is an ordinary object:
// whoever is done with it last frees it, once.
// Run: node examples/stored-values.mjs
// Output: shard 0 answered with pointer ...: "order 42: 3 items for Ada"
// Output: prices in place: 2.5, 10, 0.75 (24 bytes), total 13.25
// Output: InvalidPointerError: ...interior pointer...
// Output: shard 1 read shard 0's string: ORDER 42: 3 ITEMS FOR ADA
// Output: live objects: 0, heap.check(): []
import { InvalidPointerError, Smp } from "shardheap";

const smp = await Smp.start({ shards: 2, memoryPerShard: "8MiB", module: new URL("./stored-values-tasks.mjs", import.meta.url) });
smp.on("error", (e) => console.error(`shard ${e.shard}:`, e.message));
const order = { id: 42, customer: "Ada", items: [{ price: 2.5 }, { price: 10 }, { price: 0.75 }] };

const text = await smp.submitTo(0, "describe", order);
console.log(`shard 0 answered with pointer ${text}: ${JSON.stringify(smp.heap.storedString(text))}`);

const bytes = await smp.submitTo(0, "prices", order);
const view = smp.heap.storedView(bytes); // a Uint8Array over the heap: valid until the object is freed
const floats = new Float64Array(view.buffer, view.byteOffset, view.length / 8); // 8-aligned, so this works
const total = floats.reduce((a, b) => a + b, 0);
console.log(`prices in place: ${floats.join(", ")} (${smp.heap.storedLength(bytes)} bytes), total ${total}`);
smp.heap.free(bytes); // any thread may free: this one goes back to shard 0

// A pointer that is not a live object's start gets a specific error; nothing changes.
try {
  smp.heap.storedString(text + 8);
} catch (e) {
  if (!(e instanceof InvalidPointerError)) throw e;
  console.log(`${e.name}: ${e.message}`);
}

// Hand the pointer to another shard: it reads the string and frees it.
console.log(`shard 1 read shard 0's string: ${await smp.submitTo(1, "shout", text)}`);

await smp.stop(); // drains the frees in flight
console.log(`live objects: ${smp.stats().liveObjects}, heap.check(): ${JSON.stringify(smp.heap.check())}`);
