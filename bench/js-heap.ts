/**
 * "js-heap": what each shard's JS heap profiler costs and how well it
 * weighs, in this run.
 *
 * Cost: `shardheap memcached --smp 2 --memory 512MiB` four times: twice
 * without the JS heap profiler (their difference is the machine's noise,
 * reported), with `--jsheapprof` (its default interval, 512 KiB, in both
 * shards) and with `--jsheapprof=32KiB` (V8's own default, for
 * reference), under memcaslap -T 2 -c 16 (its default mix: 90% gets,
 * 10% sets, ~1 KiB values), in rounds whose order alternates, after a
 * warm-up. Figure: the server's CPU per request, user + system time of
 * every thread of the server's process (from /proc, bench/process-cpu.ts)
 * over the requests memcaslap made. The target, on the default interval:
 * the median over the rounds of each round's ratio to the mean of that
 * round's two servers without it (measured one after the other, so the
 * machine's drift mostly cancels) <= 1.03 (3%). When the two servers
 * without it differ by more than 3%, the line says the run cannot tell.
 *
 * Weight: one shard keeps 200,000 objects of a known shape (an object, a
 * string, a 4-element array: ~218 bytes each as V8 lays them out) in its
 * own JS heap (bench/fixtures/js-heap-objects.mjs), profiled at 32 KiB and
 * at 4 KiB: the bytes the JS heap profile gives the function that keeps
 * them, against the growth of the shard's heapUsed (process.memoryUsage(),
 * both after full collections). Reported as a ratio, no target (the
 * sampling's own error: at 32 KiB, ~1,300 samples, ~3%).
 *
 * Time: ~4 x (4 + 1.1 s) x rounds and ~15 s to start and weigh: ~100 s at
 * the default 4 rounds. Needs Linux (/proc) and memcaslap (libmemcached-tools);
 * without them the cost record says skipped.
 */
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { Smp } from "../src/index.js";
import { installed } from "../test/apps/memcached/client.js";
import { cpuSeconds, processTree } from "./process-cpu.js";
import { compare, type BenchContext, type BenchModule } from "./report.js";
import { ROOT_USER_ARGS, startServer, stopServer, type ServerProcess } from "./servers.js";
import { median } from "./timing.js";

const BENCH = "js-heap";
const CLI = fileURLToPath(new URL("../../dist/cli.js", import.meta.url));
const OBJECTS = new URL("../../bench/fixtures/js-heap-objects.mjs", import.meta.url);
const ROUND_SECONDS = 4;
const WARM_SECONDS = 1;
const DEFAULT_ROUNDS = 4;
const TARGET = 1.03;
const KNOWN_OBJECTS = 200_000;

