/**
 * What one shard's item cache counts (item-cache.ts): the items on its
 * order (curr_items, bytes, each class's number and mem_requested), the
 * bytes its budget counts, and the items it reclaimed and evicted, in the
 * shard's row of counters and per-class block (stats.ts, item-classes.ts),
 * which `stats` adds up over the shards. Each shard counts its own items:
 * an item another shard replaced is counted out by its own shard when it
 * drains its inbox (hand-over.ts).
 */
import type { ItemViews } from "./item.js";
import { classSlot, itemClass } from "../stats/item-classes.js";
import { STAT } from "../stats/stats.js";

export class CacheCounts {
  private readonly v: ItemViews;
  private readonly c: Float64Array;
  private readonly classes: Float64Array;

  /** `counters`: the shard's row; `classes`: its per-class counters. */
  constructor(views: ItemViews, counters: Float64Array, classes: Float64Array) {
    this.v = views;
    this.c = counters;
    this.classes = classes;
  }

  /** Allocated bytes of the items on the order (their entries' entryBytes: what the budget counts), kept in the shard's row (shardN:mem_allocated). */
  get allocated(): number {
    return this.c[STAT.mem_allocated]!;
  }

  /** Add (`sign` 1) or take away (-1) the item at `ptr` in the budget and the item counts. */
  account(ptr: number, sign: number): void {
    const v = this.v;
    const allocated = v.allocated(ptr);
    const bytes = v.itemBytes(ptr);
    const c = this.c;
    c[STAT.mem_allocated] += sign * allocated;
    c[STAT.curr_items] += sign;
    c[STAT.bytes] += sign * bytes;
    const cls = itemClass(allocated);
    this.classes[classSlot(cls, "number")] += sign;
    this.classes[classSlot(cls, "mem_requested")] += sign * bytes;
  }

  /** An expired item's memory taken back (memcached's reclaimed; expired_unfetched when no hit ever fetched it). */
  reclaimed(ptr: number): void {
    const cls = itemClass(this.v.allocated(ptr));
    this.c[STAT.reclaimed]++;
    this.classes[classSlot(cls, "reclaimed")]++;
    if (!this.v.fetched(ptr)) {
      this.c[STAT.expired_unfetched]++;
      this.classes[classSlot(cls, "expired_unfetched")]++;
    }
  }

  /** A live item evicted at `now` (memcached's evictions and their per-class figures). */
  evicted(ptr: number, now: number): void {
    const v = this.v;
    const cls = itemClass(v.allocated(ptr));
    this.c[STAT.evictions]++;
    const classes = this.classes;
    classes[classSlot(cls, "evicted")]++;
    if (v.exptime(ptr) !== 0) classes[classSlot(cls, "evicted_nonzero")]++;
    classes[classSlot(cls, "evicted_time")] = now - v.accessed(ptr);
    if (!v.fetched(ptr)) {
      this.c[STAT.evicted_unfetched]++;
      classes[classSlot(cls, "evicted_unfetched")]++;
    }
  }

  /** A store that found no room for an item of `size` bytes (its class's outofmemory). */
  outOfMemory(size: number): void {
    this.classes[classSlot(itemClass(size), "outofmemory")]++;
  }

  /** Problems with the counts against the order's items (`n` of `requested` bytes, `allocated` bytes, per class [number, bytes]), as sentences. */
  check(n: number, requested: number, allocated: number, perClass: ReadonlyMap<number, readonly [number, number]>, classCount: number): string[] {
    const problems: string[] = [];
    const c = this.c;
    if (c[STAT.curr_items] !== n || c[STAT.bytes] !== requested) problems.push(`curr_items ${c[STAT.curr_items]} and bytes ${c[STAT.bytes]}, the order holds ${n} of ${requested}`);
    if (allocated !== this.allocated) problems.push(`the items take ${allocated} bytes, the budget counts ${this.allocated}`);
    for (let id = 1; id <= classCount; id++) {
      const [number, bytes] = perClass.get(id) ?? [0, 0];
      const counted = [this.classes[classSlot(id, "number")], this.classes[classSlot(id, "mem_requested")]];
      if (counted[0] !== number || counted[1] !== bytes) problems.push(`class ${id} counts ${counted[0]} items of ${counted[1]} bytes, the order holds ${number} of ${bytes}`);
    }
    return problems;
  }
}
