/**
 * The main thread's side of `shardheap memcached`: start the shards
 * (Smp, with shard.ts as their module), configure them, open the one
 * listening port across them (listener.ts), and stop it all. The CLI's
 * runner (run.ts) and the tests start servers through startMemcached.
 */
import { InvalidValueError } from "../../errors.js";
import { Smp } from "../../smp/smp.js";
import { fillSmpOptions } from "../../smp/options.js";
import { DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_ITEM_SIZE, DEFAULT_PORT, DEFAULT_PREFIX_DELIMITER, DEFAULT_REQUESTS_PER_EVENT, DEFAULT_TCP_BACKLOG, type ServerConfig } from "./config.js";
import { listenMode, type ListenMode, type ListenSpec } from "./network/listener.js";
import { formatSize, parseSize } from "../../units.js";
import { MIN_SHARD_BYTES } from "../../memory/shared-heap.js";
import { shardBytesForItems } from "./store/cache-memory.js";
import { createStatsBuffer, panelFigures } from "./stats/stats.js";
import { createInboxes } from "./store/hand-over.js";

const SHARD_MODULE = new URL("./shard.js", import.meta.url);
/** memcached's -I bounds. */
export const MIN_ITEM_SIZE = 1024;
export const MAX_ITEM_SIZE = 1024 * 1024 * 1024;

export interface MemcachedOptions {
  /** Shards (worker threads); default: one per core. */
  shards?: number;
  /** Memory per shard, bytes or "64MiB", items and all; default 64 MiB. */
  memoryPerShard?: number | string;
  /**
   * memcached's -m: bytes (or "256MiB") the whole cache's items may take,
   * split evenly over the shards, each shard's region made bigger for its
   * part of the index and slack (cache-memory.ts). Instead of
   * memoryPerShard.
   */
  itemMemory?: number | string;
  /** As --heapprof: true every allocation, N one sample per N bytes, 0/false off (the default). */
  heapprof?: boolean | number;
  /** As --heapprof-sites: stacks each shard's profiler keeps exactly (Smp.start's heapprofSites). */
  heapprofSites?: number;
  /** Default 127.0.0.1 (memcached has no authentication: listen wider on purpose, with --host 0.0.0.0). */
  host?: string;
  /** Default 11211; 0 picks a free port. */
  port?: number;
  /** Largest item (header, key and value), bytes; default 1 MiB, or half a shard's memory when that is less; at most half a shard's memory. */
  maxItemSize?: number;
  /** Evict least recently used items when memory is full (default true); false answers an error instead (memcached's -M). */
  evict?: boolean;
  /** Allow flush_all (default true; memcached's -F sets false). */
  flushAllowed?: boolean;
  /** Close connections idle this many seconds (memcached's -o idle_timeout); 0 (the default): never. */
  idleTimeout?: number;
  /** Requests one connection runs per event before it yields (memcached's -R; default 20). */
  requestsPerEvent?: number;
  /** Connections open at once, at most (memcached's -c; default 1024). */
  maxConnections?: number;
  /** Where a key's prefix ends (memcached's -D; default ":"): stats detail, the `prefix` label. */
  prefixDelimiter?: string;
  /** Count `stats detail` from the start (default false; memcached's -D turns it on). */
  statsDetail?: boolean;
  /** memcached's -v count (0-3). */
  verbosity?: number;
  /** Give items cas values (default true; memcached's -C sets false: every cas is 0). */
  casEnabled?: boolean;
  /** The listen backlog (memcached's -b; default 1024). */
  tcpBacklog?: number;
  /** memcached's -B: "auto" (the default: a binary client gets a binary "not supported" answer) or "ascii" (every byte read as text). */
  protocol?: "auto" | "ascii";
  /** Allow stats cachedump and stats detail (default true; memcached's -X sets false). */
  dumpEnabled?: boolean;
  /** Override how the shards share the port (tests). */
  listenMode?: ListenMode;
}

/** A whole number option from `min` to `max`, or its default. */
function wholeOption(name: string, value: number | undefined, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value < min || value > max) throw new InvalidValueError(name, `${name} must be a whole number from ${min} to ${max}, got ${String(value)}`);
  return value;
}

export interface MemcachedServer {
  readonly smp: Smp;
  readonly host: string;
  readonly port: number;
  readonly shards: number;
  readonly listenMode: ListenMode;
  readonly config: Readonly<ServerConfig>;
  /**
   * The cache's index, a SharedMap handle: any thread of this process may
   * SharedMap.attach(smp.heap, handle) and read the cache (its values are
   * items as item.ts lays them out, each in the memory of the shard that
   * wrote it).
   */
  readonly index: number;
  /** Stop accepting and close every connection (the items stay, for a last look at the heap). */
  stopAccepting(): Promise<void>;
  /** stopAccepting, then stop the shards. Idempotent. */
  close(): Promise<void>;
}

