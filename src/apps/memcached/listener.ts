/**
 * One listening port, connections spread over the shards. Each shard runs
 * its own net.Server in its own thread; how they share the port depends on
 * what Node offers:
 *   - "reusePort" (Node >= 22.12 / 23.1 on Linux): every shard binds the
 *     port with SO_REUSEPORT and the kernel spreads new connections over
 *     the sockets.
 *   - "sharedFd" (Node 20 and other POSIX systems): one listening socket
 *     whose descriptor every shard listens on (`listen({ fd })`, same
 *     process); each shard's event loop polls it and whichever accepts
 *     first gets the connection, so the shards take turns by their counts
 *     of live connections (accept-balance.ts: a shard above another stops
 *     polling, acceptSwitch below). Binding the port a second time fails
 *     with EADDRINUSE (Node 20 has no reusePort), and sockets cannot be
 *     handed to worker threads. The port is bound by the main thread on a
 *     handle no event loop polls (bindSharedSocket), not by shard 0's
 *     net.Server: a handle that bound the port itself cannot be paused
 *     (libuv marks only handles opened from a descriptor readable, and
 *     uv_read_stop needs that), so shard 0 would accept while it should
 *     wait. The descriptor is closed once per shard at stop, and once by
 *     the main thread's handle (libuv closes what a handle wraps): the
 *     shards close together, right after one another, then the main
 *     thread, while nothing else in the server opens descriptors. A shard
 *     whose thread dies closes it too (its handles close with its
 *     thread), and the port with it: known, not handled here.
 *   - "single" (Windows): shard 0 accepts every connection; the others
 *     serve only the keys they own.
 */
import { lookup } from "node:dns/promises";
import { fstatSync } from "node:fs";
import type { Server } from "node:net";
import { getSystemErrorMap, getSystemErrorName } from "node:util";
import type { AcceptSwitch } from "./accept-balance.js";

export type ListenMode = "reusePort" | "sharedFd" | "single";

export interface ListenSpec {
  host: string;
  /** 0: any free port (the first shard's choice is then given to the others). */
  port: number;
  mode: ListenMode;
  /** sharedFd: the descriptor to listen on (bindSharedSocket's, or shard 0's for the other shards). */
  fd?: number;
  /** sharedFd with a descriptor every shard listens on: the shards' accept-balance.ts block. */
  balance?: SharedArrayBuffer;
}

/** How this Node on this system shares the port. */
export function listenMode(version: string = process.versions.node, platform: NodeJS.Platform = process.platform): ListenMode {
  const [major = 0, minor = 0] = version.split(".").map(Number);
  const reusePort = major >= 24 || (major === 23 && minor >= 1) || (major === 22 && minor >= 12);
  if (reusePort && platform === "linux") return "reusePort";
  return platform === "win32" ? "single" : "sharedFd";
}

/**
 * Listen as `spec` says, with `backlog` (-b: the first listen() on a shared
 * descriptor sets it for all); the port bound and, for sharedFd, the
 * descriptor to share (-1 otherwise).
 */
export function listenOn(server: Server, spec: ListenSpec, backlog: number): Promise<{ port: number; fd: number }> {
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
    if (spec.fd !== undefined) server.listen({ fd: spec.fd, backlog }, listening);
    // reusePort is in Node's listen options from 22.12 (typed from @types/node 22).
    else server.listen({ host: spec.host, port: spec.port, backlog, ...(spec.mode === "reusePort" ? { reusePort: true } : {}) }, listening);
  });
}

/** sharedFd's listening socket, bound on a handle that no event loop polls. */
export interface SharedSocket {
  readonly fd: number;
  readonly port: number;
  /** Close the descriptor (after every shard has closed its own handle on it). */
  close(): void;
}

/** The few methods of Node's TCP handle (tcp_wrap) that bindSharedSocket uses. */
interface TcpHandle {
  readonly fd: number;
  bind(address: string, port: number): number;
  bind6(address: string, port: number, flags: number): number;
  getsockname(out: { port?: number }): number;
  close(): void;
}

