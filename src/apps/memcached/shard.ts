/**
 * What runs in every shard of `shardheap memcached` (the Smp module): the
 * shard's store, its listening socket and its connections. Each exported
 * function is a task the main thread (server.ts) or another shard
 * (remote.ts: applyOps, flush, resetStats) runs here with submitTo.
 *
 * Start-up is two steps: configure makes each shard's store and its
 * SharedMap and answers with the map's handle; attachMaps then gives every
 * shard all the handles, so its connections read any shard's items.
 */
import { createServer, type Server } from "node:net";
import { SharedMap, type SharedMapStats } from "../../memory/shared-map.js";
import type { ShardContext } from "../../smp/current-shard.js";
import { AcceptBalance } from "./accept-balance.js";
import type { ServerConfig } from "./config.js";
import { Connection, type ConnectionContext } from "./connection.js";
import { ItemViews } from "./item.js";
import { acceptSwitch, listenOn, type ListenSpec } from "./listener.js";
import { absoluteExptime } from "./protocol.js";
import { RemoteOps, runOps, type OpArg, type OpResult } from "./remote.js";
import { StagingArea } from "./staging.js";
import { resetCounters, shardCounters, STAT, totals } from "./stats.js";
import { ItemStore } from "./store.js";

interface ShardState {
  shard: ShardContext;
  ctx: ConnectionContext;
  server: Server | undefined;
  connections: Set<Connection>;
  /** sharedFd: the turns with the other shards at accepting (accept-balance.ts). */
  balance: AcceptBalance | undefined;
  /** -o idle_timeout: the timer that closes idle connections. */
  idleScan?: NodeJS.Timeout;
}

let state: ShardState | undefined;

/** What memcached writes to a connection past -c before closing it. */
const TOO_MANY_CONNECTIONS = "ERROR Too many open connections\r\n";
/** How often idle connections are looked for (-o idle_timeout): memcached's idle thread wakes once a second too. */
const IDLE_SCAN_MS = 1000;

function configured(): ShardState {
  if (state === undefined) throw new Error("memcached: this shard has not been configured");
  return state;
}

/** Set the shard up: its store, counters and the way to the other shards. Returns the handle of the store's SharedMap. */
export function configure(config: ServerConfig, shard: ShardContext): number {
  const views = new ItemViews(shard.heap);
  const counters = shardCounters(config.statsBuffer, shard.id);
  const store = new ItemStore({ heap: shard.heap, memory: shard.memory, views, counters, shard: shard.id, shards: shard.shards, maxItemSize: config.maxItemSize, evict: config.evict });
  const remote = new RemoteOps(shard);
  const others = [...Array(shard.shards).keys()].filter((s) => s !== shard.id);
  const ctx: ConnectionContext = {
    shard: shard.id,
    shards: shard.shards,
    views,
    store,
    maps: [],
    remote,
    memory: shard.memory,
    staging: new StagingArea(shard.memory),
    heap: shard.heap,
    config,
    counters,
    async flushAll(delay: number): Promise<void> {
      // Operations this shard queued for the others go first; this shard's own keys flush now.
      remote.flush();
      const now = Math.floor(Date.now() / 1000);
      const seconds = delay > 0 ? absoluteExptime(delay, now) - now : 0;
      store.flush(seconds);
      await Promise.all(others.map((s) => shard.submitTo(s, "flush", seconds)));
    },
    async resetStats(): Promise<void> {
      resetCounters(counters);
      await Promise.all(others.map((s) => shard.submitTo(s, "resetStats")));
    },
  };
  state = { shard, ctx, server: undefined, connections: new Set(), balance: undefined };
  // The map's first objects left a pool span half used and another cached: give the cached one back
  // now, as the shard's idle trim would later, so the memory a fresh server holds is where it comes
  // back to once it is empty again.
  shard.memory.trim();
  return store.map.handle;
}

