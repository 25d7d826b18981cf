/**
 * Smp: shards on worker threads, the main side (Seastar's smp). One
 * single-thread piscina pool per shard, so each shard's region has one
 * thread; the worker side is shard-worker.ts. Pools run with atomics
 * "disabled": the default "sync" mode parks an idle worker in Atomics.wait,
 * which would stop the shard's event loop (and with it the doorbells,
 * timers and sockets) between requests.
 *
 * Tasks do not go through piscina: submitTo and invokeOnAll travel through
 * the messaging buffer (queue-layout.ts), this thread being one more
 * endpoint (endpoint.ts) beside the shards, who call each other the same
 * way. Piscina keeps the lifecycle: starting the threads, replacing one
 * that dies, terminating them, and three control requests (init, heapprof,
 * stop: control-messages.ts).
 *
 * A shard that dies: every call pending on it (from here or from another
 * shard) rejects with ShardError and calls to it fail at once; piscina
 * starts a fresh thread for it, and once every endpoint has acknowledged
 * the death (queue-layout ACK), this thread empties the shard's rings and
 * brings it back (same region and allocations, fresh module state).
 *
 * With `mainShard`, the heap has one more region, the main thread's own
 * (main-shard.ts): smp.memory allocates there from this thread.
 */
import { EventEmitter } from "node:events";
import { fileURLToPath } from "node:url";
import type { TransferListItem } from "node:worker_threads";
import { Piscina } from "piscina";
import { ShardError } from "../errors.js";
import { rejectUnknownKeys } from "../parse.js";
import { SharedHeap } from "../memory/shared-heap.js";
import "../memory/profiler/plug-in.js";
import "../memory/heap-image/plug-in.js";
import type { MemoryStats } from "../memory/memory-stats.js";
import { fillSmpOptions, heapprofRate, timeoutMs, type FilledSmpOptions, type SmpOptions } from "./options.js";
import type { HeapProfile, PeakProfile, SiteTimeline } from "../memory/heap-profile.js";
import type { ShardAllocator } from "../memory/shard-allocator.js";
import { MainShard } from "./main-shard.js";
import { decodeError } from "./error-codec.js";
import { Endpoint } from "./endpoint.js";
import { wakeEndpoint } from "./endpoint-loop.js";
import { errorMessage } from "./call-errors.js";
import { describeRequest, type ShardBootData, type ShardReply, type ShardRequest, type ShardTakeover } from "./control-messages.js";
import { JsHeaps } from "./js-heap.js";
import type { JsHeapBoard, JsHeapStats } from "./js-heap-board.js";
import { formatSize } from "../units.js";
import {
  ackWord,
  createQueueBuffer,
  endpointWord,
  EPOCH,
  MEMBERSHIP,
  queueGeometry,
  resetRingsOf,
  STATE,
  STATE_DOWN,
  STATE_GONE,
  STATE_UP,
  type QueueGeometry,
} from "./queue-layout.js";
import { MainSideLinks } from "./side-links.js";
import { createListenTable, ListenTable } from "./listen-table.js";
import { invokeOnAllVia, submitVia } from "./submit.js";
import type { NoTaskModuleNamed, Tasks } from "./task-types.js";
import { typedTasks } from "./typed-tasks.js";
import { AppStatsSources, type AppStats, type AppStatsReader } from "./app-stats.js";
import { refusedExecArgv, settlesBy } from "./smp-support.js";
import type { FreedOrphans, ShardReplacement, SmpEvents, StopOptions } from "./smp-events.js";
import { HeapWatch } from "./heap-watch.js";
import { logPressure, type MemoryPressureEvent } from "./memory-pressure.js";

export type { FreedOrphans, ShardReplacement, SmpEvents, StopOptions, MemoryPressureEvent };

/** What piscina starts each shard thread with: a CommonJS file that import()s shard-worker.js (shard-entry.cts says why). */
const WORKER_FILE = fileURLToPath(new URL("./shard-entry.cjs", import.meta.url));
/** How often a restarting shard's acknowledgements are checked. */
const REVIVAL_POLL_MS = 2;

