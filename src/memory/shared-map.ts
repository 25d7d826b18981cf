/**
 * SharedMap: a hash index in the shared heap that any thread reads without
 * a lock or a message, and one thread writes.
 *
 * What it is for
 * --------------
 * Seastar shares nothing: a read of another shard's data is a message
 * there and back (20 to 65 us between idle shards on these VMs, issue 19).
 * A shared heap can do better for reads: the data is already in memory
 * every thread can address. A SharedMap is made in one shard's memory and
 * found from any thread by its handle (a number: post it); a lookup takes
 * a reference to the entry, reads its bytes in place, and releases it. The
 * entry is never freed while a reference is held.
 *
 * Shape (offsets in shared-map-layout.ts)
 * ---------------------------------------
 *   header      table pointer, move count, hash seed, descriptor directory,
 *               the owner's lists, the stacks other threads push onto
 *   readers     a record per reading SharedMap object: 15 hazard slots
 *   table       open addressing, linear probing, at most half full; a slot
 *               is (descriptor id << 8) | tag, 0 empty
 *   descriptor  32 bytes: refs, state + generation, hash, payload pointer,
 *               key and value lengths, a list link, its own id
 *   payload     one object per entry: the key's UTF-8 bytes, zero-padded to
 *               8, then the value; the caller fills the value in place
 *               (reserve, then publish) or hands bytes (set)
 *
 * One writer
 * ----------
 * Every change (set, reserve/publish, delete, unlink, clear, the resizes,
 * reclaim, destroy) runs on the thread that owns the map's shard; any
 * other thread asks that one (with Smp: submitTo the shard) and gets
 * HeapOwnershipError if it tries. A single writer leaves no write/write
 * race to argue about, and it is the allocator's own rule (only the owner
 * allocates in its region): the payloads, tables and descriptor chunks are
 * the owner's objects. Readers are the many: acquire, release, retain and
 * the accessors work on every thread.
 *
 * Why descriptors, and why they are never freed
 * ---------------------------------------------
 * A reader must protect an entry before it knows the entry still exists:
 * it read a slot, and the owner may delete that entry, and its last holder
 * free it, before the reader's protection lands. A count kept in the
 * payload (as memcached's items keep theirs) would then be incremented in
 * freed memory, perhaps already another object's. So what a reader
 * touches is a descriptor, and descriptors are type-stable: they sit in
 * chunks that are never freed while the map lives (Linux's
 * SLAB_TYPESAFE_BY_RCU), so any id a reader ever read still names a
 * descriptor, and what the reader then holds is checked.
 *
 * Two kinds of reference
 * ----------------------
 * A shared count is one word every reader of an entry writes: two threads
 * reading the same keys bounce its cache line between their cores on
 * every lookup (two lock-prefixed writes to a line the other core last
 * wrote), and the lookups of two threads add up to about those of one. So
 * a reader protects what it reads with a hazard slot (Michael's hazard
 * pointers): each reading SharedMap object claims a reader record of 15
 * slots on a cache line of its own, and a lookup writes the descriptor's
 * id there, on its own line, which no other thread writes; the count is
 * not touched. Such a hazard reference is released on the object that
 * took it. When an object's 15 slots are all held, when no record is left,
 * and for references that must travel (retain), the reference is a
 * counted one: the shared count, raised with compareExchange, never from
 * 0, and released on any thread.
 *
 * Freeing: an entry is freed once it is out of the table, its count is 0
 * and no hazard slot names it. Whoever takes the count to 0 (the owner
 * dropping the index's reference, or the last counted reader) retires it
 * (state UNLINKED -> RETIRED by compareExchange: exactly once per entry).
 * A reader thread then looks at every hazard slot and frees it at once if
 * none names it (its payload by heap.free: a cross-shard free, so whoever
 * drops an entry's last reference frees it), else hands it to the owner.
 * The owner keeps what it retired, and what was handed to it, on a retired
 * list and frees those no hazard names in batches (reclaim: one scan of
 * the hazard slots per 32 entries or 64 KiB retired, whenever a new entry
 * needs a descriptor and none is free, and on reclaim()). Descriptors come
 * back to the owner through a lock-free stack it takes whole with one
 * exchange (cross-shard.ts's inbox: no single pop, so no ABA).
 *
 * The protocol
 * ------------
 * Reader (shared-map-atomics.ts runs R1-R3 in one WebAssembly call):
 *   R1  T = load(M_TABLE), m = load(M_MOVES); start at the key's home slot
 *   R2  s = load(slot): 0 ends the path: absent if load(M_MOVES) is still
 *       m, else start over. Another tag: next slot. The tag matches:
 *       protect its descriptor: store(hazard, id), or take a count
 *       (c = load(refs), compareExchange(c, c + 1), never from 0: a count
 *       of 0 is a free descriptor: read the slot again)
 *   R3  validate: load(slot) is still s and load(M_TABLE) still T; if not,
 *       drop the protection and read the slot again (or start over if the
 *       table was replaced)
 *   R4  compare the held descriptor's hash, key length and key bytes (in
 *       its payload) with the key; equal: the reference is the caller's;
 *       else drop it and go on from the next slot
 * Owner:
 *   publish  payload and descriptor fields written, then store(refs, 1),
 *            state LINKED, then store(slot) (new key: an empty slot;
 *            existing key: over the old entry's slot, one store)
 *   unlink   (delete, replace's old entry, clear) store(slot) away from the
 *            descriptor, then state UNLINKED, then release the index's
 *            reference (retired if it was the last)
 *   delete   Knuth's backward shift (no tombstones, so no rebuilds): the
 *            hole is filled from later in its cluster; before each store
 *            that removes the older copy of a moved entry, M_MOVES += 1
 *   grow     a table twice the size filled privately, then one
 *            store(M_TABLE); the old one is kept until destroy
 *   clear    slots emptied from the end of each cluster backwards, so no
 *            path a present key needs is ever cut
 *   reclaim  take what other threads retired, read every hazard slot,
 *            then free each retired entry whose count is 0 and which no
 *            hazard named
 *
 * Why it is safe (the memory-ordering argument)
 * ---------------------------------------------
 * Every access to a word that another thread may write at the same time is
 * atomic (WebAssembly's or Atomics', sequentially consistent: one order of
 * all of them that every thread agrees on). The plain reads are the
 * owner's of its own words, and a reader's of a descriptor's fields and
 * its payload while it protects them: nobody writes those then (the owner
 * rewrites a descriptor only once it is free, and never writes a
 * published payload), and they were written before the atomic store the
 * reader's atomic loads observed (the slot, refs), so they happen before
 * the reader's reads: no data race, no stale value.
 *  - No torn read: a payload is complete before the store that links it,
 *    and never written again by the map (a new value is a new payload and
 *    a new descriptor, swapped in with one slot store). A reader that
 *    protects a descriptor still being filled (reached through a stale
 *    slot: a reserved descriptor is in no slot) fails R3 and never reads
 *    its payload.
 *  - No read of freed memory: an entry is freed only after it left the
 *    table, its count reached 0 (and a count never rises from 0 but by
 *    retain, whose caller protects the entry) and a look at every hazard
 *    slot made after that found none naming it. A reader's hazard store
 *    comes before its R3 loads; the freeing thread's unlink store comes
 *    before its hazard loads. In the one order of these four, either the
 *    freeing thread sees the hazard (and keeps the entry), or the unlink
 *    comes before R3, which then fails: a reader never goes on to read an
 *    entry that can be freed under it (Michael, "Hazard pointers", 2004).
 *    A counted reference keeps the count above 0. A stale id still names a
 *    descriptor (chunks are never freed while the map lives), and a stale
 *    table is still a table (old ones are kept), so R1-R3 only ever touch
 *    the map's own memory.
 *  - The right entry (no ABA): once protected, a descriptor cannot be
 *    recycled. R3 then finds it in its slot of the current table, so at
 *    that instant it was an entry of the map, and R4 compares that entry's
 *    key. If it was recycled before the protection landed, R3 fails (the
 *    owner takes a descriptor out of its slot before it can be freed)
 *    unless it was relinked to the same slot, and then it is what that
 *    slot holds now. The table check covers old tables: a frozen slot may
 *    name a descriptor recycled since (even one being filled), and the
 *    moved table pointer sends the reader to the new table.
 *  - Exactly one free: retiring is a compareExchange of the state from
 *    UNLINKED (one winner per entry); after it, only the retiring reader
 *    (no hazard, count still 0) or the owner's reclaim (the entry on its
 *    list) frees, and the owner's list holds what readers did not free.
 *  - Linearizable: a hit is the map's entry at the R3 instant. A miss: an
 *    entry stays where it is in a table, but for the backward shift, which
 *    stores a copy of an entry into the hole before it removes the older
 *    copy; M_MOVES is bumped between the two, so a reader that passed the
 *    hole before the copy and reaches the old place after the removal sees
 *    the count change and starts over. Otherwise an empty slot at the end
 *    of the path, with every slot before it holding another key, means the
 *    key was absent at some instant of the probe (an insert of the key in
 *    between had it absent just before). A table a resize replaced is
 *    frozen at the resize, which came after the reader's R1: a miss there
 *    is a miss at that instant.
 *  - No lost update: one writer, and a replace is one store, so a key is
 *    never absent in between; readers never write a slot.
 *  - No leaked reference: every protection R2 takes is returned as a
 *    reference or dropped (R3's, R4's); check() balances the counts and
 *    the hazard slots against the table and the lists.
 *  - Lock-free: a reader starts over only when the owner changed the map
 *    under it (a slot, a move, a resize): the owner made progress. The
 *    owner never waits for a reader.
 *
 * Costs and figures: bench/shared-map.ts (README, "Sharing data between
 * shards"). Limits: 2^23 entries (2^24 slots at half load), keys up to
 * 64 KiB, 1024 reader records; tables only grow (what a map once held, it
 * keeps room for).
 *
 * Thread death: a reader that dies holding references leaves those
 * entries allocated (a count that never gets back to 0, a hazard slot that
 * is never cleared, and its record stays claimed) until the map is
 * destroyed with { force: true } or the heap is discarded; nothing else is
 * affected. The map belongs to its shard: a thread that takes a dead
 * owner's shard over can attach and go on (check() says whether the dead
 * one was cut off in the middle of a change), and must not free the map's
 * objects as orphans while other threads read it.
 */
