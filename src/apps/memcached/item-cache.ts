/**
 * One shard's item cache: the items whose keys this shard owns
 * (key-owner.ts), each the value of an entry in this shard's SharedMap
 * (item.ts), which every shard reads; their memory budget, their LRU
 * order, eviction, expiry and flush. The store commands (store.ts) say
 * what to link and unlink; this file says where the memory comes from and
 * what must go to make room. Every change runs here, on the owning shard's
 * thread: the map has one writer.
 *
 * Order: the LRU order (lru-order.ts), a list through two words of each
 * item's header, so that linking, unlinking and moving an item cost O(1)
 * whatever the cache holds. It was a JS Map used as a queue, walked from
 * its front past the holes of every entry deleted since: a full --smp 1
 * server under memcaslap's half sets (64 B keys, 1 KiB values, 256 MiB)
 * spent 17% of its time in eviction and 13% in the expired-tail look, and
 * fell from 51k requests/s filling to 12k at 171,000 items.
 *
 * Eviction is CLOCK (second chance): a hit, on any shard, only sets the
 * item's referenced byte (a plain store: other shards never touch the
 * list); eviction takes the tail, and a referenced item there gets its
 * mark cleared and goes to the head instead (evictOne). An eviction looks
 * at EVICT_LOOKS items at most: the one after that many second chances
 * goes whatever its mark, so a burst of hits costs no set more than a
 * bounded walk (memcached's tail search looks at 5).
 *
 * Finding a key's entry: the map itself (acquire), no JS index beside it;
 * the entry's own reference (the one the list links by, and the map's
 * unlink takes) is the link that names it in the list (current).
 *
 * Memory: items are allocated from this shard's heap region. A budget of
 * allocated bytes (the shard's share of -m, the region made bigger for the
 * rest: cache-memory.ts; under --memory, 90% of the region's object pages
 * less the index, the rest left for the staging area, the profiler's tags
 * and small-pool slack) is kept by evicting from the tail before
 * allocating. When the memory is there but not in one piece (pages held
 * by other size classes, or a page span wanted among small items' pages:
 * the slab problem memcached has too), eviction goes on from the tail in batches of the size wanted, the
 * allocation tried again after each (makeRoom), until it fits: what must
 * go and no more. The budget then becomes what the heap was found to hold
 * (so the next allocations evict first instead of failing: with 2,000-byte
 * items in 1 MiB shards, a fixed budget failed 287 mallocs of 2,000
 * sets), and grows back, up to its start, whenever an allocation finds
 * room without evicting (roomNow). Only an item that cannot fit in an
 * empty shard is refused ("SERVER_ERROR out of memory storing object").
 * The budget once dropped to 97% of what was live after each
 * OutOfMemoryError and rose again only when the shard emptied: after
 * 200,000 items of 100 B, 8 MiB shards then held 3 items of 900 KB with
 * 5.2 MB free, where 7 fit.
 *
 * A replaced or removed item's memory comes back when the last reader
 * lets go of it (shared-map/shared-map.ts: the map frees it then, or at the owner's
 * next reclaim); the budget counts the linked items only, and makeRoom's
 * retries see what readers still held.
 *
 * Expiry is lazy, as in memcached without its LRU crawler: an expired item
 * is unlinked when a request finds it (a get on another shard asks the
 * owner to: OP_EXPIRE), when eviction reaches it, or when it is among the
 * RECLAIM_LOOKS oldest as a new item takes memory.
 *
 * Other writers, later: how a shard that writes into the map directly
 * would hand this shard the items of its memory it replaced (lru-order.ts).
 */
import { OutOfMemoryError } from "../../errors.js";
import { enterHeapLabels, leaveHeapLabels } from "../../memory/profiler/heap-labels.js";
import { PAGE_SIZE } from "../../memory/layout.js";
import type { ShardAllocator } from "../../memory/shard-allocator.js";
import type { SharedHeap } from "../../memory/shared-heap.js";
import { SharedMap } from "../../memory/shared-map/shared-map.js";
import { keyArea } from "../../memory/shared-map/layout.js";
import { MAX_SMALL_SIZE } from "../../memory/size-classes.js";
import type { ItemViews } from "./item.js";
import { ITEM_CLASSES, classSlot, itemClass } from "./item-classes.js";
import { FlushedItems } from "./flushed-items.js";
import { LruOrder } from "./lru-order.js";
import { indexCapacity, indexSegments } from "./cache-memory.js";
import { PrefixLabels } from "./prefix-labels.js";
import { MAX_PREFIXES, keyPrefix } from "./prefix-stats.js";
import { expired } from "./protocol.js";
import { STAT } from "./stats.js";