export class Smp extends EventEmitter<SmpEvents> {
  readonly heap: SharedHeap;
  /** Worker shards (ids 0 to shards - 1); the main thread's region, when there is one, is one more (mainShard). */
  readonly shards: number;
  /**
   * The id of the main thread's own region (Smp.start({ mainShard: true })):
   * `shards`, the last of the heap's regions; undefined without it.
   */
  readonly mainShard: number | undefined;
  readonly options: Readonly<FilledSmpOptions>;
  private readonly pools: Piscina[];
  /** Per shard, the control requests sent and not yet answered: stop() lets them finish. */
  private readonly inFlight: Array<Set<Promise<unknown>>>;
  /** This thread's end of the messaging buffer. */
  private readonly endpoint: Endpoint;
  private readonly links: MainSideLinks;
  private readonly geometry: QueueGeometry;
  private readonly queues: Int32Array;
  /** Shards marked down in the messaging buffer, waiting for a fresh thread. */
  private readonly down = new Set<number>();
  private revivalTimer: NodeJS.Timeout | undefined;
  private stopping: Promise<void> | undefined;
  /** Set before any thread is terminated, so its exit is not reported as a failure. */
  private terminating = false;
  private stopped = false;
  /** While start() runs, failures are its to report, not the 'error' event's. */
  private starting = true;
  /** Shards whose thread has gone and whose 'error' (the cause) may follow: threadGone. */
  private readonly exitsToReport = new Set<number>();
  /** Shards whose worker died or never started: stop() does not wait for them. */
  private readonly failed = new Set<number>();
  /** What the apps running here publish about themselves (app-stats.ts). */
  private readonly apps = new AppStatsSources();
  /** smp.tasks(): one object for every type argument (they exist only at compile time). */
  private typed: Tasks<object> | undefined;
  /** The main thread's region (mainShard), or undefined. */
  private readonly main: MainShard | undefined;
  /** Memory pressure and the timelines' ticks, watched from this thread (heap-watch.ts). */
  private readonly watch: HeapWatch;
  /** Every shard's JS heap: its profiler switch and profile, its V8 figures (js-heap.ts). */
  private readonly jsHeaps: JsHeaps;
  /** The ports the shards listen on together: a dead shard leaves them (listen-table.ts). */
  private readonly listens: ListenTable;

  private constructor(options: FilledSmpOptions, heap: SharedHeap, main: MainShard | undefined, pools: Piscina[], geometry: QueueGeometry, queues: SharedArrayBuffer, jsHeapBoard: JsHeapBoard, watch: HeapWatch, listens: SharedArrayBuffer) {
    super();
    this.listens = new ListenTable(listens, options.shards);
    this.watch = watch;
    this.options = Object.freeze(options);
    this.heap = heap;
    this.shards = options.shards;
    this.main = main;
    this.mainShard = main?.id;
    const stopped = (call: string): ShardError | undefined => (this.stopping ? this.stoppedError(this.main!.id, call) : undefined);
    this.jsHeaps = new JsHeaps({ shards: options.shards, mainShard: main?.id, request: (s, r) => this.request(s, r), stopped }, jsHeapBoard);
    this.pools = pools;
    this.inFlight = pools.map(() => new Set());
    this.geometry = geometry;
    this.queues = new Int32Array(queues);
    this.links = new MainSideLinks(options.shards);
    this.endpoint = new Endpoint({
      buffer: queues,
      geometry,
      self: options.shards,
      shards: options.shards,
      links: this.links,
      keepAlive: true,
      maxPendingCalls: options.maxPendingCalls,
    });
    this.links.attach(this.endpoint);
    this.endpoint.start();
    pools.forEach((pool, shard) => {
      pool.on("error", (e: unknown) => this.shardFailed(shard, e));
      pool.on("workerDestroy", () => this.threadGone(shard));
      // piscina replaces a worker that died after starting: the shard lives
      // on in a fresh thread (same region and allocations, fresh module state).
      pool.on("workerCreate", () => {
        if (this.down.has(shard)) this.scheduleRevival();
      });
    });
  }