import { HeapOwnershipError, SharedMapError } from "../errors.js";
import { parseInteger, rejectUnknownKeys } from "../parse.js";
import { describeOwner, ownerToken, THIS_THREAD } from "./ownership.js";
import { checkSize, liveObjectRegion, objectSizeIn } from "./pointers.js";
import type { SharedHeap } from "./shared-heap.js";
import type { ShardAllocator } from "./shard-allocator.js";
import { checkMap, countStates, type SharedMapStats } from "./shared-map-check.js";
import { INVALID_HELD, NO_TABLE, descriptorAddress, mapAtomics, type MapAtomics } from "./shared-map-atomics.js";
import { KeyScratch, badKey } from "./shared-map-keys.js";
import * as L from "./shared-map-layout.js";

export type { SharedMapStats } from "./shared-map-check.js";

// Hot-path constants as module-local values (shard-allocator.ts: V8 folds
// these to constants; imported bindings cost a load and a hole check).
const { GENERATION_MASK, HAZARD_REF, ID_MASK, STATE_MASK, FREE, LINKED, UNLINKED, RETIRED } = L;
const W_REFS = L.D_REFS >>> 2;
const W_HASH = L.D_HASH >>> 2;
const W_KEY_LENGTH = L.D_KEY_LENGTH >>> 2;
const W_PAYLOAD = L.D_PAYLOAD >>> 2;
const W_STATE = L.D_STATE >>> 2;
const W_ID = L.D_ID >>> 2;
const W_NEXT = L.D_NEXT >>> 2;
const W_VALUE_LENGTH = L.D_VALUE_LENGTH >>> 2;
const W_DIRECTORY = L.M_DIRECTORY >>> 2;
/** Every hazard slot of a record free. */
const ALL_HAZARDS = (1 << L.HAZARDS_PER_READER) - 1;
/** A reference of either kind: below 2^30 with an id. */
const REF_MASK = 0x3fffffff;

/** The key being looked up or written, this thread's (shared-map-keys.ts). */
const scratch = new KeyScratch();
const utf8 = new TextDecoder();

export interface SharedMapOptions {
  /** The shard whose memory holds the map; this thread must own it. */
  shard: number;
  /**
   * Entries to make room for before the first resize (default 64): the
   * table and the descriptors for them are made at once, so a map that
   * stays within it allocates nothing but its entries later.
   */
  capacity?: number;
  /**
   * Reader records: how many SharedMap objects (one per thread, usually)
   * may read with hazard references at once (default 64, at most 1024;
   * 64 bytes each). Readers past them use counted references.
   */
  readers?: number;
}

export class SharedMap {
  /** The number to post to other threads: SharedMap.attach(heap, handle) there. */
  readonly handle: number;
  /** The shard whose memory holds the map, and whose thread alone changes it. */
  readonly shard: number;
  readonly heap: SharedHeap;
  private readonly i32: Int32Array;
  private readonly u8: Uint8Array;
  private readonly hdr: number;
  private readonly hdrWord: number;
  private readonly seed: number;
  private readonly atomics: MapAtomics;
  private readonly probe: (hdr: number, hash: number, hazard: number) => number;
  private readonly probeNext: (hdr: number, hash: number) => number;
  /** The count drops this object makes (but the probe's own, inside it) go through here: test/shared-map-unlink-order.test.ts wraps it to see the map at each. */
  private readonly releaseStep: (d: number) => number;
  private readonly store: (address: number, value: number) => void;
  /** Bytes of the map's own objects (structureBytes), -1 until first asked. */
  private ownBytes = -1;
  /** Byte address of this object's first hazard slot (0 until it claims a reader record, or when none was left). */
  private hazards = 0;
  /** Which of its hazard slots are free, a bit each. */
  private freeHazards = 0;
  /** Whether this object still has to try for a reader record. */
  private unclaimed = true;
  /** "destroyed" or "closed" once it is; undefined while usable. */
  private ended: string | undefined = undefined;

  private constructor(heap: SharedHeap, handle: number) {
    this.heap = heap;
    this.handle = handle;
    this.hdr = handle;
    this.hdrWord = handle >>> 2;
    this.i32 = new Int32Array(heap.buffer);
    this.u8 = new Uint8Array(heap.buffer);
    this.shard = this.i32[this.hdrWord + (L.M_SHARD >>> 2)]!;
    this.seed = this.i32[this.hdrWord + (L.M_SEED >>> 2)]!;
    this.atomics = mapAtomics(heap.buffer, heap.memory);
    this.probe = this.atomics.probe;
    this.probeNext = this.atomics.probeNext;
    this.releaseStep = this.atomics.release;
    this.store = this.atomics.store;
  }

