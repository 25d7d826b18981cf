/**
 * "messaging": calls between threads. shardheap's calls travel
 * through SPSC rings in shared memory (src/smp/endpoint.ts); the baselines
 * are what a Node program uses without it. Every candidate runs in this
 * process and run, in interleaved rounds (forward, then reverse order);
 * the median round is reported, ns per call. One call = the request, the
 * task (an echo) and the answer back to a settled promise.
 *
 *   shard->shard      shard 0 makes N_FLOOD calls to shard 1, all in flight
 *                     at once (Smp, two shards), with a number and with a
 *                     4-field object as the argument (and result)
 *   MessageChannel    the same between two raw worker threads joined by a
 *                     MessageChannel: a promise per call, answers matched by
 *                     id (bench/fixtures/message-channel-peer.mjs)
 *                     target: shard->shard >= 3x faster (ratio <= 1/3)
 *   main->shard       the main thread makes N_FLOOD calls to shard 0
 *   typed main->shard the same calls through smp.tasks() (src/smp/typed-tasks.ts);
 *                     its ratio to main->shard is shown, no target: here
 *                     it read 1.04-1.16 (the candidate after main->shard
 *                     pays for its garbage), while the two alternated
 *                     flood for flood, 80 rounds each, read 0.97-1.01
 *   typed call        what a typed call adds: N_OVERHEAD calls through
 *                     typedTasks and straight to a caller that does
 *                     nothing, the difference per call
 *                     target: <= 5% of a main->shard call (number)
 *   piscina.run       piscina's own run() to a one-thread pool set up as Smp
 *                     set up its pools when its calls went through piscina
 *                     (atomics disabled, 64 tasks per worker); submitTo
 *                     then cost this plus its encoding, so this baseline
 *                     is the kinder one (docs/decisions.md, "How calls
 *                     travel between threads")
 *                     target: main->shard >= 10x faster (ratio <= 1/10)
 *   sequential        N_SEQ calls one after the other between two idle
 *                     shards, vs the same over the MessageChannel
 *                     target: no slower (ratio <= 1)
 *   floor             a bare ring of integers between two raw threads with
 *                     the same ring code and doorbell protocol, nothing else
 *                     (bench/fixtures/bare-ring-peer.mjs); shard->shard's
 *                     ratio to it is what the rest costs (no target)
 *   promises          N_FLOOD promises made, resolved from the next
 *                     immediate and awaited with Promise.all on one thread,
 *                     no messaging: the part of every call above (and of
 *                     the MessageChannel baseline) that the floor lacks
 * The machine's load average is printed with the figures: on a shared
 * 2-core machine every thread here competes with whatever else runs.
 */
import os from "node:os";
import { fileURLToPath } from "node:url";
import { MessageChannel } from "node:worker_threads";
import { Piscina } from "piscina";
import { Smp } from "../src/index.js";
import { queueGeometry, createQueueBuffer } from "../src/smp/queue-layout.js";
import { typedTasks } from "../src/smp/typed-tasks.js";
import { runRounds, type AsyncCandidate } from "./async-rounds.js";
import { fixture, PeerWorker } from "./peer-worker.js";
import { compare, loadAverage, type BenchModule, type BenchRecord } from "./report.js";
import { median } from "./timing.js";

const BENCH = "messaging";
const N_FLOOD = 50_000;
const N_SEQ = 2_000;
const N_OVERHEAD = 1_000_000;
const RING_BYTES = 64 * 1024;
const VALUES = {
  number: 12345.5,
  object: { id: 123, name: "alpha", score: 0.75, ok: true },
} as const;
type ValueKind = keyof typeof VALUES;

/** N_FLOOD promises, resolved from the next immediate, awaited with Promise.all: ns per promise. */
async function promisesOnly(): Promise<number> {
  const t0 = process.hrtime.bigint();
  const resolvers: Array<(v: number) => void> = [];
  const all = new Array<Promise<number>>(N_FLOOD);
  for (let i = 0; i < N_FLOOD; i++) all[i] = new Promise<number>((resolve) => resolvers.push(resolve));
  setImmediate(() => {
    for (const resolve of resolvers) resolve(12345.5);
  });
  await Promise.all(all);
  return Number(process.hrtime.bigint() - t0) / N_FLOOD;
}

