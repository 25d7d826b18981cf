/**
 * One shard's part of the cache: the items whose keys this shard owns
 * (key-owner.ts), looked up by a Map from key to item pointer whose
 * insertion order is the LRU order, kept by second chance: a hit marks
 * the item, eviction takes from the front and moves marked items to the
 * back instead (evictOne). Every method runs on the owning shard's
 * thread only: requests for these keys from connections on other shards
 * arrive as messages (remote.ts). The Map is an index kept beside the
 * heap; the items themselves, and everything a get writes to a socket,
 * live in the shared heap (item.ts).
 *
 * Memory: items are allocated from this shard's heap region. A budget of
 * allocated bytes (at most 90% of the region's object pages, the rest
 * left for the staging area, the profiler's tags and small-pool slack) is
 * kept by evicting from the LRU front before allocating. When the memory
 * is there but not in one piece (pages held by other size classes, or a
 * page span wanted among small items' pages: the slab problem memcached
 * has too), eviction goes on from the LRU front in batches of the size
 * wanted, the allocation tried again after each (makeRoom), until it
 * fits: what must go and no more. The budget then becomes what the heap
 * was found to hold (so the next allocations evict first instead of
 * failing: with 2,000-byte items in 1 MiB shards, a fixed budget failed
 * 287 mallocs of 2,000 sets), and grows back, up to its start, whenever
 * an allocation finds room without evicting (roomNow). Only an item that
 * cannot fit in an empty shard is refused ("SERVER_ERROR out of memory
 * storing object"). The budget once dropped to 97% of what was live after
 * each OutOfMemoryError and rose again only when the shard emptied: after
 * 200,000 items of 100 B, 8 MiB shards then held 3 items of 900 KB with
 * 5.2 MB free, where 7 fit.
 *
 * Expiry is lazy, as in memcached without its LRU crawler: an expired item
 * is unlinked when a request finds it or when eviction reaches it.
 */
import { OutOfMemoryError } from "../../errors.js";
import { PAGE_SIZE } from "../../memory/layout.js";
import type { ShardAllocator } from "../../memory/shard-allocator.js";
import { MAX_SMALL_SIZE } from "../../memory/size-classes.js";
import { itemSize, type ItemViews } from "./item.js";
import { MODE_ADD, MODE_APPEND, MODE_CAS, MODE_PREPEND, MODE_REPLACE, expired, type StoreMode } from "./protocol.js";
import { STAT } from "./stats.js";

/** Outcomes of the store's operations, as numbers (they travel between shards). */
export const R_STORED = 0;
export const R_NOT_STORED = 1;
export const R_EXISTS = 2;
export const R_NOT_FOUND = 3;
export const R_DELETED = 4;
export const R_TOUCHED = 5;
export const R_NO_MEMORY = 6;
export const R_NON_NUMERIC = 7;

/** Share of the region's object pages the items may take. */
const BUDGET = 0.9;
/** A free span this long holds a new span of any small pool (size-classes.ts: at most 16 pages). */
const ANY_POOL_SPAN = 16 * PAGE_SIZE;
const MAX_U64 = 2n ** 64n - 1n;
/** strtoull's reading of an item's value for incr/decr: blanks, a sign, digits, then a blank or the end. */
const NUMERIC = /^[ \t\n\v\f\r]*([+-]?)(\d+)(?:[ \t\n\v\f\r]|$)/;

export interface StoreOptions {
  memory: ShardAllocator;
  views: ItemViews;
  /** This shard's row of counters (stats.ts). */
  counters: Float64Array;
  shard: number;
  shards: number;
  /** Largest item, bytes (an append past it is not stored). */
  maxItemSize: number;
}

