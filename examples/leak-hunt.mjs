// Hunting a leak: take a baseline of the live heap, let the service work,
// and ask what grew since. The admin API keeps named baselines for you
// (POST /v1/heapprof/baseline, then any profile with diff=baseline; the
// dashboard's "Growth since baseline" is the same); in a program,
// diffProfiles(before, after) does it with two profiles. Either way the
// growth is a profile of its own, rendered by every report (tree, SVG,
// pprof...), and steady work that allocates and frees cancels out.
// Run: node examples/leak-hunt.mjs
// Output: baseline "default" taken: 224000 bytes live
// Output: All (+438K +448000, #+2000)
// Output: rememberResponse (leak-hunt-tasks.mjs:...)
// Output: readBody: 2000 more allocations, 0 bytes more live (freed as it goes: not a leak)
// Output: grew most: rememberResponse (leak-hunt-tasks.mjs:...), +2000 objects
import { Smp, diffProfiles, serveAdmin } from "shardheap";

// Profile every allocation (heapprof: true): a leak of a few bytes at a time shows exactly.
const smp = await Smp.start({ shards: 1, memoryPerShard: "16MiB", heapprof: true, module: new URL("./leak-hunt-tasks.mjs", import.meta.url) });
smp.on("error", (e) => console.error(`shard ${e.shard}:`, e.message));
const admin = await serveAdmin(smp, { port: 0 });

await smp.submitTo(0, "handle", { from: 0, count: 1000 }); // warm up

// 1. Over HTTP: a baseline, more work, then the growth as a tree (any format: &format=svg for a red/blue flamegraph).
const baseline = await fetch(`${admin.url}/v1/heapprof/baseline`, { method: "POST" });
const [taken] = (await baseline.json()).baselines; // one per shard
console.log(`baseline "${taken.name}" taken: ${taken.totalSize} bytes live`);
const before = smp.heapProfile(); // 2. in-process: a profile now, diffed against a later one below

await smp.submitTo(0, "handle", { from: 1000, count: 2000 });

const growth = await (await fetch(`${admin.url}/v1/heapprof?format=tree&diff=baseline&min=64K`)).text();
console.log("growth since the baseline (admin API):");
console.log(growth.split("\n").slice(0, 3).join("\n")); // the growing branch first: rememberResponse

const diff = diffProfiles(before, smp.heapProfile());
const top = [...diff.sites].sort((a, b) => b.size - a.size)[0];
console.log(`grew most: ${top.frames[0].functionName} (${top.frames[0].url.split("/").pop()}:${top.frames[0].line}), +${top.count} objects`);
const steady = diff.sites.find((site) => site.frames[0].functionName === "readBody");
console.log(`readBody: ${steady.allocCount} more allocations, ${steady.size} bytes more live (freed as it goes: not a leak)`);

await admin.close();
await smp.submitTo(0, "clear");
await smp.stop();
