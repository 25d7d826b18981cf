// One port from every shard: a sharded HTTP service, as Seastar's apps
// listen. Each shard makes its own http.Server and hands it to
// shard.listen(server, { port }); connections are spread evenly over the
// shards (they take turns at accepting). The program then makes requests
// itself, closes one shard's server, and stops.
// Run: node examples/http-service.mjs
// Output: serving http://127.0.0.1:... from shards 0 and 1
// Output: 20 requests answered, by shard 0: ... and shard 1: ...
// Output: after shard 0 closed its server: answered by shard 1
import { Smp } from "shardheap";

const smp = await Smp.start({ shards: 2, memoryPerShard: "8MiB", module: new URL("./http-service-tasks.mjs", import.meta.url) });
smp.on("error", (e) => console.error(`shard ${e.shard}:`, e.message));
const tasks = smp.tasks();

const addresses = await tasks.serve.onAll(0); // every shard listens; port 0: one free port for all
const { port, host } = addresses[0];
console.log(`serving http://${host}:${port} from shards ${addresses.map((_, shard) => shard).join(" and ")}`);

// A new connection per request (connection: close), so the shards' turns show.
const get = async (path) => (await fetch(`http://${host}:${port}${path}`, { headers: { connection: "close" } })).json();
const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => get(`/item/${i}`)));
const by = (shard) => answers.filter((a) => a.shard === shard).length;
console.log(`${answers.length} requests answered, by shard 0: ${by(0)} and shard 1: ${by(1)}`);

await tasks.close(0); // shard 0 stops listening; the port stays open for shard 1
console.log(`after shard 0 closed its server: answered by shard ${(await get("/")).shard}`);
await tasks.close(1); // the last server closed: the port is free again
await smp.stop();
