/**
 * The store commands: what set, add, replace, append, prepend, cas, incr,
 * decr, touch, delete, gat and the meta protocol's mg, ms, md and ma do to
 * the items, as memcached does it, with what they count. Every command
 * runs on the connection's own shard, whatever its key: it reads the
 * cache's one index (a SharedMap every shard reads and writes), makes a
 * new item in this shard's memory (the item cache's reserve, item-cache.ts)
 * and links it in place of the old, which may be another shard's item (the
 * item cache hands it back: hand-over.ts). No message.
 *
 * Atomic per key: a command that depends on what the key holds (add,
 * replace, cas, append, prepend, incr, decr, ms with C or I, md with C, I
 * or x, ma, mg N) reads the key's entry (held while it computes), makes
 * the new item, and links it only over that entry, or only where the key
 * has none (the item cache's link with `expected`: the map's exchangeIf,
 * decided by one compareExchange of the key's slot, or under the key's
 * segment lock where it has none). When another shard's write of
 * the key came first, the link answers CHANGED and the command starts
 * over from the read (a loop: RETRY): of two cas commands racing with the
 * same value exactly one stores, an add stores once, no incr is lost.
 * What it counts (cas_hits, incr_hits, ...) is counted once, for the pass
 * that ended it.
 *
 * An item a reader elsewhere may hold never changes but for the words
 * item.ts lists (exptime, the marks, the hit bytes): a new value, incr's
 * too, a stale mark or a new cas, is a new entry linked in place of the
 * old.
 */
import { ANY, CHANGED, LINKED, type ItemCache } from "./item-cache.js";
import { MARK_KEY_BINARY, MARK_STALE, MARK_TOKEN_SENT, itemSize, type ItemViews } from "./item.js";
import { MODE_ADD, MODE_APPEND, MODE_CAS, MODE_PREPEND, MODE_REPLACE, MODE_SET, type StoreMode } from "../protocol/protocol.js";
import type { SharedMap } from "../../../memory/shared-map/shared-map.js";
import { STAT } from "../stats/stats.js";

/** Outcomes of the store's operations. */
export const R_STORED = 0;
export const R_NOT_STORED = 1;
export const R_EXISTS = 2;
export const R_NOT_FOUND = 3;
export const R_DELETED = 4;
export const R_TOUCHED = 5;
export const R_NO_MEMORY = 6;
export const R_NON_NUMERIC = 7;
/** A pass that found the key changed by another writer: read it again. */
const RETRY = -1;

/**
 * What the meta protocol's ms adds to a store (meta-commands.ts): the CAS
 * value to give the item (E; -1: a new one), whether a lower compared CAS
 * may store the value as stale (I), and whether append / prepend store a
 * new item on a miss (N).
 */
export interface MetaStore {
  casIn: number;
  invalidate: boolean;
  vivify: boolean;
}
/** An ms's outcome: the result, and the cas and value length of the item it linked (0 when none). */
export interface Stored {
  result: number;
  cas: number;
  length: number;
}
/** mg's answer bits (metaGet): won the recache (W), a win was sent before (Z), stale (X), fetched before (h). */
export const MG_WON = 1;
export const MG_TOKEN_SENT = 2;
export const MG_STALE = 4;
export const MG_FETCHED = 8;
/** mg N made the item (t and the exptime follow T and N in their order: meta-protocol.ts exptimePlan). */
export const MG_CREATED = 16;
/**
 * What metaGet found: `ref` a reference to the item held on this thread's
 * map object (the caller releases it) or 0, MG_* bits, seconds since its
 * last access, its exptime after T and before it (memcached's t reports
 * the one of its place in the flags; the caller must not read it from the
 * item: later operations of the same batch may have changed it since).
 */