export class ItemStore {
  private readonly memory: ShardAllocator;
  private readonly v: ItemViews;
  private readonly c: Float64Array;
  /** key -> item pointer; insertion order is the LRU order, least recent first. */
  private readonly items = new Map<string, number>();
  /** Allocated bytes of the linked items (their objectSize). */
  private allocatedBytes = 0;
  private readonly startBudget: number;
  /** What the items may take now: startBudget, or less where the heap was found to hold less. */
  private budget: number;
  /** cas values: this shard's id, then every `shards`-th number after (unique across shards). */
  private nextCas: number;
  private readonly casStep: number;
  private readonly maxItemSize: number;
  private flushTimer: NodeJS.Timeout | undefined;

  constructor(o: StoreOptions) {
    this.memory = o.memory;
    this.v = o.views;
    this.c = o.counters;
    this.startBudget = Math.floor(o.memory.stats().totalMemory * BUDGET);
    this.budget = this.startBudget;
    this.nextCas = o.shard + 1;
    this.casStep = o.shards;
    this.maxItemSize = o.maxItemSize;
  }

  get size(): number {
    return this.items.size;
  }

  /**
   * An object of `size` bytes from this shard, evicting least recently
   * used items to make room; 0 when even an empty shard cannot hold it.
   * Used for the items this shard will link and for staging buffers of
   * values bound for other shards.
   */
  allocate(size: number): number {
    if (this.allocatedBytes + size > this.budget && this.budget < this.startBudget && this.roomNow(size)) {
      this.budget = Math.min(this.startBudget, this.allocatedBytes + size);
    }
    while (this.allocatedBytes + size > this.budget && this.items.size > 0) this.evictOne();
    const ptr = this.tryMalloc(size);
    return ptr !== 0 ? ptr : this.makeRoom(size);
  }

  /**
   * Whether `size` bytes can be had now without evicting, to be sure
   * without trying (a failed malloc costs a trim and an error with the
   * shard's diagnostics): a free span that holds them, or any small
   * pool's new span. Pools' cached objects are not counted: a no here
   * only means the budget stays as it is a while longer.
   */
  private roomNow(size: number): boolean {
    const span = size > MAX_SMALL_SIZE ? Math.ceil(size / PAGE_SIZE) * PAGE_SIZE : ANY_POOL_SPAN;
    return this.memory.largestFreeSpan() >= span;
  }

  /** allocate's slow path: the budget allows `size` but the heap has no room in one piece. Evict until it has. */
  private makeRoom(size: number): number {
    for (;;) {
      if (this.items.size === 0) return 0;
      // A batch of `size` bytes (at least one item), then try again: an
      // item at a time would pay a trim per item (a 900 KB page span among
      // 160-byte items took 5,600 of them).
      const until = this.allocatedBytes - size;
      do this.evictOne();
      while (this.allocatedBytes > until && this.items.size > 0);
      const ptr = this.tryMalloc(size);
      if (ptr !== 0) {
        this.budget = Math.min(this.startBudget, this.allocatedBytes + size);
        return ptr;
      }
    }
  }

  /**
   * malloc, 0 where it would throw OutOfMemoryError. A page span is looked
   * for first (largestFreeSpan, after a trim that returns the pools'
   * cached objects and empty spans): a failed malloc builds an error with
   * the shard's diagnostics, which makeRoom's retries would pay each time.
   */
  private tryMalloc(size: number): number {
    const memory = this.memory;
    if (size > MAX_SMALL_SIZE) {
      const bytes = Math.ceil(size / PAGE_SIZE) * PAGE_SIZE;
      if (memory.largestFreeSpan() < bytes && (memory.trim(), memory.largestFreeSpan() < bytes)) return 0;
    }
    try {
      return memory.malloc(size);
    } catch (e) {
      if (!(e instanceof OutOfMemoryError)) throw e;
      return 0;
    }
  }

  /** Free an item (or staging buffer) nobody else can hold: one never linked. */
  discardUnlinked(ptr: number): void {
    this.memory.free(ptr);
  }

