#!/usr/bin/env node
/**
 * The `shardheap` command. `report` renders a saved heap image offline;
 * `diff` renders what grew between two heap images or pprof files.
 * Exit codes come from errors.ts's ERROR_TABLE: 0 done; 2 bad flags or
 * values (with the usage), a file that is not a heap image or cannot be
 * read (one line on stderr); 1 anything else (unexpected: with its stack).
 */
import { readFileSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { InvalidValueError, UNEXPECTED_ERROR_ROW, UsageError, errorRow } from "./errors.js";
import { MAX_SHARDS } from "./memory/shared-heap.js";
import { parseBoolean, parseDecimal, parseInteger } from "./parse.js";
import { readHeapImage } from "./memory/heap-image/heap-image.js";
import { DIFF_FORMATS, REPORT_FORMATS, parseReportFormat, renderProfile, type ReportFormat } from "./report/render.js";
import { parseLabelFilter } from "./report/labels.js";
import { diffProfiles } from "./report/diff.js";
import { readProfilesToDiff } from "./report/profile-file.js";
import { peakTitle } from "./runtime/peak-views.js";
import { mapProfileToSources } from "./report/source-map.js";
import { parseSize, plural } from "./units.js";
import { checkProfilerSitesFlag, parseCommandFlags, type RuntimeFlags } from "./runtime/flags.js";
import { readArgs, type Arg, type FlagTable } from "./runtime/command-line.js";
import { DEFAULT_MEMORY_PER_SHARD, fillSmpOptions } from "./smp/options.js";
import { runStress } from "./apps/stress/run.js";
import { MEMCACHED_HELP, MEMCACHED_USAGE, memcachedCommand } from "./apps/memcached/run.js";

/**
 * Each command's help: its synopsis (how to write it) and what its flags
 * do. A mistake on a command's line prints one line saying what is wrong,
 * then that command's help alone (all four commands' help is 87 lines,
 * the one that mattered lost somewhere among them);
 * `shardheap --help` prints them all, `shardheap COMMAND --help` one.
 */
interface CommandHelp {
  /** The synopsis, each line indented as the combined usage sets it (7 spaces: under "usage: "). */
  readonly synopsis: string;
  readonly help: string;
  /** Flags another command's help explains: printed with this command's help alone, not in the whole text. */
  readonly sharedFlags?: string;
}

const STRESS: CommandHelp = {
  synopsis: `       shardheap stress [--smp N] [--memory SIZE] [--heapprof[=RATE]] [--heapprof-sites N] [--jsheapprof[=RATE]]
                        [--duration S] [--cross-shard RATIO] [--live RATIO] [--leak RATE] [--out DIR]
                        [--admin-port P [--admin-heap-image]]`,
  help: `stress runs shards under a mixed allocation workload with cross-shard frees,
shows progress, then prints statistics and the heap profile tree and writes
heapprof.svg, heapprof.collapsed, heapprof.pb.gz, heapprof.heapprofile (not
with --heapprof=0) and heap.img into --out (default: a new
shardheap-stress-* directory here).
Ctrl-C ends it early and still writes the report.
  --smp N            shards (default: this machine's cores)
  --memory SIZE      memory per shard (default 64MiB)
  --heapprof[=RATE]  heap profiler: every allocation, or one sample per RATE
                     bytes (default 64KiB); --heapprof=0 turns it off
  --heapprof-sites N distinct allocation stacks each shard's profiler keeps
                     (default: one per 32 KiB of --memory, 64 to 4096; at
                     most a quarter of a shard, 608 bytes a site); further
                     stacks fold into "(other sites)", which reports say
  --jsheapprof[=RATE] each shard's JavaScript heap too (V8's sampling heap
                     profiler in its thread): one sample per RATE bytes (default
                     512KiB); the tree is printed and jsheapprof.svg, .collapsed,
                     .pb.gz and .heapprofile written beside heapprof.*
  --duration S       seconds to run (default 10)
  --cross-shard R    share of frees done by another shard, 0..1 (default 0.25)
  --live R           live set each shard keeps, as a share of its memory, 0..1 (default 0.4)
  --leak RATE        also leak RATE bytes per second per shard at a fourth site,
                     allocateLeakedRecord (64K, 1MiB accepted): a leak to find
  --out DIR          where the report files go
  --admin-port P     serve the admin HTTP API and its dashboard on 127.0.0.1:P while
                     it runs (0: any free port; the URL is printed first as
                     "admin: http://..."; open it in a browser for the dashboard)
  --admin-heap-image let the admin API serve the heap image (it exposes the heap)
`,
};

const REPORT_FLAGS_HELP = `  --format F    tree (default): the seed's text tree; collapsed: folded stacks
                (flamegraph.pl, inferno, speedscope); svg: flamegraph; pprof:
                gzipped profile.proto; heapprofile: Chrome DevTools; json
  --inverted    tree: caller-first instead of callee-first
  --min BYTES   tree: drop branches with fewer live bytes (64K, 1MiB accepted)
  --by LABEL    group by a heap label (withHeapLabels; memcached's prefix):
                its values first in the tree, as the outermost frames of
                collapsed, svg and heapprofile, "groups" in json
  --label N=V   only the sites whose label N is V ((none): without it), as
                go tool pprof's -tagfocus
  --shard N     one shard (default: all shards merged)
  --full-paths  frames' files as recorded (file:///abs/path.ts), not shown
                short (src/app.ts relative to the working directory,
                PKG/path for a file in node_modules/PKG)
  -o OUT        write to OUT instead of standard output
`;

const REPORT: CommandHelp = {
  synopsis: `       shardheap report FILE [--format ${REPORT_FORMATS.join("|")}]
                        [--inverted] [--min BYTES] [--by LABEL] [--label NAME=VALUE] [--shard N]
                        [--peak] [--full-paths] [-o OUT]`,
  help: `report renders a heap image (SharedHeap.saveImage / Smp.saveImage) offline:
${REPORT_FLAGS_HELP}  --peak        the sites live at the peak instead of at the image's moment: the
                shard's highest profiled live bytes (--shard N), or the moment
                the shards' sum was highest (the heap-wide peak)
`,
};

const DIFF: CommandHelp = {
  synopsis: `       shardheap diff BASE NEXT [--format ${DIFF_FORMATS.join("|")}]
                        [--inverted] [--min BYTES] [--by LABEL] [--label NAME=VALUE] [--shard N]
                        [--full-paths] [-o OUT]`,
  help: `diff renders NEXT minus BASE, each a heap image or a pprof file written by
shardheap (--shard: heap images only), per allocation site: the tree with
signed sizes (+1.5M +1572864), collapsed stacks with signed bytes, a
differential flamegraph (widths from NEXT, red grew, blue shrank), pprof
with signed values (as go tool pprof -diff_base BASE NEXT), json.
`,
  sharedFlags: `Its flags are report's (--format: ${DIFF_FORMATS.join(", ")}):
${REPORT_FLAGS_HELP}`,
};

const MEMCACHED: CommandHelp = { synopsis: MEMCACHED_USAGE, help: MEMCACHED_HELP };

const COMMANDS: Readonly<Record<string, CommandHelp>> = { stress: STRESS, report: REPORT, diff: DIFF, memcached: MEMCACHED };

/** Synopses under one "usage:" (the first line's indent becomes the word). */
function usageOf(helps: readonly CommandHelp[]): string {
  return `usage:${helps.map((h) => h.synopsis).join("\n").slice("usage:".length)}\n`;
}

/** One command's usage and help: what `shardheap COMMAND --help` prints, and what follows a mistake on its line. */
function commandHelp(help: CommandHelp): string {
  return `${usageOf([help])}\n${help.help}${help.sharedFlags ?? ""}`;
}

/** Everything: `shardheap --help`. */
const USAGE = `${usageOf(Object.values(COMMANDS))}
${STRESS.help}
${REPORT.help}
${DIFF.help}
${MEMCACHED.help}
shardheap --help prints this text, shardheap COMMAND --help that command's alone,
shardheap --version the version.
`;

interface ReportArgs {
  files: string[];
  format: ReportFormat;
  inverted: boolean;
  min: number;
  by: string | undefined;
  label: [string, string] | undefined;
  shard: number | undefined;
  fullPaths: boolean;
  /** report: the peak's profile (--peak). */
  peak: boolean;
  out: string | undefined;
}

/** report's and diff's flags (diff refuses --peak, naming report). */
const REPORT_FLAGS: FlagTable = {
  "--format": "value", "--inverted": "switch", "--min": "value", "--by": "value", "--label": "value", "--shard": "value",
  "--full-paths": "switch", "--peak": "switch", "-o": "value", "--output": "value",
};

/** A switch: on, or its value after "=" read as parseBoolean reads it (`--inverted=no`). */
const switchOn = (a: Arg): boolean => a.inline === undefined || parseBoolean(a.inline, a.flag);

/** `report FILE` (operands: ["FILE"]) or `diff BASE NEXT` (["BASE", "NEXT"]). */
function parseReportArgs(argv: readonly string[], command: "report" | "diff", operands: readonly string[], formats: readonly ReportFormat[]): ReportArgs {
  const a: ReportArgs = { files: [], format: "tree", inverted: false, min: 0, by: undefined, label: undefined, shard: undefined, fullPaths: false, peak: false, out: undefined };
  for (const arg of readArgs(argv, REPORT_FLAGS)) {
    // A value is the next argument whatever it is (`-o -` writes a file named "-").
    const value = (): string => {
      if (arg.value === undefined) throw new UsageError(`${arg.flag} needs a value`);
      return arg.value;
    };
    switch (arg.operand ? undefined : arg.flag) {
      case "--format":
        a.format = parseReportFormat(value(), "--format", formats);
        break;
      case "--inverted":
        a.inverted = switchOn(arg);
        break;
      case "--min":
        a.min = parseSize(value(), "--min");
        break;
      case "--by":
        a.by = value();
        if (a.by === "") throw new UsageError("--by needs a label name (--by prefix)");
        break;
      case "--label": {
        const text = value();
        a.label = parseLabelFilter(text);
        if (a.label === undefined) throw new UsageError(`--label ${text}: give NAME=VALUE (--label prefix=user)`);
        break;
      }
      case "--shard":
        a.shard = parseInteger(value(), "--shard", 0, MAX_SHARDS - 1);
        break;
      case "--full-paths":
        a.fullPaths = switchOn(arg);
        break;
      case "--peak":
        if (command !== "report") throw new UsageError("unknown flag --peak (report takes it: diff compares two images as they are)");
        a.peak = switchOn(arg);
        break;
      case "-o":
      case "--output":
        a.out = value();
        break;
      default:
        if (arg.flag.startsWith("-")) throw new UsageError(`unknown flag ${arg.flag}`);
        if (a.files.length === operands.length) throw new UsageError(`${command} takes ${operands.join(" ")} (got ${[...a.files, arg.flag].join(", ")})`);
        a.files.push(arg.flag);
    }
  }
  if (a.files.length < operands.length) throw new UsageError(`${command} needs ${operands.join(" and ")}${command === "report" ? ", a heap image" : ""}`);
  return a;
}

/** Render to -o OUT, or to standard output (never binary to a terminal). */
async function writeReport(a: ReportArgs, out: { body: string | Uint8Array; binary: boolean }): Promise<void> {
  if (a.out) {
    await writeFile(a.out, out.body);
  } else {
    if (out.binary && process.stdout.isTTY) throw new UsageError(`--format ${a.format} is binary: write it with -o FILE or redirect standard output`);
    process.stdout.write(out.body);
  }
}

async function report(argv: readonly string[]): Promise<void> {
  const a = parseReportArgs(argv, "report", ["FILE"], REPORT_FORMATS);
  const heap = await readHeapImage(a.files[0]!);
  if (a.shard !== undefined && a.shard >= heap.shards) {
    throw new InvalidValueError("--shard", `--shard ${a.shard}: the image has shards 0 to ${heap.shards - 1}`);
  }
  const peak = a.peak ? heap.peakProfile(a.shard) : undefined;
  const profile = await mapProfileToSources(peak ?? heap.heapProfile(a.shard));
  const title = peak !== undefined ? peakTitle(peak) : `Heap profile of ${a.shard === undefined ? `all ${plural(heap.shards, "shard")}` : `shard ${a.shard}`} (live bytes)`;
  const out = renderProfile(profile, a.format, { inverted: a.inverted, minSize: a.min, title, ...renderFlagsOf(a) });
  // The tree has no title of its own: a peak's says whose, how much and when above it.
  await writeReport(a, peak !== undefined && a.format === "tree" ? { ...out, body: `${title}\n${String(out.body)}` } : out);
}

async function diff(argv: readonly string[]): Promise<void> {
  const a = parseReportArgs(argv, "diff", ["BASE", "NEXT"], DIFF_FORMATS);
  const [baseProfile, nextProfile] = await readProfilesToDiff(a.files[0]!, a.files[1]!, a.shard);
  const title = `Heap growth of ${a.shard === undefined ? "all shards" : `shard ${a.shard}`}: ${a.files[1]} minus ${a.files[0]}`;
  await writeReport(a, renderProfile(diffProfiles(baseProfile, nextProfile), a.format, { inverted: a.inverted, minSize: a.min, title, ...renderFlagsOf(a) }));
}

/** The `by`, `label` and `fullPaths` render options, where --by, --label and --full-paths were given. */
function renderFlagsOf(a: ReportArgs): { by?: string; label?: [string, string]; fullPaths?: boolean } {
  return { ...(a.by === undefined ? {} : { by: a.by }), ...(a.label === undefined ? {} : { label: a.label }), ...(a.fullPaths ? { fullPaths: true } : {}) };
}

const DEFAULT_STRESS_HEAPPROF = 64 * 1024;

/** stress's own flags (the runtime's are runtime/flags.ts's). */
const STRESS_FLAGS: FlagTable = {
  "--duration": "value", "--cross-shard": "value", "--live": "value", "--leak": "value", "--out": "value", "--admin-port": "value", "--admin-heap-image": "switch",
};

async function stress(argv: readonly string[]): Promise<void> {
  const flags: RuntimeFlags = {};
  let duration = 10;
  let crossShard = 0.25;
  let liveRatio: number | undefined;
  let leakRate = 0;
  let outDir: string | undefined;
  let adminPort: number | undefined;
  let adminHeapImage = false;
  parseCommandFlags(argv, flags, ({ arg, flag, inline, value }) => {
    switch (flag) {
      case "--duration":
        duration = parseDecimal(value(), "--duration", 0.001, 86400);
        break;
      case "--cross-shard":
        crossShard = parseDecimal(value(), "--cross-shard", 0, 1);
        break;
      case "--live":
        liveRatio = parseDecimal(value(), "--live", 0, 1);
        break;
      case "--leak":
        leakRate = parseSize(value(), "--leak");
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
  }, { flags: STRESS_FLAGS });
  // Alone it would do nothing, silently: the image is served by the admin API.
  if (adminHeapImage && adminPort === undefined) throw new UsageError("--admin-heap-image needs --admin-port P (it lets the admin API serve the heap image)");
  checkProfilerSitesFlag(flags, flags.memory ?? DEFAULT_MEMORY_PER_SHARD, "--memory");
  const options = fillSmpOptions({
    ...(flags.smp === undefined ? {} : { shards: flags.smp }),
    ...(flags.memory === undefined ? {} : { memoryPerShard: flags.memory }),
    heapprof: flags.heapprof ?? DEFAULT_STRESS_HEAPPROF,
    ...(flags.heapprofSites === undefined ? {} : { heapprofSites: flags.heapprofSites }),
    ...(flags.jsHeapprof === undefined ? {} : { jsHeapprof: flags.jsHeapprof }),
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
      heapprofSites: options.heapprofSites,
      jsHeapprofRate: options.jsHeapprofRate,
      durationSeconds: duration,
      crossShard,
      ...(liveRatio === undefined ? {} : { liveRatio }),
      leakRate,
      interrupted,
      ...(outDir === undefined ? {} : { outDir }),
      ...(adminPort === undefined ? {} : { adminPort, adminHeapImage }),
    });
  } finally {
    process.off("SIGINT", onSigint);
  }
}

/** The version in the package.json beside dist/ (it ships with the package). */
function packageVersion(): string {
  return (JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string }).version;
}

async function main(argv: readonly string[]): Promise<number> {
  const [command, ...rest] = argv;
  const help = command === undefined ? undefined : COMMANDS[command];
  try {
    if (command === undefined) throw new UsageError("a command is needed");
    if (command === "--help" || command === "-h") {
      process.stdout.write(USAGE);
      return 0;
    }
    if (help !== undefined && rest.includes("--help")) {
      process.stdout.write(commandHelp(help));
      return 0;
    }
    if (command === "--version" || command === "-v") {
      process.stdout.write(`${packageVersion()}\n`);
      return 0;
    }
    if (command === "report") {
      await report(rest);
      return 0;
    }
    if (command === "diff") {
      await diff(rest);
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
    // The command line itself was wrong: show how to write that command
    // (no command, or one that does not exist: how to write each).
    if (e instanceof UsageError || e instanceof InvalidValueError) {
      process.stderr.write(`\n${help === undefined ? `${usageOf(Object.values(COMMANDS))}shardheap --help explains every command.\n` : commandHelp(help)}`);
    }
    return row.exitCode;
  }
}

process.exitCode = await main(process.argv.slice(2));
