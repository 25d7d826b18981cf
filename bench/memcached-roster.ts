/**
 * The servers of bench/memcached.ts, each given the same memory for its
 * cache (`cacheMiB`), and what is measured of them: a round of a load
 * (requests/s and server CPU per request, and whether the cache was still
 * filling), and their `stats` (curr_items, bytes, limit_maxbytes,
 * evictions; `stats slabs` where the server answers it).
 *
 *   memcached -t 1, -t 2     Debian's memcached 1.6, -m MiB: MiB of slab
 *                            pages for items (the hash table apart)
 *   shardheap --smp 1, 2     `shardheap memcached --smp N -m MiB`: -m is
 *                            split evenly over the shards (run.ts: each
 *                            shard's --memory is -m / N, floored), and a
 *                            shard's memory holds everything of it: items,
 *                            its part of the index and the heap's own
 *                            tables; limit_maxbytes is the sum, -m
 *   --smp 2 --heapprof       the same with the profiler at 2 MiB
 *   node:cluster 1, 2        memcached-cluster.mjs --memory MiB: a
 *                            memcached-lru.mjs cache per process, MiB / N
 *                            of item bytes each (JS overhead not counted)
 *   floors                   memcached-floor.mjs --memory MiB, the same
 *                            cache per thread, MiB / N each
 */
import { fileURLToPath } from "node:url";
import { RawClient, installed } from "../test/apps/memcached/client.js";
import { KEY_BYTES, VALUE_BYTES, fixture, type Load } from "./memcached-loads.js";
import { cpuSeconds, processTree, rssBytes } from "./process-cpu.js";
import { ROOT_USER_ARGS, startServer, type ServerProcess } from "./servers.js";

const CLI = fileURLToPath(new URL("../../dist/cli.js", import.meta.url));
/** How long a `stats` answer may take. */
const STATS_MS = 15_000;

/** Where a server's cache was when a round ended: still filling, filled during the round (evictions began), or full throughout. */
export type Phase = "filling" | "filled" | "full";

export interface Round {
  /** "filling" when measured in the fill phase, "filled" once `stats` after it showed evictions. */
  phase: Phase;
  readonly tps: number;
  readonly cpuUsPerOp: number;
  readonly misses: number;
  readonly setErrors: number;
  readonly ops: number;
}

/** A `stats` answer: STAT name value, the numeric ones. */
export type Stats = ReadonlyMap<string, number>;

export interface Server {
  readonly name: string;
  /** Why it cannot run here; undefined when it can. */
  readonly missing: string | undefined;
  /** It answers `stats slabs` (memcached and shardheap; the Node baselines do not). */
  readonly slabs: boolean;
  start(): Promise<ServerProcess>;
  running?: ServerProcess;
  /** What went wrong, once something did; its figures are not used then. */
  failure?: string;
  /** Every measured round of each load, in the order run. */
  readonly rounds: Map<Load, Round[]>;
  /** Item bytes the loads have set into it (sets x (key + value)): the fill phase's bound. */
  written: number;
  /** limit_maxbytes, read once it started. */
  limit: number;
  /** Evictions seen in `stats`, or the fill phase gave up on it (see fillNote). */
  full: boolean;
  /** Why its fill phase ended without an eviction. */
  fillNote?: string;
  /** `stats` and `stats slabs` at the end, and the resident memory of its processes then. */
  final?: Stats;
  finalSlabs?: Stats;
  rss?: number;
}

export type Roster = Record<"m1" | "m2" | "s1" | "s2" | "sp" | "c1" | "c2" | "fl" | "fo", Server>;

