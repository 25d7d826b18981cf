#!/usr/bin/env node
/**
 * The `shardheap` command. `report` renders a saved heap image offline.
 * Exit codes: 0 done; 2 bad flags, or a file that is not a heap image
 * (HeapFormatError's message on stderr); 1 anything unexpected.
 */
import { writeFile } from "node:fs/promises";
import { HeapFormatError } from "./errors.js";
import { readHeapImage } from "./report/heap-image.js";
import { REPORT_FORMATS, isReportFormat, renderProfile, type ReportFormat } from "./report/render.js";
import { mapProfileToSources } from "./report/source-map.js";
import { parseSize } from "./units.js";
import { fillSmpOptions, parseRuntimeFlag, splitFlag, type RuntimeFlags } from "./runtime/options.js";
import { runStress } from "./stress/run.js";

const USAGE = `usage: shardheap stress [--smp N] [--memory SIZE] [--heapprof[=RATE]] [--duration S]
                        [--cross-shard RATIO] [--out DIR] [--admin-port P [--admin-heap-image]]
       shardheap report FILE [--format ${REPORT_FORMATS.join("|")}]
                        [--inverted] [--min BYTES] [--shard N] [-o OUT]

stress runs shards under a mixed allocation workload with cross-shard frees,
shows progress, then prints statistics and the heap profile tree and writes
heapprof.svg, heapprof.collapsed, heapprof.pb.gz, heapprof.heapprofile and
heap.img into --out (default: a new shardheap-stress-* directory here).
Ctrl-C ends it early and still writes the report.
  --smp N            shards (default: this machine's cores)
  --memory SIZE      memory per shard (default 64MiB)
  --heapprof[=RATE]  heap profiler: every allocation, or one sample per RATE
                     bytes (default 64KiB); --heapprof=0 turns it off
  --duration S       seconds to run (default 10)
  --cross-shard R    share of frees done by another shard, 0..1 (default 0.25)
  --out DIR          where the report files go
  --admin-port P     serve the admin HTTP API on 127.0.0.1:P while it runs (0: any
                     free port; the URL is printed first as "admin: http://...")
  --admin-heap-image let the admin API serve the heap image (it exposes the heap)

report renders a heap image (SharedHeap.saveImage / Smp.saveImage) offline:
  --format F    tree (default): the seed's text tree; collapsed: folded stacks
                (flamegraph.pl, inferno, speedscope); svg: flamegraph; pprof:
                gzipped profile.proto; heapprofile: Chrome DevTools; json
  --inverted    tree: caller-first instead of callee-first
  --min BYTES   tree: drop branches with fewer live bytes (64K, 1MiB accepted)
  --shard N     one shard (default: all shards merged)
  -o OUT        write to OUT instead of standard output
  --help        this text
`;

class UsageError extends Error {}

interface ReportArgs {
  file: string;
  format: ReportFormat;
  inverted: boolean;
  min: number;
  shard: number | undefined;
  out: string | undefined;
}

function parseReportArgs(argv: readonly string[]): ReportArgs {
  const a: ReportArgs = { file: "", format: "tree", inverted: false, min: 0, shard: undefined, out: undefined };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const [flag, inline] = splitFlag(arg);
    const value = (): string => {
      if (inline !== undefined) return inline;
      const v = argv[++i];
      if (v === undefined) throw new UsageError(`${flag} needs a value`);
      return v;
    };
    switch (flag) {
      case "--format": {
        const f = value();
        if (!isReportFormat(f)) throw new UsageError(`--format must be one of ${REPORT_FORMATS.join(", ")}, got ${JSON.stringify(f)}`);
        a.format = f;
        break;
      }
      case "--inverted":
        a.inverted = true;
        break;
      case "--min":
        try {
          a.min = parseSize(value(), "--min");
        } catch (e) {
          throw new UsageError((e as Error).message);
        }
        break;
      case "--shard": {
        const v = value();
        if (!/^\d+$/.test(v)) throw new UsageError(`--shard must be a shard number, got ${JSON.stringify(v)}`);
        a.shard = Number(v);
        break;
      }
      case "-o":
      case "--output":
        a.out = value();
        break;
      default:
        if (flag.startsWith("-")) throw new UsageError(`unknown flag ${flag}`);
        if (a.file) throw new UsageError(`one image at a time (got ${a.file} and ${flag})`);
        a.file = flag;
    }
  }
  if (!a.file) throw new UsageError("report needs a heap image FILE");
  return a;
}