/**
 * The item size limit for shards of `memoryPerShard` bytes: `maxItemSize`
 * checked, or the default. As memcached 1.6 refuses `-I` above half of
 * `-m` ("Cannot set item size limit higher than 1/2 of memory max."), a
 * limit above half a shard's memory (an item lives in one shard) is an
 * InvalidValueError naming `field` and `memoryField`; the default (1 MiB)
 * becomes half a shard's memory where that is less, so a small --memory
 * alone still starts. `field` and `memoryField`: the names the caller gave
 * them (options or flags).
 */
export function itemSizeLimit(maxItemSize: number | undefined, memoryPerShard: number, field: string, memoryField: string): number {
  const half = Math.floor(memoryPerShard / 2);
  if (maxItemSize === undefined) return Math.max(MIN_ITEM_SIZE, Math.min(DEFAULT_MAX_ITEM_SIZE, half));
  if (!Number.isSafeInteger(maxItemSize) || maxItemSize < MIN_ITEM_SIZE || maxItemSize > MAX_ITEM_SIZE) {
    throw new InvalidValueError(field, `the item size limit must be a whole number of bytes from ${MIN_ITEM_SIZE} to ${MAX_ITEM_SIZE}, got ${String(maxItemSize)}`);
  }
  if (maxItemSize > half) {
    throw new InvalidValueError(
      field,
      `${field} (${formatSize(maxItemSize)}) must be at most half of ${memoryField} (${formatSize(memoryPerShard)} per shard), as memcached's -I and -m: an item lives in one shard`,
    );
  }
  return maxItemSize;
}

/** Each shard's share of `itemMemory` (memcached's -m), bytes: at least MIN_SHARD_BYTES. */
export function itemMemoryShare(itemMemory: number | string, shards: number): number {
  const total = parseSize(itemMemory, "itemMemory", { min: 1 });
  const share = Math.floor(total / shards);
  if (share < MIN_SHARD_BYTES) {
    throw new InvalidValueError("itemMemory", `itemMemory (${formatSize(total)}) is ${formatSize(share)} for each of ${shards} shards, below the ${formatSize(MIN_SHARD_BYTES)} a shard needs`);
  }
  return share;
}

