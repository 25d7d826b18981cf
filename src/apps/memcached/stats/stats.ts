/**
 * The server's statistics: memcached's counters, one row of float64 slots
 * per shard in one SharedArrayBuffer (each shard writes only its own row,
 * every thread reads all of them), and the `stats` answer built from them
 * plus each shard's MemoryStats, read straight from the heap. So `stats`
 * on any connection is answered by its own shard without a message to the
 * others, and the figures are current even while another shard is busy.
 *
 * Which shard counts what: the shard that owns a key counts what happens
 * to it (hits, misses, stores, evictions, items); the shard holding a
 * connection counts the connection and its bytes. memcached's totals are
 * the sums over the shards; `shardN:` lines give each shard's own.
 */
import type { SharedHeap } from "../../../memory/shared-heap.js";
import { MEMORY_STAT_FIELDS } from "../../../memory/memory-stats.js";
import type { AppFigure } from "../../../smp/app-stats.js";
import { VERSION, shardheapVersion, type ServerConfig } from "../config.js";
import { CLASS_BLOCK_SLOTS, CLASS_GAUGES, CLASS_STAT_NAMES } from "./item-classes.js";

/** memcached's counters: each one's slot in a shard's row. */
export const STAT = {
  curr_connections: 0,
  total_connections: 1,
  cmd_get: 2,
  cmd_set: 3,
  cmd_flush: 4,
  cmd_touch: 5,
  get_hits: 6,
  get_misses: 7,
  get_expired: 8,
  delete_misses: 9,
  delete_hits: 10,
  incr_misses: 11,
  incr_hits: 12,
  decr_misses: 13,
  decr_hits: 14,
  cas_misses: 15,
  cas_hits: 16,
  cas_badval: 17,
  touch_hits: 18,
  touch_misses: 19,
  store_too_large: 20,
  store_no_memory: 21,
  bytes_read: 22,
  bytes_written: 23,
  bytes: 24,
  curr_items: 25,
  total_items: 26,
  evictions: 27,
  reclaimed: 28,
  /** Gets that found a key flush_all had just removed (counted by the key's owner: item-cache.ts). */
  get_flushed: 29,
  /** Connections refused for -c (memcached: "ERROR Too many open connections"), counted by the shard that refused them. */
  rejected_connections: 30,
  /** Bytes this shard's items may take (cache_memlimit, or -m split over the shards): limit_maxbytes is the sum. */
  limit_maxbytes: 31,
  /** 1 while this shard accepts connections. */
  accepting_conns: 32,
  /** Keys the last flush_all removed that the store still remembers (item-cache.ts): gets elsewhere ask it about a miss while any are. */
  flushed_kept: 33,
  /** Times a connection stopped after -R requests to let others run. */
  conn_yields: 34,
  /** Connections closed for -o idle_timeout. */
  idle_kicks: 35,
  /** me commands (memcached counts only those as cmd_meta: mg, ms, md, ma count as gets, sets...). */
  cmd_meta: 36,
  /** Expired (or flushed) items taken back that no hit had fetched (item-cache.ts). */
  expired_unfetched: 37,
  /** Evicted items no hit had fetched. */
  evicted_unfetched: 38,
  /**
   * Heap bytes this shard's items' allocations take (their map entries'
   * entryBytes: header, key, value, the map's copy of the key and the size
   * class's rounding): what its budget counts, against limit_maxbytes.
   * Not memcached's (its items' chunks are chunk_size x used_chunks of
   * `stats slabs`): given per shard only, as shardN:mem_allocated.
   */
  mem_allocated: 39,
} as const;
export type StatName = keyof typeof STAT;
export const STAT_NAMES = Object.keys(STAT) as StatName[];
/** Figures of the present, which `stats reset` leaves alone (as memcached's). */
const GAUGES: ReadonlySet<StatName> = new Set(["curr_connections", "curr_items", "bytes", "limit_maxbytes", "accepting_conns", "flushed_kept", "mem_allocated"]);
/** Per-shard lines besides MemoryStats: where connections and items are. */
const PER_SHARD: readonly StatName[] = ["curr_connections", "curr_items", "bytes", "mem_allocated", "evictions", "get_hits", "get_misses"];
/** Float64 slots of a shard's row: the counters, then its class block (item-classes.ts). */
const ROW_SLOTS = STAT_NAMES.length + CLASS_BLOCK_SLOTS;

/** The statistics block for `shards` shards. */
export function createStatsBuffer(shards: number): SharedArrayBuffer {
  return new SharedArrayBuffer(shards * ROW_SLOTS * 8);
}

