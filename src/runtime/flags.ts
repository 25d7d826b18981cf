/**
 * The runtime's command-line flags (`--smp N`, `--memory SIZE`,
 * `--heapprof[=RATE]`, `--heapprof-sites N`), shared by every command that
 * starts shards; they become Smp options (smp/options.ts), where the rules
 * live. `--name=value` and `--name value` are both accepted wherever a
 * flag takes a value.
 */
import { UsageError } from "../errors.js";
import { MAX_HEAP_BYTES, HEAP_HEADER_BYTES, maxProfilerSites } from "../memory/layout.js";
import { MAX_SHARDS, MIN_SHARD_BYTES, profilerSitesFor } from "../memory/shared-heap.js";
import { parseInteger } from "../parse.js";
import { heapprofRate, jsHeapprofRate } from "../smp/options.js";
import { parseSize } from "../units.js";

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

/** `--name=value` -> ["--name", "value"]; `--name` -> ["--name", undefined]. */
export function splitFlag(arg: string): [name: string, inline: string | undefined] {
  const eq = arg.startsWith("--") ? arg.indexOf("=") : -1;
  return eq > 0 ? [arg.slice(0, eq), arg.slice(eq + 1)] : [arg, undefined];
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
  const [name, inline] = splitFlag(argv[i]!);
  const value = (): [string, number] => {
    if (inline !== undefined) return [inline, 1];
    const next = argv[i + 1];
    if (next === undefined || next.startsWith("--")) throw new UsageError(`${name} needs a value`);
    return [next, 2];
  };
  switch (name) {
    case "--smp": {
      const [v, used] = value();
      into.smp = parseInteger(v, "--smp", 1, MAX_SHARDS);
      return used;
    }
    case "--memory": {
      const [v, used] = value();
      into.memory = parseSize(v, "--memory", { min: MIN_SHARD_BYTES });
      return used;
    }
    case "--heapprof-sites": {
      const [v, used] = value();
      into.heapprofSites = parseInteger(v, "--heapprof-sites", 1, maxProfilerSites(MAX_HEAP_BYTES - HEAP_HEADER_BYTES));
      return used;
    }
    case "--heapprof":
    case "--jsheapprof": {
      const js = name === "--jsheapprof";
      if (inline === undefined && looksLikeRate(argv[i + 1])) {
        // The rate takes "=" (a bare --heapprof records every allocation):
        // left alone, `--heapprof 64K` was refused as "unknown flag: 64K".
        const alone = js ? "samples every 512KiB on average" : "records every allocation";
        throw new UsageError(`${name} takes its rate after "=": did you mean ${name}=${argv[i + 1]!}? (${name} alone ${alone})`);
      }
      if (js) into.jsHeapprof = jsHeapprofRate(inline ?? true, "--jsheapprof=RATE");
      else into.heapprof = inline === undefined ? true : heapprofRate(inline, "--heapprof=RATE");
      return 1;
    }
    default:
      return 0;
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

/** One of a command's own flags, as parseCommandFlags hands it over. */
export interface CommandFlag {
  /** The argument as written (`--port=11211`). */
  arg: string;
  /** Its name (`--port`). */
  flag: string;
  /** The value after `=`, if any. */
  inline: string | undefined;
  /** Its value: after `=`, else the next argument (then taken); a UsageError when there is none. */
  value(): string;
}

/**
 * Walk a command's arguments: the runtime flags go into `into`, every
 * other argument to `each`, which reads a value only for the flags that
 * take one (a switch's next argument stays the next flag).
 */
export function parseCommandFlags(argv: readonly string[], into: RuntimeFlags, each: (f: CommandFlag) => void): void {
  for (let i = 0; i < argv.length; ) {
    const used = parseRuntimeFlag(argv, i, into);
    if (used > 0) {
      i += used;
      continue;
    }
    const arg = argv[i]!;
    const [flag, inline] = splitFlag(arg);
    let taken = 1;
    const value = (): string => {
      if (inline !== undefined) return inline;
      const next = argv[i + 1];
      if (next === undefined || next.startsWith("--")) throw new UsageError(`${flag} needs a value`);
      taken = 2;
      return next;
    };
    each({ arg, flag, inline, value });
    i += taken;
  }
}
