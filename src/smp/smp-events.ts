/**
 * What Smp tells its listeners (Smp is an EventEmitter) and the shapes its
 * methods answer with, apart from smp.ts so that file keeps to the runtime.
 */
import type { ShardError } from "../errors.js";
import type { MemoryPressureEvent } from "./memory-pressure.js";

export interface SmpEvents {
  /**
   * A shard's worker failed outside a task or exited (its pending submitTo
   * calls reject), or stop() had to terminate a shard that had not finished
   * within the stop timeout.
   */
  error: [error: ShardError];
  /**
   * A shard whose thread died runs again on a new thread (fresh module
   * state, the same region): what the dead thread left allocated, and
   * whether it was freed (Smp.start's `orphans: "free"`); if not,
   * smp.freeOrphans(shard, { keep }) frees it.
   */
  replaced: [replacement: ShardReplacement];
  /**
   * A shard's allocated memory reached one of Smp.start's memoryPressure
   * thresholds going up (again only after it fell below): the shard, the
   * threshold, its memory and its largest sites. A line on stderr says the
   * same whether or not anyone listens (SHARDHEAP_LOG=silent mutes it).
   */
  memoryPressure: [event: MemoryPressureEvent];
}

/** A shard back on a new thread after its thread died (the 'replaced' event). */
export interface ShardReplacement {
  readonly shard: number;
  /** The objects (and their usable bytes) the dead thread left allocated when the new one took over. */
  readonly orphans: { readonly objects: number; readonly bytes: number };
  /** True when the new thread freed them before taking calls (orphans: "free"). */
  readonly freed: boolean;
}

/** What smp.freeOrphans freed. */
export interface FreedOrphans {
  /** Objects freed and their usable bytes. */
  readonly objects: number;
  readonly bytes: number;
  /** Orphans left allocated because `keep` named them. */
  readonly kept: number;
}

export interface StopOptions {
  /** ms to let running tasks finish, and then again to flush and drain, before terminating anyway. Default: Smp.start's stopTimeoutMs (10000). */
  timeoutMs?: number;
}
