/**
 * "memcached" (issue 13): the same memcaslap load against three servers
 * on this machine, in this run, in interleaved rounds:
 *
 *   shardheap --smp 2         `shardheap memcached --smp 2`, profiler off
 *   memcached -t 2            Debian's memcached with two worker threads
 *                             target: shardheap's throughput >= 0.5x
 *                             memcached's (ratio of time per op <= 2)
 *   shardheap --heapprof=2M   `--smp 2 --heapprof=2097152` (Redpanda's
 *                             always-on rate is 3 MB)
 *                             target: <= 2% slower than the profiler off
 *                             (ratio <= 1.02)
 *   floor (bare Node)         the bare mechanism with nothing of ours in
 *                             it (bench/fixtures/memcached-floor.mjs): two
 *                             worker threads listening on one shared fd as
 *                             listener.ts does on Node 20, a minimal
 *                             get/set parser, values in a JS Map per thread,
 *                             answers corked per read. Reported against
 *                             memcached, and shardheap against it: when the
 *                             floor itself is below 0.5x memcached, the 0.5x
 *                             target lies below what Node's socket layer
 *                             allows on this machine (a calibration error,
 *                             said on the target's line).
 *
 * memcaslap: `-T 2 -c 128 -t <round>`: two client threads, 128
 * connections, its default mix (90% gets, 10% sets, keys from a window of
 * 10k, values around 1 KiB). Each round runs memcaslap once against each
 * server, the order rotating, the profiler off and on back to back; a
 * warm-up round first (the JIT, the items).
 * Reported per server: the median ns per request (1e9 / TPS) over the
 * rounds, with the spread, the median TPS, and the server's CPU time per
 * request (user + system of all its threads, from /proc): less sensitive
 * than throughput to what else the machine runs, since on a 2-core
 * machine memcaslap's own threads compete with the servers.
 *
 * The machine's load average is printed before and after: the figures
 * mean little on a machine busy with other work. Skipped, saying so, when
 * memcached or memcaslap is not installed.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { createServer, connect } from "node:net";
import os from "node:os";
import { fileURLToPath } from "node:url";
import { compare, type BenchModule, type BenchRecord } from "./report.js";
import { median } from "./timing.js";

const BENCH = "memcached";
const CLI = fileURLToPath(new URL("../../dist/cli.js", import.meta.url));
const FLOOR = fileURLToPath(new URL("../../bench/fixtures/memcached-floor.mjs", import.meta.url));
/** Seconds of memcaslap per server per round. */
const ROUND_SECONDS = 4;
const DEFAULT_ROUNDS = 5;
const MEMCASLAP_ARGS = ["-T", "2", "-c", "128"];
const CLOCK_TICKS = 100; // USER_HZ on Linux

interface Server {
  name: string;
  process: ChildProcess;
  port: number;
  tps: number[];
  cpuUsPerOp: number[];
}

function installed(program: string, args: string[]): boolean {
  return spawnSync(program, args, { stdio: "ignore", timeout: 5000 }).error === undefined;
}

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const a = s.address();
  await new Promise<void>((r) => s.close(() => r()));
  return typeof a === "object" && a !== null ? a.port : 0;
}

async function accepting(port: number, child: ChildProcess, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const c = connect(port, "127.0.0.1");
      c.once("connect", () => {
        c.destroy();
        resolve(true);
      });
      c.once("error", () => resolve(false));
    });
    if (ok) return;
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`server on ${port} did not start`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function startShardheap(name: string, extra: string[]): Promise<Server> {
  const port = await freePort();
  const child = spawn(process.execPath, [CLI, "memcached", "--smp", "2", "--memory", "64MiB", "--port", String(port), ...extra], {
    stdio: "ignore",
    env: { ...process.env, SHARDHEAP_LOG: "silent" },
  });
  await accepting(port, child);
  return { name, process: child, port, tps: [], cpuUsPerOp: [] };
}

async function startFloor(): Promise<Server> {
  const port = await freePort();
  const child = spawn(process.execPath, [FLOOR, "--port", String(port), "--threads", "2"], { stdio: "ignore" });
  await accepting(port, child);
  return { name: "floor (bare Node)", process: child, port, tps: [], cpuUsPerOp: [] };
}

