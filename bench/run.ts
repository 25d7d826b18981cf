/**
 * The benchmark driver: `npm run bench [-- OPTIONS]`.
 *
 * Runs the registered benchmark modules in order. Each module measures its
 * candidates and their baselines in this same process and run (bench/
 * timing.ts) and reports records (bench/report.ts): a table per module in
 * human mode, or one JSON object per line on stdout with --json (progress
 * and warnings go to stderr, or nowhere). To add a benchmark, write a
 * module exporting a BenchModule and add it to REGISTRY below.
 */
import os from "node:os";
import { allocPair } from "./alloc-pair.js";
import { churn } from "./churn.js";
import { crossShard } from "./cross-shard.js";
import { dashboard } from "./dashboard.js";
import { fragmentation } from "./fragmentation.js";
import { httpListen } from "./http-listen.js";
import { jsHeap } from "./js-heap.js";
import { labels } from "./labels.js";
import { memcached } from "./memcached.js";
import { messaging } from "./messaging.js";
import { messagingHops } from "./messaging-hops.js";
import { profiler } from "./profiler.js";
import { profilerSites } from "./profiler-sites.js";
import { sharedMap } from "./shared-map.js";
import { formatRatio, formatTable, type BenchContext, type BenchModule, type BenchRecord } from "./report.js";
import { DEFAULT_TIMING, hasGc, type TimingOptions } from "./timing.js";
import { readArgs, type FlagTable } from "../src/runtime/command-line.js";

/** Every benchmark, in the order they run. */
export const REGISTRY: readonly BenchModule[] = [allocPair, churn, crossShard, profiler, labels, profilerSites, dashboard, messaging, messagingHops, sharedMap, fragmentation, memcached, httpListen, jsHeap];

const USAGE = `usage: npm run bench -- [options]
  --json              one JSON object per line on stdout, nothing else there
  --filter NAME       run only modules whose name contains NAME (repeatable,
                      or comma-separated); modules: ${REGISTRY.map((m) => m.name).join(", ")}
  --rounds N          timed rounds per candidate (default ${DEFAULT_TIMING.rounds}; the median is reported)
  --round-ms MS       target length of one round (default ${DEFAULT_TIMING.roundMs})
  --warmup-ms MS      warm-up per candidate (default ${DEFAULT_TIMING.warmupMs})
  --strict            exit with code 1 when a target is missed
  --list              list the modules and exit
  --help              this text
(npm prints its own "> script" banner on stdout; use \`npm run --silent bench -- --json\`
 or \`node --expose-gc dist-bench/bench/run.js --json\` for a clean JSON stream.)`;

interface Options {
  json: boolean;
  filters: string[];
  strict: boolean;
  list: boolean;
  timing: Partial<TimingOptions>;
}

class UsageError extends Error {}

/** The driver's flags, as readArgs reads them (src/runtime/command-line.ts: Node's util.parseArgs). */
const FLAGS: FlagTable = {
  "--json": "switch", "--strict": "switch", "--list": "switch", "--help": "switch", "-h": "switch",
  "--filter": "value", "--rounds": "value", "--round-ms": "value", "--warmup-ms": "value",
};

function parseArgs(argv: readonly string[]): Options {
  const o: Options = { json: false, filters: [], strict: false, list: false, timing: {} };
  const positive = (s: string, flag: string): number => {
    const n = Number(s);
    if (!Number.isFinite(n) || n <= 0) throw new UsageError(`${flag}: expected a positive number, got ${s}`);
    return n;
  };
  for (const a of readArgs(argv, FLAGS)) {
    // A value never begins with "--" (`--rounds --json`: --rounds has none).
    const take = (): string => {
      if (a.value === undefined || (a.inline === undefined && a.value.startsWith("--"))) throw new UsageError(`${a.flag} needs a value`);
      return a.value;
    };
    // A switch's "=value" is not read (`--json=no` is --json).
    switch (a.operand ? undefined : a.flag) {
      case "--json":
        o.json = true;
        break;
      case "--strict":
        o.strict = true;
        break;
      case "--list":
        o.list = true;
        break;
      case "--help":
      case "-h":
        throw new UsageError("");
      case "--filter":
        o.filters.push(...take().split(",").map((s) => s.trim()).filter((s) => s.length > 0));
        break;
      case "--rounds":
        o.timing.rounds = Math.round(positive(take(), a.flag));
        break;
      case "--round-ms":
        o.timing.roundMs = positive(take(), a.flag);
        break;
      case "--warmup-ms":
        o.timing.warmupMs = positive(take(), a.flag);
        break;
      default:
        throw new UsageError(`unknown argument: ${a.arg}`);
    }
  }
  return o;
}

