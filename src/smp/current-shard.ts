/**
 * `currentShard`: what code running inside a shard sees of it. Set once by
 * the shard's bootstrap (shard-worker.ts) before the user's module loads;
 * undefined on the main thread and in threads that are not shards.
 */
import type { ShardAllocator } from "../memory/shard-allocator.js";
import type { SharedHeap } from "../memory/shared-heap.js";

export interface ShardContext {
  /** This shard's id, 0 .. shards - 1. */
  readonly id: number;
  /** How many shards there are. */
  readonly shards: number;
  /** This shard's allocator: malloc and free here. */
  readonly memory: ShardAllocator;
  /** The whole heap (every shard's memory is readable; allocate only through `memory`). */
  readonly heap: SharedHeap;
  /**
   * Run the module's exported function `task` on `shard` (any shard, this
   * one included) with `arg`, as Smp.submitTo does from the main thread:
   * `arg` and the result are structured-cloned, calls from this shard to
   * one shard start in the order made, the task's error comes back rebuilt.
   * Rejects with a RangeError for an unknown shard, a ShardError when the
   * shard is down.
   */
  submitTo<T = unknown>(shard: number, task: string, arg?: unknown): Promise<T>;
  /** Run `task` on every shard (this one included); results in shard order, or the first error. */
  invokeOnAll<T = unknown>(task: string, arg?: unknown): Promise<T[]>;
}

// A live ESM binding: importers see the value set by the bootstrap.
export let currentShard: ShardContext | undefined;

/** @internal Called once by the shard bootstrap. */
export function setCurrentShard(context: ShardContext): void {
  currentShard = context;
}
