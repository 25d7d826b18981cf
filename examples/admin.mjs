// The admin HTTP API and its dashboard, served beside your own Smp: open
// the printed URL in a browser for the dashboard (memory per shard, the
// live heap's flamegraph, growing sites, peaks, baselines). Here the
// program asks a few endpoints itself, as curl or a monitor would, and
// stops; keep `smp` running instead and the dashboard stays up.
// Run: node examples/admin.mjs
// Output: dashboard: http://127.0.0.1:.../
// Output: GET / -> 200 text/html (shardheap dashboard)
// Output: GET /v1/memory/stats?shard=0 -> 2000 live objects
// Output: GET /metrics -> shardheap_memory_malloc_live_objects{shard="0"} 2000
// Output: GET /v1/heapprof?format=tree -> All (512000, #2000)
// Output: GET /v1/app/stats -> orders: 3
import { Smp, serveAdmin } from "shardheap";

const smp = await Smp.start({ shards: 2, memoryPerShard: "16MiB", heapprof: true, module: new URL("./tasks.mjs", import.meta.url) });
smp.on("error", (e) => console.error(`shard ${e.shard}:`, e.message));
const kept = await smp.submitTo(0, "allocate", { count: 2000, size: 256 }); // something to see

// The app's own figures, for the dashboard's "App" panel and GET /v1/app/stats.
const shop = { orders: 3 }; // (shards would count in shared memory; the reader runs on this thread)
smp.publishAppStats("shop", () => ({ orders: { value: shop.orders, kind: "counter", help: "orders taken" } }));

// port 0 picks a free port; host defaults to 127.0.0.1. Add { token } before binding anywhere else.
const admin = await serveAdmin(smp, { port: 0 });
console.log(`dashboard: ${admin.url}/`);

const get = async (path) => {
  const res = await fetch(`${admin.url}${path}`);
  if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`);
  return res;
};
const page = await get("/");
console.log(`GET / -> ${page.status} ${page.headers.get("content-type")?.split(";")[0]} (${/<title>(.*)<\/title>/.exec(await page.text())?.[1]})`);
const stats = await (await get("/v1/memory/stats?shard=0")).json(); // MemoryStats as JSON
console.log(`GET /v1/memory/stats?shard=0 -> ${stats.liveObjects} live objects`);
const metrics = await (await get("/metrics")).text(); // Prometheus text format
console.log(`GET /metrics -> ${metrics.split("\n").find((l) => l.startsWith('shardheap_memory_malloc_live_objects{shard="0"}'))}`);
const tree = await (await get("/v1/heapprof?format=tree")).text(); // also svg, pprof, collapsed, heapprofile, json
console.log(`GET /v1/heapprof?format=tree -> ${tree.split("\n")[0]}`);
const app = await (await get("/v1/app/stats")).json();
console.log(`GET /v1/app/stats -> ${app.apps[0].figures.map((f) => `${f.name}: ${f.value}`).join(", ")}`);

await admin.close();
await smp.submitTo(1, "release", kept); // free them (from another shard, as it happens)
await smp.stop();
