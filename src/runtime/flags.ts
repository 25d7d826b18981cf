/**
 * The runtime's command-line flags (`--smp N`, `--memory SIZE`,
 * `--heapprof[=RATE]`, `--heapprof-sites N`), shared by every command that
 * starts shards; they become Smp options (smp/options.ts), where the rules
 * live. `--name=value` and `--name value` are both accepted wherever a
 * flag takes a value (command-line.ts reads the arguments with Node's
 * util.parseArgs); a value never begins with "--" (`--smp --memory 1M`:
 * --smp has none).
 */
import { UsageError } from "../errors.js";
import { MAX_HEAP_BYTES, HEAP_HEADER_BYTES, maxProfilerSites } from "../memory/layout.js";
import { MAX_SHARDS, MIN_SHARD_BYTES, profilerSitesFor } from "../memory/shared-heap.js";
import { parseInteger } from "../parse.js";
import { heapprofRate, jsHeapprofRate } from "../smp/options.js";
import { parseSize } from "../units.js";
import { readArgs, type Arg, type FlagTable } from "./command-line.js";

/** The runtime flags as parsed from a command line (the rest is left to the command). */
export interface RuntimeFlags {
  smp?: number;
  /** Bytes per shard. */
  memory?: number;
  /** true: every allocation; N: sample rate in bytes (0 off). */
  heapprof?: boolean | number;
  /** Stacks each shard's profiler keeps exactly (checked against the shard size by checkProfilerSitesFlag). */
  heapprofSites?: number;
  /** The JS heap profiler's mean sampling interval in bytes (--jsheapprof alone: V8's default; 0 off). */
  jsHeapprof?: number;
}

/**
 * The runtime flags, as readArgs reads them. --heapprof and --jsheapprof
 * take their rate only after "=" (alone they mean "on"), which parseArgs
 * cannot say of one flag: they are switches to it, with the "=" value read
 * here, and `--heapprof 64K` (the rate after a space, which parseArgs
 * would hand on as an operand) refused by hand with a hint.
 */
const RUNTIME_FLAGS: FlagTable = { "--smp": "value", "--memory": "value", "--heapprof-sites": "value", "--heapprof": "switch", "--jsheapprof": "switch" };

/**
 * A flag's value, for a command that never takes the next argument as a
 * value when it is a flag (`--smp --memory 1M`: --smp has none; `-5`, one
 * dash, is a value). UsageError `X needs a value` (X as written).
 */
export function flagValue(a: Arg): string {
  if (a.value === undefined || (a.inline === undefined && a.value.startsWith("--"))) throw new UsageError(`${a.arg} needs a value`);
  return a.value;
}

/**
 * Parse one runtime flag at argv[i]. Returns how many argv entries it used
 * (0 when argv[i] is not a runtime flag). Accepts `--smp N`, `--smp=N`,
 * `--memory SIZE`, `--memory=SIZE`, `--heapprof` and `--heapprof=RATE`
 * (RATE in bytes, units allowed: --heapprof=512KiB), `--heapprof-sites N`
 * and `--heapprof-sites=N`, `--jsheapprof` and `--jsheapprof=RATE` (the
 * JS heap profiler; alone: V8's default interval). `--heapprof RATE` is a
 * UsageError that says to write `--heapprof=RATE` (the same for --jsheapprof).
 */
export function parseRuntimeFlag(argv: readonly string[], i: number, into: RuntimeFlags): number {
  const [a] = readArgs(argv.slice(i, i + 2), RUNTIME_FLAGS);
  if (a === undefined || !runtimeFlag(a, argv[i + 1], into)) return 0;
  return a.value !== undefined && a.inline === undefined ? 2 : 1;
}

/** Apply `a` when it is a runtime flag (`next`: the argument after it); false when it is not one. */
function runtimeFlag(a: Arg, next: string | undefined, into: RuntimeFlags): boolean {
  switch (a.operand ? undefined : a.flag) {
    case "--smp":
      into.smp = parseInteger(flagValue(a), "--smp", 1, MAX_SHARDS);
      return true;
    case "--memory":
      into.memory = parseSize(flagValue(a), "--memory", { min: MIN_SHARD_BYTES });
      return true;
    case "--heapprof-sites":
      into.heapprofSites = parseInteger(flagValue(a), "--heapprof-sites", 1, maxProfilerSites(MAX_HEAP_BYTES - HEAP_HEADER_BYTES));
      return true;
    case "--heapprof":
    case "--jsheapprof": {
      const js = a.flag === "--jsheapprof";
      if (a.inline === undefined && looksLikeRate(next)) {
        // The rate takes "=" (a bare --heapprof records every allocation):
        // left alone, `--heapprof 64K` was refused as "unknown flag: 64K".
        const alone = js ? "samples every 512KiB on average" : "records every allocation";
        throw new UsageError(`${a.flag} takes its rate after "=": did you mean ${a.flag}=${next!}? (${a.flag} alone ${alone})`);
      }
      if (js) into.jsHeapprof = jsHeapprofRate(a.inline ?? true, "--jsheapprof=RATE");
      else into.heapprof = a.inline === undefined ? true : heapprofRate(a.inline, "--heapprof=RATE");
      return true;
    }
    default:
      return false;
  }
}

/**
 * --heapprof-sites against the shards it is for (`memoryPerShard` bytes,
 * given as `memoryFlag`), so a value too big for them is refused naming
 * the flags rather than Smp.start's options; the number is unchanged.
 */
export function checkProfilerSitesFlag(flags: RuntimeFlags, memoryPerShard: number, memoryFlag: string): void {
  if (flags.heapprofSites !== undefined) profilerSitesFor(flags.heapprofSites, memoryPerShard, "--heapprof-sites", memoryFlag);
}

/** Whether a command-line argument reads as a byte count (64K, 65536, 1.5MiB). */
function looksLikeRate(arg: string | undefined): boolean {
  if (arg === undefined || arg.startsWith("-")) return false;
  try {
    parseSize(arg);
    return true;
  } catch {
    return false;
  }
}

/** One of a command's own arguments, as parseCommandFlags hands it over. */
export interface CommandFlag {
  /** The argument as written (`--port=11211`; each letter of a cluster has the whole cluster). */
  arg: string;
  /** Its name (`--port`, `-p`); an operand as written. */
  flag: string;
  /** Written with one dash: one of the command's letters (`-p`, or the `p` of `-vp11211` where `clusters`). */
  short: boolean;
  /** The value after `=` (attached to a letter: `-p11211`), if any. */
  inline: string | undefined;
  /** Its value (flagValue): a flag the command's table says takes one; UsageError `X needs a value` when there is none. */
  value(): string;
}

/** How a command's own flags are written: `flags` (readArgs' table) and whether short flags cluster getopt's way. */
export interface CommandFlags {
  readonly flags: FlagTable;
  readonly clusters?: boolean;
}

/**
 * Walk a command's arguments: the runtime flags go into `into`, every
 * other argument to `each`, in order; `own` names the command's flags
 * that take a value (each takes the argument after it when not written
 * with "=").
 */
export function parseCommandFlags(argv: readonly string[], into: RuntimeFlags, each: (f: CommandFlag) => void, own: CommandFlags = { flags: {} }): void {
  for (const a of readArgs(argv, { ...own.flags, ...RUNTIME_FLAGS }, own.clusters)) {
    if (runtimeFlag(a, argv[a.index + 1], into)) continue;
    each({ arg: a.arg, flag: a.flag, short: a.short, inline: a.inline, value: () => flagValue(a) });
  }
}