  /**
   * Start `shards` worker threads over one heap of `memoryPerShard` bytes
   * per shard, apply `heapprof`, and load `module` in every shard. Rejects,
   * naming the shard, when a module fails to load or takes longer than
   * `loadTimeoutMs` (every thread is then terminated).
   */
  static async start(o: SmpOptions = {}): Promise<Smp> {
    const options = fillSmpOptions(o);
    const regions = options.shards + (options.mainShard ? 1 : 0);
    const heap = SharedHeap.create({ shards: regions, shardBytes: options.memoryPerShard, heapprofSites: options.heapprofSites, debugPointers: options.debugPointers });
    // Taken before any worker exists: no module's top-level code can take it first.
    const main = options.mainShard ? new MainShard(heap, options.shards, options.heapprofRate) : undefined;
    // Thresholds in every region before any shard allocates (memory-pressure.ts).
    const watch = new HeapWatch(heap, options);
    const geometry = queueGeometry(options.shards + 1, options.queueBytes);
    const queues = createQueueBuffer(geometry);
    const jsHeapBoard = JsHeaps.board(regions, options.jsHeapprofRate);
    const listens = createListenTable(options.shards);
    const pools: Piscina[] = [];
    for (let shard = 0; shard < options.shards; shard++) {
      const workerData: ShardBootData = {
        buffer: heap.buffer,
        memory: heap.memory,
        shard,
        shards: options.shards,
        queues,
        ringBytes: options.queueBytes,
        heapprofRate: options.heapprofRate,
        module: options.module,
        idleTrimMs: options.idleTrimMs,
        maxPendingCalls: options.maxPendingCalls,
        orphans: options.orphans,
        jsHeapBoard: jsHeapBoard.buffer,
        listens,
      };
      try {
        pools.push(
          new Piscina({
            filename: WORKER_FILE,
            minThreads: 1,
            maxThreads: 1,
            atomics: "disabled",
            idleTimeout: Infinity,
            concurrentTasksPerWorker: 64,
            workerData,
            // Left out, Node gives the thread the parent's flags (an explicit list is checked more strictly).
            ...(options.execArgv === undefined ? {} : { execArgv: [...options.execArgv] }),
          }),
        );
      } catch (e) {
        // Node checks a thread's flags as it makes the thread, inside the pool's constructor.
        await Promise.allSettled(pools.map((pool) => pool.destroy()));
        throw refusedExecArgv(e) ?? e;
      }
    }
    const smp = new Smp(options, heap, main, pools, geometry, queues, jsHeapBoard, watch, listens);
    // A shard fails to start by rejecting its init request (its module
    // threw), by its worker dying before it answers (piscina then emits
    // 'error' and leaves the request pending), or by never answering (a
    // top-level await that never settles): watch for all three.
    const loadedShards = new Set<number>();
    const inits = pools.map((_, shard) => smp.init(shard).then(() => void loadedShards.add(shard)));
    let timer: NodeJS.Timeout | undefined;
    const failure = new Promise<never>((_, reject) => {
      const fail = (shard: number, cause: unknown): void => {
        const root = cause instanceof ShardError && cause.cause !== undefined ? cause.cause : cause;
        reject(new ShardError(shard, `shard ${shard} failed to start: ${errorMessage(root)}`, { cause }));
      };
      pools.forEach((pool, shard) => {
        pool.once("error", (e: unknown) => fail(shard, e));
        inits[shard]!.catch((e: unknown) => fail(shard, e));
      });
      if (options.loadTimeoutMs !== Infinity) {
        timer = setTimeout(() => {
          const late = [...Array(options.shards).keys()].filter((s) => !loadedShards.has(s));
          const others = late.length > 1 ? ` (nor did shard${late.length > 2 ? "s" : ""} ${late.slice(1).join(", ")})` : "";
          reject(new ShardError(late[0]!, `shard ${late[0]} failed to start: its module did not finish loading within ${options.loadTimeoutMs} ms (loadTimeoutMs)${others}`));
        }, options.loadTimeoutMs);
      }
    });
    const loaded = Promise.all([...inits, smp.jsHeaps.start()]);
    try {
      await Promise.race([loaded, failure]);
    } catch (e) {
      smp.starting = false;
      // Nobody holds this heap: end the threads at once, loading or not.
      smp.stopping = smp.terminateThreads();
      await smp.stopping;
      throw e;
    } finally {
      clearTimeout(timer);
      loaded.catch(() => undefined);
      failure.catch(() => undefined);
    }
    smp.starting = false;
    main?.watch();
    watch.start((e) => smp.pressure(e));
    return smp;
  }