  /**
   * A new, empty map in shard `o.shard`'s memory, on the thread that owns
   * that shard (HeapOwnershipError elsewhere). Bad options:
   * InvalidValueError; no memory for it: OutOfMemoryError, nothing left
   * allocated.
   */
  static create(heap: SharedHeap, o: SharedMapOptions): SharedMap {
    if (o === null || typeof o !== "object") throw new TypeError("SharedMap.create: options must be an object");
    rejectUnknownKeys(o, ["shard", "capacity", "readers"], "SharedMap.create: options");
    const shard = parseInteger(o.shard, "SharedMap.create: options.shard", 0, heap.shards - 1);
    const capacity = o.capacity === undefined ? 64 : parseInteger(o.capacity, "SharedMap.create: options.capacity", 0, L.MAX_CAPACITY * L.MAX_LOAD);
    const readers = o.readers === undefined ? L.DEFAULT_READER_RECORDS : parseInteger(o.readers, "SharedMap.create: options.readers", 0, L.MAX_READER_RECORDS);
    const a = ownedAllocator(heap, shard, "create");
    let slots = L.MIN_CAPACITY;
    while (slots * L.MAX_LOAD < capacity) slots *= 2;
    const made: number[] = [];
    try {
      const hdr = zeroed(heap, a.allocateAligned(64, L.MAP_HEADER_BYTES), L.MAP_HEADER_BYTES);
      made.push(hdr);
      const table = newTable(heap, a, slots);
      made.push(table);
      const chunk = newChunk(heap, a, 0);
      made.push(chunk);
      // The descriptors for `capacity` entries, now: a map that stays within it allocates no
      // structure later, so its objects sit together where an empty region put them instead of
      // pinning pages among the entries (with chunks made as they were needed, a 1 MiB memcached
      // shard emptied of its 329 items had 840 KiB free and no run over 344 KiB).
      const chunks = [chunk];
      for (let k = 1; k < L.CHUNK_COUNT && L.chunkFirstId(k) <= Math.min(capacity, L.MAX_ID); k++) {
        const more = newChunk(heap, a, k);
        made.push(more);
        chunks.push(more);
      }
      const records = zeroed(heap, a.allocateAligned(64, Math.max(1, readers) * L.READER_BYTES), Math.max(1, readers) * L.READER_BYTES);
      made.push(records);
      const i32 = new Int32Array(heap.buffer);
      const w = hdr >>> 2;
      i32[w + (L.M_TABLE >>> 2)] = table;
      for (let k = 0; k < chunks.length; k++) i32[w + W_DIRECTORY + k] = chunks[k]!;
      i32[w + (L.M_READERS >>> 2)] = records;
      i32[w + (L.M_READER_RECORDS >>> 2)] = readers;
      i32[w + (L.M_SEED >>> 2)] = crypto.getRandomValues(new Int32Array(1))[0]!;
      i32[w + (L.M_SHARD >>> 2)] = shard;
      i32[w + (L.M_VERSION >>> 2)] = L.MAP_VERSION;
      i32[w + (L.M_NEXT_ID >>> 2)] = 1; // id 0 is never handed out: a slot of 0 is empty
      Atomics.store(i32, w + (L.M_MAGIC >>> 2), L.MAP_MAGIC);
      return new SharedMap(heap, hdr);
    } catch (e) {
      for (const p of made) a.free(p);
      throw e;
    }
  }

  /**
   * The map whose handle is `handle`, from any thread (the heap attached
   * there). SharedMapError (ERR_SHARDHEAP_MAP_HANDLE) when `handle` is not
   * a live map's: the check reads the object's first words, so a handle
   * kept past its map's destroy is caught until its memory is reused.
   */
  static attach(heap: SharedHeap, handle: number): SharedMap {
    let size: number;
    try {
      size = objectSizeIn(liveObjectRegion(heap, handle, "SharedMap.attach"), handle);
    } catch (e) {
      throw new SharedMapError("ERR_SHARDHEAP_MAP_HANDLE", `SharedMap.attach(${String(handle)}): not a SharedMap: ${(e as Error).message}`);
    }
    const i32 = new Int32Array(heap.buffer);
    const w = handle >>> 2;
    const problem =
      size < L.MAP_HEADER_BYTES || Atomics.load(i32, w) !== L.MAP_MAGIC
        ? "the object there is not a SharedMap (or it was destroyed)"
        : i32[w + (L.M_VERSION >>> 2)] !== L.MAP_VERSION
          ? `its layout version is ${i32[w + (L.M_VERSION >>> 2)]}, this is ${L.MAP_VERSION}`
          : i32[w + (L.M_SHARD >>> 2)] !== heap.ownerOf(handle)
            ? "its header names another shard"
            : undefined;
    if (problem !== undefined) throw new SharedMapError("ERR_SHARDHEAP_MAP_HANDLE", `SharedMap.attach(${handle}): ${problem}`);
    return new SharedMap(heap, handle);
  }

  /** Entries in the map (from any thread: a figure of a moment). */
  get size(): number {
    return this.i32[this.hdrWord + (L.M_COUNT >>> 2)]!;
  }

  // ------------------------------------------------------------- readers

  /**
   * A reference to `key`'s entry (a string is its UTF-8 bytes), or 0 when
   * the map has none; from any thread, without a lock. The entry is not
   * freed, and its payload not changed, until the reference is released:
   * read it through valuePointer / valueLength (or value, a view), then
   * release(ref) on this same SharedMap object, once (retain gives one to
   * release elsewhere). Allocates nothing.
   */
  acquire(key: string | Uint8Array): number {
    if (this.ended !== undefined) throw this.gone("acquire");
    let hash: number;
    if (typeof key === "string") hash = scratch.ofString(key, this.seed);
    else if (key instanceof Uint8Array) hash = scratch.ofBytes(key, 0, key.length, this.seed);
    else throw badKey(key);
    return this.find(hash);
  }

  /** acquire of the key `bytes[start..end)` (a key inside a bigger buffer, such as a request's), without a view. */
  acquireBytes(bytes: Uint8Array, start: number, end: number): number {
    if (this.ended !== undefined) throw this.gone("acquireBytes");
    if (!(bytes instanceof Uint8Array)) throw badKey(bytes);
    if (!(Number.isInteger(start) && Number.isInteger(end) && start >= 0 && start <= end && end <= bytes.length)) {
      throw new RangeError(`SharedMap.acquireBytes: start and end must be integers with 0 <= start <= end <= ${bytes.length}, got ${start} and ${end}`);
    }
    return this.find(scratch.ofBytes(bytes, start, end, this.seed));
  }

  /**
   * The probe (shared-map-atomics.ts: R1-R3), protected by a free hazard
   * slot of this object when it has one, else by a count; then the key
   * compare (R4).
   */
  private find(hash: number): number {
    let free = this.freeHazards;
    if (free === 0 && this.unclaimed) free = this.claimRecord();
    const slot = 31 - Math.clz32(free & -free); // the lowest free one (-1 when none)
    const hazard = free === 0 ? 0 : this.hazards + 4 * slot;
    const i32 = this.i32;
    const hdr = this.hdr;
    const k = scratch;
    let d = this.probe(hdr, hash, hazard);
    for (;;) {
      if ((d & 31) === 0 && d !== 0) {
        const w = d >>> 2;
        if (i32[w + W_HASH] === hash && i32[w + W_KEY_LENGTH] === k.length && k.equalsAt(i32, i32[w + W_PAYLOAD]! >>> 2)) {
          if (hazard === 0) return (i32[w + W_STATE]! & GENERATION_MASK) | i32[w + W_ID]!;
          this.freeHazards = free & ~(1 << slot);
          return HAZARD_REF | (slot << 24) | i32[w + W_ID]!;
        }
        if (hazard !== 0) this.store(hazard, 0);
        else this.dropCount(d);
        d = this.probeNext(hdr, hash);
      } else {
        if (d === 0) return 0;
        d = this.findSlow(d, hash);
      }
    }
  }

  /** The probe's rarer verdicts: the map is gone, or a last count to give back (INVALID_HELD) before probing again. */
  private findSlow(verdict: number, hash: number): number {
    if (verdict === NO_TABLE) throw this.gone("acquire");
    this.dropCount(verdict ^ INVALID_HELD);
    return this.probe(this.hdr, hash, 0);
  }

