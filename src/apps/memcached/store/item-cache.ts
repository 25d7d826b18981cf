/**
 * One shard's item cache: the items in this shard's memory, each the
 * value of an entry in the cache's one index (a SharedMap every shard
 * reads and writes: cache-memory.ts makes it), their memory budget, their
 * LRU order, eviction, expiry and flush. The store commands (store.ts) say
 * what to link and unlink; this file says where the memory comes from,
 * what must go to make room, and what happens to an item another entry
 * replaced. Every change of this shard's order and counts runs here, on
 * its own thread.
 *
 * Who writes: every shard writes the index directly, no message: a new
 * item is made in the connection's shard's memory (its budget, its
 * order) and published over whatever the key held, which may be an item
 * of another shard. The map hands the writer the replaced (or removed)
 * entry's reference (exchange, exchangeIf, takeEntry); the writer puts it
 * away (dispose): its own item leaves its order at once, another shard's
 * goes onto that shard's inbox (hand-over.ts), which the owner drains
 * (drain): off its order, its counts undone, the reference released. Only
 * one writer takes an entry out of the map, so each item leaves its
 * order exactly once. A conditional change (add, replace, cas, append,
 * incr, md and ms with C, ...) links over the entry it read, or only
 * where no entry is (the map's exchangeIf: its slot swapped by one
 * compareExchange, or an insert under its segment's lock), and
 * answers CHANGED when another writer got there first: the store reads
 * again.
 *
 * Order: the LRU order (lru-order.ts), a list through two words of each
 * item's header, so that linking, unlinking and moving an item cost O(1)
 * whatever the cache holds (a JS Map used as a queue cost a full server
 * three quarters of its speed: lru-order.ts).
 *
 * Eviction is CLOCK (second chance): a hit, on any shard, only sets the
 * item's referenced byte (a plain store: other shards never touch the
 * list); eviction takes the tail, and a referenced item there gets its
 * mark cleared and goes to the head instead (evictOne). An eviction looks
 * at EVICT_LOOKS items at most: the one after that many second chances
 * goes whatever its mark, so a burst of hits costs no set more than a
 * bounded walk (memcached's tail search looks at 5). An item at the tail
 * that another writer took out of the map meanwhile (takeEntry answers 0)
 * is on its way to the inbox: drained, or passed over until it comes.
 *
 * Memory: items are allocated from this shard's heap region. A budget of
 * allocated bytes (the shard's share of -m, the region made bigger for the
 * rest: cache-memory.ts; under --memory, 90% of the region's object pages
 * less the index, the rest left for the profiler's tags and small-pool
 * slack) is kept by evicting from the tail before allocating, after the
 * inbox is drained (what other shards replaced no longer counts). When the
 * memory is there but not in one piece (pages held by other size classes,
 * or a page span wanted among small items' pages: the slab problem
 * memcached has too), eviction goes on from the tail in batches of the
 * size wanted, the allocation tried again after each (makeRoom), until it
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
 * A replaced or removed item's memory comes back when the last reader
 * lets go of it (shared-map/shared-map.ts: the map frees it then, or at
 * the owner's next reclaim); the budget counts the items on the order, and
 * makeRoom's retries see what readers still held.
 *
 * Expiry is lazy, as in memcached without its LRU crawler: an expired item
 * is taken out of the map by whichever shard's request finds it (and
 * counted reclaimed there), when eviction reaches it, or when it is among
 * the RECLAIM_LOOKS oldest as a new item takes memory.
 */
import { OutOfMemoryError } from "../../../errors.js";
import { enterHeapLabels, leaveHeapLabels } from "../../../memory/profiler/heap-labels.js";
import { PAGE_SIZE } from "../../../memory/layout.js";
import type { ShardAllocator } from "../../../memory/shard-allocator.js";
import type { SharedHeap } from "../../../memory/shared-heap.js";
import type { SharedMap } from "../../../memory/shared-map/shared-map.js";
import { MAX_SMALL_SIZE } from "../../../memory/size-classes.js";
import type { ItemViews } from "./item.js";
import { ITEM_CLASSES, itemClass } from "../stats/item-classes.js";
import { CacheCounts } from "./cache-counts.js";
import { FlushedItems } from "./flushed-items.js";
import { HandOver } from "./hand-over.js";
import { CacheTimers } from "./cache-timers.js";
import { LruOrder } from "./lru-order.js";
import { bytesByPrefix, classAges, dump, type Walked } from "./cache-walks.js";
import { PrefixLabels } from "./prefix-labels.js";
import { expired } from "../protocol/protocol.js";
import { STAT } from "../stats/stats.js";