async function report(argv: readonly string[]): Promise<void> {
  const a = parseReportArgs(argv);
  const heap = await readHeapImage(a.file);
  if (a.shard !== undefined && a.shard >= heap.shards) {
    throw new UsageError(`--shard ${a.shard}: the image has shards 0 to ${heap.shards - 1}`);
  }
  const profile = await mapProfileToSources(heap.heapProfile(a.shard));
  const title = `Heap profile of ${a.shard === undefined ? `all ${heap.shards} shards` : `shard ${a.shard}`} (live bytes)`;
  const out = renderProfile(profile, a.format, { inverted: a.inverted, minSize: a.min, title });
  if (a.out) {
    await writeFile(a.out, out.body);
  } else {
    if (out.binary && process.stdout.isTTY) throw new UsageError(`--format ${a.format} is binary: write it with -o FILE or redirect standard output`);
    process.stdout.write(out.body);
  }
}

const DEFAULT_STRESS_HEAPPROF = 64 * 1024;

async function stress(argv: readonly string[]): Promise<void> {
  const flags: RuntimeFlags = {};
  let duration = 10;
  let crossShard = 0.25;
  let outDir: string | undefined;
  let adminPort: number | undefined;
  let adminHeapImage = false;
  for (let i = 0; i < argv.length; ) {
    let used: number;
    try {
      used = parseRuntimeFlag(argv, i, flags);
    } catch (e) {
      throw new UsageError((e as Error).message);
    }
    if (used > 0) {
      i += used;
      continue;
    }
    const arg = argv[i]!;
    const [flag, inline] = splitFlag(arg);
    const value = (): string => {
      if (inline !== undefined) return inline;
      const v = argv[i + 1];
      if (v === undefined) throw new UsageError(`${flag} needs a value`);
      i++;
      return v;
    };
    switch (flag) {
      case "--duration": {
        const v = value();
        duration = Number(v);
        if (!(duration > 0 && duration <= 86400)) throw new UsageError(`--duration must be a number of seconds above 0, got ${JSON.stringify(v)}`);
        break;
      }
      case "--cross-shard": {
        const v = value();
        crossShard = Number(v);
        if (!(crossShard >= 0 && crossShard <= 1)) throw new UsageError(`--cross-shard must be a ratio from 0 to 1, got ${JSON.stringify(v)}`);
        break;
      }
      case "--out":
        outDir = value();
        break;
      case "--admin-port": {
        const v = value();
        adminPort = Number(v);
        if (!/^\d+$/.test(v) || adminPort > 65535) throw new UsageError(`--admin-port must be a port number 0..65535, got ${JSON.stringify(v)}`);
        break;
      }
      case "--admin-heap-image":
        adminHeapImage = true;
        break;
      default:
        throw new UsageError(`unknown flag for stress: ${arg}`);
    }
    i++;
  }
  let options;
  try {
    options = fillSmpOptions({
      ...(flags.smp === undefined ? {} : { shards: flags.smp }),
      ...(flags.memory === undefined ? {} : { memoryPerShard: flags.memory }),
      heapprof: flags.heapprof ?? DEFAULT_STRESS_HEAPPROF,
    });
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  // Ctrl-C: end the run and still write the report; a second one leaves at once.
  let interrupt!: () => void;
  const interrupted = new Promise<void>((r) => (interrupt = r));
  const onSigint = (): void => {
    process.off("SIGINT", onSigint);
    process.once("SIGINT", () => process.exit(130));
    interrupt();
  };
  process.on("SIGINT", onSigint);
  try {
    await runStress({
      shards: options.shards,
      memoryPerShard: options.memoryPerShard,
      heapprofRate: options.heapprofRate,
      durationSeconds: duration,
      crossShard,
      interrupted,
      ...(outDir === undefined ? {} : { outDir }),
      ...(adminPort === undefined ? {} : { adminPort, adminHeapImage }),
    });
  } finally {
    process.off("SIGINT", onSigint);
  }
}

async function main(argv: readonly string[]): Promise<number> {
  const [command, ...rest] = argv;
  try {
    if (command === undefined) throw new UsageError("a command is needed");
    if (command === "--help" || command === "-h" || rest.includes("--help")) {
      process.stdout.write(USAGE);
      return 0;
    }
    if (command === "report") {
      await report(rest);
      return 0;
    }
    if (command === "stress") {
      await stress(rest);
      return 0;
    }
    throw new UsageError(`unknown command ${JSON.stringify(command)}`);
  } catch (e) {
    if (e instanceof UsageError) {
      process.stderr.write(`shardheap: ${e.message}\n\n${USAGE}`);
      return 2;
    }
    if (e instanceof HeapFormatError || (e as NodeJS.ErrnoException).code === "ENOENT") {
      process.stderr.write(`shardheap: ${(e as Error).message}\n`);
      return 2;
    }
    process.stderr.write(`shardheap: ${(e as Error).stack ?? String(e)}\n`);
    return 1;
  }
}

process.exitCode = await main(process.argv.slice(2));