/** Numbers in JSON lines: 4 significant digits (ratios can be ~1e-4). */
function roundForJson(_key: string, v: unknown): unknown {
  return typeof v === "number" && !Number.isInteger(v) ? Number(v.toPrecision(4)) : v;
}

async function main(): Promise<number> {
  let opts: Options;
  try {
    opts = parseArgs(process.argv.slice(2));
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    if (e.message) process.stderr.write(`bench: ${e.message}\n`);
    process.stderr.write(`${USAGE}\n`);
    return e.message ? 2 : 0;
  }
  if (opts.list) {
    for (const m of REGISTRY) process.stderr.write(`${m.name.padEnd(12)} ${m.title}\n`);
    return 0;
  }
  const selected = opts.filters.length === 0 ? REGISTRY : REGISTRY.filter((m) => opts.filters.some((f) => m.name.includes(f)));
  if (selected.length === 0) {
    process.stderr.write(`bench: --filter ${opts.filters.join(",")} matches no module (${REGISTRY.map((m) => m.name).join(", ")})\n`);
    return 2;
  }
  const human = (s: string): void => {
    if (!opts.json) process.stdout.write(`${s}\n`);
  };
  if (!hasGc()) process.stderr.write("bench: warning: run node with --expose-gc; rounds may pay for other candidates' garbage\n");
  const cpus = os.cpus();
  human(
    `shardheap benchmarks: node ${process.version}, ${cpus.length} x ${cpus[0]?.model.trim() ?? "unknown CPU"}; ` +
      `median of ${opts.timing.rounds ?? DEFAULT_TIMING.rounds} interleaved rounds, ratio = candidate time / baseline time`,
  );

  const all: BenchRecord[] = [];
  const t0 = Date.now();
  for (const m of selected) {
    const records: BenchRecord[] = [];
    const ctx: BenchContext = {
      timing: opts.timing,
      json: opts.json,
      progress: (msg) => {
        if (!opts.json) process.stderr.write(`  ${msg}\n`);
      },
      record: (r) => {
        records.push(r);
        all.push(r);
        if (opts.json) process.stdout.write(`${JSON.stringify(r, roundForJson)}\n`);
      },
    };
    human(`\n== ${m.name}: ${m.title}`);
    const start = Date.now();
    await m.run(ctx);
    human(formatTable(records));
    for (const r of records) {
      if (r.note) human(`  ${r.candidate}${r.metric ? ` (${r.metric})` : ""}: ${r.note}`);
    }
    human(`(${((Date.now() - start) / 1000).toFixed(1)} s)`);
  }
  const targets = all.filter((r) => r.pass !== undefined);
  const missed = targets.filter((r) => r.pass === false);
  human(`\ntargets: ${targets.length - missed.length} PASS, ${missed.length} MISS; total ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  for (const r of missed) {
    human(`  MISS ${r.bench}${r.L === undefined ? "" : ` L=${r.L}`} ${r.candidate}${r.metric ? ` ${r.metric}` : ""} vs ${r.baseline}: ratio ${formatRatio(r.ratio)} (${r.target})`);
  }
  return opts.strict && missed.length > 0 ? 1 : 0;
}

process.exitCode = await main();
