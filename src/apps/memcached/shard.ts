/**
 * What runs in every shard of `shardheap memcached` (the Smp module): the
 * shard's item cache and store, its listening socket and its connections.
 * Each exported function is a task the main thread (server.ts) or another
 * shard (flush, resetStats, drain, the stats gatherings) runs here with
 * submitTo.
 *
 * Start-up: shard 0 makes the cache's one index (createCacheIndex: its
 * tables, and descriptors for its own items), then each shard in turn is
 * configured with its handle (configure: the others attach it and make
 * their own descriptors, in shard order: cache-memory.ts
 * indexBytesByShard counts them so). Every shard then reads and writes
 * the one index; no request hops to another shard.
 */
import { createServer, type Server } from "node:net";
import { getHeapStatistics } from "node:v8";
import type { SharedMap, SharedMapStats } from "../../memory/shared-map/shared-map.js";
import type { ShardContext } from "../../smp/current-shard.js";
import type { Holding } from "./network/backpressure.js";
import { cacheBytesPerShard, type ServerConfig } from "./config.js";
import type { CommandContext } from "./commands/command-host.js";
import { Connection } from "./network/connection.js";
import { ItemViews } from "./store/item.js";
import { listenOn, type ListenSpec } from "./network/listener.js";
import { absoluteExptime } from "./protocol/protocol.js";
import { attachIndex, createIndex, indexShare } from "./store/cache-memory.js";
import { ITEM_CLASSES } from "./stats/item-classes.js";
import { PrefixStats, type PrefixCounts } from "./stats/prefix-stats.js";
import { descriptorOf, addressText, type ConnEntry } from "./stats/stats-conns.js";
import { classCounters, resetCounters, shardCounters, STAT, totals } from "./stats/stats.js";
import { ItemCache } from "./store/item-cache.js";
import { ItemStore } from "./store/store.js";

