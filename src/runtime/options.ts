/**
 * Runtime options shared by the CLI (`--smp`, `--memory`, `--heapprof[=RATE]`)
 * and programmatic use (Smp.start). Two shapes, as piscina does: the
 * public all-optional `SmpOptions` and the internal, validated, filled
 * `FilledSmpOptions`. Every rule is checked here, at the edge, with one
 * message per field that names the option and the rule.
 */
import { availableParallelism } from "node:os";
import { MAX_SHARDS, MIN_SHARD_BYTES } from "../memory/shared-heap.js";
import { HEAP_HEADER_BYTES, MAX_HEAP_BYTES } from "../memory/layout.js";
import { parseSize } from "../units.js";

export interface SmpOptions {
  /** Number of shards (worker threads). Default: the machine's available parallelism. */
  shards?: number;
  /** Bytes per shard, or a size like "64MiB" / "1GiB". Default 64 MiB. */
  memoryPerShard?: number | string;
  /**
   * Heap profiling at start, as --heapprof: true = every allocation,
   * N = sample one allocation per N bytes on average, false / 0 = off.
   */
  heapprof?: boolean | number;
  /** Module every shard loads; its exported functions are the tasks. */
  module?: string | URL;
  /**
   * ms a shard may take to load `module` (its top-level await included)
   * before start() rejects, naming the shard, and stops every thread.
   * Default 30000; Infinity waits for ever.
   */
  loadTimeoutMs?: number;
  /**
   * ms stop() gives the shards to finish their running tasks, and then
   * again to flush and drain, before it terminates them anyway (an 'error'
   * event names each one). Default 10000; stop({ timeoutMs }) overrides it
   * per call.
   */
  stopTimeoutMs?: number;
}

export interface FilledSmpOptions {
  shards: number;
  memoryPerShard: number;
  /** Sample rate in bytes: 0 off, 1 every allocation. */
  heapprofRate: number;
  module: string | undefined;
  loadTimeoutMs: number;
  stopTimeoutMs: number;
}

export const DEFAULT_MEMORY_PER_SHARD = 64 * 1024 * 1024;
/** Generous: a module may connect to services at load; a hung one must still not hang start() for ever. */
export const DEFAULT_LOAD_TIMEOUT_MS = 30_000;
/** A shard's running tasks get this long to finish at stop(). */
export const DEFAULT_STOP_TIMEOUT_MS = 10_000;

/** Validate and fill Smp.start options; RangeError / TypeError naming the field. */
export function fillSmpOptions(o: SmpOptions = {}): FilledSmpOptions {
  if (o === null || typeof o !== "object") throw new TypeError("Smp.start: options must be an object");
  const shards = o.shards ?? Math.max(1, availableParallelism());
  if (typeof shards !== "number" || !Number.isInteger(shards) || shards < 1 || shards > MAX_SHARDS) {
    throw new RangeError(`options.shards must be an integer from 1 to ${MAX_SHARDS}, got ${String(shards)}`);
  }
  const memoryPerShard = parseSize(o.memoryPerShard ?? DEFAULT_MEMORY_PER_SHARD, "options.memoryPerShard");
  if (memoryPerShard < MIN_SHARD_BYTES) {
    throw new RangeError(`options.memoryPerShard must be at least ${MIN_SHARD_BYTES} bytes (128KiB), got ${memoryPerShard}`);
  }
  if (HEAP_HEADER_BYTES + shards * memoryPerShard > MAX_HEAP_BYTES) {
    throw new RangeError(`options.shards x options.memoryPerShard must fit in 4 GiB, got ${shards} x ${memoryPerShard}`);
  }
  return {
    shards,
    memoryPerShard,
    heapprofRate: heapprofRate(o.heapprof, "options.heapprof"),
    module: moduleSpecifier(o.module),
    loadTimeoutMs: timeoutMs(o.loadTimeoutMs ?? DEFAULT_LOAD_TIMEOUT_MS, "options.loadTimeoutMs"),
    stopTimeoutMs: timeoutMs(o.stopTimeoutMs ?? DEFAULT_STOP_TIMEOUT_MS, "options.stopTimeoutMs"),
  };
}

/** A wait in ms: a non-negative integer, or Infinity for no limit. */
export function timeoutMs(value: unknown, what: string): number {
  if (value !== Infinity && (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0)) {
    throw new RangeError(`${what} must be a whole number of milliseconds (0 or more) or Infinity, got ${String(value)}`);
  }
  return value;
}

/** true -> 1 (every allocation), false/undefined -> 0 (off), N -> N bytes. */
export function heapprofRate(value: boolean | number | undefined, what: string): number {
  if (value === undefined || value === false) return 0;
  if (value === true) return 1;
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0) {
    throw new RangeError(`${what} must be true, false or a sample rate in bytes (a non-negative integer), got ${String(value)}`);
  }
  return value;
}

function moduleSpecifier(m: string | URL | undefined): string | undefined {
  if (m === undefined) return undefined;
  if (m instanceof URL) return m.href;
  if (typeof m !== "string" || m.length === 0) throw new TypeError("options.module must be a non-empty path or URL");
  return m;
}

/** The runtime flags as parsed from a command line (the rest is left to the command). */
export interface RuntimeFlags {
  smp?: number;
  memory?: string;
  heapprof?: boolean | number;
}

/**
 * Parse one runtime flag at argv[i]. Returns how many argv entries it used
 * (0 when argv[i] is not a runtime flag). Accepts `--smp N`, `--smp=N`,
 * `--memory SIZE`, `--memory=SIZE`, `--heapprof` and `--heapprof=RATE`
 * (RATE in bytes, units allowed: --heapprof=512KiB).
 */
/** `--name=value` -> ["--name", "value"]; `--name` -> ["--name", undefined]. */
export function splitFlag(arg: string): [name: string, inline: string | undefined] {
  const eq = arg.startsWith("--") ? arg.indexOf("=") : -1;
  return eq > 0 ? [arg.slice(0, eq), arg.slice(eq + 1)] : [arg, undefined];
}

export function parseRuntimeFlag(argv: readonly string[], i: number, into: RuntimeFlags): number {
  const [name, inline] = splitFlag(argv[i]!);
  const value = (): [string, number] => {
    if (inline !== undefined) return [inline, 1];
    const next = argv[i + 1];
    if (next === undefined || next.startsWith("--")) throw new RangeError(`${name} needs a value`);
    return [next, 2];
  };
  switch (name) {
    case "--smp": {
      const [v, used] = value();
      const n = Number(v);
      if (!/^\d+$/.test(v) || n < 1 || n > MAX_SHARDS) throw new RangeError(`--smp must be a whole number from 1 to ${MAX_SHARDS}, got ${JSON.stringify(v)}`);
      into.smp = n;
      return used;
    }
    case "--memory": {
      const [v, used] = value();
      parseSize(v, "--memory");
      into.memory = v;
      return used;
    }
    case "--heapprof": {
      into.heapprof = inline === undefined ? true : parseSize(inline, "--heapprof=RATE");
      return 1;
    }
    default:
      return 0;
  }
}
