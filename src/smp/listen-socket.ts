/**
 * Listening sockets for ShardContext.listen (shard-listen.ts): getting a
 * descriptor of one listening socket into each shard's thread, and
 * switching a shard's polling of it on and off.
 *
 * Why each shard has a descriptor of its own. Shards are threads of one
 * process, and Node 20 has no reusePort, so one socket must serve them
 * all; the shards of `shardheap memcached` used to listen on one
 * descriptor number together (`listen({ fd })`). But a descriptor closes
 * with the first handle that closes it: one shard closing its server (or
 * dying: its thread closes its handles) took the port from every other
 * shard, and the next shard to close closed whatever had been given that
 * number since. Node has no dup(), and worker threads cannot receive
 * handles; a thread can receive one from a child process it spawned
 * (listen-relay.cts), and the kernel installs it as a new descriptor. So
 * the first shard to listen on a port has a child bind it and send it
 * back, and every other shard has a child inherit a member's descriptor
 * and send it back: one descriptor per shard, each closed by its own
 * shard alone. A child costs about 70 ms at a listen (measured on the
 * 2-core VM at load average 4-5: 68-75 ms a relay; two shards on a new
 * port 148 ms, the second waiting for the first's bind), nothing
 * afterwards.
 */
import { spawn } from "node:child_process";
import { fstatSync } from "node:fs";
import type { Server } from "node:net";
import { fileURLToPath } from "node:url";
import { getSystemErrorMap, getSystemErrorName } from "node:util";
import type { AcceptSwitch } from "./accept-balance.js";

const RELAY = fileURLToPath(new URL("./listen-relay.cjs", import.meta.url));
/** How long a relay child may take (a loaded machine starts Node in well under a second). */
const RELAY_TIMEOUT_MS = 30_000;

/** The few methods of Node's TCP handle (tcp_wrap) used here on a relayed one. */
export interface TcpHandle {
  readonly fd: number;
  close(): void;
}

/** A socket as the kernel knows it ("device:inode"), or undefined for a descriptor that is closed or no socket. */
export function socketIdentity(fd: number): string | undefined {
  try {
    const st = fstatSync(fd);
    return st.isSocket() ? `${st.dev}:${st.ino}` : undefined;
  } catch {
    return undefined;
  }
}

/** A failed bind as net.Server.listen reports it (`listen EADDRINUSE: address already in use 127.0.0.1:11211`). */
export function listenError(rc: number, address: string, port: number): Error & { code: string } {
  const code = rc < 0 ? getSystemErrorName(rc) : "EINVAL";
  const text = getSystemErrorMap().get(rc)?.[1] ?? "cannot listen";
  return Object.assign(new Error(`listen ${code}: ${text} ${address}:${port}`), { code, errno: rc, syscall: "listen", address, port });
}

/**
 * A TCP handle of this thread's on a socket, through a relay child:
 * `{ bind }` a new socket bound to address:port (not listening yet), or
 * `{ fd }` the socket that descriptor holds now (a new descriptor of it).
 * Rejects with net's error for a failed bind, or saying why the child
 * failed; a descriptor closed meanwhile rejects too (the caller checks
 * what it got with socketIdentity).
 */
export function relayHandle(what: { bind: { address: string; family: 4 | 6; port: number } } | { fd: number }): Promise<{ handle: TcpHandle; port: number }> {
  return new Promise((resolve, reject) => {
    const args = "bind" in what ? ["bind", what.bind.address, String(what.bind.family), String(what.bind.port)] : ["dup"];
    const env = { ...process.env };
    delete env.NODE_OPTIONS; // no loader or flag of the parent's: the child is plain CommonJS
    let child: ReturnType<typeof spawn>;
    try {
      child = spawn(process.execPath, [RELAY, ...args], { stdio: ["ignore", "ignore", "pipe", "fd" in what ? what.fd : "ignore", "ipc"], env, windowsHide: true });
    } catch (e) {
      // A descriptor closed before the spawn: libuv fails it at once (EBADF).
      reject(e as Error);
      return;
    }
    let stderr = "";
    child.stderr?.setEncoding("utf8").on("data", (d: string) => void (stderr = (stderr + d).slice(-2000)));
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      finish(new Error(`listen: the relay process did not answer within ${RELAY_TIMEOUT_MS} ms`));
    }, RELAY_TIMEOUT_MS);
    let done = false;
    function finish(error: Error | undefined, value?: { handle: TcpHandle; port: number }): void {
      if (done) {
        value?.handle.close();
        return;
      }
      done = true;
      clearTimeout(timer);
      if (error !== undefined) reject(error);
      else resolve(value!);
    }
    child.once("error", (e) => finish(new Error(`listen: cannot start the relay process (${process.execPath}): ${e.message}`, { cause: e })));
    child.once("message", (message: { rc: number; port?: number }, handle: unknown) => {
      const tcp = handle as TcpHandle | undefined;
      if (message.rc === 0 && tcp !== undefined && typeof tcp.fd === "number" && typeof message.port === "number") finish(undefined, { handle: tcp, port: message.port });
      else if ("bind" in what) finish(listenError(message.rc, what.bind.address, what.bind.port));
      else finish(Object.assign(new Error(`listen: another shard's socket was gone (${getSystemErrorName(message.rc)})`), { code: getSystemErrorName(message.rc) }));
    });
    child.once("exit", (code, signal) => {
      setImmediate(() => finish(new Error(`listen: the relay process ended (${signal ?? `exit code ${code}`}) before answering${stderr === "" ? "" : `: ${stderr.trim()}`}`)));
    });
  });
}

/**
 * Pause and resume a listening server's polling of its socket (its loop
 * stops watching the descriptor; the kernel keeps queueing connections for
 * whoever else polls the socket). Node has no public call for it: libuv's
 * uv_read_stop stops the watcher, but only of a handle marked reading, so
 * readStart marks it first (on a listening handle it starts nothing new:
 * the watcher already polls, and its callback stays the accept). Only a
 * handle opened on a descriptor it was given (a relayed one is) is
 * readable to libuv; for one that bound the port itself readStart fails
 * (ENOTCONN) and this gives undefined, as it does when the handle has no
 * such methods.
 *
 * Resuming makes libuv add the descriptor to this loop's epoll set at its
 * next turn, and libuv aborts the process if that fails for any reason
 * but EEXIST: on a descriptor that was closed (EBADF) it would. Only this
 * shard closes its own descriptor, after it has stopped switching
 * (shard-listen.ts); resume() still checks the descriptor is the socket
 * it was (device and inode) first, and does nothing otherwise.
 */
export function acceptSwitch(server: Server): AcceptSwitch | undefined {
  const handle = (server as unknown as { _handle?: { fd?: unknown; readStart?: unknown; readStop?: unknown } | null })._handle;
  if (handle === undefined || handle === null) return undefined;
  const { fd, readStart, readStop } = handle;
  if (typeof fd !== "number" || typeof readStart !== "function" || typeof readStop !== "function") return undefined;
  const socket = socketIdentity(fd);
  if (socket === undefined || readStart.call(handle) !== 0) return undefined;
  return {
    pause: () => void readStop.call(handle),
    resume: () => {
      if (socketIdentity(fd) === socket) readStart.call(handle);
    },
  };
}