  /**
   * Another reference to the entry `ref` holds, a counted one: released by
   * release() on any thread (post the number), independently of `ref`.
   */
  retain(ref: number): number {
    const d = this.descriptorOf(ref, "retain");
    if ((this.i32[(d >>> 2) + W_STATE]! & STATE_MASK) === L.RESERVED) {
      throw new SharedMapError("ERR_SHARDHEAP_MAP_REFERENCE", `SharedMap.retain(${ref}): a reservation has one reference, its writer's: publish it first`);
    }
    this.atomics.retain(d);
    return (this.i32[(d >>> 2) + W_STATE]! & GENERATION_MASK) | (ref & ID_MASK);
  }

  /**
   * Give a reference back: a hazard reference on the object that took it,
   * a counted one on any thread. An entry out of the map is freed once its
   * last reference goes (by this thread, a cross-shard free when it is not
   * the owner's, or by the owner's next reclaim). A reference released
   * twice is refused (SharedMapError, ERR_SHARDHEAP_MAP_REFERENCE) when
   * the map can tell: a hazard slot that no longer holds it, a count that
   * is gone, or a release that would free an entry still in the map.
   */
  release(ref: number): void {
    if ((ref & (HAZARD_REF | ~REF_MASK)) === HAZARD_REF) {
      const slot = (ref >>> 24) & 31;
      const hazard = this.hazards + 4 * slot;
      if (slot < L.HAZARDS_PER_READER && (this.freeHazards & (1 << slot)) === 0 && this.hazards !== 0 && this.i32[hazard >>> 2] === (ref & ID_MASK)) {
        this.store(hazard, 0);
        this.freeHazards |= 1 << slot;
        return;
      }
      throw this.notHeld(ref, "release");
    }
    const d = this.descriptorOf(ref, "release");
    if ((this.i32[(d >>> 2) + W_STATE]! & STATE_MASK) === L.RESERVED) this.giveUpReservation(ref);
    const r = this.releaseStep(d);
    if (r > 0) return;
    if (r === 0) return this.countGone(d);
    throw r === -2
      ? new SharedMapError("ERR_SHARDHEAP_MAP_REFERENCE", `SharedMap.release(${ref}): the entry's only reference left is the map's own (it is still in the map): this reference was released already`)
      : this.notHeld(ref, "release");
  }

  /** Whether `key` has an entry now (acquire and release). */
  has(key: string | Uint8Array): boolean {
    const ref = this.acquire(key);
    if (ref === 0) return false;
    this.release(ref);
    return true;
  }

  /** A copy of `key`'s value, or undefined (allocates: for the hot path, acquire and read in place). */
  get(key: string | Uint8Array): Uint8Array | undefined {
    const ref = this.acquire(key);
    if (ref === 0) return undefined;
    try {
      return this.value(ref).slice();
    } finally {
      this.release(ref);
    }
  }

  /** `key`'s value read as UTF-8 text, or undefined. */
  getString(key: string | Uint8Array): string | undefined {
    const ref = this.acquire(key);
    if (ref === 0) return undefined;
    try {
      return utf8.decode(this.value(ref));
    } finally {
      this.release(ref);
    }
  }

  /** Byte address (in heap.buffer) of the value of the entry `ref` holds; 8-aligned. */
  valuePointer(ref: number): number {
    const d = this.descriptorOf(ref, "valuePointer") >>> 2;
    return (this.i32[d + W_PAYLOAD]! >>> 0) + L.keyArea(this.i32[d + W_KEY_LENGTH]!);
  }

  /** Bytes of that value. */
  valueLength(ref: number): number {
    return this.i32[(this.descriptorOf(ref, "valueLength") >>> 2) + W_VALUE_LENGTH]! >>> 0;
  }

  /** A view of the value, no copy (a new Uint8Array each call); valid while the reference is held. */
  value(ref: number): Uint8Array {
    const d = this.descriptorOf(ref, "value") >>> 2;
    const start = (this.i32[d + W_PAYLOAD]! >>> 0) + L.keyArea(this.i32[d + W_KEY_LENGTH]!);
    return new Uint8Array(this.heap.buffer, start, this.i32[d + W_VALUE_LENGTH]! >>> 0);
  }

  /** A view of the key's bytes (its UTF-8, for a string key). */
  key(ref: number): Uint8Array {
    const d = this.descriptorOf(ref, "key") >>> 2;
    return new Uint8Array(this.heap.buffer, this.i32[d + W_PAYLOAD]! >>> 0, this.i32[d + W_KEY_LENGTH]!);
  }

  /**
   * Heap bytes the entry `ref` holds: its object's size as the allocator
   * gave it (key area, value and the size class's rounding), what a memory
   * budget over the entries counts (memcached's store, store.ts).
   */
  entryBytes(ref: number): number {
    const payload = this.i32[(this.descriptorOf(ref, "entryBytes") >>> 2) + W_PAYLOAD]! >>> 0;
    return objectSizeIn(liveObjectRegion(this.heap, payload, "SharedMap.entryBytes"), payload);
  }

  /**
   * Heap bytes of the map's own objects (header, reader records, tables,
   * descriptor chunks: stats().structureBytes) without a walk: read from
   * the heap when first asked, then kept up to date by the changes this
   * object makes (tables and descriptors only grow, by the owner's
   * changes). So it is exact on the owner's object that changes the map,
   * such as a memory budget's (memcached's store.ts); on any other, it is
   * what the map had when first asked.
   */
  get structureBytes(): number {
    if (this.ownBytes < 0) this.ownBytes = this.stats().structureBytes;
    return this.ownBytes;
  }

  /**
   * Whether entries out of the map wait for a reclaim (retired ones, or
   * ones other threads handed back): an owner that goes quiet calls
   * reclaim() while this says so, as the automatic reclaim waits for 32 of
   * them. One or two loads, any thread.
   */
  get reclaimPending(): boolean {
    const hw = this.hdrWord;
    return this.i32[hw + (L.M_RETIRED_LIST >>> 2)] !== 0 || Atomics.load(this.i32, hw + (L.M_RETIRED_STACK >>> 2)) !== 0;
  }

  /** Bytes of the key. */
  keyLength(ref: number): number {
    return this.i32[(this.descriptorOf(ref, "keyLength") >>> 2) + W_KEY_LENGTH]!;
  }

  /**
   * This object is done with the map: its reader record goes back for
   * another object to claim. Refused (ERR_SHARDHEAP_MAP_IN_USE) while it
   * holds hazard references. The object cannot be used afterwards.
   */
  close(): void {
    if (this.ended !== undefined) return;
    if (this.hazards !== 0) {
      if (this.freeHazards !== ALL_HAZARDS) {
        throw new SharedMapError("ERR_SHARDHEAP_MAP_IN_USE", `SharedMap.close: this object holds ${L.HAZARDS_PER_READER - popCount(this.freeHazards)} references; release them first`);
      }
      this.store(this.hazards - L.R_HAZARDS + L.R_CLAIM, 0);
      this.hazards = 0;
      this.freeHazards = 0;
    }
    this.ended = "closed";
  }

  // --------------------------------------------------------------- owner

  /**
   * Store `value` (its bytes, a string's UTF-8) under `key`, replacing the
   * key's entry if it has one (readers holding the old one keep reading it
   * until they release it). The owner's thread only. Returns whether an
   * entry was replaced. OutOfMemoryError leaves the map as it was.
   */
  set(key: string | Uint8Array, value: Uint8Array | string): boolean {
    let bytes: number;
    if (typeof value === "string") bytes = Buffer.byteLength(value, "utf8");
    else if (value instanceof Uint8Array) bytes = value.length;
    else throw new TypeError(`SharedMap.set: a value must be a Uint8Array or a string, got ${value === null ? "null" : typeof value}`);
    const ref = this.reserve(key, bytes);
    try {
      const at = this.valuePointer(ref);
      if (typeof value === "string") Buffer.from(this.heap.buffer, at, bytes).write(value, "utf8");
      else this.u8.set(value, at);
      return this.publish(ref);
    } catch (e) {
      this.release(ref);
      throw e;
    }
  }

