/**
 * One shard's part of the cache: the items whose keys this shard owns
 * (key-owner.ts), each the value of an entry in this shard's SharedMap
 * (item.ts), which every shard reads: a get is served by the shard that
 * holds the connection, from shared memory, without a message
 * (connection.ts lookup). Every change (store, delete, incr, touch,
 * eviction, expiry, flush) runs here, on the owning shard's thread: the
 * map has one writer, and requests to change these keys from connections
 * on other shards arrive as messages (remote.ts).
 *
 * Order: beside the map, a JS Map from key to the entry's reference keeps
 * the LRU order (its insertion order, least recent first), by second
 * chance: a hit, on any shard, marks the item; eviction takes from the
 * front and moves marked items to the back instead (evictOne). The map
 * and the order always hold the same keys: every change goes through here.
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
 * A replaced or removed item's memory comes back when the last reader
 * lets go of it (shared-map.ts: the map frees it then, or at the owner's
 * next reclaim); the budget counts the linked items only, and makeRoom's
 * retries see what readers still held.
 *
 * Expiry is lazy, as in memcached without its LRU crawler: an expired item
 * is unlinked when a request finds it (a get on another shard asks the
 * owner to: OP_EXPIRE) or when eviction reaches it.
 */
import { OutOfMemoryError } from "../../errors.js";
import { enterHeapLabels, leaveHeapLabels } from "../../memory/heap-labels.js";
import { PAGE_SIZE } from "../../memory/layout.js";
import type { ShardAllocator } from "../../memory/shard-allocator.js";
import type { SharedHeap } from "../../memory/shared-heap.js";
import { SharedMap } from "../../memory/shared-map/shared-map.js";
import { keyArea } from "../../memory/shared-map/layout.js";
import { MAX_SMALL_SIZE } from "../../memory/size-classes.js";
import { MARK_KEY_BINARY, MARK_STALE, MARK_TOKEN_SENT, itemSize, type ItemViews } from "./item.js";
import { MODE_ADD, MODE_APPEND, MODE_CAS, MODE_PREPEND, MODE_REPLACE, expired, type StoreMode } from "./protocol.js";
import { classSlot, itemClass } from "./item-classes.js";
import { PrefixLabels } from "./prefix-labels.js";
import { MAX_PREFIXES, keyPrefix } from "./prefix-stats.js";
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

/**
 * What the meta protocol's ms adds to a store (meta-commands.ts): the CAS
 * value to give the item (E; -1: a new one), whether a lower compared CAS
 * may store the value as stale (I), and whether append / prepend store a
 * new item on a miss (N). Over the wire (remote.ts) as two numbers: casIn
 * and META_* bits.
 */
export interface MetaStore {
  casIn: number;
  invalidate: boolean;
  vivify: boolean;
}
export const META_INVALIDATE = 1;
export const META_VIVIFY = 2;
/** The store's result wanted as metaResult's string (an ms). */
export const META_RESULT = 4;
/** mg's answer bits (metaGet): won the recache (W), a win was sent before (Z), stale (X), fetched before (h). */
export const MG_WON = 1;
export const MG_TOKEN_SENT = 2;
export const MG_STALE = 4;
export const MG_FETCHED = 8;
/** precondition's verdicts beyond R_*: store the value as stale (ms I with a lower CAS); store it as new (append with N, on a miss). */
const STORE_STALE = 100;
const STORE_NEW = 101;

/** Share of the region's object pages the items may take. */
const BUDGET = 0.9;
/** A free span this long holds a new span of any small pool (size-classes.ts: at most 16 pages). */
const ANY_POOL_SPAN = 16 * PAGE_SIZE;
const MAX_U64 = 2n ** 64n - 1n;
/** strtoull's reading of an item's value for incr/decr: blanks, a sign, digits, then a blank or the end. */
const NUMERIC = /^[ \t\n\v\f\r]*([+-]?)(\d+)(?:[ \t\n\v\f\r]|$)/;

export interface StoreOptions {
  heap: SharedHeap;
  memory: ShardAllocator;
  views: ItemViews;
  /** This shard's row of counters (stats.ts). */
  counters: Float64Array;
  /** This shard's per-class counters (stats.ts classCounters, item-classes.ts). */
  classes: Float64Array;
  shard: number;
  shards: number;
  /** Largest item, bytes (an append past it is not stored). */
  maxItemSize: number;
  /** Evict live items to make room (false: memcached's -M; only expired items go, else the store fails for want of memory). */
  evict: boolean;
  /** Items get cas values (false: memcached's -C; every item's cas is 0, as in memcached, whose items then have no cas field). */
  casEnabled: boolean;
  /** Where a key's prefix ends (-D): an item's heap label `prefix` (prefix-labels.ts). */
  prefixDelimiter: string;
}

/**
 * The index is made for an entry per this many bytes of the shard's
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
/** Items at the front of the LRU order looked at for an expired one before a new item takes memory (memcached looks at 5). */
const RECLAIM_LOOKS = 5;
/**
 * Keys flush_all removed that the store remembers, to count get_flushed
 * as memcached does (a get of an item flush_all invalidated): memcached
 * finds such items lazily, here flush_all frees them at once (the memory
 * comes back), so their keys are kept, the strings the order held, up
 * to this many, until a request for the key or the next flush. A get on
 * another shard asks only while some are kept (STAT.flushed_kept).
 */