/**
 * Bind host:port on a TCP handle of this thread's that is never listened
 * on, so no event loop here polls it (the shards listen on its descriptor,
 * the first listen() making the socket listen): Node's own TCP handle from
 * process.binding("tcp_wrap"), as net.Server makes it, since no public API
 * binds without listening. Undefined when this Node does not give that
 * handle (the caller lets shard 0 bind the port instead). The errors are
 * those net.Server.listen gives (`listen EADDRINUSE: address already in
 * use 127.0.0.1:11211`, code, errno, syscall, address, port).
 */
export async function bindSharedSocket(host: string, port: number): Promise<SharedSocket | undefined> {
  const handle = tcpHandle();
  if (handle === undefined) return undefined;
  const { address, family } = await lookup(host);
  let rc = family === 6 ? handle.bind6(address, port, 0) : handle.bind(address, port);
  const bound: { port?: number } = {};
  // libuv reports EADDRINUSE at the next call on the handle (listen, or getsockname here), not at bind.
  if (rc === 0) rc = handle.getsockname(bound);
  if (rc !== 0 || typeof bound.port !== "number") {
    handle.close();
    throw listenError(rc, address, port);
  }
  return { fd: handle.fd, port: bound.port, close: () => handle.close() };
}

function tcpHandle(): TcpHandle | undefined {
  const binding = (process as unknown as { binding?: (name: string) => unknown }).binding;
  if (typeof binding !== "function") return undefined;
  try {
    const tcp = binding.call(process, "tcp_wrap") as { TCP?: new (type: number) => TcpHandle; constants?: { SERVER?: unknown } };
    if (typeof tcp.TCP !== "function" || typeof tcp.constants?.SERVER !== "number") return undefined;
    return new tcp.TCP(tcp.constants.SERVER);
  } catch {
    return undefined; // e.g. --pending-deprecation with --throw-deprecation
  }
}

/** A failed bind as net.Server.listen reports it. */
function listenError(rc: number, address: string, port: number): Error {
  const code = rc < 0 ? getSystemErrorName(rc) : "EINVAL";
  const text = getSystemErrorMap().get(rc)?.[1] ?? "cannot listen";
  return Object.assign(new Error(`listen ${code}: ${text} ${address}:${port}`), { code, errno: rc, syscall: "listen", address, port });
}

/**
 * Pause and resume a listening server's polling of its socket (its loop
 * stops watching the descriptor; the kernel keeps queueing connections for
 * whoever else polls it). Node has no public call for it: libuv's
 * uv_read_stop stops the watcher, but only of a handle marked reading, so
 * readStart marks it first (on a listening handle it starts nothing new:
 * the watcher already polls, and its callback stays the accept). Only a
 * handle opened from a descriptor (`listen({ fd })`) is readable to libuv;
 * for one that bound the port itself readStart fails (ENOTCONN) and this
 * gives undefined, as it does when the handle has no such methods.
 *
 * Resuming makes libuv add the descriptor to this loop's epoll set at its
 * next turn, and libuv aborts the process if that fails for any reason
 * but EEXIST: on a descriptor another thread has closed (EBADF) it would.
 * So the shards stop switching before any of them closes it (server.ts
 * stops in two steps), and resume() first checks that the descriptor is
 * still the socket it was (device and inode): after a shard's thread died
 * (closing it with its handles) it is not, and resume() does nothing.
 */
export function acceptSwitch(server: Server): AcceptSwitch | undefined {
  const handle = (server as unknown as { _handle?: { fd?: unknown; readStart?: unknown; readStop?: unknown } | null })._handle;
  if (handle === undefined || handle === null) return undefined;
  const { fd, readStart, readStop } = handle;
  if (typeof fd !== "number" || typeof readStart !== "function" || typeof readStop !== "function") return undefined;
  const socket = identity(fd);
  if (socket === undefined || readStart.call(handle) !== 0) return undefined;
  return {
    pause: () => void readStop.call(handle),
    resume: () => {
      if (identity(fd) === socket) readStart.call(handle);
    },
  };
}

/** Which socket a descriptor is now ("device:inode"), or undefined when it is closed or no socket. */
function identity(fd: number): string | undefined {
  try {
    const st = fstatSync(fd);
    return st.isSocket() ? `${st.dev}:${st.ino}` : undefined;
  } catch {
    return undefined;
  }
}