/** Share of the region's object pages the items may take (--memory). */
const BUDGET = 0.9;
/** A free span this long holds a new span of any small pool (size-classes.ts: at most 16 pages). */
const ANY_POOL_SPAN = 16 * PAGE_SIZE;
/** Items evicted at a time when the index's table cannot grow for want of memory. */
const TABLE_EVICTION_BATCH = 64;
/** Items at the tail looked at for an expired one before a new item takes memory (memcached looks at 5). */
const RECLAIM_LOOKS = 5;
/** Second chances one eviction gives at most before the next item at the tail goes whatever its mark (memcached's tail search looks at 5). */
const EVICT_LOOKS = 5;

/** link's answers: linked; not linked, the key's entry is not the one expected (the reservation is still the caller's); no room for the index's table (the reservation given up). */
export const LINKED = 0;
export const CHANGED = 1;
export const NO_ROOM = 2;
/** link's `expected` for a store that replaces whatever the key holds. */
export const ANY = -1;

export interface CacheOptions {
  heap: SharedHeap;
  memory: ShardAllocator;
  views: ItemViews;
  /** The cache's index (cache-memory.ts createIndex / attachIndex): this thread's object of it. */
  map: SharedMap;
  /** Every shard's inbox of handed-over items (hand-over.ts createInboxes). */
  inboxes: SharedArrayBuffer;
  /** This shard's row of counters (stats.ts). */
  counters: Float64Array;
  /** This shard's per-class counters (stats.ts classCounters, item-classes.ts). */
  classes: Float64Array;
  shard: number;
  /** Evict live items to make room (false: memcached's -M; only expired items go, else the store fails for want of memory). */
  evict: boolean;
  /** Where a key's prefix ends (-D): an item's heap label `prefix` (prefix-labels.ts). */
  prefixDelimiter: string;
  /**
   * What the items may take, bytes (the shard's share of -m: cache-memory.ts),
   * the index and the rest beside it; 0: the items take BUDGET of the
   * shard's pages, this shard's part of the index included (--memory).
   */
  itemBytes: number;
}

export class ItemCache {
  /** The cache's index: key -> item, every shard's items, read and written by every shard. */
  readonly map: SharedMap;
  private readonly heap: SharedHeap;
  private readonly shard: number;
  private readonly memory: ShardAllocator;
  private readonly v: ItemViews;
  private readonly c: Float64Array;
  private readonly classes: Float64Array;
  private readonly evict: boolean;
  private readonly prefixLabels: PrefixLabels;
  /** This shard's items, newest first: those in the map, and those other shards took out not yet drained. */
  private readonly order: LruOrder;
  /** Items other shards took out of the map, on their way back here. */
  private readonly handOver: HandOver;
  /** The counts of the items on the order, and the bytes the budget counts (used() adds the index's under --memory). */
  private readonly counts: CacheCounts;
  /** Under --memory, this shard's part of the index when the cache began, and the map object's structureBytes then (its growth since is this shard's: -1 with -m). */
  private readonly indexBase: number;
  private readonly structureStart: number;
  /** What the items may take at most: -m's share or BUDGET of the shard, scaled by cache_memlimit (setLimit). */
  private startBudget: number;
  private readonly fullBudget: number;
  /** What the items may take now: startBudget, or less where the heap was found to hold less. */
  private budget: number;
  /** What the last flush_all left for the counters (get_flushed, reclaimed). */
  private readonly flushed: FlushedItems;
  private flushTimer: NodeJS.Timeout | undefined;
  /** Frees, drains and trims of a quiet shard (cache-timers.ts). */
  private readonly timers: CacheTimers;

  constructor(o: CacheOptions) {
    this.heap = o.heap;
    this.shard = o.shard;
    this.memory = o.memory;
    this.map = o.map;
    this.v = o.views;
    this.c = o.counters;
    this.classes = o.classes;
    const total = o.memory.stats().totalMemory;
    const countsIndex = o.itemBytes === 0;
    this.indexBase = countsIndex ? this.map.stats().structureBytesByShard[o.shard]! : 0;
    this.structureStart = countsIndex ? this.map.structureBytes : -1;
    this.fullBudget = countsIndex ? Math.floor(total * BUDGET) : o.itemBytes;
    this.startBudget = this.fullBudget;
    this.budget = this.startBudget;
    this.evict = o.evict;
    this.prefixLabels = new PrefixLabels(o.prefixDelimiter);
    this.order = new LruOrder(o.views, this.map);
    this.handOver = new HandOver(o.inboxes, o.shard, o.views);
    this.flushed = new FlushedItems(o.counters);
    this.counts = new CacheCounts(o.views, o.counters, o.classes);
    this.timers = new CacheTimers(this.map, o.memory, () => this.handOver.waiting, () => this.drain());
  }

