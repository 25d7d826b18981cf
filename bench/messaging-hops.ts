/**
 * "messaging-hops": what one hop to another shard and back
 * costs a service like `memcached --smp 2`, in CPU and in latency, beside
 * the floor of the same round trip between two bare threads, all in this
 * process and run (interleaved rounds: async-rounds.ts).
 *
 * CPU is the two shards' own threads' (bench/fixtures/thread-cpu.mjs: the
 * scheduler's figure, to the ns), both sides of the hop, per hop: on 2
 * cores a thread that spins takes its core from the other shard and the
 * client, so latency alone would flatter spinning. Latency is each call's,
 * from submitTo to its settled promise, inside the calling shard.
 *
 *   hop (sequential)  N_SEQ calls from shard 0 to shard 1, one after the
 *                     other, between otherwise idle shards
 *   hop (N hops/s)    requests arrive on a socket at each shard (the pacer,
 *                     bench/fixtures/hop-pacer.mjs: one byte a request,
 *                     paced so both shards together see N a second), and
 *                     each hops to the other shard and back from the socket
 *                     callback, as memcached's applyOps does; 2k, 10k and
 *                     40k a second: a quiet server, a busy one, and about
 *                     the hops memcaslap's load made at --smp 2
 *   hop (bursts)      BURST requests in one socket read every BURST_EVERY_US
 *                     at each shard (a pipelined client)
 *   local (...)       the same arrivals answered where they land: their
 *                     own cost (socket wake-ups, reads), which the hop's
 *                     "own ns/op" column leaves out
 *   bare ...          the floors (bench/fixtures/bare-pingpong-peer.mjs):
 *                     two raw threads passing a word through a
 *                     SharedArrayBuffer; CPU of both per round trip:
 *                       spin       both spin on Atomics.load
 *                       wait       Atomics.wait / notify (a futex each way)
 *                       waitAsync  event loops woken by Atomics.waitAsync
 *                                  (the endpoints' doorbell)
 *                       immediate  event loops polling once a loop turn
 *   idle shards       both shards' CPU over IDLE_MS of nothing, right after
 *                     a 40k hops/s stream (when any poll window is at its
 *                     widest), as a share of one core: ~0 (target)
 *
 * Hop ratios are to the futex floor ("bare wait"): a hop that must wake
 * the other thread each way cannot cost less than that; the notes give the
 * spinning floor too. The pacer's own thread is left out of every figure
 * (the notes' "process" CPU, every thread of this process less the
 * pacer's, includes V8's and libuv's helper threads). The machine's load
 * average is printed with the figures: on a shared 2-core machine every
 * thread here competes with whatever else runs.
 */
import { Smp } from "../src/index.js";
import { runRounds, type AsyncCandidate } from "./async-rounds.js";
import { fixture, PeerWorker } from "./peer-worker.js";
import { compare, loadAverage, type BenchModule, type BenchRecord } from "./report.js";
import { median } from "./timing.js";

const BENCH = "messaging-hops";
const N_SEQ = 2_000;
/** One paced round, ms (at 40k hops/s, 12,000 hops; at 2k, 600). */
const STREAM_MS = 300;
/** Paced rates, hops a second over both shards. */
const RATES = [2_000, 10_000, 40_000] as const;
const BURST = 16;
const BURST_EVERY_US = 1000;
const IDLE_MS = 2000;
/** Share of one core the idle shards may take: "~0" (keep-alive timers, a poll window's tail). */
const IDLE_TARGET = 0.01;
/** Round trips per floor round, by mode (each round ~10-50 ms). */
const FLOOR_ROUND_TRIPS = { spin: 20_000, wait: 2_000, waitAsync: 2_000, immediate: 5_000 } as const;
type FloorMode = keyof typeof FLOOR_ROUND_TRIPS;
const RING_BYTES = 64 * 1024;

/** One round's figures, per operation (a hop, a request, a round trip). */
interface Sample {
  /** Wall time per operation, ns (for paced requests: the pacing). */
  ns: number;
  /** Requests came at a set pace (the wall time per operation says nothing of the hop). */
  paced?: boolean;
  /** CPU per operation, ns: the two shards' threads (or the two floor threads). */
  cpuNs: number;
  /** The whole process's, less the pacer's (NaN for the floors, which have only their own threads'). */
  processCpuNs: number;
  /** Times the measured threads slept (so were woken again) per operation. */
  sleeps: number;
  /** Each operation's latency, us (hops only). */
  latencies?: Float64Array;
}

interface ShardStop {
  arrivals: number;
  latencies: Float64Array;
  cpuNs: number;
  sleeps: number;
}

/**
 * CPU time of the whole process (every thread), ns, once the other
 * threads have had a moment to leave their CPUs: Linux brings a running
 * thread's figure up to date only when it leaves the CPU or at a tick.
 */
async function processCpuNs(): Promise<number> {
  await new Promise((resolve) => setTimeout(resolve, 2));
  const u = process.cpuUsage();
  return (u.user + u.system) * 1000;
}