/** Share of the region's object pages the items may take. */
const BUDGET = 0.9;
/** A free span this long holds a new span of any small pool (size-classes.ts: at most 16 pages). */
const ANY_POOL_SPAN = 16 * PAGE_SIZE;
/**
 * Under --memory, the index is made for an entry per this many bytes of the shard's
 * memory (items of 2 KB on average), its table and descriptors at once
 * (SharedMap.create's capacity): ~3% of the shard (the descriptor chunks
 * double, so up to 64 B an entry), and no index structure allocated among
 * the items later unless they are smaller. Made as needed instead, the
 * index's chunks pinned pages all over a shard: a 1 MiB shard emptied of
 * its 329 items of 2 KB had no 384 KiB in one piece.
 */
const INDEX_BYTES_PER_ENTRY = 2048;
/** How long an owner with entries waiting to be freed waits for more before it reclaims them itself (ms). */
const RECLAIM_AFTER_MS = 10;
/** Items evicted at a time when the index's table cannot grow for want of memory. */
const TABLE_EVICTION_BATCH = 64;
/** Items at the tail looked at for an expired one before a new item takes memory (memcached looks at 5). */
const RECLAIM_LOOKS = 5;
/** Second chances one eviction gives at most before the next item at the tail goes whatever its mark (memcached's tail search looks at 5). */
const EVICT_LOOKS = 5;

export interface CacheOptions {
  heap: SharedHeap;
  memory: ShardAllocator;
  views: ItemViews;
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
   * shard's pages, the index's included (--memory).
   */
  itemBytes: number;
}

export class ItemCache {
  /** This shard's index: key -> item, read by every shard, changed only here. */
  readonly map: SharedMap;
  private readonly memory: ShardAllocator;
  private readonly v: ItemViews;
  private readonly c: Float64Array;
  private readonly classes: Float64Array;
  private readonly evict: boolean;
  private readonly prefixLabels: PrefixLabels;
  /** The linked items, newest first (the same items as the map's). */
  private readonly order: LruOrder;
  /** Allocated bytes of the linked items (their entries' entryBytes; used() adds the index's under --memory). */
  private allocatedBytes = 0;
  /** Whether the budget counts the index's bytes with the items' (--memory), or the items' alone (-m). */
  private readonly countsIndex: boolean;
  /** What the items may take at most: -m's share or BUDGET of the shard, scaled by cache_memlimit (setLimit). */
  private startBudget: number;
  private readonly fullBudget: number;
  /** What the items may take now: startBudget, or less where the heap was found to hold less. */
  private budget: number;
  /** What the last flush_all left for the counters (get_flushed, reclaimed). */
  private readonly flushed: FlushedItems;
  private flushTimer: NodeJS.Timeout | undefined;
  private reclaimTimer: NodeJS.Timeout | undefined;
  private readonly reclaimLater = (): void => {
    this.reclaimTimer = undefined;
    this.map.reclaim();
    if (this.map.reclaimPending) this.scheduleReclaim();
  };

  constructor(o: CacheOptions) {
    this.memory = o.memory;
    this.v = o.views;
    this.c = o.counters;
    this.classes = o.classes;
    const total = o.memory.stats().totalMemory;
    this.countsIndex = o.itemBytes === 0;
    const capacity = this.countsIndex ? Math.max(64, Math.floor(total / INDEX_BYTES_PER_ENTRY)) : indexCapacity(o.itemBytes);
    this.map = SharedMap.create(o.heap, { shard: o.shard, capacity, segments: indexSegments(o.heap.shards) });
    this.fullBudget = this.countsIndex ? Math.floor(total * BUDGET) : o.itemBytes;
    this.startBudget = this.fullBudget;
    this.budget = this.startBudget;
    this.evict = o.evict;
    this.prefixLabels = new PrefixLabels(o.prefixDelimiter);
    this.order = new LruOrder(o.views, this.map);
    this.flushed = new FlushedItems(o.counters);
  }