const MAX_FLUSHED_KEYS = 1 << 16;

export class ItemStore {
  /** This shard's index: key -> item, read by every shard, changed only here. */
  readonly map: SharedMap;
  private readonly memory: ShardAllocator;
  private readonly v: ItemViews;
  private readonly c: Float64Array;
  private readonly classes: Float64Array;
  /** Keys the last flush_all removed, not asked for since (get_flushed). */
  private flushed = new Set<string>();
  /** Items the last flush_all removed whose memory the next stores count as reclaimed (flushNow). */
  private flushedReusable = 0;
  /** Whether each of those had been fetched, least recent first, the order the next stores reuse them in (expired_unfetched). */
  private flushedFetched = new Uint8Array(0);
  /** key -> the map's reference to the key's entry; insertion order is the LRU order, least recent first. */
  private readonly items = new Map<string, number>();
  /** Allocated bytes of the linked items (their entries' entryBytes; used() adds the index's). */
  private allocatedBytes = 0;
  /** What the items may take at most: BUDGET of the shard, scaled by cache_memlimit (setLimit). */
  private startBudget: number;
  private readonly fullBudget: number;
  /** What the items may take now: startBudget, or less where the heap was found to hold less. */
  private budget: number;
  /** cas values: this shard's id, then every `shards`-th number after (unique across shards). */
  private nextCas: number;
  private readonly casStep: number;
  private readonly casEnabled: boolean;
  private readonly prefixLabels: PrefixLabels;
  private readonly maxItemSize: number;
  /** The cas value and value length of the item the last store() / storeReserved() linked (0, 0: it linked none), for ms's c and s flags. */
  private lastCas = 0;
  private lastLength = 0;
  private readonly evict: boolean;
  private flushTimer: NodeJS.Timeout | undefined;
  private reclaimTimer: NodeJS.Timeout | undefined;
  private readonly reclaimLater = (): void => {
    this.reclaimTimer = undefined;
    this.map.reclaim();
    if (this.map.reclaimPending) this.scheduleReclaim();
  };

  constructor(o: StoreOptions) {
    this.memory = o.memory;
    this.v = o.views;
    this.c = o.counters;
    this.classes = o.classes;
    this.map = SharedMap.create(o.heap, { shard: o.shard, capacity: Math.max(64, Math.floor(o.memory.stats().totalMemory / INDEX_BYTES_PER_ENTRY)) });
    this.fullBudget = Math.floor(o.memory.stats().totalMemory * BUDGET);
    this.startBudget = this.fullBudget;
    this.budget = this.startBudget;
    this.nextCas = o.shard + 1;
    this.casStep = o.shards;
    this.casEnabled = o.casEnabled;
    this.prefixLabels = new PrefixLabels(o.prefixDelimiter);
    this.maxItemSize = o.maxItemSize;
    this.evict = o.evict;
  }