/** One shard's row of counters (written by that shard only). */
export function shardCounters(buffer: SharedArrayBuffer, shard: number): Float64Array {
  return new Float64Array(buffer, shard * ROW_SLOTS * 8, STAT_NAMES.length);
}

/** One shard's per-class counters (item-classes.ts classSlot), written by that shard only. */
export function classCounters(buffer: SharedArrayBuffer, shard: number): Float64Array {
  return new Float64Array(buffer, (shard * ROW_SLOTS + STAT_NAMES.length) * 8, CLASS_BLOCK_SLOTS);
}

/** `stats reset`: zero a shard's counters and class counters, gauges kept. */
export function resetCounters(row: Float64Array, classes: Float64Array): void {
  STAT_NAMES.forEach((name, i) => {
    if (!GAUGES.has(name)) row[i] = 0;
  });
  const fields = CLASS_STAT_NAMES.length;
  for (let i = 0; i < classes.length; i++) if (!CLASS_GAUGES.has(CLASS_STAT_NAMES[i % fields]!)) classes[i] = 0;
}

/** Every shard's counters summed, by name. */
export function totals(config: ServerConfig): Record<StatName, number> {
  const sum = new Float64Array(STAT_NAMES.length);
  for (let s = 0; s < config.shards; s++) {
    const row = shardCounters(config.statsBuffer, s);
    for (let i = 0; i < sum.length; i++) sum[i]! += row[i]!;
  }
  return Object.fromEntries(STAT_NAMES.map((n, i) => [n, sum[i]!])) as Record<StatName, number>;
}

/**
 * What the dashboard's app panel shows (smp.publishAppStats, server.ts):
 * the figures a cache's operator watches, from the same totals `stats`
 * prints (each help names memcached's field). The hit rate is left out
 * until a get has been counted (0 of 0 is no rate).
 */
export function panelFigures(config: ServerConfig): Record<string, AppFigure> {
  const t = totals(config);
  const lookups = t.get_hits + t.get_misses;
  return {
    ...(lookups > 0 ? { "hit rate": { value: t.get_hits / lookups, unit: "ratio", help: "get_hits / (get_hits + get_misses), since the start or the last stats reset" } } : {}),
    items: { value: t.curr_items, help: "curr_items: items stored now" },
    "item bytes": { value: t.bytes, unit: "bytes", help: "bytes: what the items take (header, key and value)" },
    evictions: { value: t.evictions, kind: "counter", help: "evictions: items removed to make room for new ones" },
    connections: { value: t.curr_connections, help: "curr_connections: open client connections" },
    gets: { value: t.cmd_get, kind: "counter", help: "cmd_get: keys asked for" },
    sets: { value: t.cmd_set, kind: "counter", help: "cmd_set: storage commands" },
    "out of memory": { value: t.store_no_memory, kind: "counter", help: "store_no_memory: stores refused with SERVER_ERROR out of memory" },
  };
}

/**
 * memcached 1.6's `stats` fields that mean something here, in its order,
 * each from its counter or its source. Left out, as they have no meaning
 * here: libevent, connection_structures, response_obj_*, read_buf_*,
 * reserved_fds, auth_* (no SASL), hash_* (SharedMap's table is not
 * memcached's hash table), slab_reassign_* and slabs_moved (no slab
 * pages to move: a free span serves any class), lru_crawler_*,
 * lru_maintainer_juggles, log_*, moves_* (one CLOCK order, no segmented
 * LRU), crawler_*, direct_reclaims, slab_global_page_pool,
 * evicted_active (no active flag: no segmented LRU),
 * unexpected_napi_ids, round_robin_fallback.
 */