  /**
   * A new entry for `key` with `byteLength` bytes of value to fill in
   * place (valuePointer(ref); the bytes start as whatever the allocator
   * left there), not yet in the map: no reader can find it until
   * publish(ref). The owner's thread only. Returns the writer's (counted)
   * reference: publish hands it to the map, release gives the entry up.
   */
  reserve(key: string | Uint8Array, byteLength: number): number {
    const a = this.owner("reserve");
    checkSize(byteLength, "SharedMap.reserve", "byteLength");
    const hash = this.readKey(key);
    const keyLength = scratch.length;
    const payload = a.malloc(L.keyArea(keyLength) + byteLength);
    let d: number;
    try {
      d = this.takeDescriptor(a);
    } catch (e) {
      a.free(payload);
      throw e;
    }
    const i32 = this.i32;
    const w = d >>> 2;
    scratch.writeAt(i32, payload >>> 2);
    i32[w + W_HASH] = hash;
    i32[w + W_PAYLOAD] = payload;
    i32[w + W_KEY_LENGTH] = keyLength;
    i32[w + W_VALUE_LENGTH] = byteLength;
    const generation = (i32[w + W_STATE]! + (1 << L.GENERATION_SHIFT)) & GENERATION_MASK;
    this.store(d + L.D_STATE, generation | L.RESERVED);
    // The count last: a reader holding a stale id that sees it sees the
    // fields above too (and then fails R3: no slot names it).
    this.store(d + L.D_REFS, 1);
    this.addHeader(L.M_RESERVED, 1);
    return generation | i32[w + W_ID]!;
  }

  /**
   * Put a reserved entry in the map, replacing the key's entry if it has
   * one; the writer's reference becomes the map's. The owner's thread
   * only. Returns whether an entry was replaced. OutOfMemoryError (the
   * table could not grow) leaves the reservation as it was.
   */
  publish(ref: number): boolean {
    const a = this.owner("publish");
    const d = this.descriptorOf(ref, "publish");
    const i32 = this.i32;
    const w = d >>> 2;
    if ((i32[w + W_STATE]! & STATE_MASK) !== L.RESERVED) {
      throw new SharedMapError("ERR_SHARDHEAP_MAP_REFERENCE", `SharedMap.publish(${ref}): not a reservation (published already?)`);
    }
    const hash = i32[w + W_HASH]!;
    scratch.length = i32[w + W_KEY_LENGTH]!;
    this.loadKey(i32[w + W_PAYLOAD]! >>> 0);
    let T = this.table();
    let i = this.findSlot(T, hash);
    const word = (i32[w + W_ID]! << 8) | (hash >>> 24);
    const linked = (i32[w + W_STATE]! & GENERATION_MASK) | LINKED;
    if (i >= 0) {
      const old = this.slotDescriptor(T, i);
      this.store(d + L.D_STATE, linked);
      this.store(slotAddress(T, i), word);
      this.addHeader(L.M_RESERVED, -1);
      this.unlinked(old);
      return true;
    }
    if (this.size + 1 > (this.mask(T) + 1) * L.MAX_LOAD) {
      T = this.grow(a, T);
      i = this.findSlot(T, hash);
    }
    this.store(d + L.D_STATE, linked);
    this.store(slotAddress(T, ~i), word);
    this.addHeader(L.M_COUNT, 1);
    this.addHeader(L.M_RESERVED, -1);
    return false;
  }

  /** Remove `key`'s entry (freed once its readers release it). The owner's thread only. Returns whether there was one. */
  delete(key: string | Uint8Array): boolean {
    this.owner("delete");
    const hash = this.readKey(key);
    const T = this.table();
    const i = this.findSlot(T, hash);
    if (i < 0) return false;
    const d = this.slotDescriptor(T, i);
    this.removeAt(T, i);
    this.addHeader(L.M_COUNT, -1);
    this.unlinked(d);
    return true;
  }

  /**
   * Remove the entry `ref` names if it is still in the map (not another
   * entry of the same key): for an owner that keeps its own order of
   * entries, such as an LRU list. The owner's thread only; the owner may
   * use the reference reserve gave it for as long as the entry is in the
   * map. Returns whether it was.
   */
  unlink(ref: number): boolean {
    this.owner("unlink");
    const d = this.descriptorOf(ref, "unlink");
    const i32 = this.i32;
    const w = d >>> 2;
    if ((i32[w + W_STATE]! & STATE_MASK) !== LINKED) return false;
    const T = this.table();
    const mask = this.mask(T);
    const id = i32[w + W_ID]!;
    let i = i32[w + W_HASH]! & mask;
    while (i32[slotAddress(T, i) >>> 2]! >>> 8 !== id) i = (i + 1) & mask;
    this.removeAt(T, i);
    this.addHeader(L.M_COUNT, -1);
    this.unlinked(d);
    return true;
  }

  /** Remove every entry. The owner's thread only. Returns how many there were. */
  clear(): number {
    this.owner("clear");
    const T = this.table();
    const mask = this.mask(T);
    const i32 = this.i32;
    let empty = 0;
    while (i32[slotAddress(T, empty) >>> 2] !== 0) empty++;
    // Backwards from an empty slot: the slot after each one cleared is
    // empty by then, so it ends its cluster and no present key's path runs
    // through it (no M_MOVES bump needed).
    let removed = 0;
    for (let n = 0, i = (empty - 1) & mask; n < mask; n++, i = (i - 1) & mask) {
      if (i32[slotAddress(T, i) >>> 2] === 0) continue;
      const d = this.slotDescriptor(T, i);
      this.store(slotAddress(T, i), 0);
      this.addHeader(L.M_COUNT, -1);
      this.unlinked(d);
      removed++;
    }
    return removed;
  }

  /**
   * Call `fn` with the reference of every entry in the map (the owner's
   * thread only; the map's own references, valid while the entries stay:
   * acquire to keep one). `fn` may delete or unlink: entries it removes
   * before they are reached are skipped.
   */
  forEach(fn: (ref: number) => void): void {
    this.owner("forEach");
    const T = this.table();
    const i32 = this.i32;
    const refs: number[] = [];
    for (let i = 0; i <= this.mask(T); i++) {
      const s = i32[slotAddress(T, i) >>> 2]!;
      if (s === 0) continue;
      const w = descriptorAddress(i32, this.hdr, s >>> 8) >>> 2;
      refs.push((i32[w + W_STATE]! & GENERATION_MASK) | (s >>> 8));
    }
    for (const ref of refs) {
      const w = descriptorAddress(i32, this.hdr, ref & ID_MASK) >>> 2;
      const state = i32[w + W_STATE]!;
      if ((state & STATE_MASK) === LINKED && (state & GENERATION_MASK) === (ref & GENERATION_MASK)) fn(ref);
    }
  }

  /**
   * Free the retired entries no reader holds now (the owner does this by
   * itself every 32 entries or 64 KiB retired, and when a new entry needs
   * a descriptor; call it when memory must come back at once, such as
   * before deciding a shard is full). The owner's thread only. Returns how
   * many entries it freed.
   */
  reclaim(): number {
    const a = this.owner("reclaim");
    return this.reclaimWith(a);
  }

