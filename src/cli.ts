#!/usr/bin/env node
/**
 * The `shardheap` command. `report` renders a saved heap image offline.
 * Exit codes come from errors.ts's ERROR_TABLE: 0 done; 2 bad flags or
 * values (with the usage), a file that is not a heap image or cannot be
 * read (one line on stderr); 1 anything else (unexpected: with its stack).
 */
import { writeFile } from "node:fs/promises";
import { InvalidValueError, UNEXPECTED_ERROR_ROW, UsageError, errorRow } from "./errors.js";
import { MAX_SHARDS } from "./memory/shared-heap.js";
import { parseBoolean, parseDecimal, parseInteger } from "./parse.js";
import { readHeapImage } from "./memory/heap-image.js";
import { REPORT_FORMATS, parseReportFormat, renderProfile, type ReportFormat } from "./report/render.js";
import { mapProfileToSources } from "./report/source-map.js";
import { parseSize } from "./units.js";
import { parseRuntimeFlag, splitFlag, type RuntimeFlags } from "./runtime/flags.js";
import { fillSmpOptions } from "./smp/options.js";
import { runStress } from "./apps/stress/run.js";
import { MEMCACHED_HELP, MEMCACHED_USAGE, memcachedCommand } from "./apps/memcached/run.js";

const USAGE = `usage: shardheap stress [--smp N] [--memory SIZE] [--heapprof[=RATE]] [--duration S]
                        [--cross-shard RATIO] [--out DIR] [--admin-port P [--admin-heap-image]]
       shardheap report FILE [--format ${REPORT_FORMATS.join("|")}]
                        [--inverted] [--min BYTES] [--shard N] [-o OUT]
${MEMCACHED_USAGE}

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

${MEMCACHED_HELP}`;

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
      case "--format":
        a.format = parseReportFormat(value(), "--format");
        break;
      case "--inverted":
        a.inverted = inline === undefined || parseBoolean(inline, "--inverted");
        break;
      case "--min":
        a.min = parseSize(value(), "--min");
        break;
      case "--shard":
        a.shard = parseInteger(value(), "--shard", 0, MAX_SHARDS - 1);
        break;
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
    throw new InvalidValueError("--shard", `--shard ${a.shard}: the image has shards 0 to ${heap.shards - 1}`);
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
    const used = parseRuntimeFlag(argv, i, flags);
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
      case "--duration":
        duration = parseDecimal(value(), "--duration", 0.001, 86400);
        break;
      case "--cross-shard":
        crossShard = parseDecimal(value(), "--cross-shard", 0, 1);
        break;
      case "--out":
        outDir = value();
        break;
      case "--admin-port":
        adminPort = parseInteger(value(), "--admin-port", 0, 65535);
        break;
      case "--admin-heap-image":
        adminHeapImage = inline === undefined || parseBoolean(inline, "--admin-heap-image");
        break;
      default:
        throw new UsageError(`unknown flag for stress: ${arg}`);
    }
    i++;
  }
  const options = fillSmpOptions({
    ...(flags.smp === undefined ? {} : { shards: flags.smp }),
    ...(flags.memory === undefined ? {} : { memoryPerShard: flags.memory }),
    heapprof: flags.heapprof ?? DEFAULT_STRESS_HEAPPROF,
  });
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
    if (command === "memcached") {
      await memcachedCommand(rest);
      return 0;
    }
    throw new UsageError(`unknown command ${JSON.stringify(command)}`);
  } catch (e) {
    const row = errorRow(e);
    if (row === UNEXPECTED_ERROR_ROW) process.stderr.write(`shardheap: ${(e as Error)?.stack ?? String(e)}\n`);
    else process.stderr.write(`shardheap: ${(e as Error).message}\n`);
    // The command line itself was wrong: show how to write it.
    if (e instanceof UsageError || e instanceof InvalidValueError) process.stderr.write(`\n${USAGE}`);
    return row.exitCode;
  }
}

process.exitCode = await main(process.argv.slice(2));
