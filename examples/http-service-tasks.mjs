// Tasks for http-service.mjs: every shard runs its own HTTP server, all of
// them on one port. A request is answered by whichever shard accepted its
// connection, from that shard's thread.
import { createServer } from "node:http";

let server;
let served = 0;

export async function serve(port, shard) {
  server = createServer((req, res) => {
    served++;
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify({ shard: shard.id, path: req.url, served }));
  });
  // Every shard passes its own server; the first binds the port, the others share it.
  // Port 0: one free port, the same for every shard (the address comes back).
  return shard.listen(server, { port, host: "127.0.0.1" });
}

/** Close this shard's server: the others keep serving the port. */
export function close() {
  return new Promise((resolve) => {
    server.close(() => resolve(served));
    server.closeIdleConnections();
  });
}