  /** Items linked. */
  get size(): number {
    return this.order.size;
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
   * An object of `size` bytes from this shard, evicting least recently
   * used items to make room; 0 when even an empty shard cannot hold it.
   * For staging buffers of values bound for other shards. With `key`, the
   * object is as big as the map entry of that key and `size` bytes would
   * be (its key area more), so that it takes a slot of the entries' size
   * class, which eviction frees: a staging copy of a 100 B value one class
   * below its entries' found no slot after evictions, and its malloc failed.
   */
  allocate(size: number, key?: string): number {
    return this.obtain(key === undefined ? size : keyArea(Buffer.byteLength(key, "utf8")) + size, undefined);
  }

  /**
   * A new entry for `key` in this shard's map, room for an item of `size`
   * bytes at map.valuePointer(ref), not yet in the map (link or giveUp
   * ends it); evicting least recently used items to make room. 0 when
   * even an empty shard cannot hold it.
   */
  reserve(key: string, size: number): number {
    return this.obtain(size, key);
  }

  /** Give up a reservation nobody will publish (a value that did not arrive whole, a refused store). */
  giveUp(ref: number): void {
    this.map.release(ref);
  }

  /** Free a staging buffer (or any plain object) nobody else can hold. */
  discardUnlinked(ptr: number): void {
    this.memory.free(ptr);
  }

  /** The evictions and retries shared by allocate (`key` undefined: a plain object) and reserve. */
  private obtain(size: number, key: string | undefined): number {
    if (key !== undefined) this.reclaimExpiredTail();
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
    const got = this.tryObtain(size, key);
    if (got !== 0) return got;
    const made = this.makeRoom(size, key);
    if (made === 0) this.classes[classSlot(itemClass(size), "outofmemory")]++;
    return made;
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
      if (expired(v.exptime(ptr), now)) {
        this.countReclaimed(ptr);
        this.unlinkAt(ref, ptr);
        freed = true;
      }
      ref = newer;
    }
    if (freed) this.map.reclaim();
  }