interface ShardState {
  shard: ShardContext;
  ctx: CommandContext;
  server: Server | undefined;
  connections: Set<Connection>;
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

/** The index shard 0 made (createCacheIndex), until its configure takes it. */
let homeIndex: SharedMap | undefined;

/** The entries each shard's part of the index is made for (cache-memory.ts indexShare). */
function shareOf(config: ServerConfig, shard: ShardContext): number {
  return indexShare(config.itemMemoryPerShard, shard.memory.stats().totalMemory);
}

/** On shard 0, before any shard is configured: make the cache's one index; its handle. */
export function createCacheIndex(config: ServerConfig, shard: ShardContext): number {
  homeIndex = createIndex(shard.heap, shard.id, shareOf(config, shard));
  return homeIndex.handle;
}

/**
 * Set the shard up: its item cache and store over the cache's index
 * (`index`: createCacheIndex's handle; attached here, with this shard's
 * descriptors made now), its counters, and the way to the other shards.
 */
export function configure({ config, index }: { config: ServerConfig; index: number }, shard: ShardContext): void {
  const map = shard.id === 0 && homeIndex !== undefined ? homeIndex : attachIndex(shard.heap, index, shareOf(config, shard));
  homeIndex = undefined;
  const views = new ItemViews(shard.heap);
  const counters = shardCounters(config.statsBuffer, shard.id);
  const classes = classCounters(config.statsBuffer, shard.id);
  const cache = new ItemCache({
    heap: shard.heap,
    memory: shard.memory,
    views,
    map,
    inboxes: config.inboxes,
    counters,
    classes,
    shard: shard.id,
    evict: config.evict,
    prefixDelimiter: config.prefixDelimiter,
    itemBytes: config.itemMemoryPerShard,
  });
  const store = new ItemStore({ cache, views, counters, shard: shard.id, shards: shard.shards, maxItemSize: config.maxItemSize, casEnabled: config.casEnabled });
  counters[STAT.limit_maxbytes] = cacheBytesPerShard(config);
  const all = [...Array(shard.shards).keys()];
  const others = all.filter((s) => s !== shard.id);
  const rows = all.map((s) => shardCounters(config.statsBuffer, s));
  const ctx: CommandContext = {
    shard: shard.id,
    shards: shard.shards,
    views,
    store,
    map,
    heap: shard.heap,
    config,
    counters,
    rows,
    detail: new PrefixStats(config.prefixDelimiter, config.statsDetail),
    everyShard<T>(task: string, arg?: unknown): Promise<T[]> {
      return Promise.all(all.map((s) => shard.submitTo<T>(s, task, arg)));
    },
    async flushAll(delay: number): Promise<void> {
      const now = Math.floor(Date.now() / 1000);
      const seconds = delay > 0 ? absoluteExptime(delay, now) - now : 0;
      cache.flush(seconds);
      await Promise.all(others.map((s) => shard.submitTo(s, "flush", seconds)));
    },
    async settled(): Promise<void> {
      cache.drain();
      await Promise.all(others.map((s) => shard.submitTo(s, "drain")));
    },
    missed(key: string): void {
      cache.flushedMiss(key);
      // A shard whose flush_all removed keys remembers them (flushed-items.ts): it counts get_flushed if this was one.
      // Its answer is nobody's; a later `stats` comes after it (settled: messages from one shard to another run in order).
      for (const s of others) if (rows[s]![STAT.flushed_kept] !== 0) shard.submitTo(s, "flushedMiss", key).catch(() => {});
    },
    async resetStats(): Promise<void> {
      resetStats();
      await Promise.all(others.map((s) => shard.submitTo(s, "resetStats")));
    },
  };
  state = { shard, ctx, server: undefined, connections: new Set() };
  cache.start();
  // The map's first objects left a pool span half used and another cached: give the cached one back
  // now, as the shard's idle trim would later, so the memory a fresh server holds is where it comes
  // back to once it is empty again.
  shard.memory.trim();
}

/** Start accepting connections (listener.ts: "sharedFd" through ShardContext.listen); the port bound. */
export async function listen(spec: ListenSpec): Promise<number> {
  const s = configured();
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
    socket.once("close", () => s.connections.delete(connection));
  });
  const backlog = s.ctx.config.tcpBacklog;
  const port = spec.mode === "sharedFd" ? (await s.shard.listen(server, { host: spec.host, port: spec.port, backlog })).port : await listenOn(server, spec, backlog);
  // After listening, errors are failed accepts (EMFILE under a flood of connections): the server keeps listening.
  server.on("error", () => {});
  s.server = server;
  const idle = s.ctx.config.idleTimeout;
  if (idle > 0 && s.idleScan === undefined) {
    s.idleScan = setInterval(() => {
      const now = Math.floor(Date.now() / 1000);
      for (const c of s.connections) if (c.idleSince(now) > idle) c.kickIdle();
    }, IDLE_SCAN_MS);
    s.idleScan.unref();
  }
  s.ctx.config.port = port;
  s.ctx.counters[STAT.accepting_conns] = 1;
  return port;
}

/** Take back what other shards handed over (item-cache.ts drain): this shard's counts are then its items'. */
export function drain(): void {
  configured().ctx.store.cache.drain();
}

/** A get on another shard found no item for `key`: get_flushed here if this shard's flush_all removed it. */
export function flushedMiss(key: string): void {
  configured().ctx.store.cache.flushedMiss(key);
}

/** flush_all from another shard: `seconds` from now (0: now). */
export function flush(seconds: number): void {
  configured().ctx.store.cache.flush(seconds);
}

export function resetStats(): void {
  const { ctx } = configured();
  resetCounters(ctx.counters, classCounters(ctx.config.statsBuffer, ctx.shard));
  ctx.detail.reset();
}

/** `stats detail on|off`, on this shard. */
export function statsDetail(on: boolean): void {
  configured().ctx.detail.enabled = on;
}

/** `stats detail dump [bytes]`: this shard's per-prefix counts (with `withBytes`, and its items' bytes per prefix). */
export function prefixCounts(withBytes: boolean): PrefixCounts[] {
  const { ctx } = configured();
  return ctx.detail.list(withBytes ? ctx.store.cache.bytesByPrefix() : undefined);
}

