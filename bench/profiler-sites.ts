/**
 * "profiler-sites": a program with STACKS (50,000) distinct allocation
 * stacks, profiled exactly, on one shard of SHARD_BYTES, at two site
 * capacities in the same process:
 *
 *   default  heapprofSites left alone: one site per 32 KiB of shard, at
 *            most 4096, so ~92% of the stacks fold into "(other sites)"
 *   65536    --heapprof-sites 65536: every stack its own site, nothing folded
 *
 * Per capacity: what was folded (its share of the allocations: 49% of
 * 8,000 stacks' allocations folded at 4,096 sites, measured), the shard's time per allocation at a
 * new stack (a stack capture, plus a new site record or a folded one), the
 * time to read the profile from the buffer and to build each report (tree,
 * pprof, DevTools .heapprofile, collapsed, SVG), and the admin API's
 * answers for that profile (json, tree, svg, pprof, /metrics, and the
 * dashboard's once-a-second memory sample, which reads every site). Each
 * figure is the median of REPS runs; ratios are 65536 / default. No target:
 * the figures are shown for a user to choose a capacity by.
 *
 * The profiler-off malloc path is not touched by the capacity (its code is
 * the same; only the region's layout moves), so it is not re-measured here:
 * the "profiler" bench's off / never keeps that watch.
 */
import { Smp, formatTree, serveAdmin, toCollapsed, toFlamegraphSvg, toHeapprofile, toPprof, type HeapProfile } from "../src/index.js";
import { MemoryHistory } from "../src/runtime/memory-history.js";
import { compare, type BenchContext, type BenchModule, type BenchRecord } from "./report.js";
import { median } from "./timing.js";

const BENCH = "profiler-sites";
const STACKS = 50_000;
const CAPACITY = 65_536;
/** Room for the 65,536-site tables (33 MiB, at most a quarter of a shard) and the objects. */
const SHARD_BYTES = 160 * 1024 * 1024;
const REPS = 5;
const MODULE = new URL("../../bench/fixtures/site-stacks.mjs", import.meta.url);

/** Median ns of `reps` runs of `fn`. */
async function timed(reps: number, fn: () => unknown): Promise<number> {
  const ns: number[] = [];
  for (let i = 0; i < reps; i++) {
    const t0 = process.hrtime.bigint();
    await fn();
    ns.push(Number(process.hrtime.bigint() - t0));
  }
  return median(ns);
}

interface Run {
  sites: number;
  profile: HeapProfile;
  /** ns per allocation at a new stack, in the shard. */
  recordNs: number;
  /** ns per figure, by name. */
  ns: Map<string, number>;
}

async function runAt(ctx: BenchContext, heapprofSites: number | undefined): Promise<Run> {
  const smp = await Smp.start({ shards: 1, memoryPerShard: SHARD_BYTES, heapprof: true, module: MODULE, ...(heapprofSites === undefined ? {} : { heapprofSites }) });
  const ns = new Map<string, number>();
  try {
    const recordNs = (await smp.submitTo<number>(0, "allocateStacks", { from: 0, to: STACKS })) / STACKS;
    const profile = smp.heapProfile(0);
    const sites = smp.heap.profilerSites;
    ctx.progress(`${BENCH}: ${sites} sites a shard, ${profile.sites.length} sites recorded; timing reports`);
    ns.set("heapProfile", await timed(REPS, () => smp.heapProfile(0)));
    ns.set("tree", await timed(REPS, () => formatTree(profile)));
    ns.set("pprof", await timed(REPS, () => toPprof(profile)));
    ns.set("heapprofile", await timed(REPS, () => JSON.stringify(toHeapprofile(profile))));
    ns.set("collapsed", await timed(REPS, () => toCollapsed(profile)));
    ns.set("svg", await timed(REPS, () => toFlamegraphSvg(profile)));
    // The dashboard's memory history reads every site of every shard once a second, on the admin server's thread.
    const history = new MemoryHistory(smp);
    ns.set("dashboard sample", await timed(REPS, () => history.sample()));
    const admin = await serveAdmin(smp, { dashboard: { sampleIntervalMs: 60_000 } });
    try {
      const get = async (path: string): Promise<void> => {
        const r = await fetch(admin.url + path);
        if (!r.ok) throw new Error(`${BENCH}: GET ${path}: ${r.status}`);
        await r.arrayBuffer();
      };
      for (const format of ["json", "tree", "svg", "pprof"]) ns.set(`GET ${format}`, await timed(REPS, () => get(`/v1/heapprof?shard=0&format=${format}`)));
      ns.set("GET /metrics", await timed(REPS, () => get("/metrics")));
    } finally {
      await admin.close();
    }
    return { sites, profile, recordNs, ns };
  } finally {
    await smp.stop();
  }
}

function foldedShare(p: HeapProfile): { allocations: number; bytes: number } {
  const all = p.sites.reduce((n, s) => n + s.allocCount, 0);
  const bytes = p.sites.reduce((n, s) => n + s.allocSize, 0);
  return { allocations: (p.folded?.allocCount ?? 0) / all, bytes: (p.folded?.allocSize ?? 0) / bytes };
}

export const profilerSites: BenchModule = {
  name: BENCH,
  title: `${STACKS.toLocaleString("en-US")} distinct stacks, profiled exactly, at --heapprof-sites ${CAPACITY} vs the default capacity: folded share, report times, the admin API`,
  async run(ctx) {
    const previousLog = process.env.SHARDHEAP_LOG;
    process.env.SHARDHEAP_LOG = "silent";
    try {
      ctx.progress(`${BENCH}: ${STACKS} stacks at the default capacity`);
      const base = await runAt(ctx, undefined);
      ctx.progress(`${BENCH}: ${STACKS} stacks at ${CAPACITY} sites`);
      const wide = await runAt(ctx, CAPACITY);
      const baseName = `default (${base.sites} sites)`;
      const wideName = `${wide.sites} sites`;
      for (const [run, name] of [[base, baseName], [wide, wideName]] as const) {
        const share = foldedShare(run.profile);
        const r: BenchRecord = {
          bench: BENCH,
          candidate: name,
          metric: "folded share",
          value: share.allocations,
          note:
            `${run.profile.sites.length} sites in the profile; folded into (other sites): ${Math.round(run.profile.folded?.allocCount ?? 0)} of ${STACKS} allocations ` +
            `(${(100 * share.allocations).toFixed(1)}%), ${(100 * share.bytes).toFixed(1)}% of the bytes; totalCount ${run.profile.totalCount} (exact: ${STACKS})`,
        };
        ctx.record(r);
      }
      ctx.record({
        bench: BENCH,
        candidate: wideName,
        metric: "ns per allocation at a new stack",
        nsPerOp: wide.recordNs,
        ...compare(wide.recordNs, baseName, base.recordNs),
        note: "in the shard: a stack capture each, then a new site record (65536) or a lookup that folds (default)",
      });
      for (const [figure, ns] of wide.ns) {
        ctx.record({ bench: BENCH, candidate: wideName, metric: `${figure} ns`, nsPerOp: ns, ...compare(ns, baseName, base.ns.get(figure)!) });
      }
    } finally {
      if (previousLog === undefined) delete process.env.SHARDHEAP_LOG;
      else process.env.SHARDHEAP_LOG = previousLog;
    }
  },
};
