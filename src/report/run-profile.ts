/**
 * The heap profile a command prints when its run ends (`shardheap stress`
 * and `shardheap memcached` at Ctrl-C or the end of their time): whether
 * the profiler ran at all, and the tree to print when it did. One place,
 * so both commands tell the same story about a profiler switched on or off
 * at run time through the admin API.
 */
import type { HeapProfile } from "../memory/heap-profile.js";
import { formatTree } from "./tree.js";

/**
 * Whether the profiler ran during the run: on at the start (`startRate`,
 * the command's --heapprof), on now on some shard (the profile's rate is
 * not 0: -1 when the shards differ, so at least one is on), or sites left
 * from a time it was on.
 */
export function profilerRan(startRate: number, profile: HeapProfile): boolean {
  return startRate > 0 || profile.sampleRate !== 0 || profile.sites.length > 0;
}

/** The end-of-run tree: a heading, then every branch of at least 1% of the live bytes. */
export function formatRunProfile(profile: HeapProfile): string {
  return `Heap profile (live bytes, all shards; branches under 1% left out):\n${formatTree(profile, { minSize: Math.floor(profile.totalSize / 100) })}`;
}

/** The end-of-run tree of the shards' JS heaps (--jsheapprof): the same tree, its own heading. */
export function formatJsHeapRunProfile(profile: HeapProfile): string {
  return `JS heap profile (sampled live objects in the shards' own V8 heaps; branches under 1% left out):\n${formatTree(profile, { minSize: Math.floor(profile.totalSize / 100) })}`;
}
