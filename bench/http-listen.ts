/**
 * "http-listen": one port from every shard (ShardContext.listen) for a
 * user's HTTP service with a CPU-bound handler (bench/fixtures/
 * http-handler.mjs, about 0.5 ms a request): two shards behind one port
 * against one shard, and node:cluster's two workers against one plain
 * process, the same handler in all four, in this run, in rotating rounds.
 *
 * Servers, each its own process (bench/servers.ts):
 *   shardheap 1 shard, 2 shards   fixtures/http-shards.mjs: an http.Server
 *                                 per shard, listening through
 *                                 shard.listen on one port
 *   plain process                 fixtures/http-cluster.mjs --processes 0:
 *                                 one http.Server, no cluster
 *   node:cluster 2 workers        the same server in two worker processes
 *                                 (round-robin: the primary accepts and
 *                                 hands each connection on)
 * Load: wrk -t1 -c16 (keep-alive connections, one thread of wrk, the
 * lightest client there is for the 2-core VM, which it shares with the
 * servers); without wrk (`apt-get install wrk`), fixtures/http-load.mjs,
 * a Node client that takes more of the machine (its figures say so).
 *
 * Figures: the median requests/s of each server over the rounds, and the
 * gains: 2 shards / 1 shard, and node:cluster's 2 workers / plain. Target:
 * two shards serve at least 1.5x one shard's requests/s, or at least 0.95x
 * the gain node:cluster gets in the same run (the client takes its share
 * of the two cores, which caps both; cluster gained 1.46-1.57x here).
 *
 * Time: 4 servers x (3 s + ~0.1 s) x 3 rounds, a 1 s warm-up each, and
 * their starts: about 50 s. `--rounds N --round-ms MS` change it.
 */
import { execFile } from "node:child_process";
import os from "node:os";
import { promisify } from "node:util";
import { fixture } from "./memcached-loads.js";
import type { BenchModule } from "./report.js";
import { startServer, stopServer, type ServerProcess } from "./servers.js";

const BENCH = "http-listen";
const DEFAULT_ROUNDS = 3;
const ROUND_SECONDS = 3;
const WARM_SECONDS = 1;
const CONNECTIONS = 16;
/** Two shards / one shard, at least; or this share of node:cluster's gain. */
const SCALE = 1.5;
const OF_CLUSTER = 0.95;

const run = promisify(execFile);

interface Candidate {
  readonly name: string;
  readonly args: (port: number) => string[];
  server?: ServerProcess;
  failure?: string;
  readonly rps: number[];
}

const candidates = (): Record<"s1" | "s2" | "plain" | "c2", Candidate> => ({
  s1: { name: "shardheap 1 shard", args: (p) => [fixture("http-shards.mjs"), "--port", String(p), "--shards", "1"], rps: [] },
  s2: { name: "shardheap 2 shards", args: (p) => [fixture("http-shards.mjs"), "--port", String(p), "--shards", "2"], rps: [] },
  plain: { name: "plain process", args: (p) => [fixture("http-cluster.mjs"), "--port", String(p), "--processes", "0"], rps: [] },
  c2: { name: "node:cluster 2 workers", args: (p) => [fixture("http-cluster.mjs"), "--port", String(p), "--processes", "2"], rps: [] },
});

/** wrk's path, or undefined when it is not installed. */
async function findWrk(): Promise<string | undefined> {
  try {
    await run("wrk", ["--version"]).catch((e: { stdout?: string }) => {
      // wrk --version prints its banner and exits 1.
      if (!String(e.stdout ?? "").includes("wrk")) throw e;
    });
    return "wrk";
  } catch {
    return undefined;
  }
}

