// Heap labels: a stack says where memory was allocated, a label says for
// whom. Every profiled allocation records the labels in force, so the
// profile can be grouped or filtered by tenant, route, job...
// Run: node examples/labels.mjs
// Output: tenant=b: 24576 bytes in 24 objects
// Output: tenant=a: 8192 bytes in 8 objects
// Output: tenant=(none): 25600 bytes in 100 objects (sites without the label)
// Output: tenant a: ... allocation sites, all under route /login
import { NO_LABEL, Smp, filterByLabel, formatTree, groupByLabel } from "shardheap";

// heapprof: true records every allocation (a number samples one per that many bytes).
const smp = await Smp.start({ shards: 2, memoryPerShard: "16MiB", heapprof: true, module: new URL("./labels-tasks.mjs", import.meta.url) });
smp.on("error", (e) => console.error(`shard ${e.shard}:`, e.message));
const tasks = smp.tasks();

await tasks.login(0, { tenant: "a", count: 8 });
await tasks.login(1, { tenant: "b", count: 24 });
await tasks.warm(1, 100); // labeled job=cache-warmup: no tenant

const profile = smp.heapProfile(); // every shard's, merged
for (const g of groupByLabel(profile, "tenant")) {
  console.log(`tenant=${g.value ?? NO_LABEL}: ${g.size} bytes in ${g.count} objects${g.value === undefined ? " (sites without the label)" : ""}`);
}
const a = filterByLabel(profile, "tenant", "a");
console.log(`tenant a: ${a.sites.length} allocation sites, all under route ${[...new Set(a.sites.map((s) => s.labels?.route))].join(", ")}`);
console.log(formatTree(profile, { by: "tenant" }).split("\n").filter((l) => l.includes("tenant=")).join("\n")); // the tree's first level

await tasks.clear.onAll();
await smp.stop();
