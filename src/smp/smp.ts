/**
 * Smp: shards on worker threads, the main side (Seastar's smp). One
 * single-thread piscina pool per shard, so `submitTo(shard, ...)` always
 * lands on the thread that owns that shard's region; the worker side is
 * shard-worker.ts. Pools run with atomics "disabled": the default "sync"
 * mode parks an idle worker in Atomics.wait, which would stop the shard's
 * event loop (and with it the doorbell, timers and sockets) between tasks.
 */
import { EventEmitter } from "node:events";
import { fileURLToPath } from "node:url";
import { Piscina } from "piscina";
import { HeapError, HeapFormatError, InvalidPointerError, OutOfMemoryError, ShardError } from "../errors.js";
import { SharedHeap } from "../memory/shared-heap.js";
import type { MemoryStats } from "../memory/stats.js";
import { fillSmpOptions, heapprofRate, type FilledSmpOptions, type SmpOptions } from "./options.js";
import type { HeapProfile } from "../memory/heap-profile.js";
import type { SerializedError, ShardBootData, ShardRequest } from "./protocol.js";
import type { ShardReply } from "./shard-worker.js";

const WORKER_FILE = fileURLToPath(new URL("./shard-worker.js", import.meta.url));
/** How long stop() waits for a shard to finish its current work and quiesce before terminating it. */
const STOP_TIMEOUT_MS = 10_000;
/** A shard idle this long returns its cached pool spans (ShardAllocator.trim). */
const IDLE_TRIM_MS = 200;

export interface SmpEvents {
  /** A shard's worker failed outside a task or exited; its pending submitTo calls reject. */
  error: [error: ShardError];
}

export class Smp extends EventEmitter<SmpEvents> {
  readonly heap: SharedHeap;
  readonly shards: number;
  readonly options: Readonly<FilledSmpOptions>;
  private readonly pools: Piscina[];
  private stopping: Promise<void> | undefined;
  /** While start() runs, failures are its to report, not the 'error' event's. */
  private starting = true;
  /** Shards whose worker died or never started: stop() does not wait for them. */
  private readonly failed = new Set<number>();

  private constructor(options: FilledSmpOptions, heap: SharedHeap, pools: Piscina[]) {
    super();
    this.options = Object.freeze(options);
    this.heap = heap;
    this.shards = options.shards;
    this.pools = pools;
    pools.forEach((pool, shard) => {
      pool.on("error", (e: unknown) => this.shardFailed(shard, e));
      pool.on("workerDestroy", () => this.shardFailed(shard, new Error("its worker thread exited")));
      // piscina replaces a worker that died after starting: the shard lives
      // on in a fresh thread (same region and allocations, fresh module state).
      pool.on("workerCreate", () => this.failed.delete(shard));
    });
  }

  /**
   * Start `shards` worker threads over one heap of `memoryPerShard` bytes
   * per shard, apply `heapprof`, and load `module` in every shard. Rejects,
   * naming the shard, when a module fails to load (every thread is stopped).
   */
  static async start(o: SmpOptions = {}): Promise<Smp> {
    const options = fillSmpOptions(o);
    const heap = SharedHeap.create({ shards: options.shards, shardBytes: options.memoryPerShard });
    const pools = Array.from({ length: options.shards }, (_, shard) => {
      const workerData: ShardBootData = {
        buffer: heap.buffer,
        shard,
        heapprofRate: options.heapprofRate,
        module: options.module,
        idleTrimMs: IDLE_TRIM_MS,
      };
      return new Piscina({
        filename: WORKER_FILE,
        minThreads: 1,
        maxThreads: 1,
        atomics: "disabled",
        idleTimeout: Infinity,
        concurrentTasksPerWorker: 64,
        workerData,
      });
    });
    const smp = new Smp(options, heap, pools);
    // A shard fails to start either by rejecting its init request (its
    // module threw) or by its worker dying before it answers (piscina then
    // emits 'error' and leaves the request pending): watch for both.
    const inits = pools.map((_, shard) => smp.request(shard, { kind: "init" }));
    const failure = new Promise<never>((_, reject) => {
      const fail = (shard: number, cause: unknown): void => {
        const root = cause instanceof ShardError && cause.cause !== undefined ? cause.cause : cause;
        reject(new ShardError(shard, `shard ${shard} failed to start: ${errorMessage(root)}`, { cause }));
      };
      pools.forEach((pool, shard) => {
        pool.once("error", (e: unknown) => fail(shard, e));
        inits[shard]!.catch((e: unknown) => fail(shard, e));
      });
    });
    const loaded = Promise.all(inits);
    try {
      await Promise.race([loaded, failure]);
    } catch (e) {
      smp.starting = false;
      await smp.stop().catch(() => undefined);
      throw e;
    } finally {
      loaded.catch(() => undefined);
      failure.catch(() => undefined);
    }
    smp.starting = false;
    return smp;
  }

