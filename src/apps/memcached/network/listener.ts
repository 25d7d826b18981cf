/**
 * One listening port, connections spread over the shards. Each shard runs
 * its own net.Server in its own thread; how they share the port depends on
 * what Node offers:
 *   - "reusePort" (Node >= 22.12 / 23.1 on Linux): every shard binds the
 *     port with SO_REUSEPORT and the kernel spreads new connections over
 *     the sockets.
 *   - "sharedFd" (Node 20 and other POSIX systems): every shard listens
 *     through ShardContext.listen (smp/shard-listen.ts), the runtime's own
 *     way of serving one port from every shard: one socket, a descriptor
 *     of it in each shard, the shards taking turns at accepting by their
 *     counts of live connections (smp/accept-balance.ts).
 *   - "single" (Windows): shard 0 accepts every connection, and so
 *     writes every item (a write is made on the connection's shard): the
 *     others' memory stays unused.
 */
import type { Server } from "node:net";

export type ListenMode = "reusePort" | "sharedFd" | "single";

export interface ListenSpec {
  host: string;
  /** 0: any free port (the first shard's choice is then given to the others). */
  port: number;
  mode: ListenMode;
}

/** How this Node on this system shares the port. */
export function listenMode(version: string = process.versions.node, platform: NodeJS.Platform = process.platform): ListenMode {
  const [major = 0, minor = 0] = version.split(".").map(Number);
  const reusePort = major >= 24 || (major === 23 && minor >= 1) || (major === 22 && minor >= 12);
  if (reusePort && platform === "linux") return "reusePort";
  return platform === "win32" ? "single" : "sharedFd";
}

/**
 * Listen as `spec` says ("reusePort" or "single"; "sharedFd" is
 * ShardContext.listen's), with `backlog` (-b); the port bound.
 */
export function listenOn(server: Server, spec: ListenSpec, backlog: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const failed = (e: Error): void => reject(e);
    server.once("error", failed);
    server.listen({ host: spec.host, port: spec.port, backlog, ...(spec.mode === "reusePort" ? { reusePort: true } : {}) }, () => {
      server.off("error", failed);
      const address = server.address();
      resolve(typeof address === "object" && address !== null ? address.port : spec.port);
    });
  });
}