  /**
   * Free the map and everything in it. The owner's thread only, and only
   * once no thread will use the map again (a reader still probing it would
   * touch freed memory: tell the readers, and wait for their answer,
   * first). Refused (SharedMapError, ERR_SHARDHEAP_MAP_IN_USE, nothing
   * changed) while references are held or reservations open, unless
   * `force`: then entries are freed whoever holds them (for holders known
   * to be gone, such as a dead thread's).
   */
  destroy(o?: { force?: boolean }): void {
    const a = this.owner("destroy");
    if (o !== undefined) rejectUnknownKeys(o, ["force"], "SharedMap.destroy: options");
    const stats = this.stats();
    if (o?.force !== true && (stats.held > 0 || stats.reserved > 0)) {
      throw new SharedMapError(
        "ERR_SHARDHEAP_MAP_IN_USE",
        `SharedMap.destroy: ${stats.held} references held and ${stats.reserved} reservations open; release them first (or destroy({ force: true }) if their holders are gone)`,
      );
    }
    const i32 = this.i32;
    const hw = this.hdrWord;
    const own = this.ownObjects();
    this.store(this.hdr + L.M_TABLE, 0);
    this.store(this.hdr + L.M_MAGIC, 0);
    this.ended = "destroyed";
    const next = i32[hw + (L.M_NEXT_ID >>> 2)]!;
    for (let id = 1; id < next; id++) {
      const w = descriptorAddress(i32, this.hdr, id) >>> 2;
      if ((i32[w + W_STATE]! & STATE_MASK) !== FREE) a.free(i32[w + W_PAYLOAD]! >>> 0);
    }
    for (const p of own) a.free(p);
  }

  /** The map's own heap objects: the descriptor chunks, the tables (current and replaced), the reader records, and last the header. */
  private ownObjects(): number[] {
    const i32 = this.i32;
    const hw = this.hdrWord;
    const own: number[] = [];
    for (let k = 0; k < L.CHUNK_COUNT; k++) if (i32[hw + W_DIRECTORY + k] !== 0) own.push(i32[hw + W_DIRECTORY + k]! >>> 0);
    for (let t = i32[hw + (L.M_OLD_TABLES >>> 2)]! >>> 0; t !== 0; t = i32[(t + L.T_NEXT_OLD) >>> 2]! >>> 0) own.push(t);
    own.push(i32[hw + (L.M_TABLE >>> 2)]! >>> 0, i32[hw + (L.M_READERS >>> 2)]! >>> 0, this.hdr);
    return own;
  }

  /** Counts of the map's entries, references and descriptors, read from the heap (any thread; a walk over every descriptor). */
  stats(): SharedMapStats {
    this.checkLive("stats");
    const s = countStates(this.i32, this.hdr);
    for (const p of this.ownObjects()) {
      s.structureObjects++;
      s.structureBytes += objectSizeIn(liveObjectRegion(this.heap, p, "SharedMap.stats"), p);
    }
    return s;
  }

  /**
   * The map's invariants (shared-map-layout.ts) as sentences, [] when they
   * hold: on a quiet map (no thread changing it or taking references
   * meanwhile), from any thread.
   */
  check(): string[] {
    this.checkLive("check");
    return checkMap(this.heap, this.i32, this.hdr);
  }

  // ------------------------------------------------------- owner helpers

  /** release() of a reservation: the writer gives it up, on the owner's thread (the reservation count is the owner's). */
  private giveUpReservation(ref: number): void {
    this.owner("release");
    if (this.i32[this.hdrWord + (L.M_RESERVED >>> 2)]! <= 0) throw this.notHeld(ref, "release");
    this.addHeader(L.M_RESERVED, -1);
  }

  private owner(op: string): ShardAllocator {
    this.checkLive(op);
    return ownedAllocator(this.heap, this.shard, op);
  }

  private checkLive(op: string): void {
    if (this.ended !== undefined) throw this.gone(op);
  }

  private gone(op: string): SharedMapError {
    return new SharedMapError("ERR_SHARDHEAP_MAP_HANDLE", `SharedMap.${op}: ${this.ended === "closed" ? "this SharedMap object was closed" : `the map (handle ${this.handle}) was destroyed`}`);
  }

  /** Read `key` into the scratch; its hash. */
  private readKey(key: string | Uint8Array): number {
    if (typeof key === "string") return scratch.ofString(key, this.seed);
    if (key instanceof Uint8Array) return scratch.ofBytes(key, 0, key.length, this.seed);
    throw badKey(key);
  }

  /** The stored key at byte address `at` into the scratch (its length already set). */
  private loadKey(at: number): void {
    const n = (scratch.length + 3) >>> 2;
    if (scratch.words.length < n + 2) scratch.ofBytes(this.u8, at, at + scratch.length, this.seed);
    else for (let j = 0; j < n; j++) scratch.words[j] = this.i32[(at >>> 2) + j]!;
  }

  private table(): number {
    return this.i32[this.hdrWord + (L.M_TABLE >>> 2)]! >>> 0;
  }

  private mask(T: number): number {
    return this.i32[(T + L.T_MASK) >>> 2]!;
  }

  private slotDescriptor(T: number, i: number): number {
    return descriptorAddress(this.i32, this.hdr, this.i32[slotAddress(T, i) >>> 2]! >>> 8);
  }

  /** The owner's probe for the key in the scratch: its slot, or ~(the empty slot that ends its path). */
  private findSlot(T: number, hash: number): number {
    const i32 = this.i32;
    const mask = this.mask(T);
    const slots = (T + L.TABLE_HEADER_BYTES) >>> 2;
    const tag = hash >>> 24;
    for (let i = hash & mask; ; i = (i + 1) & mask) {
      const s = i32[slots + i]!;
      if (s === 0) return ~i;
      if ((s & 255) !== tag) continue;
      const w = descriptorAddress(i32, this.hdr, s >>> 8) >>> 2;
      if (i32[w + W_HASH] === hash && i32[w + W_KEY_LENGTH] === scratch.length && scratch.equalsAt(i32, i32[w + W_PAYLOAD]! >>> 2)) return i;
    }
  }

  /**
   * Empty slot i by Knuth's backward shift (Algorithm R): later entries of
   * its cluster whose path runs through the hole move into it, one store
   * each. Each store after the first removes the older copy of the entry
   * the previous store copied, so M_MOVES is bumped before it: a reader
   * that passed the hole before the copy sees the bump (the essay above).
   */
  private removeAt(T: number, i: number): void {
    const i32 = this.i32;
    const mask = this.mask(T);
    let hole = i;
    let moved = false;
    for (let j = (i + 1) & mask; ; j = (j + 1) & mask) {
      const s = i32[slotAddress(T, j) >>> 2]!;
      if (s === 0) break;
      const home = i32[(descriptorAddress(i32, this.hdr, s >>> 8) >>> 2) + W_HASH]! & mask;
      if (((j - home) & mask) < ((j - hole) & mask)) continue; // its path does not run through the hole
      if (moved) this.bumpMoves();
      this.store(slotAddress(T, hole), s);
      moved = true;
      hole = j;
    }
    if (moved) this.bumpMoves();
    this.store(slotAddress(T, hole), 0);
  }

  private bumpMoves(): void {
    this.store(this.hdr + L.M_MOVES, this.i32[this.hdrWord + (L.M_MOVES >>> 2)]! + 1);
  }

  /** A descriptor just taken out of the table: UNLINKED, then the index's reference dropped. */
  private unlinked(d: number): void {
    const w = d >>> 2;
    this.store(d + L.D_STATE, (this.i32[w + W_STATE]! & GENERATION_MASK) | UNLINKED);
    const r = this.releaseStep(d);
    if (r === 0) this.countGone(d);
    else if (r < 0) throw new SharedMapError("ERR_SHARDHEAP_MAP_REFERENCE", `SharedMap: an entry's own reference was released by someone else (descriptor ${this.i32[w + W_ID]}): a reference was released twice`);
  }

