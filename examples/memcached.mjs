// shardheap memcached with a client: start the server (the package's
// `shardheap memcached` command, as `npx shardheap memcached` runs it),
// talk to it over a socket in memcached's text protocol, and stop it.
// Any memcached client works the same way; this one is a few lines of
// node:net so the example needs nothing else.
// Run: node examples/memcached.mjs
// Output: memcached: listening on 127.0.0.1:... (2 shards)
// Output: get greeting -> VALUE greeting 0 19 | hello from the heap
// Output: incr visits 5 -> 15
// Output: stats -> curr_items 2, shardheap_version ...
// Output: stopped: exit code 0
import { spawn } from "node:child_process";
import { once } from "node:events";
import { connect } from "node:net";
import { fileURLToPath } from "node:url";

// The installed package's command: dist/cli.js next to its main module (import.meta.resolve: Node 20.6 and later).
const cli = fileURLToPath(new URL("./cli.js", import.meta.resolve("shardheap")));
const args = ["memcached", "--smp", "2", "--memory", "16MiB", "--port", "0"]; // port 0: any free port
if (process.getuid?.() === 0) args.push("-u", "root"); // as memcached, it refuses to run as root unless told to
const server = spawn(process.execPath, [cli, ...args], { stdio: ["ignore", "pipe", "inherit"] });
process.on("exit", () => server.kill()); // should this program fail half way, the server goes too

// It prints "memcached: listening on HOST:PORT (N shards)" once it accepts.
let output = "";
server.stdout.setEncoding("utf8").on("data", (chunk) => (output += chunk));
const listening = await new Promise((resolve, reject) => {
  server.stdout.on("data", () => {
    const m = /^memcached: listening on ([\d.]+):(\d+).*$/m.exec(output);
    if (m) resolve(m);
  });
  server.once("exit", (code) => reject(new Error(`memcached exited (${code}) before listening:\n${output}`)));
});
console.log(listening[0]);

// A client: send a request, read until its answer is complete.
const socket = connect(Number(listening[2]), listening[1]);
await once(socket, "connect");
socket.setEncoding("utf8");
let received = "";
socket.on("data", (chunk) => (received += chunk));
async function request(text, complete) {
  received = "";
  socket.write(text);
  while (!complete.test(received)) await once(socket, "data");
  return received.trimEnd().split("\r\n");
}

// Items live in the shared heap, each in the shard that owns its key; any connection reaches every key.
await request("set greeting 0 0 19\r\nhello from the heap\r\n", /STORED\r\n$/);
console.log(`get greeting -> ${(await request("get greeting\r\n", /END\r\n$/)).slice(0, 2).join(" | ")}`);
await request("set visits 0 0 2\r\n10\r\n", /STORED\r\n$/);
console.log(`incr visits 5 -> ${await request("incr visits 5\r\n", /\r\n$/)}`);
const stats = new Map((await request("stats\r\n", /END\r\n$/)).map((line) => line.split(" ").slice(1)));
console.log(`stats -> curr_items ${stats.get("curr_items")}, shardheap_version ${stats.get("shardheap_version")}`);
socket.end();

// Stop it as a service manager would: SIGTERM (or Ctrl-C) is a graceful stop; it prints its statistics.
server.kill("SIGTERM");
const [code] = await once(server, "exit");
console.log(`stopped: exit code ${code}`);
