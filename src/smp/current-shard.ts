/**
 * `currentShard`: what code running inside a shard sees of it (a
 * ShardContext, task-types.ts). Set once by the shard's bootstrap
 * (shard-worker.ts) before the user's module loads; undefined on the main
 * thread and in threads that are not shards.
 */
import type { ShardContext } from "./task-types.js";

export type { ShardContext } from "./task-types.js";

// A live ESM binding: importers see the value set by the bootstrap.
export let currentShard: ShardContext | undefined;

/** @internal Called once by the shard bootstrap. */
export function setCurrentShard(context: ShardContext): void {
  currentShard = context;
}