  /** A table twice the size of T, filled, then published with one store; T kept until destroy. */
  private grow(a: ShardAllocator, T: number): number {
    const i32 = this.i32;
    const capacity = (this.mask(T) + 1) * 2;
    if (capacity > L.MAX_CAPACITY) {
      throw new SharedMapError("ERR_SHARDHEAP_MAP_FULL", `SharedMap: the table cannot grow past ${L.MAX_CAPACITY} slots (${L.MAX_CAPACITY * L.MAX_LOAD} entries)`);
    }
    const T2 = newTable(this.heap, a, capacity);
    if (this.ownBytes >= 0) this.ownBytes += a.objectSize(T2);
    const mask = capacity - 1;
    const slots = (T2 + L.TABLE_HEADER_BYTES) >>> 2;
    for (let i = 0, old = this.mask(T); i <= old; i++) {
      const s = i32[slotAddress(T, i) >>> 2]!;
      if (s === 0) continue;
      let j = i32[(descriptorAddress(i32, this.hdr, s >>> 8) >>> 2) + W_HASH]! & mask;
      while (i32[slots + j] !== 0) j = (j + 1) & mask;
      i32[slots + j] = s;
    }
    i32[(T + L.T_NEXT_OLD) >>> 2] = i32[this.hdrWord + (L.M_OLD_TABLES >>> 2)]!;
    i32[this.hdrWord + (L.M_OLD_TABLES >>> 2)] = T;
    this.store(this.hdr + L.M_TABLE, T2);
    return T2;
  }

  /** A free descriptor: the owner's list, else what other threads handed back, else what a reclaim frees, else a new one. */
  private takeDescriptor(a: ShardAllocator): number {
    const i32 = this.i32;
    const hw = this.hdrWord;
    let id = i32[hw + (L.M_FREE >>> 2)]!;
    if (id === 0 && i32[hw + (L.M_RETURNED >>> 2)] !== 0) id = this.atomics.exchange(this.hdr + L.M_RETURNED, 0);
    if (id === 0 && (i32[hw + (L.M_RETIRED_LIST >>> 2)] !== 0 || i32[hw + (L.M_RETIRED_STACK >>> 2)] !== 0) && this.reclaimWith(a) > 0) {
      id = i32[hw + (L.M_FREE >>> 2)]!;
    }
    if (id !== 0) {
      const d = descriptorAddress(i32, this.hdr, id);
      i32[hw + (L.M_FREE >>> 2)] = i32[(d >>> 2) + W_NEXT]!;
      return d;
    }
    id = i32[hw + (L.M_NEXT_ID >>> 2)]!;
    if (id > L.MAX_ID) throw new SharedMapError("ERR_SHARDHEAP_MAP_FULL", `SharedMap: all ${L.MAX_ID} entry descriptors are in use (entries, reservations and entries still referenced)`);
    const k = L.chunkOf(id);
    if (i32[hw + W_DIRECTORY + k] === 0) {
      // Written before any of its ids can reach a slot (whose store publishes it).
      const chunk = newChunk(this.heap, a, k);
      if (this.ownBytes >= 0) this.ownBytes += a.objectSize(chunk);
      this.store(this.hdr + L.M_DIRECTORY + 4 * k, chunk);
    }
    i32[hw + (L.M_NEXT_ID >>> 2)] = id + 1;
    return descriptorAddress(i32, this.hdr, id);
  }

  private addHeader(slot: number, delta: number): void {
    this.i32[this.hdrWord + (slot >>> 2)] += delta;
  }

  // ---------------------------------------------------------- reclaiming

  /**
   * This thread took d's count to 0. A reservation given up is freed at
   * once: no slot ever named it, so no reader ever validated it, and a
   * stale reader's hazard on it would only fail its validation (a stale
   * count is no longer there: the count is 0). An entry out of the map is
   * retired, unless a retain from a hazard raised it from 0 since and it
   * was retired then: the compareExchange of its state from UNLINKED makes
   * one thread the retirer of each entry.
   */
  private countGone(d: number): void {
    const i32 = this.i32;
    const w = d >>> 2;
    const state = i32[w + W_STATE]!;
    const kind = state & STATE_MASK;
    if (kind === L.RESERVED) {
      if (this.atomics.compareExchange(d + L.D_STATE, state, (state & GENERATION_MASK) | FREE) === state) this.freeEntry(d);
      return;
    }
    if (kind !== UNLINKED) return;
    if (this.atomics.compareExchange(d + L.D_STATE, state, (state & GENERATION_MASK) | RETIRED) !== state) return;
    if (ownerToken(this.heap.regions[this.shard]!) === THIS_THREAD) return this.retireHere(d);
    // Another thread: free it now unless a hazard slot names it or a
    // retain raised its count meanwhile (both read after the retiring
    // compareExchange); else hand it to the owner's reclaim.
    const records = i32[this.hdrWord + (L.M_READERS >>> 2)]!;
    const high = this.atomics.load(this.hdr + L.M_READER_HIGH);
    if (this.atomics.findHazard(records, high, i32[w + W_ID]!) === 0 && this.atomics.load(d + L.D_REFS) === 0) {
      this.store(d + L.D_STATE, (state & GENERATION_MASK) | FREE);
      return this.freeEntry(d);
    }
    this.push(L.M_RETIRED_STACK, d);
  }

  /** The owner retires d: onto its retired list, and a reclaim once enough is there. */
  private retireHere(d: number): void {
    const i32 = this.i32;
    const w = d >>> 2;
    const hw = this.hdrWord;
    i32[w + W_NEXT] = i32[hw + (L.M_RETIRED_LIST >>> 2)]!;
    i32[hw + (L.M_RETIRED_LIST >>> 2)] = i32[w + W_ID]!;
    const count = ++i32[hw + (L.M_RETIRED_COUNT >>> 2)]!;
    const bytes = (i32[hw + (L.M_RETIRED_BYTES >>> 2)]! += L.keyArea(i32[w + W_KEY_LENGTH]!) + (i32[w + W_VALUE_LENGTH]! >>> 0));
    if (count >= L.RECLAIM_COUNT || bytes >= L.RECLAIM_BYTES) this.reclaimWith(this.heap.shard(this.shard));
  }

  /**
   * The owner's reclaim: what other threads retired joins the retired
   * list; every hazard slot is read once; then each retired entry whose
   * count is 0 (read after the hazards: a retain is made while a hazard is
   * held) and which no hazard names is freed.
   */
  private reclaimWith(a: ShardAllocator): number {
    const i32 = this.i32;
    const hw = this.hdrWord;
    const list = hw + (L.M_RETIRED_LIST >>> 2);
    if (i32[hw + (L.M_RETIRED_STACK >>> 2)] !== 0) {
      for (let id = this.atomics.exchange(this.hdr + L.M_RETIRED_STACK, 0); id !== 0; ) {
        const w = descriptorAddress(i32, this.hdr, id) >>> 2;
        const next = i32[w + W_NEXT]!;
        i32[w + W_NEXT] = i32[list]!;
        i32[list] = id;
        i32[hw + (L.M_RETIRED_COUNT >>> 2)]++;
        i32[hw + (L.M_RETIRED_BYTES >>> 2)] += L.keyArea(i32[w + W_KEY_LENGTH]!) + (i32[w + W_VALUE_LENGTH]! >>> 0);
        id = next;
      }
    }
    if (i32[list] === 0) return 0;
    const held = this.hazardIds();
    let freed = 0;
    let count = 0;
    let bytes = 0;
    let keep = 0;
    for (let id = i32[list]!; id !== 0; ) {
      const d = descriptorAddress(i32, this.hdr, id);
      const w = d >>> 2;
      const next = i32[w + W_NEXT]!;
      if (held.has(id) || this.atomics.load(d + L.D_REFS) !== 0) {
        i32[w + W_NEXT] = keep;
        keep = id;
        count++;
        bytes += L.keyArea(i32[w + W_KEY_LENGTH]!) + (i32[w + W_VALUE_LENGTH]! >>> 0);
      } else {
        this.store(d + L.D_STATE, (i32[w + W_STATE]! & GENERATION_MASK) | FREE);
        a.free(i32[w + W_PAYLOAD]! >>> 0);
        i32[w + W_NEXT] = i32[hw + (L.M_FREE >>> 2)]!;
        i32[hw + (L.M_FREE >>> 2)] = id;
        freed++;
      }
      id = next;
    }
    i32[list] = keep;
    i32[hw + (L.M_RETIRED_COUNT >>> 2)] = count;
    i32[hw + (L.M_RETIRED_BYTES >>> 2)] = bytes;
    return freed;
  }

