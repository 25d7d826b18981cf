/**
 * The main side of every shard's JavaScript heap (Smp's
 * setJsHeapProfiling, jsHeapProfile, jsHeapStats): a shard's JS heap is
 * its own thread's V8 isolate, so switching its profiler and reading its
 * profile go to that thread as control requests (control-messages.ts; the shard
 * answers with js-heap-profiler.ts), while its heap figures are read from
 * the board (js-heap-board.ts), with no request. The main thread's shard
 * (mainShard) is this thread: its profiler runs here, its figures are
 * read as they are now.
 *
 * The rate asked for each shard is kept on the board, so a shard whose
 * thread dies resumes profiling at it on its new thread (its samples
 * start again: they lived in the dead isolate).
 */
import { ShardError } from "../errors.js";
import type { HeapProfile } from "../memory/heap-profile.js";
import { JsHeapBoard, type JsHeapStats } from "./js-heap-board.js";
import { JsHeapProfiler } from "./js-heap-profiler.js";
import { jsHeapprofRate } from "./options.js";
import type { ShardRequest } from "./control-messages.js";

/** What JsHeaps needs of its Smp. */
export interface JsHeapHost {
  /** Worker shards, 0 to shards - 1. */
  readonly shards: number;
  /** The main thread's shard id (= shards), when it has one. */
  readonly mainShard: number | undefined;
  /** Send a control request to a worker shard (rejects once stop() has begun). */
  request(shard: number, request: ShardRequest): Promise<unknown>;
  /** The error a call on the main thread's shard meets once stop() has begun; undefined before. */
  stopped(call: string): ShardError | undefined;
}

export class JsHeaps {
  readonly board: JsHeapBoard;
  /** The main thread's own profiler (mainShard), or undefined. */
  private readonly main: JsHeapProfiler | undefined;

  /** A board for `regions` shards, each asked for `startRate` (what the shards start with). */
  static board(regions: number, startRate: number): JsHeapBoard {
    const board = new JsHeapBoard(regions);
    for (let s = 0; s < regions; s++) board.setRate(s, startRate);
    return board;
  }

  constructor(
    private readonly host: JsHeapHost,
    board: JsHeapBoard,
  ) {
    this.board = board;
    this.main = host.mainShard === undefined ? undefined : new JsHeapProfiler(host.mainShard);
  }

  /** Start the main thread's profiler at the start-up rate (the workers start theirs as they load). */
  async start(): Promise<void> {
    if (this.main) await this.main.setRate(this.board.rate(this.main.shard));
  }

  /** At Smp.stop: the main thread's sampler off (it would go on costing after the runtime ends); its last profile stays readable. */
  async stop(): Promise<void> {
    await this.main?.close();
  }

  /** Smp.setJsHeapProfiling: switch `shard`'s (or every shard's) JS heap profiler. */
  async set(shard: number | "all", rate: boolean | number | string): Promise<void> {
    const bytes = jsHeapprofRate(rate, "setJsHeapProfiling: rate");
    const shards = shard === "all" ? [...Array(this.board.regions).keys()] : [this.checkShard(shard, "setJsHeapProfiling")];
    await Promise.all(
      shards.map((s) => {
        if (s === this.main?.shard) {
          const stopped = this.host.stopped("setJsHeapProfiling");
          if (stopped) return Promise.reject(stopped);
          this.board.setRate(s, bytes);
          return this.main.setRate(bytes);
        }
        // On the board first: a thread that replaces this one meanwhile starts at the new rate.
        this.board.setRate(s, bytes);
        return this.host.request(s, { kind: "jsheapprof", rate: bytes });
      }),
    );
  }

  /** Smp.jsHeapProfile: the sampled objects live in `shard`'s JS heap. */
  async profile(shard: number): Promise<HeapProfile> {
    this.checkShard(shard, "jsHeapProfile");
    if (shard === this.main?.shard) return this.main.profile();
    return (await this.host.request(shard, { kind: "jsheapProfile" })) as HeapProfile;
  }

  /** Smp.jsHeapStats: `shard`'s V8 heap figures (the main thread's as they are now); undefined before the shard first posts them. */
  stats(shard: number): JsHeapStats | undefined {
    this.checkShard(shard, "jsHeapStats");
    if (shard !== this.main?.shard) return this.board.read(shard);
    const m = process.memoryUsage();
    return { t: Date.now(), used: m.heapUsed, total: m.heapTotal, external: m.external, arrayBuffers: m.arrayBuffers, sampleRate: this.board.rate(shard) };
  }

  private checkShard(shard: number, call: string): number {
    const last = this.board.regions - 1;
    if (!Number.isInteger(shard) || shard < 0 || shard > last) {
      const main = this.main === undefined ? "" : ` (${this.main.shard}: the main thread's)`;
      throw new RangeError(`${call}: shard must be${call === "setJsHeapProfiling" ? ' "all" or' : ""} an integer from 0 to ${last}${main}, got ${String(shard)}`);
    }
    return shard;
  }
}