/** `stats items`: this shard's age per class id (item-cache.ts classAges). */
export function classAges(): number[] {
  return configured().ctx.store.cache.classAges(Math.floor(Date.now() / 1000), ITEM_CLASSES);
}

/** `stats cachedump`: [class id, limit, answer bytes at most] -> this shard's rows (item-cache.ts dump). */
export function cacheDump([id, limit, budget]: [number, number, number]): Array<[string, number, number]> {
  return configured().ctx.store.cache.dump(id, limit, budget);
}

/**
 * `stats conns`: this shard's listening socket and connections; `asking`
 * (shard * 2^32 + descriptor) is the connection that asked.
 */
export function connectionList(asking: number): ConnEntry[] {
  const s = configured();
  const now = Math.floor(Date.now() / 1000);
  const out: ConnEntry[] = [];
  const server = s.server;
  const bound = server?.address();
  if (server !== undefined && bound !== null && bound !== undefined && typeof bound !== "string") {
    out.push({
      id: descriptorOf(server),
      lines: [
        ["addr", addressText(bound.address, bound.port, bound.family)],
        ["state", "conn_listening"],
        ["secs_since_last_cmd", now - s.ctx.config.startedAt],
      ],
    });
  }
  for (const c of s.connections) out.push(c.describe(now, s.shard.id * 2 ** 32 + c.id === asking));
  return out;
}

/**
 * cache_memlimit: the whole cache may take `bytes` (at most every shard's
 * region: stats/stats-commands.ts memoryLimit checks), split evenly; this shard's store keeps
 * its share of its budget (item-cache.ts setLimit).
 */
export function setMemoryLimit(bytes: number): void {
  const { ctx } = configured();
  const mine = Math.floor(bytes / ctx.config.shards) + (ctx.shard === 0 ? bytes % ctx.config.shards : 0);
  ctx.counters[STAT.limit_maxbytes] = mine;
  ctx.store.cache.setLimit(Math.min(1, mine / cacheBytesPerShard(ctx.config)));
}

/**
 * Stop accepting. The listening handle closes now (with "sharedFd", this
 * shard's own descriptor of the socket: ShardContext.listen); close()'s
 * callback would wait for the connections, which closeConnections ends.
 */
export function stopListening(): boolean {
  const s = configured();
  const server = s.server;
  s.server = undefined;
  s.ctx.counters[STAT.accepting_conns] = 0;
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

/**
 * This shard's connections and items now, its index's counts
 * (SharedMap.stats: entries, references held, its own structure), what
 * its connections hold of their clients' making (backpressure.ts: the
 * sums now, the most any one held) and its thread's JS memory (the
 * isolate's heap and the Buffers' memory outside it).
 */
export function census(): { connections: number; items: number; index: SharedMapStats; holding: Holding; jsMemoryBytes: number } {
  const s = configured();
  const holding: Holding = { unsentBytes: 0, unsentPieces: 0, peakUnsentBytes: 0, peakUnsentPieces: 0, stopped: 0, heldBytes: 0, peakHeldBytes: 0 };
  for (const c of s.connections) {
    const h = c.holding();
    holding.unsentBytes += h.unsentBytes;
    holding.unsentPieces += h.unsentPieces;
    holding.heldBytes += h.heldBytes;
    holding.peakUnsentBytes = Math.max(holding.peakUnsentBytes, h.peakUnsentBytes);
    holding.peakUnsentPieces = Math.max(holding.peakUnsentPieces, h.peakUnsentPieces);
    holding.peakHeldBytes = Math.max(holding.peakHeldBytes, h.peakHeldBytes);
    holding.stopped += h.stopped;
  }
  const v8 = getHeapStatistics();
  return { connections: s.connections.size, items: s.ctx.store.cache.size, index: s.ctx.store.map.stats(), holding, jsMemoryBytes: v8.used_heap_size + v8.external_memory };
}
