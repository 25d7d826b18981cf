/**
 * `shardheap stress`, the main job: start shards, run the mixed workload
 * (workload.ts) with cross-shard frees and heap profiling, show progress,
 * and at the end print per-shard statistics (failed allocations included)
 * and the profile tree and write heapprof.svg, heapprof.collapsed,
 * heapprof.pb.gz, heapprof.heapprofile (when the profiler ran), the
 * same four of the shards' JS heaps as jsheapprof.* (--jsheapprof) and
 * heap.img. Ctrl-C ends the run early and still writes the report.
 */
import { mkdir, mkdtemp, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import type { Writable } from "node:stream";
import type { MemoryStats } from "../../memory/memory-stats.js";
import { formatJsHeapRunProfile, formatRunProfile, profilerRan } from "../../report/run-profile.js";
import { renderProfile } from "../../report/render.js";
import { mapProfileToSources } from "../../report/source-map.js";
import { serveAdmin } from "../../runtime/admin.js";
import { jsHeapProfileOf } from "../../runtime/heap-kinds.js";
import type { HistoryOptions } from "../../runtime/memory-history.js";
import { Smp } from "../../smp/smp.js";
import { formatCount, formatSize, plural } from "../../units.js";
import { liveBound, type SliceArg, type SliceResult } from "./workload.js";

export interface StressOptions {
  shards: number;
  memoryPerShard: number;
  /** Heap-profiler sample rate in bytes (0 off, 1 exact). */
  heapprofRate: number;
  /** Stacks each shard's profiler keeps exactly (default: Smp.start's). */
  heapprofSites?: number;
  /** Each shard's JS heap profiler: one sample per N bytes (0 or absent: off). */
  jsHeapprofRate?: number;
  durationSeconds: number;
  /** Share of frees handed to another shard, 0..1. */
  crossShard: number;
  /** The live set each shard's workload keeps, as a share of the shard (default 0.4). */
  liveRatio?: number;
  /** Where the report files go; a fresh directory under the working directory when omitted. */
  outDir?: string;
  /** Where progress and the report are printed. */
  out?: Writable & { isTTY?: boolean };
  /** Resolves to end the run early (the CLI wires Ctrl-C to it). */
  interrupted?: Promise<void>;
  /** Serve the admin API on this port (0 = any free port) while the run lasts. */
  adminPort?: number;
  /** Let the admin API serve the heap image. */
  adminHeapImage?: boolean;
  /** The admin dashboard's memory history (sample interval, window). */
  adminDashboard?: HistoryOptions;
  /** Bytes per second per shard leaked at a fourth allocation site (never freed); 0 or absent: none. */
  leakRate?: number;
}

export interface StressSummary {
  outDir: string;
  files: string[];
  seconds: number;
  ops: number;
  crossShardFrees: number;
  stats: MemoryStats[];
}

const SLICE_MS = 50;
export const DEFAULT_LIVE_RATIO = 0.4;
const WORKLOAD = new URL("./workload.js", import.meta.url);

export async function runStress(o: StressOptions): Promise<StressSummary> {
  const out = o.out ?? process.stdout;
  const say = (line: string): void => void out.write(`${line}\n`);
  const outDir = o.outDir ? resolve(o.outDir) : await mkdtemp(join(process.cwd(), "shardheap-stress-"));
  const liveRatio = o.liveRatio ?? DEFAULT_LIVE_RATIO;
  await mkdir(outDir, { recursive: true });
  const profiling = o.heapprofRate === 0 ? "off" : o.heapprofRate === 1 ? "every allocation" : `sampled every ${formatSize(o.heapprofRate)}`;
  say(
    `shardheap stress: ${plural(o.shards, "shard")} x ${formatSize(o.memoryPerShard)}, heap profiler ${profiling}, ` +
      `${o.durationSeconds} s, ${o.shards > 1 ? `${Math.round(o.crossShard * 100)}% of frees cross-shard` : "no cross-shard frees (one shard)"}, live set ${Math.round(liveRatio * 100)}% of each shard${o.leakRate ? `, leaking ${formatSize(o.leakRate)}/s per shard` : ""}; reports in ${outDir}`,
  );
  const smp = await Smp.start({
    shards: o.shards,
    memoryPerShard: o.memoryPerShard,
    heapprof: o.heapprofRate,
    ...(o.heapprofSites === undefined ? {} : { heapprofSites: o.heapprofSites }),
    jsHeapprof: o.jsHeapprofRate ?? 0,
    module: WORKLOAD,
  });
  smp.on("error", (e) => say(`shard ${e.shard} failed: ${e.message}`));
  const admin =
    o.adminPort === undefined
      ? undefined
      : await serveAdmin(smp, { port: o.adminPort, allowHeapImage: o.adminHeapImage ?? false, ...(o.adminDashboard ? { dashboard: o.adminDashboard } : {}) });
  if (admin) say(`admin: ${admin.url}`);
  let stop = false;
  void o.interrupted?.then(() => {
    stop = true;
  });
  const shards = [...Array(o.shards).keys()];
  const liveBytes = liveBound(smp.stats(0).totalMemory, liveRatio);
  let ops = 0;
  const started = performance.now();
  let lastReport = started;
  let lastOps = 0;
  let lastCross = 0;
  const crossSent = (): number => shards.reduce((n, s) => n + smp.stats(s).crossShardFrees, 0);
  // Allocations refused with OutOfMemoryError (the workload frees something and goes on).
  const failedMallocs = (): number => shards.reduce((n, s) => n + smp.stats(s).failedAllocations, 0);
  // Each slice's shards hand the objects they give up straight to the other
  // shards (workload.ts), so a slice has ended once its frees are delivered.
  const slice = async (ms: number): Promise<void> => {
    const results = await Promise.all(
      shards.map((s) => smp.submitTo<SliceResult>(s, "runSlice", { ms, crossShard: o.crossShard, liveBytes, leakRate: o.leakRate ?? 0 } satisfies SliceArg)),
    );
    for (const r of results) ops += r.ops;
  };
  try {
    while (!stop && performance.now() - started < o.durationSeconds * 1000) {
      await slice(SLICE_MS);
      const now = performance.now();
      if (now - lastReport >= 1000) {
        const seconds = (now - lastReport) / 1000;
        const cross = crossSent();
        const liveMemory = shards.map((s) => `s${s} ${formatSize(smp.stats(s).allocatedMemory)}`).join(" ");
        // Read between slices, with the shards idle: how fragmented the free memory is getting, as it goes.
        const largestFree = shards.map((s) => `s${s} ${formatSize(smp.heap.largestFreeSpan(s))}`).join(" ");
        const line =
          `[${((now - started) / 1000).toFixed(1).padStart(5)}s] ${formatCount((ops - lastOps) / seconds).padStart(6)} ops/s  ` +
          `${formatCount((cross - lastCross) / seconds).padStart(6)} cross-shard frees/s  used: ${liveMemory}  largest free: ${largestFree}  ` +
          `failed mallocs: ${formatCount(failedMallocs())}`;
        if (out.isTTY) out.write(`\r${line}\x1b[K`);
        else say(line);
        [lastReport, lastOps, lastCross] = [now, ops, cross];
      }
    }
  } finally {
    if (out.isTTY) out.write("\n");
  }
  const seconds = (performance.now() - started) / 1000;
  if (stop) say("interrupted: writing the report");
  const stats = shards.map((s) => smp.stats(s));
  say("");
  say(`${formatCount(ops)} operations in ${seconds.toFixed(1)} s (${formatCount(ops / seconds)}/s), ${formatCount(crossSent())} cross-shard frees`);
  // Failed allocations and how fragmented each shard's free memory ended
  // (its largest free span against all of it).
  say("shard   mallocs     frees  cross-shard  live objects       used       free  largest free span  failed mallocs");
  stats.forEach((st, s) =>
    say(
      `${String(s).padStart(5)} ${formatCount(st.mallocs).padStart(9)} ${formatCount(st.frees).padStart(9)} ${formatCount(st.crossShardFrees).padStart(12)} ` +
        `${formatCount(st.liveObjects).padStart(13)} ${formatSize(st.allocatedMemory).padStart(10)} ${formatSize(st.freeMemory).padStart(10)} ` +
        `${formatSize(smp.heap.largestFreeSpan(s)).padStart(17)} ${formatCount(st.failedAllocations).padStart(15)}`,
    ),
  );
  if (failedMallocs() > 0) say("(failed mallocs: OutOfMemoryError, the shard full or too fragmented for the size; the workload frees an object and goes on)");
  const profile = await mapProfileToSources(smp.heapProfile());
  const profiled = profilerRan(o.heapprofRate, profile);
  say("");
  if (profiled) {
    out.write(formatRunProfile(profile));
  } else {
    say("Heap profiler was off (--heapprof to turn it on): no heapprof.* files, only heap.img (statistics and metadata).");
  }
  const files: string[] = [];
  const write = async (name: string, body: string | Uint8Array): Promise<void> => {
    await writeFile(join(outDir, name), body);
    files.push(join(outDir, name));
  };
  if (profiled) {
    const title = `shardheap stress: ${plural(o.shards, "shard")}, live heap`;
    await write("heapprof.svg", renderProfile(profile, "svg", { title }).body);
    await write("heapprof.collapsed", renderProfile(profile, "collapsed").body);
    await write("heapprof.pb.gz", renderProfile(profile, "pprof").body);
    await write("heapprof.heapprofile", renderProfile(profile, "heapprofile").body);
  }
  if (o.jsHeapprofRate) {
    const js = await mapProfileToSources(await jsHeapProfileOf(smp, undefined));
    say("");
    out.write(formatJsHeapRunProfile(js));
    const title = `shardheap stress: ${plural(o.shards, "shard")}, live JS heap (sampled)`;
    await write("jsheapprof.svg", renderProfile(js, "svg", { title }).body);
    await write("jsheapprof.collapsed", renderProfile(js, "collapsed").body);
    await write("jsheapprof.pb.gz", renderProfile(js, "pprof").body);
    await write("jsheapprof.heapprofile", renderProfile(js, "heapprofile").body);
  }
  await smp.saveImage(join(outDir, "heap.img"));
  files.push(join(outDir, "heap.img"));
  await admin?.close();
  await smp.stop();
  say("");
  say(`wrote ${files.map((f) => f.slice(outDir.length + 1)).join(", ")} in ${outDir}`);
  return { outDir, files, seconds, ops, crossShardFrees: crossSent(), stats };
}