  /**
   * The main thread's own allocator (Smp.start({ mainShard: true })): its
   * region, id `mainShard`, belongs to the thread that called start, which
   * allocates there without a task; shards read its objects and free them
   * (cross-shard frees this thread drains). Still this thread's after
   * stop(). Without the option a ShardError (code
   * ERR_SHARDHEAP_NO_MAIN_SHARD) says how to get one.
   */
  get memory(): ShardAllocator {
    if (this.main === undefined) {
      throw new ShardError(
        this.shards,
        "smp.memory: the main thread has no shard of its own in this runtime: start it with Smp.start({ mainShard: true }) to allocate from this thread (or allocate in a task on a shard)",
        { code: "ERR_SHARDHEAP_NO_MAIN_SHARD" },
      );
    }
    return this.main.memory;
  }

  /**
   * Run the module's exported function `task` on `shard` with `arg`
   * (structured-cloned; the heap is shared, so pass pointers). Resolves with
   * its result; rejects with the task's error, every own field kept
   * (shardheap's own classes and the built-in ones rebuilt, so `instanceof`
   * works; any other class arrives as a ShardError with the original name),
   * or with a ShardError naming the task when its result cannot be cloned
   * or the shard dies first. An unknown shard is a RangeError, an argument
   * that cannot be cloned a TypeError, both before anything is sent. After
   * stop() it rejects with a ShardError and starts nothing.
   */
  submitTo<T = unknown>(shard: number, task: string, arg?: unknown): Promise<T> {
    if (this.stopping) return this.refuse(shard, () => `submitTo(${String(shard)}, ${JSON.stringify(task)})`, task);
    return submitVia<T>(this.endpoint, shard, task, arg);
  }

  /**
   * Free what `shard`'s dead threads left allocated (the 'replaced'
   * event's orphans), but the objects in `keep`: gather first, from every
   * shard that may hold them, the pointers into that memory still in use,
   * and keep them; every other pointer into it is invalid afterwards, as
   * after any free. Runs on the shard's current thread, between its
   * calls. Resolves with what was freed; { objects: 0 } when nothing was
   * left. RangeError for an unknown shard, TypeError for a `keep` that is
   * not an iterable of numbers; a ShardError once stop() has begun.
   */
  async freeOrphans(shard: number, o: { keep?: Iterable<number> } = {}): Promise<FreedOrphans> {
    if (!Number.isInteger(shard) || shard < 0 || shard >= this.shards) {
      throw new RangeError(`freeOrphans: shard must be an integer from 0 to ${this.shards - 1}, got ${String(shard)}`);
    }
    if (o === null || typeof o !== "object") throw new TypeError("freeOrphans: options must be an object");
    rejectUnknownKeys(o, ["keep"], "freeOrphans: options");
    const keep = o.keep === undefined ? [] : [...(o.keep as Iterable<unknown>)];
    if (!keep.every((p): p is number => typeof p === "number")) throw new TypeError("freeOrphans: keep must hold pointers (numbers)");
    return (await this.request(shard, { kind: "freeOrphans", keep })) as FreedOrphans;
  }

  /** Run `task` on every shard at once; resolves with the results in shard order, or rejects with the first error. */
  invokeOnAll<T = unknown>(task: string, arg?: unknown): Promise<T[]> {
    if (this.stopping) return this.refuse(0, () => `invokeOnAll(${JSON.stringify(task)})`, task);
    return invokeOnAllVia<T>(this.endpoint, task, arg);
  }

  /**
   * The module's tasks as typed calls (task-types.ts):
   * `smp.tasks<typeof import("./tasks.js")>()` gives `put(shard, arg)` with
   * put's argument and result types, and `put.onAll(arg)` (invokeOnAll).
   * They are submitTo and invokeOnAll underneath, with the same checks,
   * errors and order. The same object every time.
   */
  tasks<M extends object = NoTaskModuleNamed>(): Tasks<M> {
    this.typed ??= typedTasks(this);
    return this.typed as Tasks<M>;
  }

  /** RangeError unless `shard` is "all" or one of the heap's regions (the main thread's too). */
  private checkShard(shard: number | "all", op: string): void {
    const last = this.heap.shards - 1;
    if (shard !== "all" && (!Number.isInteger(shard) || shard < 0 || shard > last)) {
      const main = this.main === undefined ? "" : ` (${this.main.id}: the main thread's)`;
      throw new RangeError(`${op}: shard must be "all" or an integer from 0 to ${last}${main}, got ${String(shard)}`);
    }
  }

