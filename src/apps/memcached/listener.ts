/**
 * One listening port, connections spread over the shards. Each shard runs
 * its own net.Server in its own thread; how they share the port depends on
 * what Node offers:
 *   - "reusePort" (Node >= 22.12 / 23.1 on Linux): every shard binds the
 *     port with SO_REUSEPORT and the kernel spreads new connections over
 *     the sockets.
 *   - "sharedFd" (Node 20 and other POSIX systems): shard 0 opens the
 *     listening socket and every other shard listens on the same file
 *     descriptor (`listen({ fd })`, same process); each shard's event loop
 *     polls it and whichever accepts first gets the connection. Binding the
 *     port a second time fails with EADDRINUSE (Node 20 has no reusePort),
 *     and sockets cannot be handed to worker threads. The descriptor is
 *     closed once per shard at stop (libuv closes what a handle wraps): the
 *     shards close together, right after one another, while nothing else
 *     in the server opens descriptors.
 *   - "single" (Windows): shard 0 accepts every connection; the others
 *     serve only the keys they own.
 */
import type { Server } from "node:net";

export type ListenMode = "reusePort" | "sharedFd" | "single";

export interface ListenSpec {
  host: string;
  /** 0: any free port (the first shard's choice is then given to the others). */
  port: number;
  mode: ListenMode;
  /** sharedFd: the descriptor shard 0 opened (the other shards only). */
  fd?: number;
}

/** How this Node on this system shares the port. */
export function listenMode(version: string = process.versions.node, platform: NodeJS.Platform = process.platform): ListenMode {
  const [major = 0, minor = 0] = version.split(".").map(Number);
  const reusePort = major >= 24 || (major === 23 && minor >= 1) || (major === 22 && minor >= 12);
  if (reusePort && platform === "linux") return "reusePort";
  return platform === "win32" ? "single" : "sharedFd";
}

/** Listen as `spec` says; the port bound and, for sharedFd, the descriptor to share (-1 otherwise). */
export function listenOn(server: Server, spec: ListenSpec): Promise<{ port: number; fd: number }> {
  return new Promise((resolve, reject) => {
    const failed = (e: Error): void => reject(e);
    server.once("error", failed);
    const listening = (): void => {
      server.off("error", failed);
      const address = server.address();
      const port = typeof address === "object" && address !== null ? address.port : spec.port;
      // The descriptor of the handle libuv opened (a Node handle's fd, on POSIX systems).
      const fd = (server as unknown as { _handle?: { fd?: unknown } })._handle?.fd;
      resolve({ port, fd: typeof fd === "number" ? fd : -1 });
    };
    if (spec.fd !== undefined) server.listen({ fd: spec.fd }, listening);
    // reusePort is in Node's listen options from 22.12 (typed from @types/node 22).
    else server.listen({ host: spec.host, port: spec.port, ...(spec.mode === "reusePort" ? { reusePort: true } : {}) }, listening);
  });
}
