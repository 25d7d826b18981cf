/**
 * Smp.start's options, shared by programmatic use and the command line
 * (runtime/flags.ts turns `--smp`, `--memory`, `--heapprof[=RATE]`,
 * `--heapprof-sites N` into these). Two shapes, as piscina does: the
 * public all-optional `SmpOptions` and the internal, validated, filled
 * `FilledSmpOptions`. Every rule is checked here, at the edge, with one
 * message per field that names the option and the rule.
 */
import { availableParallelism } from "node:os";
import { isAbsolute, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { InvalidValueError } from "../errors.js";
import { MAX_SHARDS, MIN_SHARD_BYTES, debugPointersOption, profilerSitesFor } from "../memory/shared-heap.js";
import { HEAP_HEADER_BYTES, MAX_HEAP_BYTES } from "../memory/layout.js";
import { MAX_SAMPLE_RATE } from "../memory/profiler/sampler.js";
import { MAX_PRESSURE_THRESHOLDS } from "../memory/pressure.js";
import { parseInteger, rejectUnknownKeys } from "../parse.js";
import { checkRingBytes, defaultRingBytes } from "./queue-layout.js";
import { DEFAULT_JS_HEAP_SAMPLE_RATE } from "./js-heap-profile.js";
import { parseSize } from "../units.js";

export interface SmpOptions {
  /** Number of shards (worker threads). Default: the machine's available parallelism. */
  shards?: number;
  /** Bytes per shard, or a size like "64MiB" / "1GiB". Default 64 MiB. */
  memoryPerShard?: number | string;
  /**
   * Heap profiling at start, as --heapprof: true = every allocation,
   * N = sample one allocation per N bytes on average (a size: 524288 or
   * "512KiB"; at most 2^31 - 1), false / 0 = off.
   */
  heapprof?: boolean | number | string;
  /**
   * The JavaScript heap profiler at start, as --jsheapprof: V8's sampling
   * heap profiler in every shard's own isolate (and the main thread's with
   * mainShard), sampling once per N bytes allocated on average (a size:
   * 65536 or "64KiB"); true = 512 KiB (Go's rate; V8's own 32 KiB costs
   * memcached 11-15% CPU); false / 0 = off (the
   * default). smp.setJsHeapProfiling switches it at run time.
   */
  jsHeapprof?: boolean | number | string;
  /**
   * Distinct allocation stacks each shard's heap profiler keeps exactly,
   * as --heapprof-sites (SharedHeapOptions.heapprofSites): further stacks
   * fold into "(other sites)" (HeapProfile.folded says how much). Default:
   * one per 32 KiB of shard, 64 to 4096; at most what a quarter of a
   * shard holds (608 bytes a site).
   */
  heapprofSites?: number;
  /**
   * Module every shard loads; its exported functions are the tasks. A URL
   * (`new URL("./tasks.mjs", import.meta.url)`, or a string such as
   * "file:///app/tasks.mjs"), or a file path: an absolute one, or one
   * relative to the working directory (process.cwd()) of the process that
   * calls start(). For a package's module pass
   * `import.meta.resolve("pkg/tasks")`.
   */
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
  /**
   * ms a shard's thread must have been idle (no call running) before it
   * returns its cached pool spans to the page allocator
   * (ShardAllocator.trim), so memory a burst used goes back. Default 200;
   * 0 never trims when idle (the allocator still trims in batches as it
   * frees, and before an out-of-memory error).
   */
  idleTrimMs?: number;
  /**
   * Bytes of each queue between two threads (one per ordered pair of
   * shards and the main thread): a power of two from 128 B to 64 MiB, or a
   * size like "64KiB". Calls beyond what it holds wait on the sender's
   * side, in order. Default 64 KiB (less with many shards: the queues
   * stay under 64 MiB in all).
   */
  queueBytes?: number | string;
  /**
   * Calls one thread (the main thread, or a shard) may have pending to one
   * shard at once: made and not yet settled, whether in the queue, in the
   * sender's overflow or running. Past it, submitTo and invokeOnAll reject
   * at once with a ShardError of code ERR_SHARDHEAP_QUEUE_FULL and send
   * nothing (invokeOnAll sends to no shard). Default 262144 (2^18: about
   * 50 MB of pending calls per pair of threads, 5x the largest burst any
   * program or benchmark here makes); Infinity for no bound.
   */
  maxPendingCalls?: number;
  /**
   * What becomes of the objects a shard's thread had allocated when it
   * died (its "orphans": a new thread replaces it, with fresh module
   * state; the 'replaced' event counts them). "keep" (the default): they
   * stay allocated, so pointers to them that other shards hold stay good,
   * until `smp.freeOrphans(shard, { keep })` frees all but those kept.
   * "free": the new thread frees them before it takes any call, for
   * shards that hand no pointers to others: any such pointer held
   * elsewhere is invalid from then on.
   */
  orphans?: "keep" | "free";
  /**
   * Node flags the shards' threads run with, as worker_threads' execArgv:
   * given, they replace the parent's; left out, each shard runs with the
   * parent's execArgv (`process.execArgv`: `--import tsx`, `--loader`,
   * `--experimental-strip-types`, ...). Either way a shard also gets the
   * parent's NODE_OPTIONS, as every worker does. So a TypeScript task
   * module loads in the shards of a program run under tsx (npx tsx,
   * node --import tsx, NODE_OPTIONS=--import tsx), and `execArgv:
   * ["--import", "tsx"]` loads one from a program that is not. Flags Node
   * refuses for a thread (V8's and process-wide ones: --expose-gc,
   * --max-old-space-size) are an InvalidValueError at start().
   */
  execArgv?: readonly string[];
  /**
   * Give the thread that calls start() a shard of its own: one
   * more region of `memoryPerShard`, id `shards` (after the workers'),
   * whose allocator is `smp.memory`, so that thread allocates without a
   * task. Shards read its objects and free them (cross-shard frees onto
   * its inbox, drained on that thread); no task runs on it. Default false:
   * the heap has one region per worker shard, as before.
   */
  mainShard?: boolean;
  /**
   * Debug pointers (SharedHeapOptions.debugPointers): freed objects are
   * held back from reuse, poisoned, so a pointer used after its free
   * throws InvalidPointerError on whichever shard uses it. Default:
   * SHARDHEAP_DEBUG_POINTERS, else off.
   */
  debugPointers?: boolean;
  /**
   * Memory-pressure thresholds, fractions of a shard's memory (0 < f <= 1,
   * at most 8): when a shard's allocatedMemory reaches one going up, smp
   * emits "memoryPressure" and writes one line on stderr naming the shard,
   * the threshold and its largest sites (smp/memory-pressure.ts); again only
   * after usage fell below it. Default [0.8, 0.9]; false or [] for none.
   */
  memoryPressure?: readonly number[] | false;
  /**
   * ms between the ticks of every shard's timeline (timeline.ts: the
   * largest sites' live bytes over time, kept in the buffer). Default 1000,
   * 50 to 3600000.
   */
  timelineIntervalMs?: number;
}

export interface FilledSmpOptions {
  shards: number;
  memoryPerShard: number;
  /** Sample rate in bytes: 0 off, 1 every allocation. */
  heapprofRate: number;
  /** The JS heap profiler's mean sampling interval in bytes: 0 off. */
  jsHeapprofRate: number;
  /** Stacks each shard's profiler keeps exactly (the default filled in). */
  heapprofSites: number;
  /** The module as a URL string (file paths already resolved). */
  module: string | undefined;
  loadTimeoutMs: number;
  stopTimeoutMs: number;
  idleTrimMs: number;
  /** Bytes of each ring of the messaging buffer. */
  queueBytes: number;
  /** Calls pending from one thread to one shard, at most (Infinity: no bound). */
  maxPendingCalls: number;
  orphans: "keep" | "free";
  /** The shards' execArgv; undefined: the parent's, as Node inherits it (which tolerates flags an explicit list may not name). */
  execArgv: readonly string[] | undefined;
  /** The calling thread has a region of its own, id `shards`. */
  mainShard: boolean;
  /** The heap's debug pointers (the environment's default filled in). */
  debugPointers: boolean;
  /** Memory-pressure thresholds, ascending, without repeats ([] for none). */
  memoryPressure: readonly number[];
  timelineIntervalMs: number;
}

export const DEFAULT_MEMORY_PER_SHARD = 64 * 1024 * 1024;
/** Generous: a module may connect to services at load; a hung one must still not hang start() for ever. */
export const DEFAULT_LOAD_TIMEOUT_MS = 30_000;
/** A shard's running tasks get this long to finish at stop(). */
export const DEFAULT_STOP_TIMEOUT_MS = 10_000;
/** A shard idle this long returns its cached pool spans (ShardAllocator.trim). */
export const DEFAULT_IDLE_TRIM_MS = 200;
/**
 * Calls pending from one thread to one shard, at most. A pending call
 * costs its sender ~190 B (pending-calls.ts) plus its record (~20 B for a small
 * argument): 2^18 of them ~50 MB a pair. 2M calls to a busy shard grew the
 * sender to 1.45 GB before there was a bound; the
 * largest burst in this repository is the messaging bench's 50,000.
 */
export const DEFAULT_MAX_PENDING_CALLS = 2 ** 18;
/** The thresholds Redpanda logs at (free memory under 20% and 10%), as shares of memory used. */
export const DEFAULT_MEMORY_PRESSURE: readonly number[] = Object.freeze([0.8, 0.9]);
export const DEFAULT_TIMELINE_INTERVAL_MS = 1000;
/** setTimeout's longest delay (a longer one fires at once). */
const MAX_TIMER_MS = 0x7fffffff;

/** Every key SmpOptions has (the type makes sure none is missing): any other key is refused. */
const SMP_OPTION_KEYS: Readonly<Record<keyof SmpOptions, true>> = {
  shards: true,
  memoryPerShard: true,
  heapprof: true,
  jsHeapprof: true,
  heapprofSites: true,
  module: true,
  loadTimeoutMs: true,
  stopTimeoutMs: true,
  idleTrimMs: true,
  queueBytes: true,
  maxPendingCalls: true,
  orphans: true,
  execArgv: true,
  mainShard: true,
  debugPointers: true,
  memoryPressure: true,
  timelineIntervalMs: true,
};

/** Validate and fill Smp.start options; RangeError / TypeError naming the field. */
export function fillSmpOptions(o: SmpOptions = {}): FilledSmpOptions {
  if (o === null || typeof o !== "object") throw new TypeError("Smp.start: options must be an object");
  rejectUnknownKeys(o, Object.keys(SMP_OPTION_KEYS), "options");
  const mainShard = mainShardOption(o.mainShard);
  // The main thread's region is one of the heap's MAX_SHARDS.
  const shards = parseInteger(o.shards ?? Math.max(1, availableParallelism()), "options.shards", 1, mainShard ? MAX_SHARDS - 1 : MAX_SHARDS);
  const memoryPerShard = parseSize(o.memoryPerShard ?? DEFAULT_MEMORY_PER_SHARD, "options.memoryPerShard", { min: MIN_SHARD_BYTES });
  const regions = shards + (mainShard ? 1 : 0);
  if (HEAP_HEADER_BYTES + regions * memoryPerShard > MAX_HEAP_BYTES) {
    const main = mainShard ? " (and one more region for mainShard)" : "";
    throw new InvalidValueError("options.memoryPerShard", `shards x memory per shard${main} must fit in 4 GiB, got ${regions} x ${memoryPerShard} bytes`);
  }
  return {
    shards,
    memoryPerShard,
    heapprofRate: heapprofRate(o.heapprof, "options.heapprof"),
    jsHeapprofRate: jsHeapprofRate(o.jsHeapprof, "options.jsHeapprof"),
    heapprofSites: profilerSitesFor(o.heapprofSites, memoryPerShard, "options.heapprofSites", "options.memoryPerShard"),
    module: moduleSpecifier(o.module),
    loadTimeoutMs: timeoutMs(o.loadTimeoutMs ?? DEFAULT_LOAD_TIMEOUT_MS, "options.loadTimeoutMs"),
    stopTimeoutMs: timeoutMs(o.stopTimeoutMs ?? DEFAULT_STOP_TIMEOUT_MS, "options.stopTimeoutMs"),
    idleTrimMs: parseInteger(o.idleTrimMs ?? DEFAULT_IDLE_TRIM_MS, "options.idleTrimMs", 0, MAX_TIMER_MS),
    queueBytes: o.queueBytes === undefined ? defaultRingBytes(shards + 1) : checkRingBytes(parseSize(o.queueBytes, "options.queueBytes"), "options.queueBytes"),
    maxPendingCalls: o.maxPendingCalls === Infinity ? Infinity : parseInteger(o.maxPendingCalls ?? DEFAULT_MAX_PENDING_CALLS, "options.maxPendingCalls", 1, 2 ** 31 - 1),
    orphans: orphansOption(o.orphans),
    execArgv: execArgvOption(o.execArgv),
    mainShard,
    debugPointers: debugPointersOption(o.debugPointers, "options.debugPointers"),
    memoryPressure: memoryPressureOption(o.memoryPressure),
    timelineIntervalMs: parseInteger(o.timelineIntervalMs ?? DEFAULT_TIMELINE_INTERVAL_MS, "options.timelineIntervalMs", 50, 3_600_000),
  };
}

/** The thresholds as given, sorted and without repeats: fractions in (0, 1], at most MAX_PRESSURE_THRESHOLDS. */
function memoryPressureOption(value: unknown): readonly number[] {
  if (value === undefined) return DEFAULT_MEMORY_PRESSURE;
  if (value === false) return [];
  const rule = `options.memoryPressure must be false or a list of at most ${MAX_PRESSURE_THRESHOLDS} fractions of a shard's memory, each above 0 and at most 1 ([0.8, 0.9])`;
  if (!Array.isArray(value) || value.length > MAX_PRESSURE_THRESHOLDS || !value.every((f): f is number => typeof f === "number" && f > 0 && f <= 1)) {
    const shown = Array.isArray(value) ? `[${value.map((f) => (typeof f === "string" ? JSON.stringify(f) : String(f))).join(", ")}]` : typeof value === "string" ? JSON.stringify(value) : String(value);
    throw new InvalidValueError("options.memoryPressure", `${rule}, got ${shown}`);
  }
  return Object.freeze([...new Set(value)].sort((a, b) => a - b));
}

function mainShardOption(value: unknown): boolean {
  if (value === undefined || typeof value === "boolean") return value ?? false;
  throw new InvalidValueError("options.mainShard", `options.mainShard must be true or false, got ${typeof value === "string" ? JSON.stringify(value) : String(value)}`);
}

function execArgvOption(value: unknown): readonly string[] | undefined {
  if (value === undefined) return undefined;
  if (!Array.isArray(value) || !value.every((a): a is string => typeof a === "string")) {
    throw new InvalidValueError("options.execArgv", "options.execArgv must be an array of strings (Node flags, as worker_threads' execArgv)");
  }
  return Object.freeze([...value]);
}

function orphansOption(value: unknown): "keep" | "free" {
  if (value === undefined || value === "keep" || value === "free") return value ?? "keep";
  throw new InvalidValueError("options.orphans", `options.orphans must be "keep" or "free", got ${typeof value === "string" ? JSON.stringify(value) : String(value)}`);
}

/** A wait in ms: a non-negative whole number, or Infinity for no limit; InvalidValueError naming `what`. */
export function timeoutMs(value: unknown, what: string): number {
  if (value === Infinity) return value;
  return parseInteger(value as number, what, 0, Number.MAX_SAFE_INTEGER);
}

/**
 * A heap-profiling setting as a sample rate in bytes, the one reading of
 * --heapprof[=RATE], Smp.start's heapprof, setHeapProfiling and the admin
 * API's rate: true -> 1 (every allocation), false / undefined -> 0 (off),
 * a size (parseSize: "512KiB", 524288; no fraction of a byte) -> that
 * many bytes, at most MAX_SAMPLE_RATE; InvalidValueError naming `what`.
 */
export function heapprofRate(value: boolean | number | string | undefined, what: string): number {
  if (value === undefined || value === false) return 0;
  if (value === true) return 1;
  return parseSize(value, what, { max: MAX_SAMPLE_RATE });
}

/**
 * A JS heap profiler setting as V8's mean sampling interval in bytes, the
 * one reading of --jsheapprof[=RATE], Smp.start's jsHeapprof,
 * setJsHeapProfiling and the admin API's rate with heap=js: true -> V8's
 * default (512 KiB), false / undefined -> 0 (off), a size -> that many
 * bytes (1 samples every allocation: slow, but what was asked), at most
 * MAX_SAMPLE_RATE; InvalidValueError naming `what`.
 */
export function jsHeapprofRate(value: boolean | number | string | undefined, what: string): number {
  if (value === true) return DEFAULT_JS_HEAP_SAMPLE_RATE;
  return heapprofRate(value, what);
}

/**
 * The module as the URL every shard imports. A path is resolved here,
 * against the caller's working directory: the shard's import() would
 * resolve "./tasks.mjs" against shardheap's own dist/smp/ folder.
 */
function moduleSpecifier(m: string | URL | undefined): string | undefined {
  if (m === undefined) return undefined;
  if (m instanceof URL) return m.href;
  if (typeof m !== "string" || m.length === 0) throw new TypeError("options.module must be a non-empty path or URL");
  if (isAbsolute(m)) return pathToFileURL(m).href; // before the URL test: C:\app on Windows is a path
  if (/^[a-z][a-z\d+.-]*:/i.test(m)) return m; // a URL: file:, data:, ...
  return pathToFileURL(resolve(process.cwd(), m)).href;
}