const sum = (xs: readonly ShardStop[], f: (x: ShardStop) => number): number => xs.reduce((a, x) => a + f(x), 0);

function allLatencies(stops: readonly ShardStop[]): Float64Array {
  const out = new Float64Array(sum(stops, (x) => x.latencies.length));
  let at = 0;
  for (const x of stops) {
    out.set(x.latencies, at);
    at += x.latencies.length;
  }
  return out;
}

const rateName = (rate: number): string => `${rate / 1000}k hops/s`;
const BURSTS = `bursts of ${BURST} every ${BURST_EVERY_US / 1000} ms`;

export const messagingHops: BenchModule = {
  name: BENCH,
  title: "what a hop to another shard and back costs, CPU (both threads) and latency: one at a time, paced from sockets at 2k-40k hops/s, in bursts, and idle; beside bare threads",
  async run(ctx) {
    const loadBefore = loadAverage();
    const smp = await Smp.start({ shards: 2, memoryPerShard: "1MiB", module: fixture("messaging-shard.mjs"), queueBytes: RING_BYTES });
    const word = new Int32Array(new SharedArrayBuffer(4));
    const pingPongers = [0, 1].map((role) => new PeerWorker(fixture("bare-pingpong-peer.mjs"), { role, word: word.buffer }));
    const ports = await smp.invokeOnAll<number>("hopListen");
    const pacer = new PeerWorker(fixture("hop-pacer.mjs"), { ports });
    const pace = (intervalUs: number, burst: number, ms: number): Promise<{ cpuNs: number }> => pacer.ask({ intervalUs, burst, ms });
    try {
      await pacer.first();
      /** Requests at each shard every intervalUs (burst at a time) for STREAM_MS, each hopping or answered locally. */
      const paced = (mode: "hop" | "local", intervalUs: number, burst: number) => async (): Promise<Sample> => {
        await smp.invokeOnAll("hopStart", { mode });
        const c0 = await processCpuNs();
        const t0 = process.hrtime.bigint();
        const pacerCpu = (await pace(intervalUs, burst, STREAM_MS)).cpuNs;
        const stops = await smp.invokeOnAll<ShardStop>("hopStop");
        const ns = Number(process.hrtime.bigint() - t0);
        const n = sum(stops, (x) => x.arrivals);
        return {
          ns: ns / n,
          cpuNs: sum(stops, (x) => x.cpuNs) / n,
          processCpuNs: ((await processCpuNs()) - c0 - pacerCpu) / n,
          sleeps: sum(stops, (x) => x.sleeps) / n,
          latencies: allLatencies(stops),
          paced: true,
        };
      };
      const candidates: AsyncCandidate<Sample>[] = [
        {
          name: "hop",
          metric: "sequential",
          round: async () => {
            await smp.invokeOnAll("hopStart", { mode: "local" });
            const c0 = await processCpuNs();
            const { ns, latencies } = await smp.submitTo<{ ns: number; latencies: Float64Array }>(0, "hopSequence", { target: 1, n: N_SEQ });
            const stops = await smp.invokeOnAll<ShardStop>("hopStop");
            return {
              ns: ns / N_SEQ,
              cpuNs: sum(stops, (x) => x.cpuNs) / N_SEQ,
              processCpuNs: ((await processCpuNs()) - c0) / N_SEQ,
              sleeps: sum(stops, (x) => x.sleeps) / N_SEQ,
              latencies,
            };
          },
        },
      ];
      for (const rate of RATES) {
        // Both shards get requests: each at rate / 2.
        const intervalUs = 2e6 / rate;
        for (const mode of ["hop", "local"] as const) candidates.push({ name: mode, metric: rateName(rate), round: paced(mode, intervalUs, 1) });
      }
      for (const mode of ["hop", "local"] as const) candidates.push({ name: mode, metric: BURSTS, round: paced(mode, BURST_EVERY_US, BURST) });
      for (const mode of Object.keys(FLOOR_ROUND_TRIPS) as FloorMode[]) {
        const n = FLOOR_ROUND_TRIPS[mode];
        candidates.push({
          name: `bare ${mode}`,
          metric: "round trip",
          round: async () => {
            Atomics.store(word, 0, 0);
            const [client, echo] = await Promise.all(pingPongers.map((p) => p.ask<{ ns: number; cpuNs: number; sleeps: number }>({ mode, n })));
            return { ns: client!.ns / n, cpuNs: (client!.cpuNs + echo!.cpuNs) / n, processCpuNs: Number.NaN, sleeps: (client!.sleeps + echo!.sleeps) / n };
          },
        });
      }
      candidates.push({
        name: "idle shards",
        metric: `${IDLE_MS / 1000} s after 40k hops/s`,
        round: async () => {
          await smp.invokeOnAll("hopStart", { mode: "hop" });
          await pace(2e6 / 40_000, 1, 100);
          await smp.invokeOnAll("hopStop");
          await smp.invokeOnAll("hopStart", { mode: "local" });
          const c0 = await processCpuNs();
          await new Promise((resolve) => setTimeout(resolve, IDLE_MS));
          const stops = await smp.invokeOnAll<ShardStop>("hopStop");
          // Per ns of the spell: a share of one core.
          const ns = IDLE_MS * 1e6;
          return { ns, cpuNs: sum(stops, (x) => x.cpuNs) / ns, processCpuNs: ((await processCpuNs()) - c0) / ns, sleeps: sum(stops, (x) => x.sleeps) };
        },
      });

      const { rounds, get } = await runRounds(ctx, BENCH, candidates, `load average ${loadBefore}`);
      const loadAfter = loadAverage();
      const med = (name: string, metric: string, f: (s: Sample) => number): number => median(get(name, metric).map(f));
      const cpuOf = (name: string, metric: string): number => med(name, metric, (s) => s.cpuNs);
      const floorCpu = (mode: FloorMode): number => cpuOf(`bare ${mode}`, "round trip");
      const waitFloor = floorCpu("wait");
      const floors = `floors per round trip: spin ${(floorCpu("spin") / 1000).toFixed(1)} us, wait ${(waitFloor / 1000).toFixed(1)} us, waitAsync ${(floorCpu("waitAsync") / 1000).toFixed(1)} us CPU`;
      const record = (name: string, metric: string, per: string, extra: Partial<BenchRecord> = {}): void => {
        const xs = get(name, metric);
        const cpus = xs.map((x) => x.cpuNs);
        const all = Float64Array.from(xs.flatMap((x) => (x.latencies ? [...x.latencies] : []))).sort();
        const pct = (q: number): number | undefined => (all.length === 0 ? undefined : all[Math.min(all.length - 1, Math.floor(q * all.length))]);
        const wall = median(xs.map((x) => x.ns)) / 1000;
        const processCpu = median(xs.map((x) => x.processCpuNs)) / 1000;
        const sleeps = median(xs.map((x) => x.sleeps));
        const figures = [...(xs[0]?.paced ? [] : [`${wall.toFixed(1)} us wall`]), `${sleeps.toFixed(2)} sleeps`, ...(Number.isNaN(processCpu) ? [] : [`process CPU ${processCpu.toFixed(1)} us`])];
        ctx.record({
          bench: BENCH,
          candidate: name,
          metric: `${metric}: CPU/${per}`,
          nsPerOp: median(cpus),
          minNsPerOp: Math.min(...cpus),
          maxNsPerOp: Math.max(...cpus),
          rounds,
          medianUs: pct(0.5),
          p99Us: pct(0.99),
          ...extra,
          note: `${name} (${metric}): ${figures.join(", ")} per ${per}${extra.note ? `; ${extra.note}` : ""}`,
        });
      };
      record("hop", "sequential", "hop", { ...compare(cpuOf("hop", "sequential"), "bare wait", waitFloor), note: floors });
      for (const metric of [...RATES.map(rateName), BURSTS]) {
        const hop = cpuOf("hop", metric);
        const local = cpuOf("local", metric);
        const own = hop - local;
        record("hop", metric, "hop", {
          ownNsPerOp: own,
          ...compare(own, "bare wait", waitFloor),
          note: `own: less the local arrivals' ${(local / 1000).toFixed(1)} us; ${(own / floorCpu("waitAsync")).toFixed(2)}x the waitAsync floor`,
        });
        record("local", metric, "request");
      }
      for (const mode of Object.keys(FLOOR_ROUND_TRIPS) as FloorMode[]) record(`bare ${mode}`, "round trip", "round trip");
      const idle = get("idle shards", `${IDLE_MS / 1000} s after 40k hops/s`);
      const idleShare = median(idle.map((x) => x.cpuNs));
      ctx.record({
        bench: BENCH,
        candidate: "idle shards",
        metric: `${IDLE_MS / 1000} s after 40k hops/s: share of a core`,
        value: idleShare,
        rounds,
        target: `<= ${IDLE_TARGET} (~0)`,
        pass: idleShare <= IDLE_TARGET,
        note: `idle shards: ${(idleShare * IDLE_MS).toFixed(2)} ms CPU in ${IDLE_MS} ms (both shards; the process: ${(median(idle.map((x) => x.processCpuNs)) * IDLE_MS).toFixed(2)} ms), ${median(idle.map((x) => x.sleeps)).toFixed(0)} sleeps`,
      });
      ctx.record({
        bench: BENCH,
        candidate: "load average",
        note: `load average before ${loadBefore}, after ${loadAfter}; CPU: the shards' (or floor threads') own, both sides of a hop; ns/op is CPU per hop, request or round trip`,
      });
    } finally {
      await pacer.worker.terminate();
      await smp.invokeOnAll("hopClose").catch(() => undefined);
      await smp.stop();
      for (const p of pingPongers) await p.worker.terminate();
    }
  },
};