/** The nine servers, by their parts in the comparisons, each with `cacheMiB` for its cache. */
export function roster(cacheMiB: number): Roster {
  const server = (name: string, missing: string | undefined, slabs: boolean, program: string, args: (port: number) => string[]): Server => ({
    name,
    missing,
    slabs,
    start: () => startServer(program, args, { SHARDHEAP_LOG: "silent" }),
    rounds: new Map(),
    written: 0,
    limit: 0,
    full: false,
  });
  const noMemcached = installed("memcached", ["-V"]) ? undefined : "memcached is not installed (apt-get install memcached)";
  const memcached = (threads: number): Server =>
    server(`memcached -t ${threads}`, noMemcached, true, "memcached", (port) => [
      ...["-p", String(port), "-U", "0", "-l", "127.0.0.1", "-t", String(threads), "-m", String(cacheMiB)],
      ...ROOT_USER_ARGS,
    ]);
  const shardheap = (name: string, shards: number, extra: string[] = []): Server =>
    server(name, undefined, true, process.execPath, (port) => [CLI, "memcached", "--smp", String(shards), "-m", String(cacheMiB), "--port", String(port), ...ROOT_USER_ARGS, ...extra]);
  const node = (name: string, file: string, flag: string, count: number, extra: string[] = []): Server =>
    server(name, undefined, false, process.execPath, (port) => [fixture(file), "--port", String(port), flag, String(count), "--memory", String(cacheMiB), ...extra]);
  return {
    m1: memcached(1),
    m2: memcached(2),
    s1: shardheap("shardheap --smp 1", 1),
    s2: shardheap("shardheap --smp 2", 2),
    sp: shardheap("shardheap --smp 2 --heapprof=2097152", 2, ["--heapprof=2097152"]),
    c1: node("node:cluster 1 process", "memcached-cluster.mjs", "--processes", 1),
    c2: node("node:cluster 2 processes", "memcached-cluster.mjs", "--processes", 2),
    fl: node("floor (bare Node, 2 threads)", "memcached-floor.mjs", "--threads", 2),
    fo: node("floor, one cache (sets hop by MessagePort)", "memcached-floor.mjs", "--threads", 2, ["--one-cache", "1"]),
  };
}

export const message = (e: unknown): string => (e instanceof Error ? e.message : String(e));

/** Runs `what` against a running server that has not failed; a failure is recorded on the server (its stderr's tail with it) and it runs no more. */
export async function attempt(server: Server, what: string, run: (s: ServerProcess) => Promise<void>): Promise<void> {
  const s = server.running;
  if (s === undefined || server.failure !== undefined) return;
  try {
    await run(s);
  } catch (e) {
    const tail = s.stderr().trim();
    server.failure = `${what}: ${message(e)}${tail ? `; the server's stderr: ${tail.slice(-300).replace(/\s*\n\s*/g, " | ")}` : ""}`;
  }
}

/** A `stats` command's answer (`stats`, `stats slabs`) on a connection of its own. */
export async function readStats(port: number, command = "stats"): Promise<Stats> {
  const c = await RawClient.open(port);
  try {
    const text = await c.request(`${command}\r\n`, /(^|\r\n)(END|ERROR|CLIENT_ERROR[^\r]*|SERVER_ERROR[^\r]*)\r\n$/, STATS_MS);
    if (!text.endsWith("END\r\n")) throw new Error(`${command} answered ${JSON.stringify(text.slice(-100))}`);
    const stats = new Map<string, number>();
    for (const m of text.matchAll(/^STAT (\S+) (-?\d+(?:\.\d+)?)\r$/gm)) stats.set(m[1]!, Number(m[2]));
    return stats;
  } finally {
    c.close();
  }
}

/** A `stats` figure the server must answer. */
export function stat(stats: Stats, name: string): number {
  const v = stats.get(name);
  if (v === undefined) throw new Error(`stats has no ${name}`);
  return v;
}

/** A load run against `server` without measuring it (warm-up), counted in what it has written. */
export function warm(server: Server, load: Load, seconds: number): Promise<void> {
  return attempt(server, `warm-up, ${load.name}`, async (s) => {
    const got = await load.run(s.port, seconds);
    server.written += got.ops * load.setShare * (KEY_BYTES + VALUE_BYTES);
  });
}

/** One run of `load` against `server`, its requests/s and server CPU per request recorded as a round of `phase`; the round, or undefined when the server failed. */
export async function measure(server: Server, load: Load, seconds: number, phase: Phase): Promise<Round | undefined> {
  let round: Round | undefined;
  await attempt(server, load.name, async (s) => {
    const tree = processTree(s.process.pid!);
    let before = 0;
    const got = await load.run(s.port, seconds, () => (before = cpuSeconds(tree)));
    const cpu = cpuSeconds(tree) - before;
    server.written += got.ops * load.setShare * (KEY_BYTES + VALUE_BYTES);
    round = { phase, tps: got.tps, cpuUsPerOp: (cpu * 1e6) / got.ops, misses: got.misses, setErrors: got.setErrors, ops: got.ops };
    let list = server.rounds.get(load);
    if (list === undefined) server.rounds.set(load, (list = []));
    list.push(round);
  });
  return round;
}

/** The server's `stats` and `stats slabs` (where it answers it), and its resident memory: what it holds at the end. */
export function readFinal(server: Server): Promise<void> {
  return attempt(server, "stats at the end", async (p) => {
    server.final = await readStats(p.port);
    if (server.slabs) server.finalSlabs = await readStats(p.port, "stats slabs");
    server.rss = rssBytes(processTree(p.process.pid!));
  });
}