  /** Items on this shard's order (the map's items of this shard's memory, and those handed over not yet drained). */
  get size(): number {
    return this.order.size;
  }

  /** Look at the inbox on a timer from now on (until stop): a shard that goes quiet still takes back what others handed over. */
  start(): void {
    this.timers.start();
  }

  stop(): void {
    this.timers.stop();
  }

  /**
   * cache_memlimit: the items may take `share` (0..1] of what they could
   * (the shard's budget). A lower limit evicts as new items come, as
   * memcached's does.
   */
  setLimit(share: number): void {
    this.startBudget = Math.floor(this.fullBudget * share);
    this.budget = Math.min(this.budget, this.startBudget);
  }

  // ------------------------------------------------------------ memory

  /**
   * A new entry for `key` in the index, room for an item of `size` bytes
   * at map.valuePointer(ref) in this shard's memory, not yet in the map
   * (link or giveUp ends it); evicting least recently used items of this
   * shard to make room. 0 when even an empty shard cannot hold it.
   */
  reserve(key: string, size: number): number {
    this.timers.reserved();
    if (this.handOver.waiting) this.drain();
    this.reclaimExpiredTail();
    if (this.used() + size > this.budget && this.budget < this.startBudget && this.roomNow(size)) {
      this.budget = Math.min(this.startBudget, this.used() + size);
    }
    if (this.used() + size > this.budget && this.order.size > 0) {
      const now = nowSeconds();
      while (this.evictOne(now) && this.used() + size > this.budget && this.order.size > 0);
      // What was evicted is retired, not yet freed (the map frees in batches): free it before trying,
      // or the malloc fails and makeRoom evicts as much again (a 900 KB item into a shard of 100 B
      // items took 9,375 evictions instead of 5,1xx).
      this.map.reclaim();
    }
    const got = this.tryReserve(key, size);
    if (got !== 0) return got;
    const made = this.makeRoom(key, size);
    if (made === 0) this.counts.outOfMemory(size);
    return made;
  }

  /** Give up a reservation nobody will publish (a value that did not arrive whole, a refused store). */
  giveUp(ref: number): void {
    this.map.release(ref);
  }

  /**
   * Before an item takes new memory, the oldest items (the tail of the
   * order, up to RECLAIM_LOOKS) that have expired give theirs back, as
   * memcached's allocator checks the LRU tail for an expired item to reuse
   * (its `reclaimed`): a cache whose items expire then stays the size it
   * was instead of holding the dead ones until eviction reaches them
   * (memcached's t/issue_14.t: total_malloced must not grow).
   */
  private reclaimExpiredTail(): void {
    if (this.order.size === 0) return;
    const now = nowSeconds();
    const v = this.v;
    let freed = false;
    let ref = this.order.tail;
    for (let looked = 0; ref !== 0 && looked < RECLAIM_LOOKS; looked++) {
      const ptr = this.map.valuePointer(ref);
      const newer = v.newer(ptr);
      if (expired(v.exptime(ptr), now) && this.takeOwn(ref, ptr)) {
        this.counts.reclaimed(ptr);
        freed = true;
      }
      ref = newer;
    }
    if (freed) this.map.reclaim();
  }

