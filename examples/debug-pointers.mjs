// Debug pointers: find the code that uses a pointer after its object was
// freed. Normally the memory is handed out again at once, so a stale
// pointer quietly reads someone else's object. With debugPointers (or
// SHARDHEAP_DEBUG_POINTERS=1 in the environment) a freed object is held
// back and poisoned for a while: a checked use of it throws
// InvalidPointerError ("a use after free") on whichever thread makes it, a
// raw read sees 0xdf bytes, and a write to it is reported by heap.check().
// Run: node examples/debug-pointers.mjs
// Output: shard 1 read the session while it was live: ada
// Output: shard 1, after logout: InvalidPointerError ...a use after free...
// Output: a raw read of the freed object: df df df df
// Output: heap.check(): shard 0: object ... was written after it was freed, at byte 16 (debug pointers)
import { InvalidPointerError, Smp } from "shardheap";

const smp = await Smp.start({ shards: 2, memoryPerShard: "8MiB", debugPointers: true, module: new URL("./debug-pointers-tasks.mjs", import.meta.url) });
smp.on("error", (e) => console.error(`shard ${e.shard}:`, e.message));

const ptr = await smp.submitTo(0, "login", "ada"); // shard 0 owns the session; some cache keeps `ptr`
console.log(`shard 1 read the session while it was live: ${await smp.submitTo(1, "read", ptr)}`);
await smp.submitTo(0, "logout", "ada"); // freed: from here on `ptr` is dangling

try {
  await smp.submitTo(1, "read", ptr); // the bug: the error comes back with its class
} catch (e) {
  if (!(e instanceof InvalidPointerError)) throw e;
  console.log(`shard 1, after logout: ${e.name} ${e.message}`);
}
// heap.bytes is the unchecked view: it cannot throw, but the poison says what happened.
console.log(`a raw read of the freed object: ${[...smp.heap.bytes(ptr + 8, 4)].map((b) => b.toString(16)).join(" ")}`);

// A write through a stale pointer (here the raw view again) is found too: heap.check() names it.
smp.heap.bytes(ptr + 16, 1)[0] = 1;
console.log(`heap.check(): ${smp.heap.check().join("; ")}`);

await smp.stop();