  /**
   * get / gets / gat / gats of one key: the item with one more reference
   * for the caller (who releases it once written), or 0. `touchTo`: the new
   * absolute exptime for gat (undefined for get).
   */
  get(key: string, now: number, touchTo?: number): number {
    const c = this.c;
    c[STAT.cmd_get]++;
    if (touchTo !== undefined) c[STAT.cmd_touch]++;
    const ptr = this.items.get(key);
    if (ptr === undefined || this.expiredNow(key, ptr, now, true)) {
      c[STAT.get_misses]++;
      if (touchTo !== undefined) c[STAT.touch_misses]++;
      return 0;
    }
    c[STAT.get_hits]++;
    if (touchTo !== undefined) {
      c[STAT.touch_hits]++;
      this.v.setExptime(ptr, touchTo);
    }
    this.bump(ptr);
    this.v.acquire(ptr);
    return ptr;
  }

  /**
   * A storage command's item, already filled (value and \r\n checked) by
   * the caller. `owned`: the item is on this shard and the store takes it
   * over (linking or freeing it); otherwise it is another shard's staging
   * copy, read here and left to its shard. `cas`: the client's value for
   * the cas command (a decimal string).
   */
  store(mode: StoreMode, key: string, src: number, owned: boolean, cas: string, now: number): number {
    this.c[STAT.cmd_set]++;
    // Conditions first, so a store that will not happen allocates nothing.
    const verdict = this.precondition(mode, key, cas, now);
    if (verdict !== R_STORED) {
      if (owned) this.memory.free(src);
      return verdict;
    }
    if (mode === MODE_APPEND || mode === MODE_PREPEND) return this.concatenate(mode, key, src, owned);
    let item = src;
    if (!owned) {
      item = this.copyIn(src);
      if (item === 0) return R_NO_MEMORY;
    }
    // Allocating may have evicted the old item: look again.
    const old = this.items.get(key);
    if (old !== undefined) this.unlink(key, old);
    else if (mode === MODE_REPLACE || mode === MODE_CAS) {
      this.memory.free(item);
      return mode === MODE_CAS ? R_NOT_FOUND : R_NOT_STORED;
    }
    this.link(key, item);
    return R_STORED;
  }

  /** The store's verdict before any allocation: R_STORED (go on), or why not. */
  private precondition(mode: StoreMode, key: string, cas: string, now: number): number {
    const old = this.find(key, now);
    switch (mode) {
      case MODE_ADD:
        if (old === 0) return R_STORED;
        this.bump(old); // memcached: a failed add refreshes the item
        return R_NOT_STORED;
      case MODE_REPLACE:
      case MODE_APPEND:
      case MODE_PREPEND:
        return old === 0 ? R_NOT_STORED : R_STORED;
      case MODE_CAS:
        if (old === 0) {
          this.c[STAT.cas_misses]++;
          return R_NOT_FOUND;
        }
        if (String(this.v.cas(old)) !== cas) {
          this.c[STAT.cas_badval]++;
          return R_EXISTS;
        }
        this.c[STAT.cas_hits]++;
        return R_STORED;
      default:
        return R_STORED;
    }
  }

  /** A copy of another shard's staging item in this shard's memory (0: no room). */
  private copyIn(src: number): number {
    const bytes = this.v.itemBytes(src);
    const ptr = this.allocate(bytes);
    if (ptr === 0) return 0;
    this.v.bytes.copyWithin(ptr, src, src + bytes);
    this.v.setAllocated(ptr, this.memory.objectSize(ptr));
    // The staging copy's count was its connection's; this one is the store's.
    Atomics.store(this.v.i32, ptr >>> 2, 1);
    return ptr;
  }

