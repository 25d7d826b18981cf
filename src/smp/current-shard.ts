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
  /** This shard's allocator: malloc and free here. */
  readonly memory: ShardAllocator;
  /** The whole heap (every shard's memory is readable; allocate only through `memory`). */
  readonly heap: SharedHeap;
}

// A live ESM binding: importers see the value set by the bootstrap.
export let currentShard: ShardContext | undefined;

/** @internal Called once by the shard bootstrap. */
export function setCurrentShard(context: ShardContext): void {
  currentShard = context;
}
