/**
 * The packed package runs on the oldest Node its `engines` claims (the
 * binary from the npm registry: registry-packages.ts) as on this one. A named
 * import of something newer than that Node (zlib.crc32 came in 20.15)
 * stops every `import "shardheap"` at link time, and a top-level call of
 * something newer (import.meta.resolve, unflagged in 20.6) at evaluation:
 * so every module of dist/ is loaded there, then a user's program (heap,
 * shards with a task module, SharedMap, a heap image, an HTTP server on
 * one port from both shards) and the command line run there. Skipped, saying why, where that Node cannot be
 * installed (no registry). The test suite itself cannot run there
 * (vitest needs Node 20.19), hence these runs.
 */
import { execFileSync } from "node:child_process";
import { readdirSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { tempDir } from "./helpers.js";
import { nodeBinary, oldestClaimed } from "./registry-packages.js";
import { packedProject, pkg } from "./packed-package.js";

const engines = (pkg as unknown as { engines: { node: string } }).engines.node;
const oldest = oldestClaimed(engines);

/** A user's program: what it prints is the same on every Node. */
const MAIN = `import { connect } from "node:net";
import { SharedHeap, SharedMap, Smp, readHeapImage } from "shardheap";
const heap = SharedHeap.create({ shards: 1, shardBytes: "1MiB" });
const text = heap.storedString(heap.shard(0).mallocString("h\\u00e9llo"));
const smp = await Smp.start({ shards: 2, memoryPerShard: "4MiB", module: new URL("./tasks.mjs", import.meta.url) });
const handle = await smp.submitTo(0, "fill", 10);
const read = await smp.submitTo(1, "read", { handle, key: "k3" });
const map = SharedMap.attach(smp.heap, handle);
const here = map.getString("k7");
map.close();
await smp.saveImage(new URL("./heap.img", import.meta.url).pathname);
const image = await readHeapImage(new URL("./heap.img", import.meta.url).pathname);
// One port from both shards: 4 connections opened together, each kept until answered, land 2 and 2
// (where libuv accepts one connection per poll, 1.45 on: Node 20.3; before, a shard that wakes takes every one waiting).
const bound = await smp.invokeOnAll("serve");
const ask = () => new Promise((resolve, reject) => {
  const socket = connect(bound[0].port, "127.0.0.1");
  let data = "";
  socket.setEncoding("utf8").on("data", (d) => { data += d; const m = /shard (\\d)/.exec(data); if (m) resolve({ socket, shard: Number(m[1]) }); });
  socket.once("error", reject).write("GET / HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n");
});
const answers = await Promise.all([ask(), ask(), ask(), ask()]);
for (const a of answers) a.socket.destroy();
const served = answers.map((a) => a.shard).sort();
await smp.stop();
console.log(JSON.stringify({ text, read, here, imageLive: image.stats(0).liveObjects === smp.stats(0).liveObjects, samePort: bound[1].port === bound[0].port, served, uv: process.versions.uv, check: smp.heap.check() }));
`;
const TASKS = `import { createServer } from "node:http";
import { SharedMap } from "shardheap";
let map;
export function fill(count, shard) {
  map = SharedMap.create(shard.heap, { shard: shard.id, capacity: count });
  for (let i = 0; i < count; i++) map.set("k" + i, "v" + i * i);
  return map.handle;
}
export function read({ handle, key }, shard) {
  const m = SharedMap.attach(shard.heap, handle);
  try { return m.getString(key) + " read on shard " + shard.id; } finally { m.close(); }
}
export function serve(_, shard) {
  return shard.listen(createServer((req, res) => res.end("shard " + shard.id + "\\n")), { port: 0, host: "127.0.0.1" });
}
`;

describe(`the packed package on Node ${oldest} (the oldest engines.node "${engines}" allows) and on this Node`, () => {
  let dir: string;
  let dist: string;
  let old: { path: string } | { reason: string };
  beforeAll(() => {
    dir = tempDir("shardheap-old-node-");
    packedProject(dir, {});
    dist = join(dir, "node_modules", "shardheap", "dist");
    writeFileSync(join(dir, "main.mjs"), MAIN);
    writeFileSync(join(dir, "tasks.mjs"), TASKS);
    old = nodeBinary(oldest);
  }, 300_000);

  const run = (node: string, args: string[]): string =>
    execFileSync(node, args, { cwd: dir, encoding: "utf8", env: { ...process.env, SHARDHEAP_LOG: "silent", NODE_OPTIONS: "" }, timeout: 120_000 });
  /** The old Node's binary, or the test skipped with the reason. */
  const oldNode = (ctx: { skip: (note: string) => never }): string => ("path" in old ? old.path : ctx.skip(`Node ${oldest} could not be installed: ${old.reason}`));

  it(`every module of dist/ loads on Node ${oldest}`, (ctx) => {
    const node = oldNode(ctx);
    // Not the entry points that act as they load (the command line, a shard's bootstrap), nor the
    // dashboard's modules, which are the browser's (they run against the page's DOM).
    const modules = (readdirSync(dist, { recursive: true }) as string[])
      .filter((f) => f.endsWith(".js") && f !== "cli.js" && f !== join("smp", "shard-worker.js") && !f.startsWith(join("runtime", "dashboard") + "/"))
      .map((f) => "./" + relative(dir, join(dist, f)));
    expect(modules.length).toBeGreaterThan(100);
    writeFileSync(join(dir, "load-all.mjs"), `for (const m of ${JSON.stringify(modules)}) await import(m);\nconsole.log(process.version);\n`);
    expect(run(node, ["load-all.mjs"]).trim()).toBe(`v${oldest}`);
  });

  for (const which of ["oldest", "this"] as const) {
    it(`a user's program (heap, shards with a task module, SharedMap, a heap image, one port from both shards) runs on ${which === "oldest" ? `Node ${oldest}` : "this Node"}`, (ctx) => {
      const node = which === "oldest" ? oldNode(ctx) : process.execPath;
      const { served, uv, ...rest } = JSON.parse(run(node, ["main.mjs"])) as { served: number[]; uv: string };
      expect(rest).toEqual({ text: "h\u00e9llo", read: "v9 read on shard 1", here: "v49", imageLive: true, samePort: true, check: [] });
      const [major = 0, minor = 0] = uv.split(".").map(Number);
      if (major > 1 || minor >= 45) expect(served).toEqual([0, 0, 1, 1]);
      else expect(served.length === 4 && served.every((s) => s === 0 || s === 1)).toBe(true);
    });
  }

  it(`the command line runs stress, report and diff on Node ${oldest}`, (ctx) => {
    const node = oldNode(ctx);
    const cli = join(dist, "cli.js");
    run(node, [cli, "stress", "--smp", "2", "--memory", "16MiB", "--duration", "0.5", "--out", "stress"]);
    expect(run(node, [cli, "report", "stress/heap.img"])).toMatch(/^All \(\d+, #\d+\)/);
    expect(run(node, [cli, "diff", "stress/heap.img", "stress/heap.img"])).toMatch(/^All \(\+0B 0, #0\)/);
  });
});