/** memcaslap -T 2 -c 16 for `seconds` against `port`: its request count, and the server's CPU seconds over it. */
function memcaslap(port: number, seconds: number, server: ServerProcess): Promise<{ ops: number; cpu: number }> {
  return new Promise((resolve, reject) => {
    const pids = processTree(server.process.pid!);
    const cpu0 = cpuSeconds(pids);
    const child = spawn("memcaslap", ["-s", `127.0.0.1:${port}`, "-T", "2", "-c", "16", "-t", `${seconds}s`], { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (b: Buffer) => (out += b.toString()));
    child.stderr.on("data", (b: Buffer) => (out += b.toString()));
    const timer = setTimeout(() => child.kill("SIGKILL"), (seconds + 60) * 1000);
    child.once("error", reject);
    child.once("close", (status) => {
      clearTimeout(timer);
      const cpu = cpuSeconds(pids) - cpu0;
      const ops = /Ops: (\d+) TPS/.exec(out);
      if (status === 0 && ops !== null) resolve({ ops: Number(ops[1]), cpu });
      else reject(new Error(`memcaslap exited ${status}: ${out.trim().slice(-300)}`));
    });
  });
}

interface Server {
  name: string;
  server: ServerProcess;
  cpuUsPerOp: number[];
  tps: number[];
}

async function cost(ctx: BenchContext): Promise<void> {
  const missing = process.platform !== "linux" ? "needs Linux (server CPU from /proc)" : !installed("memcaslap", ["-V"]) ? "memcaslap is not installed (apt-get install libmemcached-tools)" : undefined;
  if (missing !== undefined) {
    ctx.record({ bench: BENCH, candidate: "--jsheapprof vs off", metric: "CPU per request", note: `skipped: ${missing}` });
    return;
  }
  const rounds = ctx.timing.rounds ?? DEFAULT_ROUNDS;
  const seconds = ctx.timing.roundMs === undefined ? ROUND_SECONDS : Math.max(1, Math.round(ctx.timing.roundMs / 1000));
  const args = (extra: string[]) => (port: number) => [CLI, "memcached", "--smp", "2", "--memory", "512MiB", "--port", String(port), ...ROOT_USER_ARGS, ...extra];
  const servers: Server[] = [];
  try {
    for (const [name, extra] of [["off", []], ["--jsheapprof", ["--jsheapprof"]], ["off, again", []], ["--jsheapprof=32KiB", ["--jsheapprof=32KiB"]]] as const) {
      servers.push({ name, server: await startServer(process.execPath, args([...extra])), cpuUsPerOp: [], tps: [] });
    }
    for (const s of servers) await memcaslap(s.server.port, WARM_SECONDS, s.server);
    for (let r = 0; r < rounds; r++) {
      ctx.progress(`round ${r + 1}/${rounds}`);
      for (const s of r % 2 === 0 ? servers : [...servers].reverse()) {
        const { ops, cpu } = await memcaslap(s.server.port, seconds, s.server);
        s.cpuUsPerOp.push((cpu * 1e6) / ops);
        s.tps.push(ops / seconds);
      }
    }
  } finally {
    await Promise.all(servers.map((s) => stopServer(s.server)));
  }
  const [off, on, again, v8Default] = servers as [Server, Server, Server, Server];
  // Each round's ratio to the mean of that round's two servers without the profiler.
  const offOf = (i: number): number => (off.cpuUsPerOp[i]! + again.cpuUsPerOp[i]!) / 2;
  const ratiosOf = (x: Server): number[] => x.cpuUsPerOp.map((c, i) => c / offOf(i));
  const noise = median(again.cpuUsPerOp.map((c, i) => c / off.cpuUsPerOp[i]!));
  ctx.record({ bench: BENCH, candidate: "off vs off (the machine's noise)", metric: "CPU per request", nsPerOp: median(again.cpuUsPerOp) * 1000, ratio: noise, note: again.cpuUsPerOp.map((c, i) => (c / off.cpuUsPerOp[i]!).toFixed(3)).join(" ") });
  ctx.record({ bench: BENCH, candidate: "--jsheapprof=32KiB (V8's own default) vs off", metric: "CPU per request", nsPerOp: median(v8Default.cpuUsPerOp) * 1000, ratio: median(ratiosOf(v8Default)), note: ratiosOf(v8Default).map((x) => x.toFixed(3)).join(" ") });
  const ratios = ratiosOf(on);
  const pairs = median(ratios);
  const judged = compare(median(on.cpuUsPerOp) * 1000, "off", median(off.cpuUsPerOp.map((_, i) => offOf(i))) * 1000);
  // The two servers without the profiler differ by more than the target: this run cannot tell 3% (memcached.ts's calibration rule).
  const calibration = Math.abs(noise - 1) > TARGET - 1 ? `; calibration: the two servers without it differ by ${((noise - 1) * 100).toFixed(1)}% here, more than the target` : "";
  ctx.record({
    bench: BENCH,
    candidate: "--jsheapprof (512K) vs off",
    metric: "CPU per request",
    nsPerOp: median(on.cpuUsPerOp) * 1000,
    rounds,
    ...judged,
    ratio: pairs,
    target: `median per-round ratio <= ${TARGET}`,
    pass: pairs <= TARGET,
    note: `memcaslap -T 2 -c 16, ${seconds} s rounds; requests/s ${Math.round(median(on.tps))} on, ${Math.round(median(off.tps))} off; ratio of medians ${judged.ratio!.toFixed(3)}; per round ${ratios.map((x) => x.toFixed(3)).join(" ")}${calibration}`,
  });
}

async function weight(ctx: BenchContext): Promise<void> {
  const smp = await Smp.start({ shards: 1, memoryPerShard: "8MiB", module: OBJECTS });
  try {
    for (const rate of [32 * 1024, 4096]) {
      await smp.setJsHeapProfiling(0, rate);
      const before = await smp.submitTo<number>(0, "heapUsedAfterGc");
      await smp.submitTo(0, "keepKnownObjects", { count: KNOWN_OBJECTS });
      const after = await smp.submitTo<number>(0, "heapUsedAfterGc");
      const profile = await smp.jsHeapProfile(0);
      const sampled = profile.sites.filter((s) => s.frames.some((f) => f.functionName === "keepKnownObjects")).reduce((n, s) => n + s.size, 0);
      const growth = after - before;
      ctx.record({
        bench: BENCH,
        candidate: `sampled bytes at ${rate / 1024}K vs heapUsed growth`,
        metric: "bytes ratio",
        value: sampled / growth,
        note: `${KNOWN_OBJECTS} known objects: heapUsed grew ${growth} bytes (${(growth / KNOWN_OBJECTS).toFixed(0)} a object), the profile gives keepKnownObjects ${Math.round(sampled)}`,
      });
      await smp.submitTo(0, "dropKnownObjects");
      await smp.setJsHeapProfiling(0, false);
    }
  } finally {
    await smp.stop();
  }
}

export const jsHeap: BenchModule = {
  name: BENCH,
  title: "each shard's JS heap profiler: server CPU per request of shardheap memcached --smp 2 with --jsheapprof vs off, and sampled bytes vs heapUsed growth on known objects",
  async run(ctx) {
    await weight(ctx);
    await cost(ctx);
  },
};