  /** A memory-pressure crossing (heap-watch.ts): the event, and the line on stderr either way. */
  private pressure(e: MemoryPressureEvent): void {
    logPressure(e, e.shard === this.mainShard ? `main thread (shard ${e.shard})` : `shard ${e.shard}`);
    this.emit("memoryPressure", e);
  }

  /** A call made once stop() has begun: its task name is still checked first. */
  private refuse(shard: number, call: () => string, task: unknown): Promise<never> {
    if (typeof task !== "string" || task.length === 0) return Promise.reject(new TypeError(`${call()}: task must be a function name`));
    return Promise.reject(this.stoppedError(shard, call()));
  }

  /**
   * Switch heap profiling on `shard` or on "all" shards at run time: true
   * or 1 records every allocation, N samples one allocation per N bytes on
   * average (a size: 524288 or "512KiB"), false or 0 turns it off. The
   * main thread's region (mainShard) is one of them, switched here on this
   * thread. Resolves once every named shard has applied it; rejects with a
   * ShardError once stop() has begun.
   */
  async setHeapProfiling(shard: number | "all", rate: boolean | number | string): Promise<void> {
    const bytes = heapprofRate(rate, "setHeapProfiling: rate");
    this.checkShard(shard, "setHeapProfiling");
    if (this.main !== undefined && (shard === "all" || shard === this.main.id)) {
      if (this.stopping) throw this.stoppedError(this.main.id, "setHeapProfiling");
      this.main.memory.setHeapProfilingSampleRate(bytes);
    }
    const shards = shard === "all" ? [...Array(this.shards).keys()] : shard === this.mainShard ? [] : [shard];
    await Promise.all(shards.map((s) => this.request(s, { kind: "heapprof", rate: bytes })));
  }

  /**
   * Switch the JS heap profiler (V8's sampler in that shard's isolate; mainShard: this thread's) on `shard` or "all":
   * N bytes per sample on average ("64KiB"), true 512 KiB, false / 0 off; resolves once applied (js-heap.ts).
   */
  setJsHeapProfiling(shard: number | "all", rate: boolean | number | string): Promise<void> {
    return this.jsHeaps.set(shard, rate);
  }

  /** The sampled objects still live in `shard`'s JS heap (its thread answers), as a HeapProfile every renderer reads. */
  jsHeapProfile(shard: number): Promise<HeapProfile> {
    return this.jsHeaps.profile(shard);
  }

  /** `shard`'s V8 heap figures as it last posted them (every 500 ms, no shard involved); undefined before its first. */
  jsHeapStats(shard: number): JsHeapStats | undefined {
    return this.jsHeaps.stats(shard);
  }

  /** One shard's heap profile (the main thread's region too), or all shards' merged; read from the buffer, no shard involved. */
  heapProfile(shard?: number): HeapProfile {
    return this.heap.heapProfile(shard);
  }

  /**
   * The sites live at shard `shard`'s profiled peak, or at the heap-wide
   * peak (the moment the shards' sum was highest) when no shard is named;
   * from the buffer (SharedHeap.peakProfile).
   */
  peakProfile(shard?: number): PeakProfile {
    return this.heap.peakProfile(shard);
  }

  /**
   * Start the peak of `shard`, or of every shard and the heap-wide one
   * ("all"), again from now: each shard's own thread resets its peak (the
   * main thread's region here). Resolves once every named shard has.
   */
  async resetPeak(shard: number | "all"): Promise<void> {
    this.checkShard(shard, "resetPeak");
    if (this.main !== undefined && (shard === "all" || shard === this.main.id)) {
      if (this.stopping) throw this.stoppedError(this.main.id, "resetPeak");
      this.main.memory.resetPeak();
    }
    const shards = shard === "all" ? [...Array(this.shards).keys()] : shard === this.mainShard ? [] : [shard];
    await Promise.all(shards.map((s) => this.request(s, { kind: "resetPeak" })));
    if (shard === "all") this.heap.resetHeapPeak();
  }

