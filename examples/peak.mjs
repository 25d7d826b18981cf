// Peaks: what held the memory at its highest, after the fact. A batch job
// loads everything, keeps a little, then builds its summaries; by the time
// anyone looks, the live heap shows the summaries, and the peak profile
// still names the load, to the byte (every allocation is recorded here).
// Run: node examples/peak.mjs
// Output: at the peak, ..., 18432000 bytes:
// Output: after resetPeak: 2662400 bytes
import { SharedHeap, formatTree } from "shardheap";

process.env.SHARDHEAP_LOG ??= "silent";
const heap = SharedHeap.create({ shards: 1, shardBytes: 64 * 1024 * 1024 });
const shard = heap.shard(0);
shard.setHeapProfilingEnabled(true);

function loadEverything(n) {
  const rows = [];
  for (let i = 0; i < n; i++) rows.push(shard.malloc(6000));
  return rows;
}
function buildSummaries(n) {
  const out = [];
  for (let i = 0; i < n; i++) out.push(shard.malloc(1000));
  return out;
}

const rows = loadEverything(3000);
for (const p of rows.splice(100)) shard.free(p); // keep 100 rows
buildSummaries(2000);

console.log("now:");
console.log(formatTree(heap.heapProfile(0)));
const peak = heap.peakProfile(0);
console.log(`at the peak, ${new Date(peak.peakTime).toISOString()}, ${peak.peakBytes} bytes:`);
console.log(formatTree(peak));
shard.resetPeak(); // the peak starts again from what is held now
console.log(`after resetPeak: ${heap.peakProfile(0).peakBytes} bytes`);