export interface MetaGot {
  ref: number;
  bits: number;
  idle: number;
  exptime: number;
  before: number;
}
/** ma's outcome when it changed the value: the item's cas, exptime after T and before it, the value, and whether N made it. */
export interface MetaArith {
  cas: number;
  exptime: number;
  before: number;
  value: string;
  created: boolean;
}
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
  /** The cache's index (this thread's object of it). */
  readonly map: SharedMap;
  private readonly v: ItemViews;
  private readonly c: Float64Array;
  /** cas values: this shard's id, then every `shards`-th number after (unique across shards). */
  private nextCas: number;
  private readonly casStep: number;
  private readonly casEnabled: boolean;
  private readonly maxItemSize: number;
  /** The item the last link made (its address; the entry's reference): read right after, within one command. */
  private linked = 0;
  private linkedRef = 0;

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

  /** A get found no item for `key` (item-cache.ts flushedMiss: get_flushed). */
  flushedMiss(key: string): void {
    this.cache.flushedMiss(key);
  }

  /** A reservation for `key`'s new item (item-cache.ts reserve), published or given up by a store. */
  reserve(key: string, size: number): number {
    return this.cache.reserve(key, size);
  }

  /** Give up a reservation nobody will publish (a value that did not arrive whole, a refused store). */
  giveUp(ref: number): void {
    this.cache.giveUp(ref);
  }

  /**
   * gat / gats of one key: a reference to the key's live item held on this
   * thread's map object (the caller releases it once written), or 0,
   * its exptime now `touchTo` (absolute). Plain gets read the map
   * themselves (commands/classic-commands.ts lookup).
   */
  get(key: string, now: number, touchTo: number): number {
    const c = this.c;
    c[STAT.cmd_get]++;
    c[STAT.cmd_touch]++;
    const ref = this.cache.acquireLive(key, now, true);
    if (ref === 0) {
      c[STAT.get_misses]++;
      c[STAT.touch_misses]++;
      return 0;
    }
    c[STAT.get_hits]++;
    c[STAT.touch_hits]++;
    const ptr = this.map.valuePointer(ref);
    this.v.setExptime(ptr, touchTo);
    this.cache.markHit(ptr);
    this.v.setAccessed(ptr, now);
    return ref;
  }

  /**
   * A storage command whose item was filled in the entry `ref` reserved
   * (reserve, on this shard): published, or given up. `cas`: the client's
   * value for the cas command (a decimal string), or an ms's compared CAS.
   */
  storeReserved(mode: StoreMode, key: string, ref: number, cas: string, now: number, meta?: MetaStore): number {
    this.c[STAT.cmd_set]++;
    const v = this.v;
    const src = this.map.valuePointer(ref);
    // What a pass may change in the reservation's header (markStale), for the next pass to start from.
    const exptime = v.exptime(src);
    const marks = v.marks(src);
    for (;;) {
      v.setExptime(src, exptime);
      v.setMarks(src, marks);
      const old = this.cache.acquireLive(key, now, false);
      const verdict = this.precondition(mode, old, cas, meta);
      let r = verdict;
      if (verdict === R_STORED && (mode === MODE_APPEND || mode === MODE_PREPEND)) {
        r = this.concatenate(mode, key, src, old, now, meta?.casIn ?? -1);
      } else if (verdict === R_STORED || verdict === STORE_STALE || verdict === STORE_NEW) {
        if (verdict === STORE_STALE) this.markStale(ref, old);
        r = this.linkStored(key, ref, now, meta?.casIn ?? -1, mode === MODE_SET ? ANY : old);
      }
      if (old !== 0) {
        if (r !== RETRY && mode === MODE_ADD) v.markReferenced(this.map.valuePointer(old)); // memcached: a failed add refreshes the item, and does not fetch it (h)
        this.map.release(old);
      }
      if (r === RETRY) continue;
      if (mode === MODE_CAS) this.countCas(verdict);
      // The client's item was linked itself, or was given up by the link, unless the command ended otherwise.
      if (r !== R_STORED && r !== R_NO_MEMORY) this.giveUp(ref);
      else if (verdict === R_STORED && (mode === MODE_APPEND || mode === MODE_PREPEND)) this.giveUp(ref);
      return r;
    }
  }

  /** storeReserved for an ms: the result and what its answer reports of the item linked. */
  storeMeta(mode: StoreMode, key: string, ref: number, cas: string, now: number, meta: MetaStore): Stored {
    const result = this.storeReserved(mode, key, ref, cas, now, meta);
    if (result !== R_STORED) return { result, cas: 0, length: 0 };
    return { result, cas: this.v.cas(this.linked), length: this.v.length(this.linked) };
  }

  /** Link a filled reservation of the client's (over `expected`, item-cache.ts link): R_STORED, RETRY (the reservation still the caller's) or R_NO_MEMORY (given up). */
  private linkStored(key: string, ref: number, now: number, casIn: number, expected: number): number {
    const r = this.link(key, ref, now, this.casOf(casIn), expected);
    if (r === LINKED) return R_STORED;
    return r === CHANGED ? RETRY : this.noMemory();
  }

  /** cache.link, the item it made remembered (linked) for the command's answer. */
  private link(key: string, ref: number, now: number, cas: number, expected: number): number {
    const r = this.cache.link(key, ref, now, cas, expected);
    if (r === LINKED) {
      this.linked = this.map.valuePointer(ref);
      this.linkedRef = ref;
    }
    return r;
  }

  /** A store that found no room (counted as memcached counts it; a reservation's failure is counted by the connection that asked). */
  private noMemory(): number {
    this.c[STAT.store_no_memory]++;
    return R_NO_MEMORY;
  }

  /** The cas command's counts, for the verdict of the pass that ended it. */
  private countCas(verdict: number): void {
    const c = this.c;
    if (verdict === R_NOT_FOUND) c[STAT.cas_misses]++;
    else if (verdict === R_EXISTS) c[STAT.cas_badval]++;
    else c[STAT.cas_hits]++;
  }

  /** An ms I whose CAS was lower: the new value keeps the old item's TTL and win token, and is stale (memcached's CAS_STALE). */
  private markStale(ref: number, old: number): void {
    const v = this.v;
    const from = this.map.valuePointer(old);
    const ptr = this.map.valuePointer(ref);
    v.setExptime(ptr, v.exptime(from));
    v.setMarks(ptr, v.marks(ptr) | MARK_STALE | (v.marks(from) & MARK_TOKEN_SENT));
  }

  /** The store's verdict on the key's live entry `old` (held; 0: none): R_STORED (go on), STORE_STALE / STORE_NEW (go on so), or why not. */
  private precondition(mode: StoreMode, old: number, cas: string, meta: MetaStore | undefined): number {
    switch (mode) {
      case MODE_ADD:
        return old === 0 ? R_STORED : R_NOT_STORED;
      case MODE_APPEND:
      case MODE_PREPEND:
        // ms: N stores a new item on a miss; a compared CAS must match.
        if (old === 0) return meta?.vivify ? STORE_NEW : R_NOT_STORED;
        // memcached: a compared CAS of 0 compares nothing (CAS_NONE).
        return cas !== "" && cas !== "0" && String(this.v.cas(this.map.valuePointer(old))) !== cas ? R_EXISTS : R_STORED;
      case MODE_REPLACE:
        return old === 0 ? R_NOT_STORED : R_STORED;
      case MODE_CAS: {
        if (old === 0) return R_NOT_FOUND;
        const current = this.v.cas(this.map.valuePointer(old));
        // memcached: a cas of 0 is no CAS (CAS_NONE), which the cas command fails, even with -C where every item's is 0.
        if (cas === "0") return R_EXISTS;
        if (String(current) === cas) return R_STORED;
        if (meta?.invalidate && BigInt(cas) < BigInt(current)) return STORE_STALE;
        return R_EXISTS;
      }
      default:
        return R_STORED;
    }
  }

  /** append / prepend: a new item of `old`'s value and the new one (at `src`), with the old flags and exptime, linked over `old`. */
  private concatenate(mode: StoreMode, key: string, src: number, old: number, now: number, casIn: number): number {
    const v = this.v;
    const from = this.map.valuePointer(old);
    const length = v.length(from) + v.length(src);
    const flags = v.flags(from);
    const size = itemSize(key.length, flags, length);
    // memcached answers NOT_STORED when the joined item cannot be made.
    const ref = size > this.maxItemSize ? 0 : this.cache.reserve(key, size);
    if (ref === 0) return R_NOT_STORED;
    const ptr = this.map.valuePointer(ref);
    // memcached's joined item is a new one, without the old one's binary key mark (k and me answer the key's bytes).
    v.writeHead(ptr, 0, key, flags, v.exptime(from), length);
    const at = v.dataStart(ptr);
    const [first, second] = mode === MODE_APPEND ? [from, src] : [src, from];
    const firstLength = v.length(first);
    v.bytes.copyWithin(at, v.dataStart(first), v.dataStart(first) + firstLength);
    v.bytes.copyWithin(at + firstLength, v.dataStart(second), v.dataStart(second) + v.length(second));
    v.terminate(ptr);
    const r = this.link(key, ref, now, this.casOf(casIn), old);
    if (r === CHANGED) {
      this.giveUp(ref);
      return RETRY;
    }
    return r === LINKED ? R_STORED : R_NOT_STORED;
  }

  delete(key: string, now: number): number {
    for (;;) {
      const ref = this.cache.acquireLive(key, now, false);
      if (ref === 0) {
        this.c[STAT.delete_misses]++;
        return R_NOT_FOUND;
      }
      const done = this.cache.unlink(ref);
      this.map.release(ref);
      if (!done) continue;
      this.c[STAT.delete_hits]++;
      return R_DELETED;
    }
  }

  /** A failed set leaves no stale value behind (memcached unlinks it too); a newer write of the key stays. */
  forget(key: string): void {
    const ref = this.map.acquire(key);
    if (ref === 0) return;
    this.cache.unlink(ref);
    this.map.release(ref);
  }

  touch(key: string, exptime: number, now: number): number {
    this.c[STAT.cmd_touch]++;
    const ref = this.cache.acquireLive(key, now, false);
    if (ref === 0) {
      this.c[STAT.touch_misses]++;
      return R_NOT_FOUND;
    }
    this.c[STAT.touch_hits]++;
    const ptr = this.map.valuePointer(ref);
    this.v.setExptime(ptr, exptime);
    this.cache.markHit(ptr);
    this.map.release(ref);
    return R_TOUCHED;
  }

  /**
   * incr / decr by `delta` (a decimal below 2^64): the new value as a
   * decimal string, or R_NOT_FOUND / R_NON_NUMERIC / R_NO_MEMORY (and, with
   * a compared `cas`, R_EXISTS). As memcached: the value is read as
   * strtoull reads it, incr wraps at 2^64, decr stops at 0, and a shorter
   * result keeps the value's length, padded with spaces (memcached writes
   * it in place so; here it is a new entry, as readers on other shards may
   * be reading the old one's bytes).
   */
  arith(key: string, incr: boolean, delta: string, now: number, casIn = -1, cas = ""): string | number {
    for (;;) {
      const old = this.cache.acquireLive(key, now, false);
      if (old === 0) {
        this.c[incr ? STAT.incr_misses : STAT.decr_misses]++;
        return R_NOT_FOUND;
      }
      const r = this.arithOver(old, key, incr, delta, now, casIn, cas);
      this.map.release(old);
      if (r !== RETRY) return r;
    }
  }

  /** One pass of arith over the key's live entry `old` (held): its answer, or RETRY. */
  private arithOver(old: number, key: string, incr: boolean, delta: string, now: number, casIn: number, cas: string): string | number {
    const v = this.v;
    const from = this.map.valuePointer(old);
    const length = v.length(from);
    // memcached (ma): an empty value is not a number before its CAS is compared; a CAS of 0 compares nothing.
    if (cas !== "" && cas !== "0" && length > 0 && String(v.cas(from)) !== cas) return R_EXISTS;
    const m = length === 0 ? null : NUMERIC.exec(v.value(from).toString("latin1"));
    const value = m ? BigInt(m[2]!) : 0n;
    if (!m || value > MAX_U64 || (m[1] === "-" && value !== 0n)) return R_NON_NUMERIC;
    const d = BigInt(delta);
    const next = incr ? (value + d) & MAX_U64 : value < d ? 0n : value - d;
    const text = next.toString();
    const newLength = Math.max(text.length, length);
    const flags = v.flags(from);
    const ref = this.cache.reserve(key, itemSize(key.length, flags, newLength));
    if (ref === 0) {
      this.c[incr ? STAT.incr_hits : STAT.decr_hits]++;
      return R_NO_MEMORY;
    }
    const ptr = this.map.valuePointer(ref);
    v.writeHead(ptr, 0, key, flags, v.exptime(from), newLength);
    const at = v.dataStart(ptr);
    v.bytes.write(text, at, "latin1");
    v.bytes.fill(0x20, at + text.length, at + newLength);
    v.terminate(ptr);
    // memcached writes a result that fits in place: the item keeps its marks (stale, win sent, binary key) and
    // stays fetched (h); one that does not is a new item, without them.
    if (text.length <= length) {
      v.setMarks(ptr, v.marks(from));
      if (v.fetched(from)) v.setFetched(ptr);
    }
    const r = this.link(key, ref, now, this.casOf(casIn), old);
    if (r === CHANGED) {
      this.giveUp(ref);
      return RETRY;
    }
    this.c[incr ? STAT.incr_hits : STAT.decr_hits]++;
    return r === LINKED ? text : R_NO_MEMORY;
  }

  /**
   * mg that may change the item: T (`touchTo`, an absolute exptime, -1:
   * none), N (`vivifyTo`: on a miss, link an empty item expiring then, and
   * win it), R (`recacheBefore`: win when the item expires before then), a
   * stale item's first fetch (a win), u (`noBump`: no hit marked). The
   * win's token is marked on the item (atomically: of two shards' mg at
   * once, one wins), so the next fetch gets Z instead. Counted as
   * memcached counts mg: a hit with T as a touch, anything else as a get.
   */
  metaGet(key: string, now: number, touchTo: number, vivifyTo: number, recacheBefore: number, casIn: number, noBump: boolean, recacheFirst = false, noWin = false): MetaGot {
    const c = this.c;
    const v = this.v;
    let ref = 0;
    let created = false;
    for (;;) {
      ref = this.cache.acquireLive(key, now, true);
      if (ref !== 0 || vivifyTo < 0) break;
      // Without the binary key mark, as memcached's vivified item: k and me answer the key's bytes. The win's
      // token marked before it is published: no other shard's mg can win it first.
      const r = this.linkText(key, 0, vivifyTo, "", noWin ? 0 : MARK_TOKEN_SENT, now, casIn, 0);
      if (r === CHANGED) continue;
      if (r === LINKED) {
        ref = this.map.retain(this.linkedRef);
        created = true;
      }
      break;
    }
    // memcached counts a hit with T as a touch, any miss as a get.
    const touch = touchTo >= 0 && ref !== 0;
    c[touch ? STAT.cmd_touch : STAT.cmd_get]++;
    if (ref === 0) {
      c[STAT.get_misses]++;
      return { ref: 0, bits: 0, idle: 0, exptime: 0, before: 0 };
    }
    c[touch ? STAT.touch_hits : STAT.get_hits]++;
    const ptr = this.map.valuePointer(ref);
    const marks = created ? 0 : v.marks(ptr);
    let bits = (v.fetched(ptr) ? MG_FETCHED : 0) | (marks & MARK_TOKEN_SENT ? MG_TOKEN_SENT : 0) | (marks & MARK_STALE ? MG_STALE : 0);
    const idle = now - v.accessed(ptr);
    const before = v.exptime(ptr);
    if (touch && !created) v.setExptime(ptr, touchTo);
    const exptime = v.exptime(ptr);
    const sent = (marks & MARK_TOKEN_SENT) !== 0;
    // R reads the exptime of its place among the flags: the item's own when it comes before T.
    const recheck = recacheFirst ? before : exptime;
    if (created) bits |= MG_CREATED | (noWin ? 0 : MG_WON);
    else if (!noWin && !sent && ((recacheBefore >= 0 && recheck !== 0 && recheck < recacheBefore) || (marks & MARK_STALE) !== 0)) {
      bits |= v.addMarks(ptr, MARK_TOKEN_SENT) & MARK_TOKEN_SENT ? MG_TOKEN_SENT : MG_WON;
    }
    if (!noBump) {
      this.cache.markHit(ptr);
      v.setAccessed(ptr, now);
    }
    return { ref, bits, idle: Math.max(0, idle), exptime, before };
  }

  /**
   * md: R_DELETED (HD), R_NOT_FOUND, R_EXISTS (the compared `cas` differs;
   * "" compares none) or R_NO_MEMORY. `invalidate` (I) keeps the item,
   * stale, with a new CAS (`casIn`, or the next) and, with `touchTo` >= 0,
   * a new exptime; `removeValue` (x) leaves an empty value under the key
   * (flags `clientFlags`, exptime `touchTo` or none), as memcached does. A
   * marked item is a new entry, as every change of what readers elsewhere
   * read in place (item.ts).
   */
  metaDelete(key: string, now: number, cas: string, casIn: number, touchTo: number, invalidate: boolean, removeValue: boolean, clientFlags: number): number {
    for (;;) {
      const ref = this.cache.acquireLive(key, now, false);
      if (ref === 0 || (cas !== "" && String(this.v.cas(this.map.valuePointer(ref))) !== cas)) {
        if (ref !== 0) this.map.release(ref);
        this.c[STAT.delete_misses]++;
        return ref === 0 ? R_NOT_FOUND : R_EXISTS;
      }
      const r = invalidate || removeValue ? this.markDeleted(key, ref, now, casIn, touchTo, invalidate, removeValue, clientFlags) : this.cache.unlink(ref) ? R_DELETED : RETRY;
      this.map.release(ref);
      if (r === RETRY) continue;
      if (r === R_DELETED && !invalidate) this.c[STAT.delete_hits]++;
      return r;
    }
  }

  /** md I or x over the key's entry `old` (held): a copy of it marked so, linked over it. */
  private markDeleted(key: string, old: number, now: number, casIn: number, touchTo: number, invalidate: boolean, removeValue: boolean, clientFlags: number): number {
    const v = this.v;
    const from = this.map.valuePointer(old);
    let flags = v.flags(from);
    let exptime = v.exptime(from);
    // x makes a new item (memcached's has no binary key mark); I marks the item itself.
    let marks = removeValue ? 0 : v.marks(from) & MARK_KEY_BINARY;
    let newCas = removeValue && casIn >= 0 ? this.casOf(casIn) : v.cas(from);
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
    }
    const r = this.linkCopy(key, old, text, flags, exptime, marks, now, newCas);
    return r === LINKED ? R_DELETED : r === CHANGED ? RETRY : R_NO_MEMORY;
  }

  /**
   * ma: incr / decr (arith) with what meta adds: a compared `cas` (R_EXISTS
   * when it differs), `casIn` (E), `vivifyTo` (N: on a miss, link `initial`
   * expiring then), `touchTo` (T: the new exptime on success). What it
   * did (MetaArith), or a bare R_* number.
   */
  metaArith(key: string, now: number, incr: boolean, delta: string, cas: string, casIn: number, vivifyTo: number, initial: string, touchTo: number): MetaArith | number {
    let text: string;
    let created = false;
    for (;;) {
      const old = this.cache.acquireLive(key, now, false);
      if (old === 0) {
        if (vivifyTo < 0) {
          this.c[incr ? STAT.incr_misses : STAT.decr_misses]++;
          return R_NOT_FOUND;
        }
        const r = this.linkText(key, 0, vivifyTo, initial, 0, now, casIn, 0);
        if (r === CHANGED) continue;
        if (r !== LINKED) return R_NO_MEMORY;
        text = initial;
        created = true;
        break;
      }
      const r = this.arithOver(old, key, incr, delta, now, casIn, cas);
      this.map.release(old);
      if (r === RETRY) continue;
      if (typeof r === "number") return r;
      text = r;
      break;
    }
    const v = this.v;
    const ptr = this.linked;
    const before = v.exptime(ptr);
    // T on an item found; one N made has its exptime already (the last of T and N).
    if (touchTo >= 0 && !created) v.setExptime(ptr, touchTo);
    return { cas: v.cas(ptr), exptime: v.exptime(ptr), before, value: text, created };
  }

  /** Link a new item of `text` under `key` (mg N, ma N) where the key has none (`expected` 0): item-cache.ts link's answer; 0-room counts as NO_ROOM. */
  private linkText(key: string, flags: number, exptime: number, text: string, marks: number, now: number, casIn: number, expected: number): number {
    const v = this.v;
    const ref = this.cache.reserve(key, itemSize(key.length, flags, text.length));
    if (ref === 0) return -1;
    const ptr = this.map.valuePointer(ref);
    v.writeHead(ptr, 0, key, flags, exptime, text.length);
    v.bytes.write(text, v.dataStart(ptr), "latin1");
    v.terminate(ptr);
    v.setMarks(ptr, marks);
    const r = this.link(key, ref, now, this.casOf(casIn), expected);
    if (r === CHANGED) this.giveUp(ref);
    return r;
  }

  /** Link a copy of the item `old` holds (its value, or `text` in its place) with this header over it: md I and md x. */
  private linkCopy(key: string, old: number, text: string | undefined, flags: number, exptime: number, marks: number, now: number, cas: number): number {
    const v = this.v;
    const from = this.map.valuePointer(old);
    const length = text === undefined ? v.length(from) : text.length;
    const ref = this.cache.reserve(key, itemSize(key.length, flags, length));
    if (ref === 0) return -1;
    const ptr = this.map.valuePointer(ref);
    v.writeHead(ptr, 0, key, flags, exptime, length);
    const at = v.dataStart(ptr);
    if (text === undefined) v.bytes.copyWithin(at, v.dataStart(from), v.dataStart(from) + length);
    else v.bytes.write(text, at, "latin1");
    v.terminate(ptr);
    v.setMarks(ptr, marks);
    // md I marks memcached's item itself: it stays fetched (h, me).
    if (text === undefined && v.fetched(from)) v.setFetched(ptr);
    const r = this.link(key, ref, now, cas, old);
    if (r === CHANGED) this.giveUp(ref);
    return r;
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