  /** The largest sites' live bytes over time, of `shard` or all shards summed per tick (SharedHeap.timeline). */
  timeline(shard?: number): SiteTimeline {
    return this.heap.timeline(shard);
  }

  /** Save a heap image (SharedHeap.saveImage) while the shards run: it reads the buffer only, after a timeline tick. */
  saveImage(path: string): Promise<void> {
    if (!this.stopped) this.watch.tick();
    return this.heap.saveImage(path);
  }

  /** One shard's statistics (the main thread's region too), or all shards' summed; read from the buffer, no shard involved. */
  stats(shard?: number): MemoryStats {
    return this.heap.stats(shard);
  }

  /**
   * Publish an app's own figures (app-stats.ts): `read` returns figure
   * names to numbers or to `{ value, unit?: "count" | "bytes" | "ratio",
   * kind?: "counter" | "gauge", help? }`, cheaply and synchronously (it
   * runs on this thread whenever appStats() is called: the admin server's
   * GET /v1/app/stats and the dashboard's app panel, about once a second
   * while a page is open). Replaces what `app` published before; returns
   * the function that withdraws it. stop() withdraws every app.
   */
  publishAppStats(app: string, read: AppStatsReader): () => void {
    return this.apps.publish(app, read);
  }

  /** Every published app's figures, read now; a reader that fails gives its app an `error`, never a throw. */
  appStats(): AppStats[] {
    return this.apps.read();
  }

  /**
   * Stop the runtime without cutting anything off halfway:
   *   1. new calls (submitTo, invokeOnAll, setHeapProfiling) reject with a
   *      ShardError from now on; calls already made run to completion;
   *   2. then every shard flushes its batched remote frees, drains its
   *      inbox and parks its thread;
   *   3. then the threads are terminated, and this thread drains what was
   *      pushed while they stopped.
   * A shard that has not finished 1 within `timeoutMs` (default: Smp.start's
   * stopTimeoutMs, 10 s), or then 2 within `timeoutMs` again, is terminated
   * anyway, and an 'error' event (a process warning without a listener)
   * names it: whatever it was doing was cut off. Afterwards each shard's
   * memory holds exactly what the user left live. Idempotent (later calls
   * share the first one's outcome); completes even when shards have died.
   */
  stop(o: StopOptions = {}): Promise<void> {
    if (this.stopping === undefined) {
      let timeout: number;
      try {
        rejectUnknownKeys(o, ["timeoutMs"], "stop: options");
        timeout = timeoutMs(o.timeoutMs ?? this.options.stopTimeoutMs, "stop: timeoutMs");
      } catch (e) {
        return Promise.reject(e);
      }
      this.apps.clear();
      this.stopping = this.quiesceAndTerminate(timeout);
    }
    return this.stopping;
  }

  private async quiesceAndTerminate(timeout: number): Promise<void> {
    const deadline = (): number | undefined => (timeout === Infinity ? undefined : performance.now() + timeout);
    const shards = [...Array(this.shards).keys()];
    clearTimeout(this.revivalTimer);
    // 1. Every call already made finishes (a task that yields would
    // otherwise be terminated between two allocations, or inside one).
    const callsDone = deadline();
    const finished = await Promise.all(
      shards.map((s) =>
        this.failed.has(s) ? false : settlesBy(Promise.allSettled([...this.inFlight[s]!, this.endpoint.settledOn(s)]), callsDone),
      ),
    );
    // 2. Only once no task runs anywhere (no more remote frees are coming
    // from tasks), each shard flushes, drains and parks. A fresh timeout: a
    // stuck shard must not use up the healthy ones' time to drain.
    const drained = deadline();
    const quiesced = await Promise.all(
      shards.map((s) => (finished[s] ? settlesBy(this.request(s, { kind: "stop" }), drained) : false)),
    );
    for (const s of shards) {
      if (quiesced[s] || this.failed.has(s)) continue;
      const what = finished[s] ? "flush and drain" : `finish its ${this.inFlight[s]!.size + this.endpoint.pendingOn(s)} running call(s)`;
      this.report(new ShardError(s, `shard ${s} did not ${what} within stop()'s ${timeout} ms timeout: terminating it; whatever it was doing was cut off`));
    }
    await this.terminateThreads();
    // The shard threads are gone, so this thread takes every shard over and
    // recovers on their behalf: adopting a shard pushes the remote-free
    // batches its thread left in its outbox (a terminated or crashed shard
    // dies holding some), then every inbox is drained (frees pushed after a
    // shard's last drain, and those batches).
    // A shard terminated at its timeout may have died between claiming an
    // object and chaining it: no thread runs now, so those are found too.
    const adopted = [...Array(this.shards).keys()].map((shard) => this.heap.adoptShard(shard));
    this.heap.recoverLostFrees();
    for (const shard of adopted) shard.drainCrossShardFrees();
    // The main thread's region was this thread's all along: its inbox
    // (frees the shards pushed since its last ring, and any recovered) last.
    this.main?.finish();
    // A last timeline tick and pressure look, of the memory as stop leaves it.
    this.watch.stop();
    await this.jsHeaps.stop();
  }