type Field = StatName | [string, (t: Record<StatName, number>, config: ServerConfig, heap: SharedHeap) => string | number];
const now = (): number => Math.floor(Date.now() / 1000);
const FIELDS: readonly Field[] = [
  ["pid", () => process.pid],
  ["uptime", (_t, c) => now() - c.startedAt],
  ["time", () => now()],
  ["version", () => VERSION],
  ["pointer_size", () => 64],
  ["rusage_user", () => seconds(process.cpuUsage().user)],
  ["rusage_system", () => seconds(process.cpuUsage().system)],
  ["max_connections", (_t, c) => c.maxConnections],
  "curr_connections",
  "total_connections",
  "rejected_connections",
  "cmd_get",
  "cmd_set",
  "cmd_flush",
  "cmd_touch",
  "cmd_meta",
  "get_hits",
  "get_misses",
  "get_expired",
  "get_flushed",
  "delete_misses",
  "delete_hits",
  "incr_misses",
  "incr_hits",
  "decr_misses",
  "decr_hits",
  "cas_misses",
  "cas_hits",
  "cas_badval",
  "touch_hits",
  "touch_misses",
  "store_too_large",
  "store_no_memory",
  "idle_kicks", // only with -o idle_timeout, as memcached prints it (formatStats)
  "bytes_read",
  "bytes_written",
  "limit_maxbytes",
  // memcached's is 1 or 0 for the whole server: 1 while any shard accepts.
  ["accepting_conns", (t) => (t.accepting_conns > 0 ? 1 : 0)],
  // Listening is never turned off here (memcached does on EMFILE; this server keeps listening: shard.ts).
  ["listen_disabled_num", () => 0],
  ["time_in_listen_disabled_us", () => 0],
  ["threads", (_t, c) => c.shards],
  "conn_yields",
  // Allocations the heap refused (each shard's failedAllocations; the store evicts before most would fail).
  ["malloc_fails", (_t, c, heap) => sumOver(c.shards, (s) => heap.stats(s).failedAllocations)],
  "bytes",
  "curr_items",
  "total_items",
  "expired_unfetched",
  "evicted_unfetched",
  "evictions",
  "reclaimed",
  // Eviction never skips an item a reader holds (the map frees it once the reader lets go): never counted.
  ["lrutail_reflocked", () => 0],
  // Not memcached's: what the server is (version stays memcached's number, which clients parse).
  ["shardheap_version", () => shardheapVersion()],
];

/** `stats`: memcached's general-purpose lines, then each shard's, then END. */
export function formatStats(config: ServerConfig, heap: SharedHeap): string {
  const t = totals(config);
  const fields = config.idleTimeout > 0 ? FIELDS : FIELDS.filter((f) => f !== "idle_kicks");
  const lines: Array<[string, string | number]> = fields.map((f) => (typeof f === "string" ? [f, t[f]] : [f[0], f[1](t, config, heap)]));
  for (let s = 0; s < config.shards; s++) {
    const row = shardCounters(config.statsBuffer, s);
    for (const name of PER_SHARD) lines.push([`shard${s}:${name}`, row[STAT[name]]!]);
    const memory = heap.stats(s);
    for (const f of MEMORY_STAT_FIELDS) lines.push([`shard${s}:${f.name}`, memory[f.name]]);
  }
  return statLines(lines);
}

/** STAT lines and END. */
export function statLines(lines: ReadonlyArray<readonly [string, string | number]>): string {
  return lines.map(([k, v]) => `STAT ${k} ${v}\r\n`).join("") + "END\r\n";
}

function sumOver(shards: number, f: (shard: number) => number): number {
  let sum = 0;
  for (let s = 0; s < shards; s++) sum += f(s);
  return sum;
}

/**
 * `stats settings`: memcached 1.6's settings that apply here, in its
 * order, with its names. Left out: the slab, LRU-crawler and -maintainer,
 * logger, extstore and TLS tunables (none of those mechanisms exists
 * here), umask, hashpower_init, hash_algorithm (the index hashes keys its
 * own way: shared-map/keys.ts). `detailEnabled`: stats detail is on (shared
 * across shards: prefix-stats.ts).
 */
export function formatSettings(config: ServerConfig, detailEnabled: boolean): string {
  const t = totals(config);
  const lines: Array<[string, string | number]> = [
    ["maxbytes", t.limit_maxbytes],
    ["maxconns", config.maxConnections],
    ["tcpport", config.port],
    ["udpport", 0],
    ["inter", config.host],
    ["verbosity", config.verbosity],
    ["evictions", config.evict ? "on" : "off"],
    ["domain_socket", "NULL"],
    ["shutdown_command", "no"],
    ["num_threads", config.shards],
    ["stat_key_prefix", config.prefixDelimiter],
    ["detail_enabled", detailEnabled ? "yes" : "no"],
    ["reqs_per_event", config.requestsPerEvent],
    ["cas_enabled", config.casEnabled ? "yes" : "no"],
    ["tcp_backlog", config.tcpBacklog],
    ["binding_protocol", config.protocol === "auto" ? "auto-negotiate" : "ascii"],
    ["auth_enabled_sasl", "no"],
    ["auth_enabled_ascii", "no"],
    ["item_size_max", config.maxItemSize],
    ["maxconns_fast", "yes"],
    ["flush_enabled", config.flushAllowed ? "yes" : "no"],
    ["dump_enabled", config.dumpEnabled ? "yes" : "no"],
    ["idle_timeout", config.idleTimeout],
    ["track_sizes", "no"],
    ["inline_ascii_response", "no"],
    ["ssl_enabled", "no"],
  ];
  return statLines(lines);
}

/** memcached prints rusage as seconds.microseconds. */
function seconds(micros: number): string {
  return `${Math.floor(micros / 1e6)}.${String(micros % 1e6).padStart(6, "0")}`;
}