  /** Every id a hazard slot holds now (atomic loads, after whatever retired what is to be freed). */
  private hazardIds(): Set<number> {
    const held = new Set<number>();
    const records = this.i32[this.hdrWord + (L.M_READERS >>> 2)]! >>> 0;
    const high = this.atomics.load(this.hdr + L.M_READER_HIGH);
    for (let r = 0; r < high; r++) {
      for (let j = 0; j < L.HAZARDS_PER_READER; j++) {
        const id = this.atomics.load(records + r * L.READER_BYTES + L.R_HAZARDS + 4 * j);
        if (id !== 0) held.add(id);
      }
    }
    return held;
  }

  /**
   * An entry nobody holds any more (its state FREE already), freed by this
   * thread: its payload (a cross-shard free on another thread's), then
   * its descriptor handed back: onto the owner's free list on the owner's
   * thread, else onto the returned stack.
   */
  private freeEntry(d: number): void {
    const i32 = this.i32;
    const w = d >>> 2;
    this.heap.free(i32[w + W_PAYLOAD]! >>> 0);
    if (ownerToken(this.heap.regions[this.shard]!) !== THIS_THREAD) return this.push(L.M_RETURNED, d);
    i32[w + W_NEXT] = i32[this.hdrWord + (L.M_FREE >>> 2)]!;
    i32[this.hdrWord + (L.M_FREE >>> 2)] = i32[w + W_ID]!;
  }

  /** Push d onto one of the header's lock-free stacks (M_RETURNED, M_RETIRED_STACK): the owner takes them whole. */
  private push(stack: number, d: number): void {
    const i32 = this.i32;
    const w = d >>> 2;
    const id = i32[w + W_ID]!;
    const head = this.hdr + stack;
    let seen = this.atomics.load(head);
    for (;;) {
      i32[w + W_NEXT] = seen;
      const was = this.atomics.compareExchange(head, seen, id);
      if (was === seen) return;
      seen = was;
    }
  }

  /** Claim a reader record for this object's hazard slots; its free-slot bits (0: none was left, counted references only). */
  private claimRecord(): number {
    this.unclaimed = false;
    const records = this.i32[this.hdrWord + (L.M_READERS >>> 2)]! >>> 0;
    const count = this.i32[this.hdrWord + (L.M_READER_RECORDS >>> 2)]!;
    for (let r = 0; r < count; r++) {
      const record = records + r * L.READER_BYTES;
      if (this.i32[(record + L.R_CLAIM) >>> 2] !== 0 || this.atomics.compareExchange(record + L.R_CLAIM, 0, THIS_THREAD) !== 0) continue;
      // Raise the high mark before any hazard is stored here (a reclaim reads the mark, then the slots).
      const highAddress = this.hdr + L.M_READER_HIGH;
      for (let high = this.atomics.load(highAddress); high < r + 1; ) {
        const seen = this.atomics.compareExchange(highAddress, high, r + 1);
        if (seen === high) break;
        high = seen;
      }
      this.hazards = record + L.R_HAZARDS;
      this.freeHazards = ALL_HAZARDS;
      return ALL_HAZARDS;
    }
    return 0;
  }

  // ---------------------------------------------------------- references

  /**
   * The descriptor address a reference names, checked: a hazard reference
   * whose slot on this object still holds its id, or a counted one whose
   * generation is its descriptor's, in use. SharedMapError
   * (ERR_SHARDHEAP_MAP_REFERENCE) otherwise.
   */
  private descriptorOf(ref: number, op: string): number {
    if (this.ended !== undefined) throw this.gone(op);
    const id = ref & ID_MASK;
    if ((ref & REF_MASK) === ref && id !== 0) {
      const k = 31 - Math.clz32((id >>> 6) + 1);
      const chunk = this.i32[this.hdrWord + W_DIRECTORY + k]! >>> 0;
      if (chunk !== 0) {
        const d = chunk + ((id - ((64 << k) - 64)) << 5);
        if ((ref & HAZARD_REF) !== 0) {
          const slot = (ref >>> 24) & 31;
          if (slot < L.HAZARDS_PER_READER && (this.freeHazards & (1 << slot)) === 0 && this.hazards !== 0 && this.i32[(this.hazards >>> 2) + slot] === id) return d;
        } else {
          const state = this.i32[(d >>> 2) + W_STATE]!;
          if ((state & GENERATION_MASK) === (ref & GENERATION_MASK) && (state & STATE_MASK) !== FREE && (state & STATE_MASK) !== RETIRED) return d;
          if ((state & STATE_MASK) === RETIRED && this.i32[(d >>> 2) + W_REFS]! > 0 && (state & GENERATION_MASK) === (ref & GENERATION_MASK)) return d;
        }
      }
    }
    throw this.notHeld(ref, op);
  }

  private notHeld(ref: unknown, op: string): SharedMapError {
    if (this.ended !== undefined) return this.gone(op);
    return new SharedMapError("ERR_SHARDHEAP_MAP_REFERENCE", `SharedMap.${op}(${String(ref)}): not a reference to an entry of this map that is held`);
  }

  /** Give back a count the probe took (a key that did not match, or an invalid hold). */
  private dropCount(d: number): void {
    if (this.releaseStep(d) === 0) this.countGone(d >>> 0);
  }
}

function popCount(bits: number): number {
  let n = 0;
  for (; bits !== 0; bits &= bits - 1) n++;
  return n;
}

function slotAddress(T: number, i: number): number {
  return T + L.TABLE_HEADER_BYTES + 4 * i;
}

/** The allocator of `shard` if this thread owns it; HeapOwnershipError naming the map and the owner otherwise. */
function ownedAllocator(heap: SharedHeap, shard: number, op: string): ShardAllocator {
  // heap.shard takes a shard no thread owns, as a malloc there would.
  const a = heap.shard(shard);
  if (a.owned) return a;
  throw new HeapOwnershipError(
    `SharedMap.${op} on a map of shard ${shard} from ${describeOwner(THIS_THREAD)}: the shard belongs to ${describeOwner(ownerToken(heap.regions[shard]!))}. ` +
      "A map changes only on the thread that owns its shard: ask that thread to make the change (with Smp, submitTo the shard); " +
      "acquire, release and reading the entries work from any thread.",
    shard,
  );
}

function zeroed(heap: SharedHeap, ptr: number, bytes: number): number {
  new Uint8Array(heap.buffer, ptr, bytes).fill(0);
  return ptr;
}

/** An empty table of `capacity` slots. */
function newTable(heap: SharedHeap, a: ShardAllocator, capacity: number): number {
  const bytes = L.TABLE_HEADER_BYTES + 4 * capacity;
  const T = zeroed(heap, a.allocateAligned(64, bytes), bytes);
  new Int32Array(heap.buffer)[(T + L.T_MASK) >>> 2] = capacity - 1;
  return T;
}

/** Chunk k of descriptors, each FREE with its id written. */
function newChunk(heap: SharedHeap, a: ShardAllocator, k: number): number {
  const first = L.chunkFirstId(k);
  const count = Math.min(L.chunkSize(k), L.MAX_ID + 1 - first);
  const bytes = count * L.DESCRIPTOR_BYTES;
  const chunk = zeroed(heap, a.allocateAligned(64, bytes), bytes);
  const i32 = new Int32Array(heap.buffer);
  for (let j = 0; j < count; j++) i32[((chunk + j * L.DESCRIPTOR_BYTES) >>> 2) + W_ID] = first + j;
  return chunk;
}