export async function startMemcached(o: MemcachedOptions = {}): Promise<MemcachedServer> {
  const smpOptions: { shards?: number; memoryPerShard?: number | string; heapprof: boolean | number; heapprofSites?: number } = {
    ...(o.shards === undefined ? {} : { shards: o.shards }),
    ...(o.memoryPerShard === undefined ? {} : { memoryPerShard: o.memoryPerShard }),
    heapprof: o.heapprof ?? false,
    ...(o.heapprofSites === undefined ? {} : { heapprofSites: o.heapprofSites }),
  };
  let itemMemoryPerShard = 0;
  if (o.itemMemory !== undefined) {
    if (o.memoryPerShard !== undefined) throw new InvalidValueError("itemMemory", "itemMemory and memoryPerShard both size the cache: give one of them");
    // The region follows from the items' share (and the profiler's tables, which it holds beside them).
    const { heapprofSites, ...sized } = smpOptions;
    const shards = fillSmpOptions(sized).shards;
    itemMemoryPerShard = itemMemoryShare(o.itemMemory, shards);
    smpOptions.memoryPerShard = shardBytesForItems(itemMemoryPerShard, shards, heapprofSites);
  }
  const options = fillSmpOptions(smpOptions);
  const host = o.host ?? "127.0.0.1";
  const port = o.port ?? DEFAULT_PORT;
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new InvalidValueError("port", `port must be a whole number from 0 to 65535, got ${String(port)}`);
  const maxItemSize = itemMemoryPerShard === 0 ? itemSizeLimit(o.maxItemSize, options.memoryPerShard, "maxItemSize", "memoryPerShard") : itemSizeLimit(o.maxItemSize, itemMemoryPerShard, "maxItemSize", "itemMemory");
  const idleTimeout = wholeOption("idleTimeout", o.idleTimeout, 0, 0, 2 ** 31 - 1);
  const requestsPerEvent = wholeOption("requestsPerEvent", o.requestsPerEvent, DEFAULT_REQUESTS_PER_EVENT, 1, 2 ** 31 - 1);
  const maxConnections = wholeOption("maxConnections", o.maxConnections, DEFAULT_MAX_CONNECTIONS, 1, 2 ** 31 - 1);
  const verbosity = wholeOption("verbosity", o.verbosity, 0, 0, 3);
  const tcpBacklog = wholeOption("tcpBacklog", o.tcpBacklog, DEFAULT_TCP_BACKLOG, 1, 2 ** 31 - 1);
  const protocol = o.protocol ?? "auto";
  if (protocol !== "auto" && protocol !== "ascii") throw new InvalidValueError("protocol", `protocol must be "auto" or "ascii" (the binary protocol is not spoken here), got ${JSON.stringify(protocol)}`);
  const prefixDelimiter = o.prefixDelimiter ?? DEFAULT_PREFIX_DELIMITER;
  if (prefixDelimiter.length !== 1 || prefixDelimiter.charCodeAt(0) > 0x7e || prefixDelimiter.charCodeAt(0) <= 0x20) {
    throw new InvalidValueError("prefixDelimiter", `prefixDelimiter must be one printable ASCII character, not a space, got ${JSON.stringify(prefixDelimiter)}`);
  }
  const mode = o.listenMode ?? listenMode();
  const smp = await Smp.start({
    shards: options.shards,
    memoryPerShard: options.memoryPerShard,
    heapprof: options.heapprofRate,
    heapprofSites: options.heapprofSites,
    module: SHARD_MODULE,
    // A cache lives full: its items fill their budget (-m, 89% of the heap that -m 256 makes) and
    // eviction keeps them there, so the 80% and 90% lines would be printed by every warm server, for
    // nothing anyone must act on. What can run out is answered per request (SERVER_ERROR out of
    // memory) and counted in stats (store_no_memory) and the admin API's failed allocations.
    memoryPressure: false,
  });
  let index = 0;
  try {
    const config: ServerConfig = {
      maxItemSize,
      shards: options.shards,
      memoryPerShard: options.memoryPerShard,
      itemMemoryPerShard,
      startedAt: Math.floor(Date.now() / 1000),
      host,
      port,
      statsBuffer: createStatsBuffer(options.shards),
      inboxes: createInboxes(options.shards),
      evict: o.evict ?? true,
      flushAllowed: o.flushAllowed ?? true,
      dumpEnabled: o.dumpEnabled ?? true,
      idleTimeout,
      requestsPerEvent,
      maxConnections,
      prefixDelimiter,
      statsDetail: o.statsDetail ?? false,
      verbosity,
      casEnabled: o.casEnabled ?? true,
      tcpBacklog,
      protocol,
    };
    index = await smp.submitTo<number>(0, "createCacheIndex", config);
    // One shard after another: each makes its part of the index's descriptors in turn (cache-memory.ts indexBytesByShard).
    for (let s = 0; s < options.shards; s++) await smp.submitTo(s, "configure", { config, index });
    const all = [...Array(options.shards).keys()];
    const spec: ListenSpec = { host, port, mode };
    let bound: number;
    if (mode === "sharedFd") {
      // Every shard at once through ShardContext.listen: one socket, the same port (port 0 too), turns at accepting.
      bound = (await Promise.all(all.map((s) => smp.submitTo<number>(s, "listen", spec))))[0]!;
    } else {
      bound = await smp.submitTo<number>(0, "listen", spec);
      if (mode === "reusePort") await Promise.all(all.slice(1).map((s) => smp.submitTo(s, "listen", { ...spec, port: bound } satisfies ListenSpec)));
    }
    config.port = bound;
    return new Server(smp, host, bound, mode, config, index);
  } catch (e) {
    // Shards that listened close their handles (their own descriptors) with their threads.
    await smp.stop();
    throw e;
  }
}

class Server implements MemcachedServer {
  readonly smp: Smp;
  readonly host: string;
  readonly port: number;
  readonly shards: number;
  readonly listenMode: ListenMode;
  readonly config: Readonly<ServerConfig>;
  private accepting: Promise<void> | undefined;
  private closing: Promise<void> | undefined;
  /**
   * Keeps this thread's event loop alive while the server runs, as a
   * listening net.Server does (the sockets live in the shards' threads,
   * which do not hold the process open: piscina unrefs them).
   */
  private readonly keepAlive = setInterval(() => {}, 2 ** 30);

  readonly index: number;

  constructor(smp: Smp, host: string, port: number, mode: ListenMode, config: ServerConfig, index: number) {
    this.index = index;
    this.smp = smp;
    this.host = host;
    this.port = port;
    this.shards = smp.shards;
    this.listenMode = mode;
    this.config = config;
    // The admin server's app panel (GET /v1/app/stats): read from the stats block, no shard asked.
    smp.publishAppStats("memcached", () => panelFigures(config));
  }

  stopAccepting(): Promise<void> {
    this.accepting ??= (async () => {
      await this.smp.invokeOnAll("stopListening");
      await this.smp.invokeOnAll("closeConnections");
    })();
    return this.accepting;
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      try {
        await this.stopAccepting();
      } finally {
        await this.smp.stop();
        clearInterval(this.keepAlive);
      }
    })();
    return this.closing;
  }
}