/** Requests/s of `seconds` of load against `port`. */
async function load(wrk: string | undefined, port: number, seconds: number): Promise<number> {
  const { stdout } =
    wrk === undefined
      ? await run(process.execPath, [fixture("http-load.mjs"), "--port", String(port), "--connections", String(CONNECTIONS), "--seconds", String(seconds)], { timeout: (seconds + 30) * 1000 })
      : await run(wrk, ["-t1", `-c${CONNECTIONS}`, `-d${seconds}s`, `http://127.0.0.1:${port}/`], { timeout: (seconds + 30) * 1000 });
  const rps = Number(/Requests\/sec:\s*([\d.]+)/.exec(stdout)?.[1]);
  if (!Number.isFinite(rps) || rps <= 0) throw new Error(`no requests/s in the load's output: ${stdout.trim().slice(-300)}`);
  const errors = /Non-2xx or 3xx responses: (\d+)|Socket errors: .*/.exec(stdout);
  if (errors !== null) throw new Error(`the load saw errors: ${errors[0]}`);
  return rps;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 === 1 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const loadavg = (): string => os.loadavg().map((l) => l.toFixed(2)).join(" ");

export const httpListen: BenchModule = {
  name: BENCH,
  title: "an HTTP service with a CPU-bound handler: 2 shards behind one port (shard.listen) vs 1 shard, and node:cluster 2 workers vs a plain process, requests/s (wrk -c16)",
  async run(ctx) {
    const rounds = ctx.timing.rounds ?? DEFAULT_ROUNDS;
    const seconds = ctx.timing.roundMs === undefined ? ROUND_SECONDS : Math.max(1, Math.round(ctx.timing.roundMs / 1000));
    const wrk = await findWrk();
    const all = candidates();
    const list = Object.values(all);
    const loadBefore = loadavg();
    try {
      for (const c of list) {
        try {
          c.server = await startServer(process.execPath, c.args);
          // The port accepts once the first shard listens: give the others a moment, then the JIT its warm-up.
          await new Promise((r) => setTimeout(r, 300));
          await load(wrk, c.server.port, WARM_SECONDS);
        } catch (e) {
          c.failure = e instanceof Error ? e.message : String(e);
        }
      }
      for (let r = 0; r < rounds; r++) {
        ctx.progress(`round ${r + 1}/${rounds} (load average ${loadavg()})`);
        for (let i = 0; i < list.length; i++) {
          const c = list[(i + r) % list.length]!;
          if (c.server === undefined || c.failure !== undefined) continue;
          try {
            c.rps.push(await load(wrk, c.server.port, seconds));
          } catch (e) {
            c.failure = e instanceof Error ? e.message : String(e);
          }
        }
      }
    } finally {
      await Promise.all(list.map((c) => (c.server === undefined ? undefined : stopServer(c.server))));
    }
    const client = wrk === undefined ? "the Node client (wrk is not installed: apt-get install wrk)" : `wrk -t1 -c${CONNECTIONS}`;
    for (const c of list) {
      if (c.rps.length === 0) {
        ctx.record({ bench: BENCH, candidate: c.name, note: `failed: ${c.failure ?? "no rounds"}` });
        continue;
      }
      const rps = median(c.rps);
      ctx.record({
        bench: BENCH,
        candidate: c.name,
        metric: "time per request (1 / requests/s)",
        nsPerOp: 1e9 / rps,
        minNsPerOp: 1e9 / Math.max(...c.rps),
        maxNsPerOp: 1e9 / Math.min(...c.rps),
        rounds: c.rps.length,
        note: `${c.name}: ${Math.round(rps)} requests/s (rounds ${c.rps.map(Math.round).join(", ")}), ${seconds} s of ${client} each`,
      });
    }
    if (all.s1.rps.length === 0 || all.s2.rps.length === 0) return;
    const shards = median(all.s2.rps) / median(all.s1.rps);
    const cluster = all.plain.rps.length > 0 && all.c2.rps.length > 0 ? median(all.c2.rps) / median(all.plain.rps) : undefined;
    if (cluster !== undefined) {
      ctx.record({ bench: BENCH, candidate: "node:cluster gain", metric: "2 workers / plain, requests/s", value: cluster, note: `node:cluster's gain: ${cluster.toFixed(2)}x` });
    }
    const pass = shards >= SCALE || (cluster !== undefined && shards >= OF_CLUSTER * cluster);
    ctx.record({
      bench: BENCH,
      candidate: "shardheap gain",
      metric: "2 shards / 1 shard, requests/s",
      value: shards,
      target: `>= ${SCALE}x, or >= ${OF_CLUSTER}x node:cluster's gain`,
      pass,
      note:
        `two shards behind one port: ${shards.toFixed(2)}x one shard's requests/s` +
        (cluster === undefined ? "" : ` (${(shards / cluster).toFixed(2)}x node:cluster's ${cluster.toFixed(2)}x)`) +
        `; load average ${loadBefore} before, ${loadavg()} after`,
    });
  },
};