  /** append / prepend: a new item of the old value and the new one, with the old flags and exptime. */
  private concatenate(mode: StoreMode, key: string, src: number, owned: boolean): number {
    const v = this.v;
    const old = this.items.get(key)!;
    const oldLength = v.length(old);
    const addLength = v.length(src);
    const flags = v.flags(old);
    const length = oldLength + addLength;
    const size = itemSize(key.length, flags, length);
    if (size > this.maxItemSize) {
      if (owned) this.memory.free(src);
      return R_NOT_STORED;
    }
    // Hold the old item while allocating (eviction could free it).
    v.acquire(old);
    const ptr = this.allocate(size);
    const stillLinked = this.items.get(key) === old;
    if (ptr === 0 || !stillLinked) {
      this.release(old);
      if (ptr !== 0) this.memory.free(ptr);
      if (owned) this.memory.free(src);
      // memcached answers NOT_STORED when the joined item cannot be made.
      return R_NOT_STORED;
    }
    v.writeHead(ptr, this.memory.objectSize(ptr), key, flags, v.exptime(old), length);
    const at = v.dataStart(ptr);
    const [first, second] = mode === MODE_APPEND ? [old, src] : [src, old];
    const firstLength = v.length(first);
    v.bytes.copyWithin(at, v.dataStart(first), v.dataStart(first) + firstLength);
    v.bytes.copyWithin(at + firstLength, v.dataStart(second), v.dataStart(second) + v.length(second));
    v.terminate(ptr);
    this.release(old);
    if (owned) this.memory.free(src);
    this.unlink(key, old);
    this.link(key, ptr);
    return R_STORED;
  }

  delete(key: string, now: number): number {
    const ptr = this.find(key, now);
    if (ptr === 0) {
      this.c[STAT.delete_misses]++;
      return R_NOT_FOUND;
    }
    this.c[STAT.delete_hits]++;
    this.unlink(key, ptr);
    return R_DELETED;
  }

  /** A failed set leaves no stale value behind (memcached unlinks it too). */
  forget(key: string): void {
    const ptr = this.items.get(key);
    if (ptr !== undefined) this.unlink(key, ptr);
  }

  touch(key: string, exptime: number, now: number): number {
    this.c[STAT.cmd_touch]++;
    const ptr = this.find(key, now);
    if (ptr === 0) {
      this.c[STAT.touch_misses]++;
      return R_NOT_FOUND;
    }
    this.c[STAT.touch_hits]++;
    this.v.setExptime(ptr, exptime);
    this.bump(ptr);
    return R_TOUCHED;
  }

  /**
   * incr / decr by `delta` (a decimal below 2^64): the new value as a
   * decimal string, or R_NOT_FOUND / R_NON_NUMERIC / R_NO_MEMORY. As
   * memcached: the value is read as strtoull reads it, incr wraps at 2^64,
   * decr stops at 0, and a shorter result is written in place padded with
   * spaces when nobody else holds the item.
   */
  arith(key: string, incr: boolean, delta: string, now: number): string | number {
    const v = this.v;
    const ptr = this.find(key, now);
    if (ptr === 0) {
      this.c[incr ? STAT.incr_misses : STAT.decr_misses]++;
      return R_NOT_FOUND;
    }
    const length = v.length(ptr);
    const m = length === 0 ? null : NUMERIC.exec(v.value(ptr).toString("latin1"));
    const value = m ? BigInt(m[2]!) : 0n;
    if (!m || value > MAX_U64 || (m[1] === "-" && value !== 0n)) return R_NON_NUMERIC;
    const d = BigInt(delta);
    const next = incr ? (value + d) & MAX_U64 : value < d ? 0n : value - d;
    const text = next.toString();
    this.c[incr ? STAT.incr_hits : STAT.decr_hits]++;
    if (text.length <= length && v.refs(ptr) === 1) {
      const at = v.dataStart(ptr);
      v.bytes.write(text, at, "latin1");
      v.bytes.fill(0x20, at + text.length, at + length);
      v.setCas(ptr, this.takeCas());
      this.bump(ptr);
      return text;
    }
    const flags = v.flags(ptr);
    v.acquire(ptr);
    const fresh = this.allocate(itemSize(key.length, flags, text.length));
    const stillLinked = this.items.get(key) === ptr;
    if (fresh === 0 || !stillLinked) {
      this.release(ptr);
      if (fresh !== 0) this.memory.free(fresh);
      return fresh === 0 ? R_NO_MEMORY : R_NOT_FOUND;
    }
    v.writeHead(fresh, this.memory.objectSize(fresh), key, flags, v.exptime(ptr), text.length);
    v.bytes.write(text, v.dataStart(fresh), "latin1");
    v.terminate(fresh);
    this.release(ptr);
    this.unlink(key, ptr);
    this.link(key, fresh);
    return text;
  }