/** Every shard's map handle, in shard order (what configure answered): this thread's readers of them. */
export function attachMaps(handles: number[]): number {
  const s = configured();
  const maps = s.ctx.maps;
  maps.length = 0;
  for (let i = 0; i < handles.length; i++) maps.push(i === s.shard.id ? s.ctx.store.map : SharedMap.attach(s.shard.heap, handles[i]!));
  return maps.length;
}

/** Start accepting connections; the port bound and the descriptor to share (listener.ts). */
export async function listen(spec: ListenSpec): Promise<{ port: number; fd: number }> {
  const s = configured();
  const balance = spec.balance === undefined ? undefined : new AcceptBalance(spec.balance, s.shard.id, s.shard.shards);
  const server = createServer({ allowHalfOpen: true, noDelay: true }, (socket) => {
    if (totals(s.ctx.config).curr_connections >= s.ctx.config.maxConnections) {
      // -c: as memcached (its maxconns_fast default), a line and the door.
      s.ctx.counters[STAT.rejected_connections]++;
      socket.on("error", () => {});
      socket.end(TOO_MANY_CONNECTIONS);
      return;
    }
    const connection = new Connection(socket, s.ctx);
    s.connections.add(connection);
    // Counted before anything else runs on this loop: it may not accept again first (accept-balance.ts).
    balance?.opened();
    socket.once("close", () => {
      s.connections.delete(connection);
      balance?.closed();
    });
  });
  const bound = await listenOn(server, spec);
  // After listening, errors are failed accepts (EMFILE under a flood of connections): the server keeps listening.
  server.on("error", () => {});
  s.server = server;
  s.balance = balance;
  const idle = s.ctx.config.idleTimeout;
  if (idle > 0 && s.idleScan === undefined) {
    s.idleScan = setInterval(() => {
      const now = Math.floor(Date.now() / 1000);
      for (const c of s.connections) if (c.idleSince(now) > idle) c.kickIdle();
    }, IDLE_SCAN_MS);
    s.idleScan.unref();
  }
  s.ctx.config.port = bound.port;
  balance?.start(acceptSwitch(server));
  return bound;
}

/** The owner's side of remote.ts. */
export function applyOps(ops: OpArg[]): OpResult[] {
  return runOps(configured().ctx.store, ops, Math.floor(Date.now() / 1000));
}

/** flush_all from another shard: `seconds` from now (0: now). */
export function flush(seconds: number): void {
  configured().ctx.store.flush(seconds);
}

export function resetStats(): void {
  resetCounters(configured().ctx.counters);
}

/**
 * Stop pausing and resuming the listening handle, the first of two steps
 * of stopping: every shard takes it before any closes the shared
 * descriptor (listener.ts acceptSwitch). A resume just before it reaches
 * the loop's epoll set at the start of a later poll phase (libuv applies
 * watcher changes there, and aborts the process if the descriptor is gone
 * by then), so this answers only after the loop has passed one: the
 * second of two immediates runs in the check phase of the turn after the
 * one it was queued in. (Answering at once: an abort in 3 of 4 runs of 15
 * servers stopped while their clients hung up.)
 */
export async function stopBalancing(): Promise<void> {
  configured().balance?.stop();
  await new Promise<void>((resolve) => setImmediate(() => setImmediate(resolve)));
}

/**
 * Stop accepting (every shard at once: see listener.ts for the shared
 * descriptor). The listening handle closes now; close()'s callback would
 * wait for the connections, which closeConnections ends.
 */
export function stopListening(): boolean {
  const s = configured();
  const server = s.server;
  s.server = undefined;
  s.balance?.stop();
  clearInterval(s.idleScan);
  s.idleScan = undefined;
  server?.close();
  return server !== undefined;
}

/** Close every connection; how many there were. */
export function closeConnections(): number {
  const s = configured();
  const n = s.connections.size;
  for (const c of s.connections) c.destroy();
  return n;
}

/** This shard's connections and items now, and its index's counts (SharedMap.stats: entries, references held, its own structure). */
export function census(): { connections: number; items: number; index: SharedMapStats } {
  const s = configured();
  return { connections: s.connections.size, items: s.ctx.store.size, index: s.ctx.store.map.stats() };
}
