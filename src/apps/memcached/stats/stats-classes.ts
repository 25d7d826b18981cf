/**
 * `stats slabs` and `stats items`, from the class mapping of
 * item-classes.ts: each shard's item counts per class (its class block in
 * the statistics buffer) and each shard's small pools, read from the heap
 * (any thread may). Every figure is the sum over the shards.
 *
 * `stats slabs`, per class holding memory: chunk_size (memcached's for
 * that id: the largest object it stands for); total_pages (memcached's
 * page is a span of a small pool here: the spans of the heap classes the
 * id stands for, their pages over the pool's span length, rounded up; an
 * id of page-span items only: one "page" per item); total_chunks (objects
 * those spans hold), chunks_per_page (total_chunks / total_pages);
 * used_chunks (objects in use: items, and any other object of those
 * sizes, such as the index's chunks); free_chunks (the
 * rest), free_chunks_end 0 (spans are carved whole). Page-span items are
 * added to their id as a chunk and a page each. Then active_slabs (ids
 * listed) and total_malloced (the shards' allocated memory). memcached's
 * per-class command counts (get_hits, cmd_set...) are not kept per class:
 * the totals are in `stats`.
 *
 * `stats items`, per class with items: number, age (seconds since its
 * least recently used item took its place in the shard's order: the
 * oldest over the shards; item-cache.ts classAges), mem_requested (item
 * bytes), evicted, evicted_nonzero, evicted_time (the latest of the
 * shards'), outofmemory, reclaimed, expired_unfetched, evicted_unfetched.
 * One CLOCK order per shard, not memcached's segmented hot/warm/cold LRU:
 * number_hot/warm/cold, age_hot/warm, moves_*, hits_to_* and
 * evicted_active are not given, nor tailrepairs (no tail repair) and
 * crawler_* (no LRU crawler).
 */
import { P_CAPACITY, PAGE_SIZE } from "../../../memory/layout.js";
import type { SharedHeap } from "../../../memory/shared-heap.js";
import { SAMPLED_POOL_BASE, classSpanPages } from "../../../memory/size-classes.js";
import { poolBytes, poolObjectsInUse, poolRecord } from "../../../memory/small-pool.js";
import type { ServerConfig } from "../config.js";
import { ITEM_CLASSES, classChunkSize, classSlot, heapClassesOf, type ClassStatName } from "./item-classes.js";
import { classCounters, statLines } from "./stats.js";

type Line = [string, number];

/** A class counter summed over the shards (evicted_time: the shards' latest, as one server's last eviction). */
function classSum(config: ServerConfig, id: number, name: ClassStatName): number {
  let sum = 0;
  for (let s = 0; s < config.shards; s++) {
    const v = classCounters(config.statsBuffer, s)[classSlot(id, name)]!;
    sum = name === "evicted_time" ? Math.max(sum, v) : sum + v;
  }
  return sum;
}

/** The pools of the heap classes `id` stands for, over the shards (sampled pools too): spans, objects their spans hold, objects in use. */
function poolFigures(heap: SharedHeap, id: number): { spans: number; capacity: number; used: number } {
  let spans = 0;
  let capacity = 0;
  let used = 0;
  for (const c of heapClassesOf(id)) {
    for (const pool of [c, SAMPLED_POOL_BASE + c]) {
      let pages = 0;
      for (const r of heap.regions) {
        const cap = r.i32[poolRecord(r, pool) + P_CAPACITY]!;
        pages += poolBytes(r, pool) / PAGE_SIZE;
        capacity += cap;
        // A busy shard may be read mid-refill or mid-trim: keep within what its spans hold.
        used += Math.max(0, Math.min(poolObjectsInUse(r, pool), cap));
      }
      spans += Math.ceil(pages / classSpanPages[pool]!);
    }
  }
  return { spans, capacity, used };
}

/** Items of page spans in class `id`, over the shards: a class standing for no heap size class holds only those (a span item has 5 pages at least, past every class holding the 16 KiB one). */
function spanItems(config: ServerConfig, id: number): number {
  return heapClassesOf(id).length === 0 ? classSum(config, id, "number") : 0;
}

export function formatSlabs(config: ServerConfig, heap: SharedHeap): string {
  const lines: Line[] = [];
  let active = 0;
  for (let id = 1; id <= ITEM_CLASSES; id++) {
    const pool = poolFigures(heap, id);
    const big = spanItems(config, id);
    const pages = pool.spans + big;
    if (pages === 0) continue;
    active++;
    const total = pool.capacity + big;
    const used = pool.used + big;
    const f = (name: string, v: number): void => void lines.push([`${id}:${name}`, v]);
    f("chunk_size", classChunkSize(id));
    f("chunks_per_page", Math.floor(total / pages));
    f("total_pages", pages);
    f("total_chunks", total);
    f("used_chunks", used);
    f("free_chunks", Math.max(0, total - used));
    f("free_chunks_end", 0);
  }
  let malloced = 0;
  for (let s = 0; s < config.shards; s++) malloced += heap.stats(s).allocatedMemory;
  lines.push(["active_slabs", active], ["total_malloced", malloced]);
  return statLines(lines);
}

/** `stats items`; `ages`: each shard's item-cache.ts classAges, by shard. */
export function formatItems(config: ServerConfig, ages: readonly number[][]): string {
  const lines: Line[] = [];
  for (let id = 1; id <= ITEM_CLASSES; id++) {
    const number = classSum(config, id, "number");
    if (number === 0) continue;
    const f = (name: string, v: number): void => void lines.push([`items:${id}:${name}`, v]);
    f("number", number);
    f("age", Math.max(0, ...ages.map((a) => a[id] ?? 0)));
    f("mem_requested", classSum(config, id, "mem_requested"));
    for (const name of ["evicted", "evicted_nonzero", "evicted_time", "outofmemory", "reclaimed", "expired_unfetched", "evicted_unfetched"] as const) f(name, classSum(config, id, name));
  }
  return statLines(lines);
}
