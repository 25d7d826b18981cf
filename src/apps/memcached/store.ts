/**
 * One shard's store commands: what set, add, replace, append, prepend,
 * cas, incr, decr, touch, delete, gat and the meta protocol's mg, ms, md
 * and ma do to the items whose keys this shard owns (key-owner.ts), as
 * memcached does it, with what they count. The items themselves, their
 * memory, order, eviction, expiry and flush are the item cache's
 * (item-cache.ts): a command finds an entry there, reserves and fills a
 * new one, and hands it to the cache to link in place of the old. Every
 * change runs here, on the owning shard's thread (the map has one
 * writer): requests to change these keys from connections on other
 * shards arrive as messages (remote.ts). Gets do not come here: every
 * shard reads the map itself (connection.ts lookup).
 *
 * An item a reader elsewhere may hold never changes but for the words
 * item.ts lists (exptime, the marks, the hit bytes): a new value, incr's
 * too, a stale mark or a new cas, is a new entry linked in place of the
 * old.
 */
import type { ItemCache } from "./item-cache.js";
import { MARK_KEY_BINARY, MARK_STALE, MARK_TOKEN_SENT, itemSize, type ItemViews } from "./item.js";
import { MODE_ADD, MODE_APPEND, MODE_CAS, MODE_PREPEND, MODE_REPLACE, type StoreMode } from "./protocol.js";
import type { SharedMap } from "../../memory/shared-map/shared-map.js";
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
/** The store's result wanted as storedAnswer's string (an ms). */
export const META_RESULT = 4;
/** mg's answer bits (metaGet): won the recache (W), a win was sent before (Z), stale (X), fetched before (h). */
export const MG_WON = 1;
export const MG_TOKEN_SENT = 2;
export const MG_STALE = 4;
export const MG_FETCHED = 8;
/** mg N made the item (t and the exptime follow T and N in their order: meta-protocol.ts exptimePlan). */
export const MG_CREATED = 16;
/** precondition's verdicts beyond R_*: store the value as stale (ms I with a lower CAS); store it as new (append with N, on a miss). */
const STORE_STALE = 100;
const STORE_NEW = 101;

const MAX_U64 = 2n ** 64n - 1n;
/** strtoull's reading of an item's value for incr/decr: blanks, a sign, digits, then a blank or the end. */
const NUMERIC = /^[ \t\n\v\f\r]*([+-]?)(\d+)(?:[ \t\n\v\f\r]|$)/;

export interface StoreOptions {
  /** This shard's item cache. */
  cache: ItemCache;
  views: ItemViews;
  /** This shard's row of counters (stats.ts). */
  counters: Float64Array;
  shard: number;
  shards: number;
  /** Largest item, bytes (an append past it is not stored). */
  maxItemSize: number;
  /** Items get cas values (false: memcached's -C; every item's cas is 0, as in memcached, whose items then have no cas field). */
  casEnabled: boolean;
}

export class ItemStore {
  readonly cache: ItemCache;
  /** This shard's index (the cache's): key -> item, read by every shard, changed only here. */
  readonly map: SharedMap;
  private readonly v: ItemViews;
  private readonly c: Float64Array;
  /** cas values: this shard's id, then every `shards`-th number after (unique across shards). */
  private nextCas: number;
  private readonly casStep: number;
  private readonly casEnabled: boolean;
  private readonly maxItemSize: number;

  constructor(o: StoreOptions) {
    this.cache = o.cache;
    this.map = o.cache.map;
    this.v = o.views;
    this.c = o.counters;
    this.nextCas = o.shard + 1;
    this.casStep = o.shards;
    this.casEnabled = o.casEnabled;
    this.maxItemSize = o.maxItemSize;
  }

  /** A get elsewhere found no item for `key` (item-cache.ts flushedMiss: get_flushed). */
  flushedMiss(key: string): void {
    this.cache.flushedMiss(key);
  }

  /** A staging copy for another shard's key (item-cache.ts allocate). */
  allocate(size: number, key?: string): number {
    return this.cache.allocate(size, key);
  }

  /** A reservation for `key`'s new item (item-cache.ts reserve), published or given up by a store here. */
  reserve(key: string, size: number): number {
    return this.cache.reserve(key, size);
  }

  /** Give up a reservation nobody will publish (a value that did not arrive whole, a refused store). */
  giveUp(ref: number): void {
    this.cache.giveUp(ref);
  }