async function startMemcached(): Promise<Server> {
  const port = await freePort();
  const args = ["-p", String(port), "-U", "0", "-l", "127.0.0.1", "-t", "2", "-m", "128"];
  if (process.getuid?.() === 0) args.push("-u", "root");
  const child = spawn("memcached", args, { stdio: "ignore" });
  await accepting(port, child);
  return { name: "memcached -t 2", process: child, port, tps: [], cpuUsPerOp: [] };
}

/** A process's CPU time so far (all threads), in clock ticks. */
function cpuTicks(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return Number(fields[11]) + Number(fields[12]); // utime, stime
}

/** One memcaslap run against `server`: its TPS and the server's CPU per request. */
function load(server: Server, seconds: number): { tps: number; cpuUsPerOp: number; ops: number } {
  const pid = server.process.pid!;
  const before = cpuTicks(pid);
  const r = spawnSync("memcaslap", ["-s", `127.0.0.1:${server.port}`, ...MEMCASLAP_ARGS, "-t", `${seconds}s`], { encoding: "utf8", timeout: (seconds + 60) * 1000 });
  const ticks = cpuTicks(pid) - before;
  const m = /Ops: (\d+) TPS: (\d+)/.exec(r.stdout ?? "");
  if (!m) throw new Error(`memcaslap against ${server.name} printed no figures: ${r.stdout}${r.stderr}`);
  const ops = Number(m[1]);
  return { tps: Number(m[2]), ops, cpuUsPerOp: ((ticks / CLOCK_TICKS) * 1e6) / ops };
}

async function stop(server: Server): Promise<void> {
  const child = server.process;
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  child.kill("SIGINT");
  await Promise.race([exited, new Promise((r) => setTimeout(r, 15_000))]);
  if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
}

const loadavg = (): string => os.loadavg().map((l) => l.toFixed(2)).join(" ");