/** What typedTasks adds to a call: N_OVERHEAD calls each way to a caller that does nothing, ns per call. */
async function typedCallOverhead(): Promise<number> {
  const answer = Promise.resolve<unknown>(0);
  const caller = { submitTo: (_shard: number, _task: string, _arg?: unknown) => answer, invokeOnAll: () => Promise.resolve<unknown[]>([]) };
  const typed = typedTasks<{ echo(value: number): number }>(caller);
  let last: unknown;
  let t0 = process.hrtime.bigint();
  for (let i = 0; i < N_OVERHEAD; i++) last = caller.submitTo(0, "echo", i);
  const direct = Number(process.hrtime.bigint() - t0);
  t0 = process.hrtime.bigint();
  for (let i = 0; i < N_OVERHEAD; i++) last = typed.echo(0, i);
  const through = Number(process.hrtime.bigint() - t0);
  if (last !== answer) throw new Error("typedCallOverhead: the typed call did not reach the caller");
  return Math.max(0, through - direct) / N_OVERHEAD;
}

/** One round: ns per call. */
type Candidate = AsyncCandidate<number>;

export const messaging: BenchModule = {
  name: BENCH,
  title: `calls between threads, ${N_FLOOD.toLocaleString("en-US")} in flight or one at a time: shared-memory rings vs MessageChannel and piscina`,
  async run(ctx) {
    const loadBefore = loadAverage();
    const smp = await Smp.start({ shards: 2, memoryPerShard: "1MiB", module: fixture("messaging-shard.mjs"), queueBytes: RING_BYTES });
    const mcClient = new PeerWorker(fixture("message-channel-peer.mjs"), { role: "client" });
    const mcEcho = new PeerWorker(fixture("message-channel-peer.mjs"), { role: "echo" });
    const channel = new MessageChannel();
    mcClient.worker.postMessage({ port: channel.port1 }, [channel.port1]);
    mcEcho.worker.postMessage({ port: channel.port2 }, [channel.port2]);
    const queues = createQueueBuffer(queueGeometry(2, RING_BYTES));
    const bareClient = new PeerWorker(fixture("bare-ring-peer.mjs"), { role: "client", queues, ringBytes: RING_BYTES });
    const bareEcho = new PeerWorker(fixture("bare-ring-peer.mjs"), { role: "echo", queues, ringBytes: RING_BYTES });
    const pool = new Piscina({
      filename: fileURLToPath(fixture("piscina-echo.mjs")),
      minThreads: 1,
      maxThreads: 1,
      atomics: "disabled",
      idleTimeout: Infinity,
      concurrentTasksPerWorker: 64,
    });
    const typed = smp.tasks<{ echo(value: (typeof VALUES)[ValueKind]): unknown }>();
    try {
      const candidates: Candidate[] = [];
      for (const kind of Object.keys(VALUES) as ValueKind[]) {
        const value = VALUES[kind];
        candidates.push(
          {
            name: `shard->shard`,
            metric: kind,
            round: async () => (await smp.submitTo<number>(0, "flood", { target: 1, n: N_FLOOD, value })) / N_FLOOD,
          },
          { name: "MessageChannel", metric: kind, round: async () => (await mcClient.request({ type: "flood", n: N_FLOOD, value })) / N_FLOOD },
          {
            name: "main->shard",
            metric: kind,
            round: async () => {
              const t0 = process.hrtime.bigint();
              const calls = new Array<Promise<unknown>>(N_FLOOD);
              for (let i = 0; i < N_FLOOD; i++) calls[i] = smp.submitTo(0, "echo", value);
              await Promise.all(calls);
              return Number(process.hrtime.bigint() - t0) / N_FLOOD;
            },
          },
          {
            name: "typed main->shard",
            metric: kind,
            round: async () => {
              const t0 = process.hrtime.bigint();
              const calls = new Array<Promise<unknown>>(N_FLOOD);
              for (let i = 0; i < N_FLOOD; i++) calls[i] = typed.echo(0, value);
              await Promise.all(calls);
              return Number(process.hrtime.bigint() - t0) / N_FLOOD;
            },
          },
          {
            name: "piscina.run",
            metric: kind,
            round: async () => {
              const t0 = process.hrtime.bigint();
              const calls = new Array<Promise<unknown>>(N_FLOOD);
              for (let i = 0; i < N_FLOOD; i++) calls[i] = pool.run(value);
              await Promise.all(calls);
              return Number(process.hrtime.bigint() - t0) / N_FLOOD;
            },
          },
        );
      }
      candidates.push(
        { name: "shard->shard", metric: "sequential", round: async () => (await smp.submitTo<number>(0, "pingPong", { target: 1, n: N_SEQ })) / N_SEQ },
        { name: "MessageChannel", metric: "sequential", round: async () => (await mcClient.request({ type: "pingPong", n: N_SEQ })) / N_SEQ },
        { name: "floor", metric: "integers", round: async () => (await bareClient.request({ n: N_FLOOD })) / N_FLOOD },
        { name: "promises", metric: "one thread", round: promisesOnly },
        { name: "typed call", metric: "added to submitTo", round: typedCallOverhead },
      );

      const { rounds, get } = await runRounds(ctx, BENCH, candidates, `load average ${loadBefore}`);
      const loadAfter = loadAverage();

      const find = (name: string, metric: string): { ns: number } => ({ ns: median(get(name, metric)) });
      const floor = find("floor", "integers").ns;
      const record = (name: string, metric: string, extra: Partial<BenchRecord> = {}): void => {
        const xs = get(name, metric);
        ctx.record({
          bench: BENCH,
          candidate: name,
          metric,
          nsPerOp: median(xs),
          minNsPerOp: Math.min(...xs),
          maxNsPerOp: Math.max(...xs),
          opsPerRound: metric === "sequential" ? N_SEQ : name === "typed call" ? N_OVERHEAD : N_FLOOD,
          rounds,
          ...extra,
        });
      };
      for (const kind of Object.keys(VALUES) as ValueKind[]) {
        const s2s = find("shard->shard", kind).ns;
        const mc = find("MessageChannel", kind).ns;
        record("shard->shard", kind, {
          ...compare(s2s, "MessageChannel", mc, 1 / 3, "ratio <= 1/3 (>= 3x)"),
          note: `${(s2s / floor).toFixed(2)}x the floor (bare ring of integers, ${floor.toFixed(0)} ns)`,
        });
        record("MessageChannel", kind);
        const m2s = find("main->shard", kind).ns;
        record("main->shard", kind, compare(m2s, "piscina.run", find("piscina.run", kind).ns, 1 / 10, "ratio <= 1/10 (>= 10x)"));
        record("typed main->shard", kind, compare(find("typed main->shard", kind).ns, "main->shard", m2s));
        record("piscina.run", kind);
      }
      record("shard->shard", "sequential", compare(find("shard->shard", "sequential").ns, "MessageChannel", find("MessageChannel", "sequential").ns, 1, "ratio <= 1 (no slower)"));
      record("MessageChannel", "sequential");
      record("floor", "integers", {
        note: `bare SPSC ring of integers with the same doorbell; load average before ${loadBefore}, after ${loadAfter} (${os.cpus().length} cores)`,
      });
      record(
        "typed call",
        "added to submitTo",
        compare(find("typed call", "added to submitTo").ns, "main->shard (number)", find("main->shard", "number").ns, 0.05, "<= 5% of a call"),
      );
      record("promises", "one thread", { note: "a promise per call made, resolved and awaited with Promise.all, no messaging: in every call's cost, not in the floor's" });
    } finally {
      await smp.stop();
      await pool.destroy();
      for (const p of [mcClient, mcEcho, bareClient, bareEcho]) await p.worker.terminate();
      channel.port1.close();
    }
  },
};