  /**
   * Run the module's exported function `task` on `shard` with `arg`
   * (structured-cloned; the heap is shared, so pass pointers). Resolves with
   * its result; rejects with a ShardError carrying the task's error name,
   * message and stack (shardheap's own errors are rebuilt as their class).
   */
  async submitTo<T = unknown>(shard: number, task: string, arg?: unknown): Promise<T> {
    if (!Number.isInteger(shard) || shard < 0 || shard >= this.shards) {
      throw new RangeError(`submitTo: shard must be an integer from 0 to ${this.shards - 1}, got ${String(shard)}`);
    }
    if (typeof task !== "string" || task.length === 0) throw new TypeError("submitTo: task must be a function name");
    if (this.stopping) throw new ShardError(shard, `submitTo(${shard}, ${JSON.stringify(task)}): the runtime is stopping`);
    return (await this.request(shard, { kind: "task", task, arg })) as T;
  }

  /**
   * Switch heap profiling on `shard` or on "all" shards at run time: true
   * or 1 records every allocation, N samples one allocation per N bytes on
   * average (a size: 524288 or "512KiB"), false or 0 turns it off. Resolves once every named shard has
   * applied it.
   */
  async setHeapProfiling(shard: number | "all", rate: boolean | number | string): Promise<void> {
    const bytes = heapprofRate(rate, "setHeapProfiling: rate");
    if (shard !== "all" && (!Number.isInteger(shard) || shard < 0 || shard >= this.shards)) {
      throw new RangeError(`setHeapProfiling: shard must be "all" or an integer from 0 to ${this.shards - 1}, got ${String(shard)}`);
    }
    const shards = shard === "all" ? [...Array(this.shards).keys()] : [shard];
    await Promise.all(shards.map((s) => this.request(s, { kind: "heapprof", rate: bytes })));
  }

  /** One shard's heap profile, or all shards' merged; read from the buffer, no shard involved. */
  heapProfile(shard?: number): HeapProfile {
    return this.heap.heapProfile(shard);
  }

  /** Save a heap image (SharedHeap.saveImage) while the shards run: it reads the buffer only. */
  saveImage(path: string): Promise<void> {
    return this.heap.saveImage(path);
  }

  /** One shard's statistics, or all shards' summed; read from the buffer, no shard involved. */
  stats(shard?: number): MemoryStats {
    return this.heap.stats(shard);
  }

  /**
   * Quiesce every shard (each drains its inbox and stops watching its
   * doorbell), terminate the threads, then drain what was pushed while
   * they stopped. Afterwards each shard's memory holds exactly what the
   * user left live. Idempotent; completes even when shards have died.
   */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      await Promise.allSettled(
        this.pools.map((_, shard) =>
          this.failed.has(shard) ? undefined : withTimeout(this.request(shard, { kind: "stop" }), STOP_TIMEOUT_MS),
        ),
      );
      await Promise.allSettled(this.pools.map((pool) => pool.destroy()));
      // The shard threads are gone: this thread is now the only writer of
      // every region, so it may drain on their behalf.
      for (let shard = 0; shard < this.shards; shard++) this.heap.adoptShard(shard).drainCrossShardFrees();
    })();
    return this.stopping;
  }

  private async request(shard: number, request: ShardRequest): Promise<unknown> {
    let reply: ShardReply;
    try {
      reply = (await this.pools[shard]!.run(request)) as ShardReply;
    } catch (e) {
      const cause = e as Error;
      throw new ShardError(shard, `shard ${shard}: ${cause?.message ?? String(e)}`, { cause });
    }
    if (reply.ok) return reply.value;
    throw rebuildError(shard, reply.error);
  }

  private shardFailed(shard: number, e: unknown): void {
    if (this.stopping) return;
    this.failed.add(shard);
    if (this.starting) return;
    const error = new ShardError(shard, `shard ${shard} failed: ${errorMessage(e)}`, { cause: e });
    // An 'error' event without a listener would throw and take the process down.
    if (this.listenerCount("error") > 0) this.emit("error", error);
    else process.emitWarning(error.message, { code: "SHARDHEAP_SHARD_FAILED" });
  }
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ms);
    timer.unref();
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

const REBUILT_ERRORS: Record<string, new (message: string) => Error> = {
  TypeError,
  RangeError,
  HeapError,
  HeapFormatError,
};

/** A shard's error on this side: shardheap's classes where possible (instanceof works), else a ShardError. */
function rebuildError(shard: number, s: SerializedError): Error {
  let error: Error;
  if (s.name === "InvalidPointerError") error = new InvalidPointerError(s.message, undefined);
  else if (s.name === "OutOfMemoryError") error = new OutOfMemoryError(s.message, s.requestedBytes ?? 0, s.report ?? "");
  else if (REBUILT_ERRORS[s.name]) error = new REBUILT_ERRORS[s.name]!(s.message);
  else error = new ShardError(shard, s.message, s.code === undefined ? undefined : { code: s.code });
  if (!(error instanceof ShardError)) {
    Object.defineProperty(error, "shard", { value: shard, enumerable: true });
  }
  if (error.name !== s.name) error.name = s.name;
  // The shard's stack, then where the submit came from.
  error.stack = `${s.stack ?? `${s.name}: ${s.message}`}\n    at <shard ${shard}>\n${(error.stack ?? "").split("\n").slice(1).join("\n")}`;
  return error;
}