  private async terminateThreads(): Promise<void> {
    this.terminating = true;
    clearTimeout(this.revivalTimer);
    await Promise.allSettled(this.pools.map((pool) => pool.destroy()));
    this.stopped = true;
    // Whatever was still pending (a shard cut off by the stop timeout) ends here.
    this.endpoint.stop((shard, task, started) =>
      started
        ? new ShardError(shard, `shard ${shard}: task ${JSON.stringify(task)} was cut off: the runtime has stopped; it may have run`, { code: "ERR_SHARDHEAP_CALL_MAY_HAVE_RUN" })
        : new ShardError(shard, `shard ${shard}: task ${JSON.stringify(task)} never started: the runtime has stopped`, { code: "ERR_SHARDHEAP_CALL_NOT_STARTED" }),
    );
    this.links.closeControls();
  }

  /** Join shard `shard`'s (fresh) thread to the messaging buffer and load its module. */
  private init(shard: number): Promise<unknown> {
    const epoch = Atomics.load(this.queues, endpointWord(this.geometry, shard) + EPOCH);
    const control = this.links.openControl(shard, epoch);
    return this.request(shard, { kind: "init", epoch, control }, [control]);
  }

  private stoppedError(shard: number, call: string): ShardError {
    return new ShardError(shard, `${call}: the runtime ${this.stopped ? "has stopped" : "is stopping"}`);
  }

  /** Send one control request to a shard and decode its answer; tracked so stop() can wait for it. */
  private request(shard: number, request: ShardRequest, transferList: TransferListItem[] = []): Promise<unknown> {
    // Past this point a stopped pool would start a fresh thread (piscina
    // replaces destroyed workers): only stop's own request may pass.
    if (this.stopping && request.kind !== "stop") return Promise.reject(this.stoppedError(shard, describeRequest(request)));
    const answer = this.send(shard, request, transferList);
    const running = this.inFlight[shard]!;
    running.add(answer);
    const done = (): void => void running.delete(answer);
    answer.then(done, done);
    return answer;
  }

  private async send(shard: number, request: ShardRequest, transferList: TransferListItem[]): Promise<unknown> {
    let reply: ShardReply;
    try {
      reply = (await this.pools[shard]!.run(request, { transferList })) as ShardReply;
    } catch (e) {
      throw new ShardError(shard, `shard ${shard}: ${errorMessage(e)}`, { cause: e });
    }
    if (reply.ok) return reply.value;
    const thrown = reply.thrown;
    if (thrown.kind === "error") {
      const error = decodeError(thrown.error, ShardError);
      if (!("shard" in error)) Object.defineProperty(error, "shard", { value: shard, enumerable: true, writable: true, configurable: true });
      throw error;
    }
    throw new ShardError(shard, `shard ${shard}: ${describeRequest(request)} threw ${thrown.kind === "value" ? String(thrown.value) : thrown.description}`);
  }

  /**
   * piscina announces a thread that died of an uncaught error twice:
   * 'workerDestroy' and then, in the same call, 'error' with the error.
   * The exit is reported a microtask later, and only when no 'error' came
   * with it, so one crash is one 'error' event with the real message.
   */
  private threadGone(shard: number): void {
    this.exitsToReport.add(shard);
    queueMicrotask(() => {
      if (this.exitsToReport.delete(shard)) this.shardFailed(shard, new Error("its worker thread exited"));
    });
  }