  /** flush_all: unlink every item now, or in `delay` seconds (a later flush_all replaces an earlier one). */
  flush(delay: number): void {
    if (this.flushTimer) clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    if (delay <= 0) {
      this.flushNow();
      return;
    }
    this.flushTimer = setTimeout(() => {
      this.flushTimer = undefined;
      this.flushNow();
    }, delay * 1000);
    this.flushTimer.unref();
  }

  /** Unlink everything (the shard's stop, flush_all). */
  flushNow(): void {
    for (const [key, ptr] of this.items) this.unlink(key, ptr);
    this.budget = this.startBudget;
  }

  /** Drop a reference; free the item when it was the last. */
  release(ptr: number): void {
    if (this.v.release(ptr)) this.memory.free(ptr);
  }

  /** The live item for `key` (expired ones unlinked on the way), or 0. */
  private find(key: string, now: number): number {
    const ptr = this.items.get(key);
    return ptr === undefined || this.expiredNow(key, ptr, now, false) ? 0 : ptr;
  }

  /** Unlink `ptr` if it has expired; true when it had. */
  private expiredNow(key: string, ptr: number, now: number, byGet: boolean): boolean {
    if (!expired(this.v.exptime(ptr), now)) return false;
    if (byGet) this.c[STAT.get_expired]++;
    this.c[STAT.reclaimed]++;
    this.unlink(key, ptr);
    return true;
  }

  /**
   * A hit: mark the item used. The order changes only when eviction reaches
   * it (evictOne: second chance), not on every hit: a Map delete and set
   * per hit were 4% of the server's CPU under memcaslap (perf), where a
   * byte in the item costs nothing.
   */
  private bump(ptr: number): void {
    this.v.setReferenced(ptr, true);
  }

  private link(key: string, ptr: number): void {
    this.v.setCas(ptr, this.takeCas());
    this.items.set(key, ptr);
    this.allocatedBytes += this.v.allocated(ptr);
    const c = this.c;
    c[STAT.curr_items]++;
    c[STAT.total_items]++;
    c[STAT.bytes] += this.v.itemBytes(ptr);
  }

  private unlink(key: string, ptr: number): void {
    this.items.delete(key);
    this.allocatedBytes -= this.v.allocated(ptr);
    const c = this.c;
    c[STAT.curr_items]--;
    c[STAT.bytes] -= this.v.itemBytes(ptr);
    this.release(ptr);
  }

  /**
   * Evict the least recently used item, by second chance (CLOCK): take the
   * front of the order; if a hit used it since it was last here, clear the
   * mark and move it to the back instead. Every item moves at most once
   * per pass, so this ends within one pass over the items.
   */
  private evictOne(): void {
    const v = this.v;
    const now = Math.floor(Date.now() / 1000);
    for (const [key, ptr] of this.items) {
      const gone = expired(v.exptime(ptr), now);
      if (v.referenced(ptr) && !gone) {
        v.setReferenced(ptr, false);
        this.items.delete(key);
        this.items.set(key, ptr);
        continue;
      }
      if (gone) this.c[STAT.reclaimed]++;
      else this.c[STAT.evictions]++;
      this.unlink(key, ptr);
      return;
    }
  }

  private takeCas(): number {
    const cas = this.nextCas;
    this.nextCas += this.casStep;
    return cas;
  }
}