  /** What the budget counts: the linked items' bytes, and under --memory the index's own (its tables and descriptors, which grow with the items). */
  private used(): number {
    return this.countsIndex ? this.allocatedBytes + this.map.structureBytes : this.allocatedBytes;
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

  /** obtain's slow path: the budget allows `size` but the heap has no room in one piece. Evict until it has. */
  private makeRoom(size: number, key: string | undefined): number {
    for (;;) {
      if (this.order.size === 0) {
        // What readers held may have come back meanwhile.
        return this.map.reclaim() > 0 ? this.tryObtain(size, key) : 0;
      }
      // A batch of `size` bytes (at least one item), then try again: an
      // item at a time would pay a trim per item (a 900 KB page span among
      // 160-byte items took 5,600 of them).
      const until = this.allocatedBytes - size;
      const now = nowSeconds();
      let evicted = false;
      while (this.order.size > 0) {
        // A page span next in line goes only once what the batch freed so far has been tried: small
        // items a few hundred bytes short of `size` took the oldest 900 KB item with them, and the
        // budget then stayed an item lower (a shard of 8 MiB kept 3 of them where 5 fit).
        if (evicted && this.v.allocated(this.map.valuePointer(this.order.tail)) > MAX_SMALL_SIZE) break;
        if (!this.evictOne(now)) break;
        evicted = true;
        if (this.allocatedBytes <= until) break;
      }
      // -M: nothing left that may go.
      if (!evicted) return this.map.reclaim() > 0 ? this.tryObtain(size, key) : 0;
      this.map.reclaim();
      const got = this.tryObtain(size, key);
      if (got !== 0) {
        this.budget = Math.min(this.startBudget, this.used() + size);
        return got;
      }
    }
  }

  /**
   * malloc (or the map's reserve, which mallocs the entry), 0 where it
   * would throw OutOfMemoryError. A page span is looked for first
   * (largestFreeSpan, after a trim that returns the pools' cached objects
   * and empty spans): a failed malloc builds an error with the shard's
   * diagnostics, which makeRoom's retries would pay each time.
   */
  private tryObtain(size: number, key: string | undefined): number {
    const memory = this.memory;
    if (size > MAX_SMALL_SIZE) {
      const bytes = Math.ceil(size / PAGE_SIZE) * PAGE_SIZE;
      if (memory.largestFreeSpan() < bytes && (memory.trim(), memory.largestFreeSpan() < bytes)) return 0;
    }
    // An item's entry carries its key's prefix label while the heap profiler is on (a label is read by a profiled allocation only).
    const labels = key === undefined || memory.heapProfilingSampleRate() === 0 ? undefined : this.prefixLabels.of(key);
    const outer = labels === undefined ? undefined : enterHeapLabels(labels);
    try {
      return key === undefined ? memory.malloc(size) : this.map.reserve(key, size);
    } catch (e) {
      if (!(e instanceof OutOfMemoryError)) throw e;
      return 0;
    } finally {
      if (labels !== undefined) leaveHeapLabels(outer);
    }
  }

  // ------------------------------------------------------------ lookups

  /**
   * The entry linked under `key`, expired or not: the map's own reference
   * to it (valid until it is unlinked), or 0. Found in the map; its own
   * reference is the link its newer neighbour holds, or the head (an entry
   * is in the order exactly while it is in the map), so the lookup's
   * reference is given back at once.
   */
  current(key: string): number {
    const map = this.map;
    const held = map.acquire(key);
    if (held === 0) return 0;
    const ref = this.order.ownRef(map.valuePointer(held));
    map.release(held);
    return ref;
  }

  /** The live entry for `key` (an expired one unlinked on the way; a key flush_all removed forgotten): its reference, or 0. */
  find(key: string, now: number): number {
    const ref = this.current(key);
    if (ref === 0) this.flushed.forget(key);
    return ref === 0 || this.expireIfDue(ref, now, false) ? 0 : ref;
  }

  /** Unlink `ref` if its item has expired (counted as reclaimed; `byGet`: get_expired too); true when it had. */
  expireIfDue(ref: number, now: number, byGet: boolean): boolean {
    const ptr = this.map.valuePointer(ref);
    if (!expired(this.v.exptime(ptr), now)) return false;
    if (byGet) this.c[STAT.get_expired]++;
    this.countReclaimed(ptr);
    this.unlinkAt(ref, ptr);
    return true;
  }

  /**
   * A hit: mark the item used. The order changes only when eviction reaches
   * it (evictOne: second chance), not on every hit: a Map delete and set
   * per hit were 4% of the server's CPU under memcaslap (perf), where a
   * byte in the item costs nothing, and can be set by a hit on any shard.
   */
  bump(ptr: number): void {
    this.v.setReferenced(ptr, true);
  }

  // ------------------------------------------------------------ flush_all's memory

  /** A get found no item for `key`: get_flushed if flush_all removed it (flushed-items.ts). */
  flushedMiss(key: string): void {
    this.flushed.miss(key);
  }

  /** Another request for `key` found nothing (flushed-items.ts forget). */
  forgetFlushed(key: string): void {
    this.flushed.forget(key);
  }

  // ------------------------------------------------------------ link / unlink

  /**
   * Publish the filled reservation `ref` as `key`'s item with this `cas`,
   * in place of the key's old one if it has one: one store in the map's
   * table, so a reader finds the old item or the new, never neither. False
   * (the reservation given up) when the table must grow and even an empty
   * shard has no room for it.
   */
  link(key: string, ref: number, now: number, cas: number): boolean {
    const v = this.v;
    const map = this.map;
    const ptr = map.valuePointer(ref);
    v.setCas(ptr, cas);
    v.setAccessed(ptr, now);
    v.setAllocated(ptr, map.entryBytes(ref));
    const oldRef = this.current(key);
    if (oldRef !== 0) {
      // A replace takes the old entry's slot: the table does not grow, so publish cannot fail; the
      // old item leaves the order first, while its reference is still the map's (publish lets go of it).
      this.leave(map.valuePointer(oldRef));
      map.publish(ref);
      this.scheduleReclaim();
    } else {
      for (;;) {
        try {
          map.publish(ref);
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
          return false;
        }
        map.reclaim();
      }
    }
    this.join(ref, ptr);
    this.flushed.forget(key);
    this.flushed.linked();
    this.c[STAT.total_items]++;
    return true;
  }

  /** Unlink the entry `ref` (delete, a failed set's old value). */
  unlink(ref: number): void {
    this.unlinkAt(ref, this.map.valuePointer(ref));
  }

  private unlinkAt(ref: number, ptr: number): void {
    this.leave(ptr);
    this.map.unlink(ref);
    this.scheduleReclaim();
  }

  /** The item at `ptr` (the entry `ref`) joins the order at the head, and the counts. */
  private join(ref: number, ptr: number): void {
    this.order.push(ref, ptr);
    this.account(ptr, 1);
  }

  /** The item at `ptr` leaves the order and the counts (the map's entry is the caller's to unlink or replace). */
  private leave(ptr: number): void {
    this.order.remove(ptr);
    this.account(ptr, -1);
  }

  /** Add (`sign` 1) or take away (-1) the item at `ptr` in the budget and the item counts. */
  private account(ptr: number, sign: number): void {
    const v = this.v;
    const allocated = v.allocated(ptr);
    const bytes = v.itemBytes(ptr);
    this.allocatedBytes += sign * allocated;
    const c = this.c;
    c[STAT.curr_items] += sign;
    c[STAT.bytes] += sign * bytes;
    const cls = itemClass(allocated);
    this.classes[classSlot(cls, "number")] += sign;
    this.classes[classSlot(cls, "mem_requested")] += sign * bytes;
  }

  /**
   * The map frees what readers let go of by itself once 32 entries wait;
   * an owner that goes quiet with fewer waiting frees them RECLAIM_AFTER_MS
   * later (a timer, only while some wait).
   */
  private scheduleReclaim(): void {
    if (this.reclaimTimer !== undefined) return;
    this.reclaimTimer = setTimeout(this.reclaimLater, RECLAIM_AFTER_MS);
    this.reclaimTimer.unref();
  }

  /** An expired item's memory taken back (memcached's reclaimed; expired_unfetched when no hit ever fetched it). */
  private countReclaimed(ptr: number): void {
    const cls = itemClass(this.v.allocated(ptr));
    this.c[STAT.reclaimed]++;
    this.classes[classSlot(cls, "reclaimed")]++;
    if (!this.v.fetched(ptr)) {
      this.c[STAT.expired_unfetched]++;
      this.classes[classSlot(cls, "expired_unfetched")]++;
    }
  }

  /**
   * Unlink one item from the tail, by second chance (CLOCK): an expired
   * one goes (reclaimed); one a hit used since it was last here has its
   * mark cleared and moves to the head instead; else it is evicted. After
   * EVICT_LOOKS second chances, the next item at the tail goes whatever
   * its mark. Without `evict` (-M) only an expired item goes: the live
   * ones looked at move to the head, so the next call looks at others;
   * false when none of EVICT_LOOKS was expired (memcached's -M answers out
   * of memory so too).
   */
  private evictOne(now: number): boolean {
    const v = this.v;
    const map = this.map;
    for (let looked = 0; this.order.size > 0; looked++) {
      const ref = this.order.tail;
      const ptr = map.valuePointer(ref);
      if (expired(v.exptime(ptr), now)) {
        this.countReclaimed(ptr);
        this.unlinkAt(ref, ptr);
        return true;
      }
      if (looked === EVICT_LOOKS) {
        if (!this.evict) return false;
      } else if (!this.evict || v.referenced(ptr)) {
        v.setReferenced(ptr, false);
        this.order.toHead(ref, ptr);
        continue;
      }
      this.countEviction(ptr, now);
      this.unlinkAt(ref, ptr);
      return true;
    }
    return false;
  }

  private countEviction(ptr: number, now: number): void {
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

  // ------------------------------------------------------------ flush_all

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

  /** Unlink everything (the shard's stop, flush_all), from the tail (flushed-items.ts keeps what the counters need of them). */
  flushNow(): void {
    const v = this.v;
    this.flushed.begin(this.order.size);
    while (this.order.size > 0) {
      const ref = this.order.tail;
      const ptr = this.map.valuePointer(ref);
      this.flushed.item(() => v.key(ptr), v.fetched(ptr));
      this.unlinkAt(ref, ptr);
    }
    this.flushed.end();
    this.budget = this.startBudget;
    this.map.reclaim();
  }

  // ------------------------------------------------------------ operator walks

  /**
   * `stats items` age: per class id, seconds since the least recently used
   * item of that class took its place in the order (0 for a class without
   * items). One walk from the tail, stopping once every class with items
   * has been seen: the whole order at worst (a class whose only items are
   * the newest), as `stats items` is asked for rarely, by people and
   * monitors.
   */
  classAges(now: number, classCount: number): number[] {
    const ages = new Array<number>(classCount + 1).fill(0);
    let missing = 0;
    for (let id = 1; id <= classCount; id++) if (this.classes[classSlot(id, "number")]! > 0) missing++;
    const seen = new Uint8Array(classCount + 1);
    const v = this.v;
    for (let ref = this.order.tail; ref !== 0 && missing > 0; ) {
      const ptr = this.map.valuePointer(ref);
      ref = v.newer(ptr);
      const id = itemClass(v.allocated(ptr));
      if (seen[id] !== 0) continue;
      seen[id] = 1;
      missing--;
      ages[id] = Math.max(0, now - v.accessed(ptr));
    }
    return ages;
  }

  /**
   * The bytes of this shard's items (as `bytes` counts them) per key
   * prefix (prefix-stats.ts keyPrefix, with the cache's -D delimiter);
   * keys without one are left out; the prefixes in the order of their
   * oldest items. Walks every item: for `stats detail dump bytes`, an
   * operator's command, so a set pays nothing for it (at most MAX_PREFIXES
   * prefixes, as stats detail's own bound).
   */
  bytesByPrefix(): Map<string, number> {
    const v = this.v;
    const delimiter = this.prefixLabels.delimiter;
    const out = new Map<string, number>();
    for (let ref = this.order.tail; ref !== 0; ) {
      const ptr = this.map.valuePointer(ref);
      ref = v.newer(ptr);
      const prefix = keyPrefix(v.key(ptr), delimiter);
      if (prefix === undefined) continue;
      const seen = out.get(prefix);
      if (seen === undefined && out.size >= MAX_PREFIXES) continue;
      out.set(prefix, (seen ?? 0) + v.itemBytes(ptr));
    }
    return out;
  }

  /**
   * `stats cachedump`: up to `limit` (0: all) items of class `id`, the
   * most recently placed first (memcached lists its LRU from the head),
   * as [key, value bytes, absolute exptime (0: never)]; at most `budget`
   * bytes of answer lines.
   */
  dump(id: number, limit: number, budget: number): Array<[string, number, number]> {
    const v = this.v;
    const out: Array<[string, number, number]> = [];
    let bytes = 0;
    for (let ref = this.order.head; ref !== 0 && (limit === 0 || out.length < limit); ) {
      const ptr = this.map.valuePointer(ref);
      ref = v.older(ptr);
      if (itemClass(v.allocated(ptr)) !== id) continue;
      const row: [string, number, number] = [v.key(ptr), v.length(ptr), v.exptime(ptr)];
      // "ITEM <key> [<bytes> b; <exptime> s]\r\n"
      bytes += 16 + row[0].length + String(row[1]).length + String(row[2]).length;
      if (bytes > budget) break;
      out.push(row);
    }
    return out;
  }

  /**
   * The cache's invariants as sentences, [] when they hold (for tests, on
   * a quiet cache): the order's (lru-order.ts), every item in it the map's
   * entry for its key, as many as the map and curr_items say, their bytes
   * as `bytes`, the budget and each class's number and mem_requested count
   * them.
   */
  check(): string[] {
    const v = this.v;
    let allocated = 0;
    let requested = 0;
    const perClass = new Map<number, [number, number]>();
    const strays: string[] = [];
    const problems = this.order.check((ref, ptr) => {
      if (this.current(v.key(ptr)) !== ref) strays.push(`${v.key(ptr)}: the order's item is not the map's entry for its key`);
      allocated += v.allocated(ptr);
      requested += v.itemBytes(ptr);
      const [number, bytes] = perClass.get(itemClass(v.allocated(ptr))) ?? [0, 0];
      perClass.set(itemClass(v.allocated(ptr)), [number + 1, bytes + v.itemBytes(ptr)]);
    });
    problems.push(...strays);
    const n = this.order.size;
    const c = this.c;
    if (n !== this.map.size) problems.push(`the order holds ${n} items, the map ${this.map.size}`);
    if (c[STAT.curr_items] !== n || c[STAT.bytes] !== requested) problems.push(`curr_items ${c[STAT.curr_items]} and bytes ${c[STAT.bytes]}, the order holds ${n} of ${requested}`);
    if (allocated !== this.allocatedBytes) problems.push(`the items take ${allocated} bytes, the budget counts ${this.allocatedBytes}`);
    for (let id = 1; id <= ITEM_CLASSES; id++) {
      const [number, bytes] = perClass.get(id) ?? [0, 0];
      const counted = [this.classes[classSlot(id, "number")], this.classes[classSlot(id, "mem_requested")]];
      if (counted[0] !== number || counted[1] !== bytes) problems.push(`class ${id} counts ${counted[0]} items of ${counted[1]} bytes, the order holds ${number} of ${bytes}`);
    }
    return problems;
  }
}

function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}