  get size(): number {
    return this.items.size;
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

  /**
   * A get found no item for `key`: whether flush_all removed it (counted
   * in get_flushed, once, as memcached counts the flushed item it finds).
   */
  flushedMiss(key: string): void {
    if (this.flushed.size === 0 || !this.flushed.delete(key)) return;
    this.c[STAT.get_flushed]++;
    this.c[STAT.flushed_kept] = this.flushed.size;
  }

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
   * bytes at map.valuePointer(ref), not yet in the map (storeReserved or
   * giveUp ends it); evicting least recently used items to make room. 0
   * when even an empty shard cannot hold it.
   */
  reserve(key: string, size: number): number {
    return this.obtain(size, key);
  }

  /** Give up a reservation nobody will publish (a value that did not arrive whole, a refused store). */
  giveUp(ref: number): void {
    this.map.release(ref);
  }

  /** The evictions and retries shared by allocate (`key` undefined: a plain object) and reserve. */
  private obtain(size: number, key: string | undefined): number {
    if (key !== undefined) this.reclaimExpiredTail();
    if (this.used() + size > this.budget && this.budget < this.startBudget && this.roomNow(size)) {
      this.budget = Math.min(this.startBudget, this.used() + size);
    }
    if (this.used() + size > this.budget && this.items.size > 0) {
      while (this.evictOne() && this.used() + size > this.budget && this.items.size > 0);
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
   * Before an item takes new memory, the oldest items (the front of the
   * LRU order, up to RECLAIM_LOOKS) that have expired give theirs back, as
   * memcached's allocator checks the LRU tail for an expired item to reuse
   * (its `reclaimed`): a cache whose items expire then stays the size it
   * was instead of holding the dead ones until eviction reaches them
   * (memcached's t/issue_14.t: total_malloced must not grow).
   */
  private reclaimExpiredTail(): void {
    if (this.items.size === 0) return;
    const now = Math.floor(Date.now() / 1000);
    let looked = 0;
    let freed = false;
    for (const [key, ref] of this.items) {
      if (looked++ === RECLAIM_LOOKS) break;
      if (this.expiredNow(key, ref, now, false)) freed = true;
    }
    if (freed) this.map.reclaim();
  }

  /** What the budget counts: the linked items' bytes and the index's own (its tables and descriptors, which grow with the items). */
  private used(): number {
    return this.allocatedBytes + this.map.structureBytes;
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
      if (this.items.size === 0) {
        // What readers held may have come back meanwhile.
        return this.map.reclaim() > 0 ? this.tryObtain(size, key) : 0;
      }
      // A batch of `size` bytes (at least one item), then try again: an
      // item at a time would pay a trim per item (a 900 KB page span among
      // 160-byte items took 5,600 of them).
      const until = this.allocatedBytes - size;
      let evicted = false;
      while (this.items.size > 0 && this.evictOne()) {
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

  /** Free a staging buffer (or any plain object) nobody else can hold. */
  discardUnlinked(ptr: number): void {
    this.memory.free(ptr);
  }

  /**
   * gat / gats of one key, and a get that the owner's own thread serves
   * for a caller elsewhere: a counted reference to the key's entry (the
   * caller releases it on its own SharedMap object for this shard's map,
   * once written), or 0. `touchTo`: the new absolute exptime (gat).
   * Plain gets do not come here: every shard reads the map itself
   * (connection.ts lookup).
   */
  get(key: string, now: number, touchTo?: number): number {
    const c = this.c;
    c[STAT.cmd_get]++;
    if (touchTo !== undefined) c[STAT.cmd_touch]++;
    const ref = this.items.get(key);
    if (ref === undefined || this.expiredNow(key, ref, now, true)) {
      if (ref === undefined) this.flushedMiss(key);
      c[STAT.get_misses]++;
      if (touchTo !== undefined) c[STAT.touch_misses]++;
      return 0;
    }
    c[STAT.get_hits]++;
    const ptr = this.map.valuePointer(ref);
    if (touchTo !== undefined) {
      c[STAT.touch_hits]++;
      this.v.setExptime(ptr, touchTo);
    }
    this.bump(ptr);
    this.v.setAccessed(ptr, now);
    return this.map.retain(ref);
  }

  /** A get on another shard found `key`'s item expired: unlink it if it still is. */
  expire(key: string, now: number): void {
    this.find(key, now);
  }

  /**
   * A storage command whose item another shard staged (its staging copy at
   * `src`, left to that shard): copied into an entry of this shard's map
   * when the command stores. `cas`: the client's value for the cas command
   * (a decimal string).
   */
  store(mode: StoreMode, key: string, src: number, cas: string, now: number, meta?: MetaStore): number {
    this.c[STAT.cmd_set]++;
    this.lastCas = this.lastLength = 0;
    // Conditions first, so a store that will not happen allocates nothing.
    const verdict = this.precondition(mode, key, cas, now, meta);
    if (verdict !== R_STORED && verdict !== STORE_STALE && verdict !== STORE_NEW) return verdict;
    const casIn = meta?.casIn ?? -1;
    if (verdict === R_STORED && (mode === MODE_APPEND || mode === MODE_PREPEND)) return this.concatenate(mode, key, src, now, casIn);
    const ref = this.copyIn(key, src);
    if (ref === 0) return this.noMemory();
    if (verdict === STORE_STALE) this.markStale(key, ref);
    return this.linkChecked(mode, key, ref, now, casIn);
  }

  /** A storage command whose item was filled in the entry `ref` reserved (reserve, here or for another shard's connection: a reservation's reference is a counted one, valid on any thread): published or given up here. */
  storeReserved(mode: StoreMode, key: string, ref: number, cas: string, now: number, meta?: MetaStore): number {
    this.c[STAT.cmd_set]++;
    this.lastCas = this.lastLength = 0;
    const verdict = this.precondition(mode, key, cas, now, meta);
    if (verdict !== R_STORED && verdict !== STORE_STALE && verdict !== STORE_NEW) {
      this.giveUp(ref);
      return verdict;
    }
    const casIn = meta?.casIn ?? -1;
    if (verdict === R_STORED && (mode === MODE_APPEND || mode === MODE_PREPEND)) {
      const result = this.concatenate(mode, key, this.map.valuePointer(ref), now, casIn);
      this.giveUp(ref);
      return result;
    }
    if (verdict === STORE_STALE) this.markStale(key, ref);
    return this.linkChecked(mode, key, ref, now, casIn);
  }

  /** The last store's result for an ms: "<R_*> <cas> <value length>". */
  metaResult(result: number): string {
    return `${result} ${this.lastCas} ${this.lastLength}`;
  }

  /** Link a filled reservation, unless the old item a replace or cas needs went while it was being made (eviction). */
  private linkChecked(mode: StoreMode, key: string, ref: number, now: number, casIn: number): number {
    if (!this.items.has(key) && (mode === MODE_REPLACE || mode === MODE_CAS)) {
      this.giveUp(ref);
      return mode === MODE_CAS ? R_NOT_FOUND : R_NOT_STORED;
    }
    return this.link(key, ref, now, casIn) ? R_STORED : this.noMemory();
  }

  /** A store that found no room (counted as memcached counts it; a reservation's failure is counted by the connection that asked). */
  private noMemory(): number {
    this.c[STAT.store_no_memory]++;
    return R_NO_MEMORY;
  }

  /** An ms I whose CAS was lower: the new value keeps the old item's TTL and win token, and is stale (memcached's CAS_STALE). */
  private markStale(key: string, ref: number): void {
    const v = this.v;
    const old = this.map.valuePointer(this.items.get(key)!);
    const ptr = this.map.valuePointer(ref);
    v.setExptime(ptr, v.exptime(old));
    v.setMarks(ptr, v.marks(ptr) | MARK_STALE | (v.marks(old) & MARK_TOKEN_SENT));
  }

  /** The store's verdict before any allocation: R_STORED (go on), STORE_STALE / STORE_NEW (go on so), or why not. */
  private precondition(mode: StoreMode, key: string, cas: string, now: number, meta: MetaStore | undefined): number {
    const old = this.find(key, now);
    switch (mode) {
      case MODE_ADD:
        if (old === 0) return R_STORED;
        this.bump(this.map.valuePointer(old)); // memcached: a failed add refreshes the item
        return R_NOT_STORED;
      case MODE_APPEND:
      case MODE_PREPEND:
        // ms: N stores a new item on a miss; a compared CAS must match.
        if (old === 0) return meta?.vivify ? STORE_NEW : R_NOT_STORED;
        return cas !== "" && String(this.v.cas(this.map.valuePointer(old))) !== cas ? R_EXISTS : R_STORED;
      case MODE_REPLACE:
        return old === 0 ? R_NOT_STORED : R_STORED;
      case MODE_CAS: {
        if (old === 0) {
          this.c[STAT.cas_misses]++;
          return R_NOT_FOUND;
        }
        const current = this.v.cas(this.map.valuePointer(old));
        if (String(current) === cas) {
          this.c[STAT.cas_hits]++;
          return R_STORED;
        }
        if (meta?.invalidate && BigInt(cas) < BigInt(current)) {
          this.c[STAT.cas_hits]++;
          return STORE_STALE;
        }
        this.c[STAT.cas_badval]++;
        return R_EXISTS;
      }
      default:
        return R_STORED;
    }
  }

  /** A copy of another shard's staging item in an entry of this shard's map, reserved (0: no room). */
  private copyIn(key: string, src: number): number {
    const bytes = this.v.itemBytes(src);
    const ref = this.reserve(key, bytes);
    if (ref === 0) return 0;
    const ptr = this.map.valuePointer(ref);
    this.v.bytes.copyWithin(ptr, src, src + bytes);
    return ref;
  }

  /** append / prepend: a new item of the old value and the new one (at `src`), with the old flags and exptime. */
  private concatenate(mode: StoreMode, key: string, src: number, now: number, casIn: number): number {
    const v = this.v;
    const oldRef = this.items.get(key)!;
    // Hold the old item while reserving (eviction could unlink it).
    const hold = this.map.retain(oldRef);
    const old = this.map.valuePointer(hold);
    const length = v.length(old) + v.length(src);
    const flags = v.flags(old);
    const size = itemSize(key.length, flags, length);
    const ref = size > this.maxItemSize ? 0 : this.reserve(key, size);
    if (ref === 0 || this.items.get(key) !== oldRef) {
      this.map.release(hold);
      if (ref !== 0) this.giveUp(ref);
      // memcached answers NOT_STORED when the joined item cannot be made.
      return R_NOT_STORED;
    }
    const ptr = this.map.valuePointer(ref);
    v.writeHead(ptr, 0, key, flags, v.exptime(old), length);
    v.setMarks(ptr, v.marks(old) & MARK_KEY_BINARY);
    const at = v.dataStart(ptr);
    const [first, second] = mode === MODE_APPEND ? [old, src] : [src, old];
    const firstLength = v.length(first);
    v.bytes.copyWithin(at, v.dataStart(first), v.dataStart(first) + firstLength);
    v.bytes.copyWithin(at + firstLength, v.dataStart(second), v.dataStart(second) + v.length(second));
    v.terminate(ptr);
    this.map.release(hold);
    return this.link(key, ref, now, casIn) ? R_STORED : R_NOT_STORED;
  }

  delete(key: string, now: number): number {
    const ref = this.find(key, now);
    if (ref === 0) {
      this.c[STAT.delete_misses]++;
      return R_NOT_FOUND;
    }
    this.c[STAT.delete_hits]++;
    this.unlink(key, ref);
    return R_DELETED;
  }

  /** A failed set leaves no stale value behind (memcached unlinks it too). */
  forget(key: string): void {
    const ref = this.items.get(key);
    if (ref !== undefined) this.unlink(key, ref);
  }

  touch(key: string, exptime: number, now: number): number {
    this.c[STAT.cmd_touch]++;
    const ref = this.find(key, now);
    if (ref === 0) {
      this.c[STAT.touch_misses]++;
      return R_NOT_FOUND;
    }
    this.c[STAT.touch_hits]++;
    const ptr = this.map.valuePointer(ref);
    this.v.setExptime(ptr, exptime);
    this.bump(ptr);
    return R_TOUCHED;
  }

  /**
   * incr / decr by `delta` (a decimal below 2^64): the new value as a
   * decimal string, or R_NOT_FOUND / R_NON_NUMERIC / R_NO_MEMORY. As
   * memcached: the value is read as strtoull reads it, incr wraps at 2^64,
   * decr stops at 0, and a shorter result keeps the value's length, padded
   * with spaces (memcached writes it in place so; here it is a new entry,
   * as readers on other shards may be reading the old one's bytes).
   */
  arith(key: string, incr: boolean, delta: string, now: number, casIn = -1): string | number {
    const v = this.v;
    const oldRef = this.find(key, now);
    if (oldRef === 0) {
      this.c[incr ? STAT.incr_misses : STAT.decr_misses]++;
      return R_NOT_FOUND;
    }
    const old = this.map.valuePointer(oldRef);
    const length = v.length(old);
    const m = length === 0 ? null : NUMERIC.exec(v.value(old).toString("latin1"));
    const value = m ? BigInt(m[2]!) : 0n;
    if (!m || value > MAX_U64 || (m[1] === "-" && value !== 0n)) return R_NON_NUMERIC;
    const d = BigInt(delta);
    const next = incr ? (value + d) & MAX_U64 : value < d ? 0n : value - d;
    const text = next.toString();
    this.c[incr ? STAT.incr_hits : STAT.decr_hits]++;
    const newLength = Math.max(text.length, length);
    const flags = v.flags(old);
    const exptime = v.exptime(old);
    const hold = this.map.retain(oldRef);
    const ref = this.reserve(key, itemSize(key.length, flags, newLength));
    this.map.release(hold);
    if (ref === 0) return R_NO_MEMORY;
    if (this.items.get(key) !== oldRef) {
      this.giveUp(ref);
      return R_NOT_FOUND;
    }
    const ptr = this.map.valuePointer(ref);
    v.writeHead(ptr, 0, key, flags, exptime, newLength);
    const at = v.dataStart(ptr);
    v.bytes.write(text, at, "latin1");
    v.bytes.fill(0x20, at + text.length, at + newLength);
    v.terminate(ptr);
    v.setMarks(ptr, v.marks(old) & MARK_KEY_BINARY);
    return this.link(key, ref, now, casIn) ? text : R_NO_MEMORY;
  }

  /**
   * mg that changes the item, on the owner: T (`touchTo`, an absolute
   * exptime, -1: none), N (`vivifyTo`: on a miss, link an empty item
   * expiring then, and win it), R (`recacheBefore`: win when the item
   * expires before then), a stale item's first fetch (a win), u
   * (`noBump`: no hit marked). The win's token is marked on the item, so
   * the next fetch gets Z instead. Counted as memcached counts mg: a hit
   * with T as a touch, anything else as a get. Returns "<reference> <MG_* bits> <seconds
   * since the last access> <exptime> <exptime before>": a counted
   * reference to the item (the caller releases it) or 0, what h and l
   * report, as they were before, and the exptime after T and before it
   * (memcached's t reports the one of its place in the flags; the caller
   * must not read it from the item: later operations of the same batch
   * may have changed it since).
   */
  metaGet(key: string, now: number, touchTo: number, vivifyTo: number, recacheBefore: number, casIn: number, noBump: boolean, binary: boolean): string {
    const c = this.c;
    const v = this.v;
    let ref = this.items.get(key) ?? 0;
    if (ref !== 0 && this.expiredNow(key, ref, now, true)) ref = 0;
    let created = false;
    if (ref === 0 && vivifyTo >= 0) {
      ref = this.linkText(key, 0, vivifyTo, "", binary ? MARK_KEY_BINARY : 0, now, casIn);
      created = ref !== 0;
    }
    // memcached counts a hit with T as a touch, any miss as a get.
    const touch = touchTo >= 0 && ref !== 0;
    c[touch ? STAT.cmd_touch : STAT.cmd_get]++;
    if (ref === 0) {
      c[STAT.get_misses]++;
      return "0 0 0 0 0";
    }
    c[touch ? STAT.touch_hits : STAT.get_hits]++;
    const ptr = this.map.valuePointer(ref);
    const marks = v.marks(ptr);
    let bits = (v.fetched(ptr) ? MG_FETCHED : 0) | (marks & MARK_TOKEN_SENT ? MG_TOKEN_SENT : 0) | (marks & MARK_STALE ? MG_STALE : 0);
    const idle = now - v.accessed(ptr);
    const before = v.exptime(ptr);
    if (touch) v.setExptime(ptr, touchTo);
    const exptime = v.exptime(ptr);
    const sent = (marks & MARK_TOKEN_SENT) !== 0;
    if (created || (!sent && ((recacheBefore >= 0 && exptime !== 0 && exptime < recacheBefore) || (marks & MARK_STALE) !== 0))) {
      bits |= MG_WON;
      v.setMarks(ptr, marks | MARK_TOKEN_SENT);
    }
    if (!noBump) {
      this.bump(ptr);
      v.setAccessed(ptr, now);
    }
    return `${this.map.retain(ref)} ${bits} ${Math.max(0, idle)} ${exptime} ${before}`;
  }

  /**
   * md on the owner: R_DELETED (HD), R_NOT_FOUND, R_EXISTS (the compared
   * `cas` differs; "" compares none) or R_NO_MEMORY. `invalidate` (I)
   * keeps the item, stale, with a new CAS (`casIn`, or the next) and, with
   * `touchTo` >= 0, a new exptime; `removeValue` (x) leaves an empty value
   * under the key (flags `clientFlags`, exptime `touchTo` or none), as
   * memcached does. A marked item is a new entry, as every change of
   * what readers elsewhere read in place (item.ts).
   */
  metaDelete(key: string, now: number, cas: string, casIn: number, touchTo: number, invalidate: boolean, removeValue: boolean, clientFlags: number): number {
    const v = this.v;
    const ref = this.find(key, now);
    if (ref === 0 || (cas !== "" && String(v.cas(this.map.valuePointer(ref))) !== cas)) {
      this.c[STAT.delete_misses]++;
      return ref === 0 ? R_NOT_FOUND : R_EXISTS;
    }
    if (!invalidate && !removeValue) {
      this.c[STAT.delete_hits]++;
      this.unlink(key, ref);
      return R_DELETED;
    }
    const old = this.map.valuePointer(ref);
    const hold = this.map.retain(ref);
    let flags = v.flags(old);
    let exptime = v.exptime(old);
    let marks = v.marks(old) & MARK_KEY_BINARY;
    let newCas = removeValue && casIn >= 0 ? this.casOf(casIn) : v.cas(old);
    let text: string | undefined;
    if (removeValue) {
      flags = clientFlags;
      exptime = touchTo >= 0 ? touchTo : 0;
      text = "";
    }
    if (invalidate) {
      if (touchTo >= 0) exptime = touchTo;
      marks |= MARK_STALE; // and no token sent: the next fetch wins
      newCas = this.casOf(casIn);
    } else {
      this.c[STAT.delete_hits]++;
    }
    const made = this.linkCopy(key, hold, text, flags, exptime, marks, now, newCas);
    this.map.release(hold);
    return made ? R_DELETED : R_NO_MEMORY;
  }

  /**
   * ma on the owner: incr / decr (arith) with what meta adds: a compared
   * `cas` (R_EXISTS when it differs), `casIn` (E), `vivifyTo` (N: on a
   * miss, link `initial` expiring then), `touchTo` (T: the new exptime on
   * success). Returns "<R_*> <cas> <exptime> <exptime before T> <value>"
   * (R_STORED: done), or a bare R_* number.
   */
  metaArith(key: string, now: number, incr: boolean, delta: string, cas: string, casIn: number, vivifyTo: number, initial: string, touchTo: number): string | number {
    const v = this.v;
    const oldRef = this.find(key, now);
    let text: string;
    if (oldRef === 0) {
      if (vivifyTo < 0) {
        this.c[incr ? STAT.incr_misses : STAT.decr_misses]++;
        return R_NOT_FOUND;
      }
      if (this.linkText(key, 0, vivifyTo, initial, 0, now, casIn) === 0) return R_NO_MEMORY;
      text = initial;
    } else {
      if (cas !== "" && String(v.cas(this.map.valuePointer(oldRef))) !== cas) return R_EXISTS;
      const r = this.arith(key, incr, delta, now, casIn);
      if (typeof r === "number") return r;
      text = r;
    }
    const ptr = this.map.valuePointer(this.items.get(key)!);
    const before = v.exptime(ptr);
    if (touchTo >= 0) v.setExptime(ptr, touchTo);
    return `${R_STORED} ${v.cas(ptr)} ${v.exptime(ptr)} ${before} ${text}`;
  }

  /** Link a new item of `text` under `key` (mg N, ma N): its reference, or 0 when there is no room. */
  private linkText(key: string, flags: number, exptime: number, text: string, marks: number, now: number, casIn: number): number {
    const v = this.v;
    const ref = this.reserve(key, itemSize(key.length, flags, text.length));
    if (ref === 0) return 0;
    const ptr = this.map.valuePointer(ref);
    v.writeHead(ptr, 0, key, flags, exptime, text.length);
    v.bytes.write(text, v.dataStart(ptr), "latin1");
    v.terminate(ptr);
    v.setMarks(ptr, marks);
    return this.link(key, ref, now, casIn) ? this.items.get(key)! : 0;
  }

  /** Link a copy of the item `oldRef` holds (its value, or `text` in its place) with this header: md I and md x. */
  private linkCopy(key: string, oldRef: number, text: string | undefined, flags: number, exptime: number, marks: number, now: number, cas: number): boolean {
    const v = this.v;
    const old = this.map.valuePointer(oldRef);
    const length = text === undefined ? v.length(old) : text.length;
    const ref = this.reserve(key, itemSize(key.length, flags, length));
    if (ref === 0) return false;
    const ptr = this.map.valuePointer(ref);
    v.writeHead(ptr, 0, key, flags, exptime, length);
    const at = v.dataStart(ptr);
    if (text === undefined) v.bytes.copyWithin(at, v.dataStart(old), v.dataStart(old) + length);
    else v.bytes.write(text, at, "latin1");
    v.terminate(ptr);
    v.setMarks(ptr, marks);
    return this.link(key, ref, now, cas);
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
    const flushed = new Set<string>();
    const flushedCount = this.items.size;
    const fetched = new Uint8Array(flushedCount);
    let i = 0;
    for (const [key, ref] of this.items) {
      if (flushed.size < MAX_FLUSHED_KEYS) flushed.add(key);
      fetched[i++] = this.v.fetched(this.map.valuePointer(ref)) ? 1 : 0;
      this.unlink(key, ref);
    }
    this.flushedFetched = fetched;
    this.flushed = flushed;
    this.c[STAT.flushed_kept] = flushed.size;
    // memcached leaves flushed items in place and counts each one a new item reuses as reclaimed; here they are gone at once, so the next stores count them (t/issue_183.t).
    this.flushedReusable = this.items.size === 0 ? flushedCount : this.flushedReusable;
    this.budget = this.startBudget;
    this.map.reclaim();
  }

  /** The live entry for `key` (expired ones unlinked on the way): its reference, or 0. */
  private find(key: string, now: number): number {
    const ref = this.items.get(key);
    if (ref === undefined && this.flushed.size !== 0 && this.flushed.delete(key)) this.c[STAT.flushed_kept] = this.flushed.size;
    return ref === undefined || this.expiredNow(key, ref, now, false) ? 0 : ref;
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

  /** Unlink `ref` if its item has expired; true when it had. */
  private expiredNow(key: string, ref: number, now: number, byGet: boolean): boolean {
    if (!expired(this.v.exptime(this.map.valuePointer(ref)), now)) return false;
    if (byGet) this.c[STAT.get_expired]++;
    this.countReclaimed(this.map.valuePointer(ref));
    this.unlink(key, ref);
    return true;
  }

  /**
   * A hit: mark the item used. The order changes only when eviction reaches
   * it (evictOne: second chance), not on every hit: a Map delete and set
   * per hit were 4% of the server's CPU under memcaslap (perf), where a
   * byte in the item costs nothing, and can be set by a hit on any shard.
   */
  private bump(ptr: number): void {
    this.v.setReferenced(ptr, true);
  }

  /**
   * Publish the filled reservation `ref` as `key`'s item, in place of the
   * key's old one if it has one: one store in the map's table, so a reader
   * finds the old item or the new, never neither. False (the reservation
   * given up) when the table must grow and even an empty shard has no room
   * for it.
   */
  private link(key: string, ref: number, now: number, casIn = -1): boolean {
    const v = this.v;
    const map = this.map;
    const ptr = map.valuePointer(ref);
    const cas = this.casOf(casIn);
    v.setCas(ptr, cas);
    v.setAccessed(ptr, now);
    v.setAllocated(ptr, map.entryBytes(ref));
    for (;;) {
      // The old entry's figures, read while its reference still holds it (publish drops it).
      const oldRef = this.items.get(key);
      const old = oldRef === undefined ? 0 : map.valuePointer(oldRef);
      const oldAllocated = old === 0 ? 0 : v.allocated(old);
      const oldBytes = old === 0 ? 0 : v.itemBytes(old);
      try {
        map.publish(ref);
      } catch (e) {
        if (!(e instanceof OutOfMemoryError)) throw e;
        // The table's next size needs room in one piece: evict a batch, free what readers let go, try again.
        let n = 0;
        while (n < TABLE_EVICTION_BATCH && this.items.size > 0 && this.evictOne()) n++;
        if (n === 0) {
          this.giveUp(ref);
          return false;
        }
        map.reclaim();
        continue;
      }
      const c = this.c;
      if (oldRef !== undefined) {
        this.items.delete(key);
        this.allocatedBytes -= oldAllocated;
        c[STAT.curr_items]--;
        c[STAT.bytes] -= oldBytes;
        this.classes[classSlot(itemClass(oldAllocated), "number")]--;
        this.classes[classSlot(itemClass(oldAllocated), "mem_requested")] -= oldBytes;
        this.scheduleReclaim();
      }
      this.items.set(key, ref);
      if (this.flushed.size !== 0 && this.flushed.delete(key)) c[STAT.flushed_kept] = this.flushed.size;
      if (this.flushedReusable > 0) {
        if (this.flushedFetched[this.flushedFetched.length - this.flushedReusable] === 0) c[STAT.expired_unfetched]++;
        this.flushedReusable--;
        c[STAT.reclaimed]++;
      }
      const allocated = v.allocated(ptr);
      const bytes = v.itemBytes(ptr);
      this.allocatedBytes += allocated;
      c[STAT.curr_items]++;
      c[STAT.total_items]++;
      c[STAT.bytes] += bytes;
      const cls = itemClass(allocated);
      this.classes[classSlot(cls, "number")]++;
      this.classes[classSlot(cls, "mem_requested")] += bytes;
      this.lastCas = cas;
      this.lastLength = v.length(ptr);
      return true;
    }
  }

  private unlink(key: string, ref: number): void {
    const ptr = this.map.valuePointer(ref);
    this.items.delete(key);
    const allocated = this.v.allocated(ptr);
    const bytes = this.v.itemBytes(ptr);
    this.allocatedBytes -= allocated;
    const c = this.c;
    c[STAT.curr_items]--;
    c[STAT.bytes] -= bytes;
    const cls = itemClass(allocated);
    this.classes[classSlot(cls, "number")]--;
    this.classes[classSlot(cls, "mem_requested")] -= bytes;
    this.map.unlink(ref);
    this.scheduleReclaim();
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

  /**
   * Evict the least recently used item, by second chance (CLOCK): take the
   * front of the order; if a hit used it since it was last here, clear the
   * mark and move it to the back instead. Every item moves at most once
   * per pass, so this ends within one pass over the items. Without
   * `evict` (-M) only an expired item goes: false when there is none (a
   * pass over every item, only when memory is full).
   */
  private evictOne(): boolean {
    const v = this.v;
    const map = this.map;
    const now = Math.floor(Date.now() / 1000);
    for (const [key, ref] of this.items) {
      const ptr = map.valuePointer(ref);
      const gone = expired(v.exptime(ptr), now);
      if (!gone && !this.evict) continue;
      if (v.referenced(ptr) && !gone) {
        v.setReferenced(ptr, false);
        this.items.delete(key);
        this.items.set(key, ref);
        continue;
      }
      if (gone) {
        this.countReclaimed(ptr);
      } else {
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
      this.unlink(key, ref);
      return true;
    }
    return false;
  }

  /**
   * `stats items` age: per class id, seconds since the least recently used
   * item of that class took its place in the order (0 for a class without
   * items). One pass from the front of the order, stopping once every
   * class with items has been seen: the whole order at worst (a class
   * whose only items are the newest), as `stats items` is asked for
   * rarely, by people and monitors.
   */
  classAges(now: number, classCount: number): number[] {
    const ages = new Array<number>(classCount + 1).fill(0);
    let missing = 0;
    for (let id = 1; id <= classCount; id++) if (this.classes[classSlot(id, "number")]! > 0) missing++;
    const seen = new Uint8Array(classCount + 1);
    const v = this.v;
    for (const ref of this.items.values()) {
      if (missing === 0) break;
      const ptr = this.map.valuePointer(ref);
      const id = itemClass(v.allocated(ptr));
      if (seen[id] !== 0) continue;
      seen[id] = 1;
      missing--;
      ages[id] = Math.max(0, now - v.accessed(ptr));
    }
    return ages;
  }

  /**
   * `stats cachedump`: up to `limit` (0: all) items of class `id`, the
   * most recently placed first (memcached lists its LRU from the head),
   * as [key, value bytes, absolute exptime (0: never)]; at most `budget`
   * bytes of answer lines.
   */
  /**
   * The bytes of this shard's items (as `bytes` counts them) per key
   * prefix (prefix-stats.ts keyPrefix, with the store's -D delimiter);
   * keys without one are left out. Walks every item: for `stats detail
   * dump bytes`, an operator's command, so a set pays nothing for it (at
   * most MAX_PREFIXES prefixes, as stats detail's own bound).
   */
  bytesByPrefix(): Map<string, number> {
    const v = this.v;
    const delimiter = this.prefixLabels.delimiter;
    const out = new Map<string, number>();
    for (const [key, ref] of this.items) {
      const prefix = keyPrefix(key, delimiter);
      if (prefix === undefined) continue;
      const seen = out.get(prefix);
      if (seen === undefined && out.size >= MAX_PREFIXES) continue;
      out.set(prefix, (seen ?? 0) + v.itemBytes(this.map.valuePointer(ref)));
    }
    return out;
  }

  dump(id: number, limit: number, budget: number): Array<[string, number, number]> {
    const v = this.v;
    const refs: number[] = [];
    for (const ref of this.items.values()) if (itemClass(v.allocated(this.map.valuePointer(ref))) === id) refs.push(ref);
    const out: Array<[string, number, number]> = [];
    let bytes = 0;
    for (let i = refs.length - 1; i >= 0 && (limit === 0 || out.length < limit); i--) {
      const ptr = this.map.valuePointer(refs[i]!);
      const row: [string, number, number] = [v.key(ptr), v.length(ptr), v.exptime(ptr)];
      // "ITEM <key> [<bytes> b; <exptime> s]\r\n"
      bytes += 16 + row[0].length + String(row[1]).length + String(row[2]).length;
      if (bytes > budget) break;
      out.push(row);
    }
    return out;
  }

  /** An item's new cas: the client's (`casIn`, meta's E), else the next; 0 with -C. */
  private casOf(casIn: number): number {
    if (!this.casEnabled) return 0;
    return casIn >= 0 ? casIn : this.takeCas();
  }

  private takeCas(): number {
    const cas = this.nextCas;
    this.nextCas += this.casStep;
    return cas;
  }
}