export const memcached: BenchModule = {
  name: BENCH,
  title: `memcaslap ${MEMCASLAP_ARGS.join(" ")} against shardheap memcached --smp 2 (profiler off, --heapprof=2097152), memcached -t 2 and the floor (bare Node, 2 threads)`,
  async run(ctx) {
    if (process.platform !== "linux" || !installed("memcached", ["-V"]) || !installed("memcaslap", ["-V"])) {
      ctx.progress("skipped: needs Linux, memcached and memcaslap (apt-get install memcached libmemcached-tools)");
      ctx.record({ bench: BENCH, candidate: "skipped", nsPerOp: NaN, note: "memcached or memcaslap is not installed (apt-get install memcached libmemcached-tools)" });
      return;
    }
    const rounds = ctx.timing.rounds ?? DEFAULT_ROUNDS;
    const seconds = ctx.timing.roundMs === undefined ? ROUND_SECONDS : Math.max(1, Math.round(ctx.timing.roundMs / 1000));
    const loadBefore = loadavg();
    const servers: Server[] = [];
    try {
      servers.push(await startShardheap("shardheap --smp 2", []));
      servers.push(await startMemcached());
      servers.push(await startShardheap("shardheap --heapprof=2M", ["--heapprof=2097152"]));
      servers.push(await startFloor());
      ctx.progress(`warm-up: ${seconds} s of memcaslap per server`);
      for (const s of servers) load(s, seconds);
      // The profiler off and on run back to back in every round (their
      // order alternating), the pair's place among the others rotating.
      const [off, , on] = servers as [Server, Server, Server, Server];
      const slots: Server[][] = [[servers[1]!], [servers[3]!], [off, on]];
      for (let r = 0; r < rounds; r++) {
        ctx.progress(`round ${r + 1}/${rounds} (load ${loadavg()})`);
        for (let i = 0; i < slots.length; i++) {
          const slot = slots[(i + r) % slots.length]!;
          for (const s of r % 2 === 0 ? slot : [...slot].reverse()) {
            const got = load(s, seconds);
            s.tps.push(got.tps);
            s.cpuUsPerOp.push(got.cpuUsPerOp);
          }
        }
      }
    } finally {
      await Promise.all(servers.map(stop));
    }
    const loadAfter = loadavg();
    const [shardheap, reference, profiled, floor] = servers as [Server, Server, Server, Server];
    const figures = (s: Server): Required<Pick<BenchRecord, "nsPerOp" | "minNsPerOp" | "maxNsPerOp" | "rounds">> => ({
      nsPerOp: 1e9 / median(s.tps),
      minNsPerOp: 1e9 / Math.max(...s.tps),
      maxNsPerOp: 1e9 / Math.min(...s.tps),
      rounds: s.tps.length,
    });
    const note = (s: Server): string =>
      `median ${Math.round(median(s.tps)).toLocaleString("en-US")} requests/s (rounds: ${s.tps.map((t) => Math.round(t / 100) / 10).join(", ")}k); ` +
      `server CPU ${median(s.cpuUsPerOp).toFixed(1)} us per request; load average ${loadBefore} before, ${loadAfter} after`;
    ctx.record({ bench: BENCH, candidate: reference.name, ...figures(reference), note: note(reference) });
    const refNs = 1e9 / median(reference.tps);
    const fl = figures(floor);
    // The floor's time per request over memcached's: above 2, no Node server on this arrangement reaches 0.5x.
    const floorRatio = fl.nsPerOp / refNs;
    const calibration = floorRatio > 2;
    ctx.record({
      bench: BENCH,
      candidate: floor.name,
      ...fl,
      ...compare(fl.nsPerOp, reference.name, refNs),
      note: `${note(floor)}; floor throughput ${(1 / floorRatio).toFixed(2)}x memcached's`,
    });
    const sh = figures(shardheap);
    ctx.record({
      bench: BENCH,
      candidate: shardheap.name,
      ...sh,
      ...compare(
        sh.nsPerOp,
        reference.name,
        refNs,
        2,
        calibration
          ? `ratio <= 2 (>= 0.5x memcached's throughput): calibration error, the floor itself is at ${(1 / floorRatio).toFixed(2)}x (ratio ${floorRatio.toFixed(2)})`
          : "ratio <= 2 (>= 0.5x memcached's throughput)",
      ),
      note: note(shardheap),
    });
    ctx.record({
      bench: BENCH,
      candidate: `${shardheap.name} vs floor`,
      ...sh,
      ...compare(sh.nsPerOp, floor.name, fl.nsPerOp),
      note: `throughput ${(fl.nsPerOp / sh.nsPerOp).toFixed(2)}x the floor's; server CPU per request ${(median(shardheap.cpuUsPerOp) / median(floor.cpuUsPerOp)).toFixed(2)}x the floor's`,
    });
    // The profiler's cost: the medians of the rounds, on over off, as for
    // the other servers. What decided it (this loaded 2-core machine): the
    // medians moved between runs from 7.2% slower to 0.9% slower, a
    // server's own rounds spread by 30%, and the per-round pairs (on and
    // off back to back) spread no less (1.062 against 1.009 for the medians
    // in one run): the spread comes with each memcaslap run's split of the
    // connections over the shards, not with the moment. The shards'
    // --cpu-prof under memcaslap puts the profiler's own functions (stack
    // capture, site table) at 11 ms of 17.3 s of shard CPU, 0.06%: at
    // 2 MiB a sample comes once per ~1,900 sets of ~1.1 KiB and costs
    // ~20 us. The pairs' ratios are printed in the note.
    const pairRatios = (of: (s: Server) => number[], inverse: boolean): number =>
      median(of(profiled).map((v, i) => (inverse ? of(shardheap)[i]! / v : v / of(shardheap)[i]!)));
    const timeRatio = pairRatios((s) => s.tps, true);
    const cpuRatio = pairRatios((s) => s.cpuUsPerOp, false);
    const pr = figures(profiled);
    ctx.record({
      bench: BENCH,
      candidate: profiled.name,
      ...pr,
      ...compare(pr.nsPerOp, shardheap.name, sh.nsPerOp, 1.02, "ratio <= 1.02 (<= 2% slower)"),
      note:
        `${note(profiled)}; CPU per request vs the profiler off: ${(median(profiled.cpuUsPerOp) / median(shardheap.cpuUsPerOp)).toFixed(3)}; ` +
        `medians of the per-round pairs: time per request ${timeRatio.toFixed(3)}, CPU per request ${cpuRatio.toFixed(3)}`,
    });
  },
};
