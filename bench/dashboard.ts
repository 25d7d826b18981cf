/**
 * "dashboard": does watching a heap cost the shards anything? The stress
 * workload (runStress: 2 shards x 64 MiB, the profiler sampling every
 * 64 KiB, 25% cross-shard frees) runs in rounds of ROUND_SECONDS, its
 * throughput (operations per second, all shards) measured with
 *   alone      no admin server
 *   dashboard  the admin server sampling its memory history every second
 *              (the default) and a client polling it as an open dashboard
 *              page does: the history every second, the live flamegraph
 *              (SVG), the growing sites and the growth since a baseline
 *              every 5 seconds
 * interleaved round by round (ROUNDS each), so drift on a shared machine
 * hits both alike. Reported as ns per operation (1e9 / ops per second) with
 * the ratio against "alone", the rounds' spread as the noise it is to be
 * read against, and the server's own cost per sample. The sampling reads
 * the SharedArrayBuffer on the server's thread, never a shard's, so the
 * expectation is a ratio within the spread. No target: the figure is
 * shown for what it is, and the machine is shared.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import type { BenchModule } from "./report.js";
import { compare } from "./report.js";
import { median } from "./timing.js";

const BENCH = "dashboard";
const ROUNDS = 5;
const ROUND_SECONDS = 4;
const SHARDS = 2;
const PAGE_REFRESH_MS = 5000;

/**
 * runStress from the package build (dist/, made by `npm run bench`'s build
 * step): its shards load dist/smp/shard-worker.js, which dist-bench/ does
 * not have (nothing imports it statically).
 */
type RunStress = (typeof import("../src/apps/stress/run.js"))["runStress"];
const runStressUrl = new URL("../../dist/apps/stress/run.js", import.meta.url);
let runStress: RunStress;

const silent = (): Writable => new Writable({ write: (_c, _e, done) => done() });

/** A client doing what an open dashboard does, until `stop`; the server's sample costs it saw. */
async function pollLikeThePage(outLines: string[], stop: Promise<void>): Promise<number[]> {
  let url: string | undefined;
  for (let i = 0; i < 200 && !url; i++) {
    url = /admin: (http:\/\/\S+)/.exec(outLines.join(""))?.[1];
    if (!url) await new Promise((r) => setTimeout(r, 10));
  }
  if (!url) throw new Error("dashboard bench: the admin server did not start");
  let stopped = false;
  void stop.then(() => (stopped = true));
  const costs: number[] = [];
  let lastT = 0;
  let lastRefresh = 0;
  await fetch(`${url}/v1/heapprof/baseline`, { method: "POST" });
  while (!stopped) {
    try {
      const history = (await (await fetch(`${url}/v1/memory/history?since=${lastT}`)).json()) as { lastSampleMs: number; samples: Array<{ t: number }> };
      if (history.samples.length > 0) lastT = history.samples[history.samples.length - 1]!.t;
      costs.push(history.lastSampleMs);
      if (Date.now() - lastRefresh >= PAGE_REFRESH_MS) {
        lastRefresh = Date.now();
        await Promise.all(["/v1/heapprof?format=svg", "/v1/heapprof?format=svg&diff=baseline", "/v1/heapprof?format=json&diff=baseline", "/v1/heapprof/growing"].map(async (p) => (await fetch(url + p)).arrayBuffer()));
      }
    } catch {
      break; // the run ended and took the server with it
    }
    await Promise.race([new Promise((r) => setTimeout(r, 1000)), stop]);
  }
  return costs;
}

async function round(withDashboard: boolean, dir: string): Promise<{ opsPerSecond: number; sampleCosts: number[] }> {
  const lines: string[] = [];
  const out = new Writable({
    write(chunk: Buffer, _e, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  let stop!: () => void;
  const stopped = new Promise<void>((r) => (stop = r));
  const run = runStress({
    shards: SHARDS,
    memoryPerShard: 64 << 20,
    heapprofRate: 64 * 1024,
    durationSeconds: ROUND_SECONDS,
    crossShard: 0.25,
    outDir: dir,
    out: withDashboard ? out : silent(),
    ...(withDashboard ? { adminPort: 0 } : {}),
  });
  const poller = withDashboard ? pollLikeThePage(lines, stopped) : Promise.resolve([]);
  const summary = await run;
  stop();
  return { opsPerSecond: summary.ops / summary.seconds, sampleCosts: await poller };
}

export const dashboard: BenchModule = {
  name: BENCH,
  title: "stress throughput with the dashboard open and polling vs without",
  async run(ctx) {
    runStress = ((await import(runStressUrl.href)) as { runStress: RunStress }).runStress;
    const dir = await mkdtemp(join(tmpdir(), "shardheap-bench-dashboard-"));
    const perOp = { alone: [] as number[], dashboard: [] as number[] };
    process.env.SHARDHEAP_LOG = "silent";
    const costs: number[] = [];
    try {
      for (let r = 0; r < ROUNDS; r++) {
        // Alternate which goes first, so neither always runs on a warmer machine.
        for (const withDashboard of r % 2 === 0 ? [false, true] : [true, false]) {
          ctx.progress(`round ${r + 1}/${ROUNDS}: stress ${withDashboard ? "with the dashboard polling" : "alone"}`);
          const result = await round(withDashboard, join(dir, `r${r}-${withDashboard ? "d" : "a"}`));
          (withDashboard ? perOp.dashboard : perOp.alone).push(1e9 / result.opsPerSecond);
          costs.push(...result.sampleCosts);
        }
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    const spread = (xs: number[]): string => `${((100 * (Math.max(...xs) - Math.min(...xs))) / median(xs)).toFixed(1)}%`;
    const alone = median(perOp.alone);
    ctx.record({ bench: BENCH, candidate: "stress alone", nsPerOp: alone, minNsPerOp: Math.min(...perOp.alone), maxNsPerOp: Math.max(...perOp.alone), rounds: ROUNDS, note: `rounds spread ${spread(perOp.alone)} (max-min over median): the noise` });
    const watched = median(perOp.dashboard);
    ctx.record({
      bench: BENCH,
      candidate: "stress + dashboard",
      nsPerOp: watched,
      minNsPerOp: Math.min(...perOp.dashboard),
      maxNsPerOp: Math.max(...perOp.dashboard),
      rounds: ROUNDS,
      ...compare(watched, "stress alone", alone),
      note: `rounds spread ${spread(perOp.dashboard)}; the server's memory sample took median ${median(costs).toFixed(2)} ms, max ${Math.max(...costs).toFixed(2)} ms, once a second, on the main thread (never a shard's)`,
    });
  },
};