  private shardFailed(shard: number, e: unknown): void {
    this.exitsToReport.delete(shard);
    if (this.stopping || this.terminating) return;
    this.failed.add(shard);
    this.markDown(shard);
    if (this.starting) return;
    this.report(new ShardError(shard, `shard ${shard} failed: ${errorMessage(e)}`, { cause: e }));
  }

  /**
   * Tell every endpoint that `shard`'s thread is gone: a new EPOCH, STATE
   * DOWN, MEMBERSHIP bumped, every sleeping endpoint rung. Each one then
   * rejects its calls pending on the shard and acknowledges.
   */
  private markDown(shard: number): void {
    if (this.down.has(shard)) return;
    this.down.add(shard);
    this.listens.forgetShard(shard); // its thread closed its listening handles: the others stop waiting for its turns
    const w = endpointWord(this.geometry, shard);
    Atomics.store(this.queues, w + STATE, STATE_DOWN);
    Atomics.add(this.queues, w + EPOCH, 1);
    this.announceMembership();
  }

  private announceMembership(): void {
    Atomics.add(this.queues, MEMBERSHIP, 1);
    for (let e = 0; e < this.geometry.endpoints; e++) wakeEndpoint(this.queues, this.geometry, e);
    this.endpoint.membershipChanged();
  }

  private scheduleRevival(): void {
    if (this.revivalTimer !== undefined || this.stopping) return;
    this.revivalTimer = setTimeout(() => {
      this.revivalTimer = undefined;
      this.revive();
    }, REVIVAL_POLL_MS);
  }

  /**
   * Bring back the shards that are down and have a fresh thread, once
   * every other live endpoint has acknowledged their death (so none still
   * reads or writes their rings): empty their rings, init the new thread,
   * then mark them UP.
   */
  private revive(): void {
    if (this.stopping) return;
    let waiting = false;
    for (const shard of [...this.down]) {
      const epoch = Atomics.load(this.queues, endpointWord(this.geometry, shard) + EPOCH);
      let acked = true;
      for (let e = 0; e < this.geometry.endpoints && acked; e++) {
        if (e === shard || this.down.has(e)) continue;
        acked = Atomics.load(this.queues, ackWord(this.geometry, e, shard)) === epoch;
      }
      if (!acked) {
        waiting = true;
        continue;
      }
      this.down.delete(shard);
      resetRingsOf(this.geometry, this.queues, shard);
      this.init(shard).then(
        (takeover) => {
          if (this.stopping) return;
          this.failed.delete(shard);
          Atomics.store(this.queues, endpointWord(this.geometry, shard) + STATE, STATE_UP);
          this.announceMembership();
          this.replaced(shard, takeover as ShardTakeover);
        },
        (e: unknown) => {
          if (this.stopping) return;
          // Calls waiting for the new thread reject; later ones at once.
          Atomics.store(this.queues, endpointWord(this.geometry, shard) + STATE, STATE_GONE);
          this.announceMembership();
          this.report(new ShardError(shard, `shard ${shard} could not restart: ${errorMessage(e)}`, { cause: e }));
        },
      );
    }
    if (waiting) this.scheduleRevival();
  }

  /**
   * The 'replaced' event. Orphans kept with nobody listening would be
   * kept silently, for ever: a process warning says so, and how to free them.
   */
  private replaced(shard: number, takeover: ShardTakeover): void {
    const replacement: ShardReplacement = { shard, orphans: takeover.orphans, freed: takeover.freed };
    if (this.listenerCount("replaced") > 0) this.emit("replaced", replacement);
    else if (!takeover.freed && takeover.orphans.objects > 0) {
      process.emitWarning(
        `shard ${shard} runs on a new thread; its dead thread left ${takeover.orphans.objects} objects (${formatSize(takeover.orphans.bytes)}) allocated: ` +
          `smp.freeOrphans(${shard}, { keep }) frees them, or Smp.start({ orphans: "free" }) at every replacement`,
        { code: "SHARDHEAP_ORPHANS" },
      );
    }
  }

  /** An 'error' event, or a process warning when nobody listens (an unheard 'error' event would throw and take the process down). */
  private report(error: ShardError): void {
    if (this.listenerCount("error") > 0) this.emit("error", error);
    else process.emitWarning(error.message, { code: "SHARDHEAP_SHARD_FAILED" });
  }
}