  /** Free a staging buffer (or any plain object) nobody else can hold. */
  discardUnlinked(ptr: number): void {
    this.cache.discardUnlinked(ptr);
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
    const ref = this.cache.current(key);
    if (ref === 0 || this.cache.expireIfDue(ref, now, true)) {
      if (ref === 0) this.cache.flushedMiss(key);
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
    this.cache.bump(ptr);
    this.v.setAccessed(ptr, now);
    return this.map.retain(ref);
  }

  /** A get on another shard found `key`'s item expired: unlink it if it still is. */
  expire(key: string, now: number): void {
    this.cache.find(key, now);
  }

  /**
   * A storage command whose item another shard staged (its staging copy at
   * `src`, left to that shard): copied into an entry of this shard's map
   * when the command stores. `cas`: the client's value for the cas command
   * (a decimal string).
   */
  store(mode: StoreMode, key: string, src: number, cas: string, now: number, meta?: MetaStore): number {
    this.c[STAT.cmd_set]++;
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

  /** An ms's answer to a store of `key` that ended in `result`: "<R_*> <cas> <value length>" of the item it linked ("<R_*> 0 0" when it linked none). */
  storedAnswer(key: string, result: number): string {
    if (result !== R_STORED) return `${result} 0 0`;
    const ptr = this.map.valuePointer(this.cache.current(key));
    return `${result} ${this.v.cas(ptr)} ${this.v.length(ptr)}`;
  }

  /** Link a filled reservation, unless the old item a replace or cas needs went while it was being made (eviction). */
  private linkChecked(mode: StoreMode, key: string, ref: number, now: number, casIn: number): number {
    if ((mode === MODE_REPLACE || mode === MODE_CAS) && this.cache.current(key) === 0) {
      this.giveUp(ref);
      return mode === MODE_CAS ? R_NOT_FOUND : R_NOT_STORED;
    }
    return this.cache.link(key, ref, now, this.casOf(casIn)) ? R_STORED : this.noMemory();
  }

  /** A store that found no room (counted as memcached counts it; a reservation's failure is counted by the connection that asked). */
  private noMemory(): number {
    this.c[STAT.store_no_memory]++;
    return R_NO_MEMORY;
  }

  /**
   * An ms I whose CAS was lower: the new value keeps the old item's TTL and
   * win token, and is stale (memcached's CAS_STALE). If making room for it
   * evicted the old item, there is nothing to keep: linkChecked finds it
   * gone and answers NOT_FOUND.
   */
  private markStale(key: string, ref: number): void {
    const v = this.v;
    const oldRef = this.cache.current(key);
    if (oldRef === 0) return;
    const old = this.map.valuePointer(oldRef);
    const ptr = this.map.valuePointer(ref);
    v.setExptime(ptr, v.exptime(old));
    v.setMarks(ptr, v.marks(ptr) | MARK_STALE | (v.marks(old) & MARK_TOKEN_SENT));
  }

  /** The store's verdict before any allocation: R_STORED (go on), STORE_STALE / STORE_NEW (go on so), or why not. */
  private precondition(mode: StoreMode, key: string, cas: string, now: number, meta: MetaStore | undefined): number {
    const old = this.cache.find(key, now);
    switch (mode) {
      case MODE_ADD:
        if (old === 0) return R_STORED;
        this.v.markReferenced(this.map.valuePointer(old)); // memcached: a failed add refreshes the item, and does not fetch it (h)
        return R_NOT_STORED;
      case MODE_APPEND:
      case MODE_PREPEND:
        // ms: N stores a new item on a miss; a compared CAS must match.
        if (old === 0) return meta?.vivify ? STORE_NEW : R_NOT_STORED;
        // memcached: a compared CAS of 0 compares nothing (CAS_NONE).
        return cas !== "" && cas !== "0" && String(this.v.cas(this.map.valuePointer(old))) !== cas ? R_EXISTS : R_STORED;
      case MODE_REPLACE:
        return old === 0 ? R_NOT_STORED : R_STORED;
      case MODE_CAS: {
        if (old === 0) {
          this.c[STAT.cas_misses]++;
          return R_NOT_FOUND;
        }
        const current = this.v.cas(this.map.valuePointer(old));
        // memcached: a cas of 0 is no CAS (CAS_NONE), which the cas command fails, even with -C where every item's is 0.
        if (cas === "0") {
          this.c[STAT.cas_badval]++;
          return R_EXISTS;
        }
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
    const ref = this.cache.reserve(key, bytes);
    if (ref === 0) return 0;
    const ptr = this.map.valuePointer(ref);
    this.v.bytes.copyWithin(ptr, src, src + bytes);
    return ref;
  }

  /** append / prepend: a new item of the old value and the new one (at `src`), with the old flags and exptime. */
  private concatenate(mode: StoreMode, key: string, src: number, now: number, casIn: number): number {
    const v = this.v;
    const oldRef = this.cache.current(key);
    // Hold the old item while reserving (eviction could unlink it).
    const hold = this.map.retain(oldRef);
    const old = this.map.valuePointer(hold);
    const length = v.length(old) + v.length(src);
    const flags = v.flags(old);
    const size = itemSize(key.length, flags, length);
    const ref = size > this.maxItemSize ? 0 : this.cache.reserve(key, size);
    if (ref === 0 || this.cache.current(key) !== oldRef) {
      this.map.release(hold);
      if (ref !== 0) this.giveUp(ref);
      // memcached answers NOT_STORED when the joined item cannot be made.
      return R_NOT_STORED;
    }
    const ptr = this.map.valuePointer(ref);
    // memcached's joined item is a new one, without the old one's binary key mark (k and me answer the key's bytes).
    v.writeHead(ptr, 0, key, flags, v.exptime(old), length);
    const at = v.dataStart(ptr);
    const [first, second] = mode === MODE_APPEND ? [old, src] : [src, old];
    const firstLength = v.length(first);
    v.bytes.copyWithin(at, v.dataStart(first), v.dataStart(first) + firstLength);
    v.bytes.copyWithin(at + firstLength, v.dataStart(second), v.dataStart(second) + v.length(second));
    v.terminate(ptr);
    this.map.release(hold);
    return this.cache.link(key, ref, now, this.casOf(casIn)) ? R_STORED : R_NOT_STORED;
  }

  delete(key: string, now: number): number {
    const ref = this.cache.find(key, now);
    if (ref === 0) {
      this.c[STAT.delete_misses]++;
      return R_NOT_FOUND;
    }
    this.c[STAT.delete_hits]++;
    this.cache.unlink(ref);
    return R_DELETED;
  }

  /** A failed set leaves no stale value behind (memcached unlinks it too). */
  forget(key: string): void {
    const ref = this.cache.current(key);
    if (ref !== 0) this.cache.unlink(ref);
  }

  touch(key: string, exptime: number, now: number): number {
    this.c[STAT.cmd_touch]++;
    const ref = this.cache.find(key, now);
    if (ref === 0) {
      this.c[STAT.touch_misses]++;
      return R_NOT_FOUND;
    }
    this.c[STAT.touch_hits]++;
    const ptr = this.map.valuePointer(ref);
    this.v.setExptime(ptr, exptime);
    this.cache.bump(ptr);
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
    const oldRef = this.cache.find(key, now);
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
    const ref = this.cache.reserve(key, itemSize(key.length, flags, newLength));
    this.map.release(hold);
    if (ref === 0) return R_NO_MEMORY;
    if (this.cache.current(key) !== oldRef) {
      this.giveUp(ref);
      return R_NOT_FOUND;
    }
    const ptr = this.map.valuePointer(ref);
    v.writeHead(ptr, 0, key, flags, exptime, newLength);
    const at = v.dataStart(ptr);
    v.bytes.write(text, at, "latin1");
    v.bytes.fill(0x20, at + text.length, at + newLength);
    v.terminate(ptr);
    // memcached writes a result that fits in place: the item keeps its marks (stale, win sent, binary key) and
    // stays fetched (h); one that does not is a new item, without them.
    if (text.length <= length) {
      v.setMarks(ptr, v.marks(old));
      if (v.fetched(old)) v.setFetched(ptr);
    }
    return this.cache.link(key, ref, now, this.casOf(casIn)) ? text : R_NO_MEMORY;
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
  metaGet(key: string, now: number, touchTo: number, vivifyTo: number, recacheBefore: number, casIn: number, noBump: boolean, recacheFirst = false, noWin = false): string {
    const c = this.c;
    const v = this.v;
    let ref = this.cache.current(key);
    if (ref !== 0 && this.cache.expireIfDue(ref, now, true)) ref = 0;
    let created = false;
    if (ref === 0 && vivifyTo >= 0) {
      // Without the binary key mark, as memcached's vivified item: k and me answer the key's bytes.
      ref = this.linkText(key, 0, vivifyTo, "", 0, now, casIn);
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
    if (touch && !created) v.setExptime(ptr, touchTo);
    const exptime = v.exptime(ptr);
    const sent = (marks & MARK_TOKEN_SENT) !== 0;
    // R reads the exptime of its place among the flags: the item's own when it comes before T.
    const recheck = recacheFirst ? before : exptime;
    if (created) bits |= MG_CREATED;
    if (!noWin && (created || (!sent && ((recacheBefore >= 0 && recheck !== 0 && recheck < recacheBefore) || (marks & MARK_STALE) !== 0)))) {
      bits |= MG_WON;
      v.setMarks(ptr, marks | MARK_TOKEN_SENT);
    }
    if (!noBump) {
      this.cache.bump(ptr);
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
    const ref = this.cache.find(key, now);
    if (ref === 0 || (cas !== "" && String(v.cas(this.map.valuePointer(ref))) !== cas)) {
      this.c[STAT.delete_misses]++;
      return ref === 0 ? R_NOT_FOUND : R_EXISTS;
    }
    if (!invalidate && !removeValue) {
      this.c[STAT.delete_hits]++;
      this.cache.unlink(ref);
      return R_DELETED;
    }
    const old = this.map.valuePointer(ref);
    const hold = this.map.retain(ref);
    let flags = v.flags(old);
    let exptime = v.exptime(old);
    // x makes a new item (memcached's has no binary key mark); I marks the item itself.
    let marks = removeValue ? 0 : v.marks(old) & MARK_KEY_BINARY;
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
   * success). Returns "<R_*> <cas> <exptime> <exptime before T> <value> <1: N made it>"
   * (R_STORED: done), or a bare R_* number.
   */
  metaArith(key: string, now: number, incr: boolean, delta: string, cas: string, casIn: number, vivifyTo: number, initial: string, touchTo: number): string | number {
    const v = this.v;
    const oldRef = this.cache.find(key, now);
    let text: string;
    if (oldRef === 0) {
      if (vivifyTo < 0) {
        this.c[incr ? STAT.incr_misses : STAT.decr_misses]++;
        return R_NOT_FOUND;
      }
      if (this.linkText(key, 0, vivifyTo, initial, 0, now, casIn) === 0) return R_NO_MEMORY;
      text = initial;
    } else {
      // memcached: an empty value is not a number before its CAS is compared; a CAS of 0 compares nothing.
      const old = this.map.valuePointer(oldRef);
      if (cas !== "" && cas !== "0" && v.length(old) > 0 && String(v.cas(old)) !== cas) return R_EXISTS;
      const r = this.arith(key, incr, delta, now, casIn);
      if (typeof r === "number") return r;
      text = r;
    }
    const ptr = this.map.valuePointer(this.cache.current(key));
    const before = v.exptime(ptr);
    // T on an item found; one N made has its exptime already (the last of T and N).
    if (touchTo >= 0 && oldRef !== 0) v.setExptime(ptr, touchTo);
    return `${R_STORED} ${v.cas(ptr)} ${v.exptime(ptr)} ${before} ${text} ${oldRef === 0 ? 1 : 0}`;
  }

  /** Link a new item of `text` under `key` (mg N, ma N): its reference, or 0 when there is no room. */
  private linkText(key: string, flags: number, exptime: number, text: string, marks: number, now: number, casIn: number): number {
    const v = this.v;
    const ref = this.cache.reserve(key, itemSize(key.length, flags, text.length));
    if (ref === 0) return 0;
    const ptr = this.map.valuePointer(ref);
    v.writeHead(ptr, 0, key, flags, exptime, text.length);
    v.bytes.write(text, v.dataStart(ptr), "latin1");
    v.terminate(ptr);
    v.setMarks(ptr, marks);
    return this.cache.link(key, ref, now, this.casOf(casIn)) ? ref : 0;
  }

  /** Link a copy of the item `oldRef` holds (its value, or `text` in its place) with this header: md I and md x. */
  private linkCopy(key: string, oldRef: number, text: string | undefined, flags: number, exptime: number, marks: number, now: number, cas: number): boolean {
    const v = this.v;
    const old = this.map.valuePointer(oldRef);
    const length = text === undefined ? v.length(old) : text.length;
    const ref = this.cache.reserve(key, itemSize(key.length, flags, length));
    if (ref === 0) return false;
    const ptr = this.map.valuePointer(ref);
    v.writeHead(ptr, 0, key, flags, exptime, length);
    const at = v.dataStart(ptr);
    if (text === undefined) v.bytes.copyWithin(at, v.dataStart(old), v.dataStart(old) + length);
    else v.bytes.write(text, at, "latin1");
    v.terminate(ptr);
    v.setMarks(ptr, marks);
    // md I marks memcached's item itself: it stays fetched (h, me).
    if (text === undefined && v.fetched(old)) v.setFetched(ptr);
    return this.cache.link(key, ref, now, cas);
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
