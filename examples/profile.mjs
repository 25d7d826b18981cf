// The heap profiler on one thread: record every allocation, then print
// where the live heap goes as the seed's text tree and as collapsed stacks.
// Run: node examples/profile.mjs
// Output: All (1742208, #350)
// Output: |-- makeCache (profile.mjs:...) (1323008, #50)
import { SharedHeap, formatTree, toCollapsed, mapProfileToSources } from "shardheap";

process.env.SHARDHEAP_LOG ??= "silent";
const heap = SharedHeap.create({ shards: 1, shardBytes: 64 * 1024 * 1024 });
const shard = heap.shard(0);
shard.setHeapProfilingEnabled(true);

function makeSessions(n) {
  const sessions = [];
  for (let i = 0; i < n; i++) sessions.push({ id: i, buffer: shard.malloc(4096), key: shard.malloc(48) });
  return sessions;
}
function makeCache(n) {
  const entries = [];
  for (let i = 0; i < n; i++) entries.push(shard.malloc(20_000 + (i % 4) * 4096));
  return entries;
}
function serve() {
  const sessions = makeSessions(200);
  const cache = makeCache(50);
  for (const s of sessions.slice(0, 100)) shard.free(s.buffer); // half the buffers go away again
  return { sessions, cache };
}

serve();
const profile = await mapProfileToSources(heap.heapProfile(0));
console.log(formatTree(profile, { minSize: 10_000 }));
console.log(toCollapsed(profile).split("\n").slice(0, 3).join("\n"));
