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
import type { SharedHeap } from "../../memory/shared-heap.js";
import { MEMORY_STAT_FIELDS } from "../../memory/stats.js";
import { VERSION, type ServerConfig } from "./config.js";

/** memcached's counters: each one's slot in a shard's row, in the order `stats` prints them. */
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
  /** Connections refused for -c (memcached: "ERROR Too many open connections"). */
  rejected_connections: 29,
  /** Times a connection stopped after -R requests to let others run. */
  conn_yields: 30,
  /** Connections closed for -o idle_timeout. */
  idle_kicks: 31,
  /** memcached counts the times it stopped accepting at -c; shardheap refuses each connection instead: 0. */
  listen_disabled_num: 32,
} as const;
export type StatName = keyof typeof STAT;
export const STAT_NAMES = Object.keys(STAT) as StatName[];
/** Figures of the present, which `stats reset` leaves alone (as memcached's). */
const GAUGES: ReadonlySet<StatName> = new Set(["curr_connections", "curr_items", "bytes"]);
/** Per-shard lines besides MemoryStats: where connections and items are. */
const PER_SHARD: readonly StatName[] = ["curr_connections", "curr_items", "bytes", "evictions", "get_hits", "get_misses"];

/** The statistics block for `shards` shards. */
export function createStatsBuffer(shards: number): SharedArrayBuffer {
  return new SharedArrayBuffer(shards * STAT_NAMES.length * 8);
}

/** One shard's row of counters (written by that shard only). */
export function shardCounters(buffer: SharedArrayBuffer, shard: number): Float64Array {
  return new Float64Array(buffer, shard * STAT_NAMES.length * 8, STAT_NAMES.length);
}

/** `stats reset`: zero a shard's counters, gauges kept. */
export function resetCounters(row: Float64Array): void {
  STAT_NAMES.forEach((name, i) => {
    if (!GAUGES.has(name)) row[i] = 0;
  });
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

/** `stats`: memcached's general-purpose lines, then each shard's, then END. */
export function formatStats(config: ServerConfig, heap: SharedHeap): string {
  const now = Math.floor(Date.now() / 1000);
  const t = totals(config);
  const cpu = process.cpuUsage();
  const lines: Array<[string, string | number]> = [
    ["pid", process.pid],
    ["uptime", now - config.startedAt],
    ["time", now],
    ["version", VERSION],
    ["pointer_size", 64],
    ["rusage_user", seconds(cpu.user)],
    ["rusage_system", seconds(cpu.system)],
  ];
  for (const name of STAT_NAMES) lines.push([name, t[name]]);
  lines.push(["limit_maxbytes", config.shards * config.memoryPerShard], ["threads", config.shards]);
  for (let s = 0; s < config.shards; s++) {
    const row = shardCounters(config.statsBuffer, s);
    for (const name of PER_SHARD) lines.push([`shard${s}:${name}`, row[STAT[name]]!]);
    const memory = heap.stats(s);
    for (const f of MEMORY_STAT_FIELDS) lines.push([`shard${s}:${f.name}`, memory[f.name]]);
  }
  return lines.map(([k, v]) => `STAT ${k} ${v}\r\n`).join("") + "END\r\n";
}

/** `stats settings`: the settings that apply here, as memcached names them. */
export function formatSettings(config: ServerConfig): string {
  const lines: Array<[string, string | number]> = [
    ["maxbytes", config.shards * config.memoryPerShard],
    ["tcpport", config.port],
    ["inter", config.host],
    ["evictions", "on"],
    ["num_threads", config.shards],
    ["cas_enabled", "yes"],
    ["item_size_max", config.maxItemSize],
    ["binding_protocol", "ascii"],
  ];
  return lines.map(([k, v]) => `STAT ${k} ${v}\r\n`).join("") + "END\r\n";
}

/** memcached prints rusage as seconds.microseconds. */
function seconds(micros: number): string {
  return `${Math.floor(micros / 1e6)}.${String(micros % 1e6).padStart(6, "0")}`;
}
