// The allocator on one thread: two shards of one SharedArrayBuffer heap,
// objects allocated on shard 0, one freed by shard 1 (a cross-shard free
// that waits in shard 0's inbox until shard 0 drains it).
// Run: node examples/basic.mjs
// Output: shard 0 drained 1 object(s); live now 2
// Output: InvalidPointerError: free(...): interior pointer, 8 bytes into a 32-byte object
// Output: heap.check(): []
import { SharedHeap, InvalidPointerError, formatSize } from "shardheap";

const heap = SharedHeap.create({ shards: 2, shardBytes: 16 * 1024 * 1024 });
const shard0 = heap.shard(0);
const shard1 = heap.shard(1);

// Pointers are byte offsets into heap.buffer; heap.bytes() gives a view.
const greeting = shard0.malloc(32);
heap.bytes(greeting, 5).set(new TextEncoder().encode("hello"));
const table = shard0.malloc(100_000); // > 16 KiB: a page span
const floats = new Float64Array(heap.buffer, shard0.allocateAligned(64, 8 * 16), 16);
floats.fill(Math.PI);

console.log("greeting at", greeting, "owner shard", heap.ownerOf(greeting), "usable", shard0.objectSize(greeting), "bytes");
console.log("table at", table, "usable", formatSize(shard0.objectSize(table)));

// Shard 1 frees shard 0's object: it goes to shard 0's lock-free inbox.
shard1.free(table);
console.log("shard 1 cross-shard frees:", shard1.stats().crossShardFrees, "| shard 0 live objects:", shard0.stats().liveObjects);
console.log("shard 0 drained", shard0.drainCrossShardFrees(), "object(s); live now", shard0.stats().liveObjects);

// Bad input gets a specific error and leaves the heap as it was.
try {
  shard0.free(greeting + 8);
} catch (e) {
  if (!(e instanceof InvalidPointerError)) throw e;
  console.log(`${e.name}: ${e.message}`);
}

shard0.free(greeting);
shard0.free(floats.byteOffset);
console.log("heap.check():", heap.check());
console.log(shard0.diagnostics().split("\n").slice(0, 5).join("\n"));
