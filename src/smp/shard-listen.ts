/**
 * ShardContext.listen: every shard that calls it with its own server (an
 * http.Server is a net.Server) serves one listening port, and connections
 * are spread evenly over the shards that listen, as Seastar's apps listen
 * on one port from every shard. Node 20 has no reusePort, so:
 *   - the first shard to ask for a port binds it (through a relay child:
 *     listen-socket.ts), every other takes a descriptor of its own of the
 *     same socket (listen-table.ts says whose to copy); each passes its
 *     descriptor's handle to its server's listen(), so the shards' event
 *     loops all poll the one socket;
 *   - they take turns at accepting (accept-balance.ts): a shard holding
 *     more live connections than another listening shard stops polling
 *     until that one has caught up;
 *   - port 0 picks one port for all: the nth port-0 listen of every shard
 *     on a host shares one port (the first with the first, ...), and a
 *     port asked by number joins a port-0 listen that was given it;
 *   - closing one shard's server leaves the port to the others: it closes
 *     only that shard's descriptor (its server's handle is wrapped to
 *     leave the turns first); the port is free again once the last shard
 *     has closed. A shard whose thread dies leaves too (smp.ts tells the
 *     table), and its fresh thread may listen again.
 */
import { lookup } from "node:dns/promises";
import { Server } from "node:net";
import { InvalidValueError } from "../errors.js";
import { rejectUnknownKeys } from "../parse.js";
import { AcceptBalance } from "./accept-balance.js";
import { acceptSwitch, relayHandle, socketIdentity, type TcpHandle } from "./listen-socket.js";
import { GENERATION, ListenTable, MAX_PORTS, type PortKey } from "./listen-table.js";

/** What ShardContext.listen takes. */
export interface ListenOptions {
  /** The port, 0 to 65535; 0: one free port, the same for every shard that listens with port 0 (the nth such listen of each). */
  port: number;
  /** The address to listen on (a name is looked up); default every address, IPv6 and IPv4 where the system has both. */
  host?: string;
  /** The listen backlog (as net.Server's; default 511); the last shard's to listen applies to the socket. */
  backlog?: number;
}

/** Where the server listens. */
export interface ListeningAddress {
  port: number;
  host: string;
}

/** Attempts at taking a member's descriptor before giving up (each fails only when the member left meanwhile). */
const JOIN_ATTEMPTS = 8;
/** How long a shard waits for another shard's bind of the same port. */
const BIND_WAIT_MS = 60_000;

/** One shard's side of the table. */
export class ShardListener {
  private readonly table: ListenTable;
  private readonly shard: number;
  private readonly shards: number;
  /** Port-0 listens made per address key, for `nth`. */
  private readonly anyPorts = new Map<string, number>();

  constructor(buffer: SharedArrayBuffer, shard: number, shards: number) {
    this.table = new ListenTable(buffer, shards);
    this.shard = shard;
    this.shards = shards;
  }

  /** ShardContext.listen (this file's opening comment). */
  async listen(server: Server, o: ListenOptions): Promise<ListeningAddress> {
    if (!(server instanceof Server)) throw new TypeError("listen: server must be a net.Server (an http.Server, https.Server or tls.Server is one)");
    if (o === null || typeof o !== "object") throw new TypeError("listen: options must be an object: { port, host?, backlog? }");
    rejectUnknownKeys(o, ["port", "host", "backlog"], "listen: options");
    const { port, host, backlog } = o;
    if (!Number.isInteger(port) || port < 0 || port > 65535) throw new InvalidValueError("port", `listen: port must be a whole number from 0 to 65535, got ${String(port)}`);
    if (host !== undefined && (typeof host !== "string" || host === "")) throw new InvalidValueError("host", `listen: host must be a non-empty string, got ${JSON.stringify(host)}`);
    if (backlog !== undefined && (!Number.isInteger(backlog) || backlog < 1)) throw new InvalidValueError("backlog", `listen: backlog must be a positive whole number, got ${String(backlog)}`);
    if (server.listening) throw new Error("listen: this server is listening already (close it first)");
    if (process.platform === "win32") throw new Error("listen: one port from every shard needs descriptor passing, which Windows does not have: listen from one shard there");
    const resolved = host === undefined ? { family: 0 as const, address: "" } : await resolve(host);
    const addressKey = `${resolved.family}/${resolved.address}`;
    let nth = 0;
    if (port === 0) {
      nth = this.anyPorts.get(addressKey) ?? 0;
      this.anyPorts.set(addressKey, nth + 1);
    }
    const key: PortKey = { ...resolved, port, nth };
    const { entry, handle } = await this.acquire(key, host ?? "", port);
    try {
      await listenOnHandle(server, handle, backlog);
    } catch (e) {
      this.table.leave(entry, this.shard);
      handle.close();
      throw e;
    }
    this.serve(server, handle, entry);
    const bound = server.address();
    return typeof bound === "object" && bound !== null ? { port: bound.port, host: bound.address } : { port, host: host ?? "" };
  }