  /** What the budget counts: the items' bytes, and under --memory this shard's part of the index (its tables and descriptors, which grow with the items). */
  private used(): number {
    return this.structureStart < 0 ? this.counts.allocated : this.counts.allocated + this.indexBase + this.map.structureBytes - this.structureStart;
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

  /** reserve's slow path: the budget allows `size` but the heap has no room in one piece. Evict until it has. */
  private makeRoom(key: string, size: number): number {
    for (;;) {
      if (this.order.size === 0) {
        // What readers held may have come back meanwhile.
        return this.map.reclaim() > 0 ? this.tryReserve(key, size) : 0;
      }
      // A batch of `size` bytes (at least one item), then try again: an
      // item at a time would pay a trim per item (a 900 KB page span among
      // 160-byte items took 5,600 of them).
      const until = this.counts.allocated - size;
      const now = nowSeconds();
      let evicted = false;
      while (this.order.size > 0) {
        // A page span next in line goes only once what the batch freed so far has been tried: small
        // items a few hundred bytes short of `size` took the oldest 900 KB item with them, and the
        // budget then stayed an item lower (a shard of 8 MiB kept 3 of them where 5 fit).
        if (evicted && this.v.allocated(this.map.valuePointer(this.order.tail)) > MAX_SMALL_SIZE) break;
        if (!this.evictOne(now)) break;
        evicted = true;
        if (this.counts.allocated <= until) break;
      }
      // -M: nothing left that may go.
      if (!evicted) return this.map.reclaim() > 0 ? this.tryReserve(key, size) : 0;
      this.map.reclaim();
      const got = this.tryReserve(key, size);
      if (got !== 0) {
        this.budget = Math.min(this.startBudget, this.used() + size);
        return got;
      }
    }
  }

  /**
   * The map's reserve (which mallocs the entry), 0 where it would throw
   * OutOfMemoryError. A page span is looked for first (largestFreeSpan,
   * after a trim that returns the pools' cached objects and empty spans):
   * a failed malloc builds an error with the shard's diagnostics, which
   * makeRoom's retries would pay each time.
   */
  private tryReserve(key: string, size: number): number {
    const memory = this.memory;
    if (size > MAX_SMALL_SIZE) {
      const bytes = Math.ceil(size / PAGE_SIZE) * PAGE_SIZE;
      if (memory.largestFreeSpan() < bytes && (memory.trim(), memory.largestFreeSpan() < bytes)) return 0;
    }
    // An item's entry carries its key's prefix label while the heap profiler is on (a label is read by a profiled allocation only).
    const labels = memory.heapProfilingSampleRate() === 0 ? undefined : this.prefixLabels.of(key);
    const outer = labels === undefined ? undefined : enterHeapLabels(labels);
    try {
      return this.map.reserve(key, size);
    } catch (e) {
      if (!(e instanceof OutOfMemoryError)) throw e;
      return 0;
    } finally {
      if (labels !== undefined) leaveHeapLabels(outer);
    }
  }

  // ------------------------------------------------------------ lookups

  /**
   * A reference to `key`'s live entry, held on this thread (the caller
   * releases it: map.release), whichever shard's item it is; or 0. An
   * expired entry found is taken out of the map on the way (reclaimed,
   * counted by this shard; `byGet`: get_expired too). A key with no entry
   * is a get's flushed miss (`byGet`: get_flushed if flush_all removed
   * it), or else forgotten by flush_all's memory.
   */
  acquireLive(key: string, now: number, byGet: boolean): number {
    const map = this.map;
    const held = map.acquire(key);
    if (held === 0) {
      if (byGet) this.flushed.miss(key);
      else this.flushed.forget(key);
      return 0;
    }
    const ptr = map.valuePointer(held);
    if (!expired(this.v.exptime(ptr), now)) return held;
    if (byGet) this.c[STAT.get_expired]++;
    this.expire(held, ptr);
    map.release(held);
    return 0;
  }

  /** Take the expired entry `held` (item at `ptr`) out of the map, counted as reclaimed, unless another writer took it first. */
  expire(held: number, ptr: number): void {
    const old = this.map.takeEntry(held);
    if (old === 0) return;
    this.counts.reclaimed(ptr);
    this.dispose(old, ptr);
  }

  /**
   * A hit: mark the item used. The order changes only when eviction reaches
   * it (evictOne: second chance), not on every hit: a Map delete and set
   * per hit were 4% of the server's CPU under memcaslap (perf), where a
   * byte in the item costs nothing, and can be set by a hit on any shard.
   */
  markHit(ptr: number): void {
    this.v.setReferenced(ptr, true);
  }

  // ------------------------------------------------------------ flush_all's memory

  /** A get found no item for `key`: get_flushed if flush_all removed it (flushed-items.ts). */
  flushedMiss(key: string): void {
    this.flushed.miss(key);
  }

  // ------------------------------------------------------------ link / unlink

  /**
   * Publish the filled reservation `ref` (this shard's) as `key`'s item
   * with this `cas`: over whatever the key holds (`expected` ANY), only
   * over the entry `expected` names (a reference the caller holds, read
   * before), or only where the key has none (0). One store in the map's
   * table, so a reader finds the old item or the new, never neither; the
   * old item is put away (dispose). LINKED; CHANGED when the key's entry
   * is not the one expected (the reservation is still the caller's); or
   * NO_ROOM when the table must grow and even an empty shard has no room
   * for it (the reservation given up).
   */
  link(key: string, ref: number, now: number, cas: number, expected: number): number {
    const v = this.v;
    const map = this.map;
    const ptr = map.valuePointer(ref);
    v.setCas(ptr, cas);
    v.setAccessed(ptr, now);
    v.setAllocated(ptr, map.entryBytes(ref));
    let old: number;
    for (;;) {
      try {
        old = expected === ANY ? map.exchange(ref) : map.exchangeIf(ref, expected);
        break;
      } catch (e) {
        if (!(e instanceof OutOfMemoryError)) throw e;
      }
      // The table's next size needs room in one piece: evict a batch, free what readers let go, try again.
      const t = nowSeconds();
      let n = 0;
      while (n < TABLE_EVICTION_BATCH && this.order.size > 0 && this.evictOne(t)) n++;
      if (n === 0) {
        this.giveUp(ref);
        return NO_ROOM;
      }
      map.reclaim();
    }
    if (old === -1) return CHANGED;
    // Joined before anything else runs here: another shard may take it out of the map at once, and hand it back.
    this.order.push(ref, ptr);
    this.counts.account(ptr, 1);
    if (old !== 0) this.dispose(old, map.valuePointer(old));
    this.flushed.forget(key);
    this.flushed.linked();
    this.c[STAT.total_items]++;
    return LINKED;
  }

  /** Take `held`'s entry out of the map (delete, md) unless another writer changed the key first (false: read it again). */
  unlink(held: number): boolean {
    const old = this.map.takeEntry(held);
    if (old === 0) return false;
    this.dispose(old, this.map.valuePointer(old));
    return true;
  }

  /**
   * An entry this shard took out of the map (`ref`: the map's reference,
   * now this shard's; the item at `ptr`): off this shard's order at once
   * if the item is this shard's, else handed over to the shard whose memory
   * holds it (hand-over.ts), which takes it off its order.
   */
  private dispose(ref: number, ptr: number): void {
    const owner = this.heap.ownerOf(ptr);
    if (owner !== this.shard) {
      this.handOver.push(owner, ref, ptr);
      return;
    }
    this.leave(ptr);
    this.map.release(ref);
    this.timers.freed();
  }

  /**
   * This shard's item at the order's `ref` (`ptr`) out of the map and the
   * order (eviction, expiry, flush): false when another writer took it out
   * of the map first (it comes back through the inbox).
   */
  private takeOwn(ref: number, ptr: number): boolean {
    const old = this.map.takeEntry(ref);
    if (old === 0) return false;
    this.leave(ptr);
    this.map.release(old);
    this.timers.freed();
    return true;
  }

  /**
   * Take back what other shards handed over: each item off the order,
   * out of the counts, its reference released (the map frees it once
   * readers let go). On this shard's requests (reserve), before evicting
   * and flushing, when `stats` asks, and on the inbox's timer.
   */
  drain(): void {
    let ref = this.handOver.takeAll();
    if (ref === 0) return;
    const map = this.map;
    const v = this.v;
    while (ref !== 0) {
      const ptr = map.valuePointer(ref);
      const next = v.handoff(ptr);
      this.leave(ptr);
      map.release(ref);
      ref = next;
    }
    this.timers.freed();
  }

  /** The item at `ptr` leaves the order and the counts. */
  private leave(ptr: number): void {
    this.order.remove(ptr);
    this.counts.account(ptr, -1);
  }

  /**
   * Unlink one item from the tail, by second chance (CLOCK): an expired
   * one goes (reclaimed); one a hit used since it was last here has its
   * mark cleared and moves to the head instead; else it is evicted. After
   * EVICT_LOOKS second chances, the next item at the tail goes whatever
   * its mark. Without `evict` (-M) only an expired item goes: the live
   * ones looked at move to the head, so the next call looks at others;
   * false when none of EVICT_LOOKS was expired (memcached's -M answers out
   * of memory so too). An item another shard took out of the map is
   * drained, or (its hand-over still on its way) moved to the head.
   */
  private evictOne(now: number): boolean {
    const v = this.v;
    const map = this.map;
    for (let looked = 0; this.order.size > 0 && looked <= this.order.size + EVICT_LOOKS; looked++) {
      const ref = this.order.tail;
      const ptr = map.valuePointer(ref);
      if (expired(v.exptime(ptr), now)) {
        if (this.takeOwn(ref, ptr)) {
          this.counts.reclaimed(ptr);
          return true;
        }
        this.passOver(ref, ptr);
        continue;
      }
      if (looked >= EVICT_LOOKS) {
        if (!this.evict) return false;
      } else if (!this.evict || v.referenced(ptr)) {
        v.setReferenced(ptr, false);
        this.order.toHead(ref, ptr);
        continue;
      }
      if (this.takeOwn(ref, ptr)) {
        this.counts.evicted(ptr, now);
        return true;
      }
      this.passOver(ref, ptr);
    }
    return false;
  }

  /** The item at the tail was taken out of the map by another shard: drain the inbox, and if its hand-over has not come yet, move it out of eviction's way. */
  private passOver(ref: number, ptr: number): void {
    this.drain();
    if (this.order.tail === ref) this.order.toHead(ref, ptr);
  }

  // ------------------------------------------------------------ flush_all

  /** flush_all: unlink every item of this shard now, or in `delay` seconds (a later flush_all replaces an earlier one). */
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

  /**
   * Unlink this shard's items (the shard's stop, flush_all: every shard
   * flushes its own), from the tail (flushed-items.ts keeps what the
   * counters need of them); what other shards took out meanwhile comes
   * back through the inbox, drained last.
   */
  flushNow(): void {
    const v = this.v;
    const map = this.map;
    this.drain();
    this.flushed.begin(this.order.size);
    for (let ref = this.order.tail; ref !== 0; ) {
      const ptr = map.valuePointer(ref);
      const newer = v.newer(ptr);
      const old = map.takeEntry(ref);
      if (old !== 0) {
        this.flushed.item(() => v.key(ptr), v.fetched(ptr));
        this.leave(ptr);
        map.release(old);
      }
      ref = newer;
    }
    this.flushed.end();
    this.drain();
    this.budget = this.startBudget;
    map.reclaim();
  }

  // ------------------------------------------------------------ operator walks (cache-walks.ts)

  private get walked(): Walked {
    return { order: this.order, map: this.map, views: this.v, classes: this.classes };
  }

  /** `stats items` age per class id (cache-walks.ts classAges). */
  classAges(now: number, classCount: number): number[] {
    return classAges(this.walked, now, classCount);
  }

  /** This shard's items' bytes per key prefix (cache-walks.ts bytesByPrefix). */
  bytesByPrefix(): Map<string, number> {
    return bytesByPrefix(this.walked, this.prefixLabels.delimiter);
  }

  /** `stats cachedump` rows of class `id` (cache-walks.ts dump). */
  dump(id: number, limit: number, budget: number): Array<[string, number, number]> {
    return dump(this.walked, id, limit, budget);
  }

  /**
   * The cache's invariants as sentences, [] when they hold (for tests, on
   * a quiet cache, the inbox drained): the order's (lru-order.ts), every
   * item in it of this shard's memory and the map's entry for its key, as
   * many as curr_items says, their bytes as `bytes`, the budget and each
   * class's number and mem_requested count them.
   */
  check(): string[] {
    const v = this.v;
    const map = this.map;
    let allocated = 0;
    let requested = 0;
    const perClass = new Map<number, [number, number]>();
    const strays: string[] = [];
    const problems = this.order.check((_ref, ptr) => {
      const held = map.acquire(v.key(ptr));
      if (held === 0 || map.valuePointer(held) !== ptr) strays.push(`${v.key(ptr)}: the order's item is not the map's entry for its key`);
      if (held !== 0) map.release(held);
      if (this.heap.ownerOf(ptr) !== this.shard) strays.push(`${v.key(ptr)}: on shard ${this.shard}'s order, in shard ${this.heap.ownerOf(ptr)}'s memory`);
      allocated += v.allocated(ptr);
      requested += v.itemBytes(ptr);
      const [number, bytes] = perClass.get(itemClass(v.allocated(ptr))) ?? [0, 0];
      perClass.set(itemClass(v.allocated(ptr)), [number + 1, bytes + v.itemBytes(ptr)]);
    });
    problems.push(...strays);
    if (this.handOver.waiting) problems.push("items handed over wait in the inbox");
    problems.push(...this.counts.check(this.order.size, requested, allocated, perClass, ITEM_CLASSES));
    return problems;
  }
}

function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}
