/**
 * `currentShard`: what code running inside a shard sees of it (a
 * ShardContext, task-types.ts). Set once by the shard's bootstrap
 * (shard-worker.ts) before the user's module loads; undefined on the main
 * thread and in threads that are not shards. `shardContext()` is the same
 * object typed without the undefined, for code that only ever runs in a
 * shard (under strict TypeScript `currentShard.tasks()` is TS18048).
 */
import { ShardError } from "../errors.js";
import type { ShardContext } from "./task-types.js";

export type { ShardContext } from "./task-types.js";

// A live ESM binding: importers see the value set by the bootstrap.
export let currentShard: ShardContext | undefined;

/**
 * The shard this code runs in (currentShard); on a thread that is no
 * shard's, a ShardError (code ERR_SHARDHEAP_NOT_IN_SHARD, shard -1) that
 * says so.
 */
export function shardContext(): ShardContext {
  if (currentShard !== undefined) return currentShard;
  throw new ShardError(
    -1,
    "shardContext(): this code is not running in a shard (the main thread, or a thread Smp did not start): call it from a task module that Smp.start({ module }) loads",
    { code: "ERR_SHARDHEAP_NOT_IN_SHARD" },
  );
}

/** @internal Called once by the shard bootstrap. */
export function setCurrentShard(context: ShardContext): void {
  currentShard = context;
}