  /** A handle of this thread's on the socket `key` names, this shard a member of its entry. */
  private async acquire(key: PortKey, host: string, port: number): Promise<{ entry: number; handle: TcpHandle }> {
    const deadline = performance.now() + BIND_WAIT_MS;
    for (let attempt = 0; attempt < JOIN_ATTEMPTS; ) {
      const seen = this.table.generation();
      const found = this.table.findOrClaim(key, this.shard);
      if (found.kind === "full") throw new Error(`listen: the shards listen on ${MAX_PORTS} ports already, as many as one runtime's shards can`);
      if (found.kind === "binding") {
        // Another shard is binding this port: wait for it (it opens or abandons the entry, and bumps the generation).
        const left = deadline - performance.now();
        if (left <= 0) throw new Error(`listen: another shard's bind of ${describe(host, port)} did not finish within ${BIND_WAIT_MS} ms`);
        const wait = Atomics.waitAsync(this.table.words, GENERATION, seen, Math.min(left, 1000));
        if (wait.async) await wait.value;
        continue;
      }
      if (found.kind === "claimed") return this.bind(found.entry, key, host, port);
      const open = found.open;
      if (this.table.isMember(open.entry, this.shard)) throw new Error(`listen: this shard listens on ${describe(host, open.port)} already (one server per shard and port)`);
      attempt++;
      if (open.memberFd < 0) continue;
      let got: { handle: TcpHandle } | undefined;
      try {
        got = await relayHandle({ fd: open.memberFd });
      } catch {
        continue; // the member closed its descriptor meanwhile: take another's
      }
      if (socketIdentity(got.handle.fd) === open.identity && this.table.join(open.entry, this.shard, got.handle.fd, open.identity)) return { entry: open.entry, handle: got.handle };
      got.handle.close();
    }
    throw new Error(`listen: could not take a descriptor of ${describe(host, port)} from the shards listening on it (they kept closing)`);
  }

  /** This shard binds the port for every shard: the entry opens with it as the first member, or is abandoned. */
  private async bind(entry: number, key: PortKey, host: string, port: number): Promise<{ entry: number; handle: TcpHandle }> {
    let got: { handle: TcpHandle; port: number };
    try {
      got = await bindAddress(key, port);
    } catch (e) {
      this.table.abandon(entry);
      throw e;
    }
    const identity = socketIdentity(got.handle.fd);
    if (identity === undefined) {
      this.table.abandon(entry);
      got.handle.close();
      throw new Error(`listen: the socket bound for ${describe(host, port)} is no socket here`);
    }
    this.table.opened(entry, this.shard, got.handle.fd, got.port, identity);
    return { entry, handle: got.handle };
  }

  /**
   * Serve: count connections for the turns, and leave the entry when the
   * server's handle closes (before the descriptor does: no other shard
   * copies a closed one, and this shard stops switching its handle first).
   */
  private serve(server: Server, handle: TcpHandle, entry: number): void {
    const balance = new AcceptBalance(this.table.buffer, this.shard, this.shards, this.table.balanceOffset(entry));
    let active = true;
    const leave = (): void => {
      if (!active) return;
      active = false;
      server.off("connection", counted);
      balance.stop();
      this.table.leave(entry, this.shard);
    };
    function counted(socket: { once(event: "close", f: () => void): unknown }): void {
      // Counted before anything else runs on this loop: it may not accept again first (accept-balance.ts).
      balance.opened();
      socket.once("close", () => {
        if (active) balance.closed();
      });
    }
    server.prependListener("connection", counted);
    const close = (handle as unknown as { close: (...args: unknown[]) => unknown }).close;
    Object.defineProperty(handle, "close", {
      configurable: true,
      writable: true,
      value(this: unknown, ...args: unknown[]) {
        leave();
        return close.apply(this, args);
      },
    });
    server.once("close", leave);
    balance.start(acceptSwitch(server));
  }
}

/** net.Server.listen on a handle we made (backlog: net's default when none). */
function listenOnHandle(server: Server, handle: TcpHandle, backlog: number | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const failed = (e: Error): void => reject(e);
    server.once("error", failed);
    const done = (): void => {
      server.off("error", failed);
      resolve();
    };
    // Node's typings name listen(handle: any, ...): a TCP handle of Node's own (net.js takes a TCP instance as is).
    if (backlog === undefined) server.listen(handle, done);
    else server.listen(handle, backlog, done);
  });
}

/** The address `host` names, as a table key. */
async function resolve(host: string): Promise<{ family: 4 | 6; address: string }> {
  const { address, family } = await lookup(host);
  return { family: family === 6 ? 6 : 4, address };
}

/** A new socket bound as `key` says; the default host is every address, IPv6 and IPv4, or IPv4 alone where IPv6 is missing (as net.Server does). */
async function bindAddress(key: PortKey, port: number): Promise<{ handle: TcpHandle; port: number }> {
  if (key.family !== 0) return relayHandle({ bind: { address: key.address, family: key.family, port } });
  try {
    return await relayHandle({ bind: { address: "::", family: 6, port } });
  } catch (e) {
    if ((e as { code?: string }).code !== "EAFNOSUPPORT" && (e as { code?: string }).code !== "EADDRNOTAVAIL") throw e;
    return relayHandle({ bind: { address: "0.0.0.0", family: 4, port } });
  }
}

const describe = (host: string, port: number): string => `${host === "" ? "every address" : host} port ${port}`;
