/**
 * The writers' side of a SharedMap (shared-map.ts, "The protocol",
 * Writers): set, reserve and publish (or exchange), delete (or take),
 * unlink (or takeEntry), clear, forEach and reclaim, on any thread that
 * owns a shard of the heap. What a change allocates (the payload, a
 * descriptor) is made in the writer's shard before it takes its
 * segment's lock; inside the lock it probes, writes its intent, makes its
 * few stores and clears the intent (repair.ts finishes a change whose
 * writer died there). The old entry's reference is let go after the lock
 * is given back, so a retire and a reclaim never run inside it.
 */
import { SharedMapError } from "../../errors.js";
import { parseInteger } from "../../parse.js";
import { THIS_THREAD } from "../ownership.js";
import { checkSize } from "../pointers.js";
import type { ShardAllocator } from "../shard-allocator.js";
import { descriptorAddress } from "./atomics.js";
import { newTable, scratch, slotAddress } from "./core.js";
import * as L from "./layout.js";
import { MapSegments } from "./repair.js";

// Hot-path constants as module-local values (shard-allocator.ts: V8 folds
// these to constants; imported bindings cost a load and a hole check).
const { STATE_MASK, LINKED, RESERVED, GENERATION_STEP, W_HASH, W_KEY_LENGTH, W_PAYLOAD, W_STATE, W_ID, W_VALUE_LENGTH, W_NEXT, MAX_LOAD } = L;
const SG_COUNT = L.SG_COUNT >>> 2;
const SG_LINKING = L.SG_LINKING >>> 2;
const SG_LINKING_STATE = L.SG_LINKING_STATE >>> 2;
const SG_UNLINKING = L.SG_UNLINKING >>> 2;
const SG_UNLINKING_STATE = L.SG_UNLINKING_STATE >>> 2;

/** link's `expected` for an unconditional link. */
const ANY = -1;
/** link's answer when a conditional link found another entry (or none, or one where none was expected). */
const UNCHANGED = -1;
/** replaceUnlocked's answer when the change must be made under the lock. */
const LOCK_IT = -2;
const WR_REPLACING = L.WR_REPLACING >>> 2;
const WR_REPLACING_SEGMENT = L.WR_REPLACING_SEGMENT >>> 2;
const WR_LINKING = L.WR_LINKING >>> 2;
const WR_LINKING_STATE = L.WR_LINKING_STATE >>> 2;
const WR_UNLINKING = L.WR_UNLINKING >>> 2;
const WR_UNLINKING_STATE = L.WR_UNLINKING_STATE >>> 2;

export class MapWriter extends MapSegments {
  /** The slot word findSlot found the key in. */
  private seen = 0;
  /** Whether this object's last set (or publish, exchange) replaced an entry: the next one tries replaceUnlocked first. */
  private lastSetReplaced = true;

  /**
   * Store `value` (its bytes, a string's UTF-8) under `key`, replacing the
   * key's entry if it has one (readers holding the old one keep reading it
   * until they release it). Any thread that owns a shard: the entry is
   * made in that shard's memory. Returns whether an entry was replaced.
   * OutOfMemoryError leaves the map as it was.
   */
  set(key: string | Uint8Array, value: Uint8Array | string): boolean {
    let bytes: number;
    if (typeof value === "string") bytes = Buffer.byteLength(value, "utf8");
    else if (value instanceof Uint8Array) bytes = value.length;
    else throw new TypeError(`SharedMap.set: a value must be a Uint8Array or a string, got ${value === null ? "null" : typeof value}`);
    const d = this.reserveDescriptor(this.writer("set"), key, bytes);
    const i32 = this.i32;
    const at = (i32[(d >>> 2) + W_PAYLOAD]! >>> 0) + L.keyArea(scratch.length);
    if (typeof value === "string") Buffer.from(this.heap.buffer, at, bytes).write(value, "utf8");
    else if (bytes <= 64) {
      // A short value byte by byte: TypedArray.prototype.set costs a call
      // of ~25 ns whatever the length (16 bytes: 4 ns this way).
      const u8 = this.u8;
      for (let j = 0; j < bytes; j++) u8[at + j] = value[j]!;
    } else this.u8.set(value, at);
    try {
      return this.linkDescriptor(this.alloc!, d, false) !== 0;
    } catch (e) {
      this.release(this.countedRef(d));
      throw e;
    }
  }

  /**
   * A new entry for `key` with `byteLength` bytes of value to fill in
   * place (valuePointer(ref); the bytes start as whatever the allocator
   * left there), in this thread's shard's memory, not yet in the map: no
   * reader can find it until publish(ref). Returns the writer's (counted)
   * reference: publish hands it to the map, release gives the entry up;
   * both on this thread.
   */
  reserve(key: string | Uint8Array, byteLength: number): number {
    const d = this.reserveDescriptor(this.writer("reserve"), key, byteLength);
    return this.countedRef(d);
  }

  /** reserve's work: the payload, a descriptor, its fields, RESERVED with the writer's count. */
  private reserveDescriptor(a: ShardAllocator, key: string | Uint8Array, byteLength: number): number {
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
    i32[w + W_NEXT] = THIS_THREAD;
    // The state, then the count (one call, two atomic stores): a reader
    // holding a stale id that sees the count sees the fields above too
    // (and then fails R3: no slot names it).
    this.reserveSteps(d, ((i32[w + W_STATE]! & ~STATE_MASK) + GENERATION_STEP) | RESERVED);
    return d;
  }

  /**
   * Put a reserved entry in the map, replacing the key's entry if it has
   * one; the writer's reference becomes the map's. On the thread that
   * reserved it. Returns whether an entry was replaced. OutOfMemoryError
   * (the table could not grow) leaves the reservation as it was.
   */
  publish(ref: number): boolean {
    return this.link(ref, "publish", false) !== 0;
  }

  /**
   * publish, and hand the caller the map's reference to the entry it
   * replaced instead of dropping it: a counted reference (release it, on
   * any thread, when done: a writer that keeps its own order of entries,
   * such as an LRU list on the entry's home shard, learns this way that
   * the entry left the map), or 0 when the key had no entry.
   */
  exchange(ref: number): number {
    const old = this.link(ref, "exchange", true);
    return old === 0 ? 0 : this.countedRef(old);
  }

  /**
   * publish, only if `key`'s entry is still the one `expected` names (a
   * reference this object holds to it: acquire's, retain's; or 0: only if
   * the key has no entry), decided under the segment's lock, so that
   * writers on several threads make a read-modify-write of one key atomic:
   * read the entry, compute, publishIf, and on false read again (no write
   * of the key is lost in between). Returns whether it published; when not,
   * nothing changed and the reservation is still the caller's (publish it,
   * publishIf it again, or release it). The replaced entry's index
   * reference is dropped (the caller's `expected` still holds it).
   */
  publishIf(ref: number, expected: number): boolean {
    return this.link(ref, "publishIf", false, this.expectedEntry(expected, "publishIf")) !== UNCHANGED;
  }

  /**
   * publishIf, handing the caller the map's reference to the entry it
   * replaced instead of dropping it (a counted reference, as exchange):
   * that reference when it published over `expected`, 0 when it published
   * a key that had no entry (`expected` 0), -1 when it did not publish
   * (the key's entry is not `expected`; the reservation is still the
   * caller's).
   */
  exchangeIf(ref: number, expected: number): number {
    const old = this.link(ref, "exchangeIf", true, this.expectedEntry(expected, "exchangeIf"));
    return old <= 0 ? old : this.countedRef(old);
  }

  /** The descriptor a conditional publish compares with: 0 for "absent", else the one `expected` names (a reference this object holds). */
  private expectedEntry(expected: number, op: string): number {
    return expected === 0 ? 0 : this.descriptorOf(expected, op);
  }

  /**
   * The change behind set, publish, exchange and their conditional forms:
   * d linked in its key's segment, over the key's entry if it has one,
   * whose descriptor is returned (0 when there was none); its index
   * reference dropped unless `keep`. `expected`: ANY (link whatever the
   * key holds), 0 (only if the key has none) or the descriptor the key's
   * entry must be; UNCHANGED when it is not (nothing done).
   */
  private link(ref: number, op: string, keep: boolean, expected = ANY): number {
    const a = this.writer(op);
    const d = this.descriptorOf(ref, op);
    const i32 = this.i32;
    const w = d >>> 2;
    if ((i32[w + W_STATE]! & STATE_MASK) !== RESERVED) throw new SharedMapError("ERR_SHARDHEAP_MAP_REFERENCE", `SharedMap.${op}(${ref}): not a reservation (published already?)`);
    if (i32[w + W_NEXT] !== THIS_THREAD) throw new SharedMapError("ERR_SHARDHEAP_MAP_REFERENCE", `SharedMap.${op}(${ref}): a reservation is published by the thread that made it`);
    scratch.length = i32[w + W_KEY_LENGTH]!;
    this.loadKey(i32[w + W_PAYLOAD]! >>> 0);
    return this.linkDescriptor(a, d, keep, expected);
  }

  /** link of reservation d, its key in the scratch. */
  private linkDescriptor(a: ShardAllocator, d: number, keep: boolean, expected = ANY): number {
    const i32 = this.i32;
    const w = d >>> 2;
    const state = i32[w + W_STATE]!;
    const hash = i32[w + W_HASH]!;
    const id = i32[w + W_ID]!;
    const seg = this.segmentOf(hash);
    const sw = seg >>> 2;
    const word = (id << 8) | (hash >>> 24);
    const linked = (state & ~STATE_MASK) | LINKED;
    // A set (expected ANY) tries the path its last one ended on: an insert
    // needs the lock, and a failed try without it costs an insert 12-20 ns
    // (145-155 -> 165-167 ns at 10,000 keys); a conditional publish knows what it replaces.
    if (expected > 0 || (expected === ANY && this.lastSetReplaced)) {
      const old = this.replaceUnlocked(seg, d, id, state, hash, word, keep, expected);
      if (old !== LOCK_IT) return old;
    }
    this.lock(seg);
    let old = 0;
    let refs = -1;
    try {
      i32[sw + SG_LINKING] = id;
      i32[sw + SG_LINKING_STATE] = state;
      let T = this.table(seg);
      let i = this.findSlot(T, hash);
      // A conditional publish: the key's entry (or its absence) is still what the writer read, under the lock.
      if (expected !== ANY && (i >= 0 ? this.slotDescriptor(T, i) !== expected : expected !== 0)) return UNCHANGED;
      if (i >= 0) {
        old = this.slotDescriptor(T, i);
        const oldState = i32[(old >>> 2) + W_STATE]!;
        i32[sw + SG_UNLINKING] = i32[(old >>> 2) + W_ID]!;
        i32[sw + SG_UNLINKING_STATE] = oldState;
        this.linkSteps(d, linked, slotAddress(T, i), word);
        refs = this.unlinkEntry(old, oldState, keep ? 0 : 1);
      } else {
        if (i32[sw + SG_COUNT]! + 1 > (this.mask(T) + 1) * MAX_LOAD) {
          T = this.grow(a, seg, T);
          i = this.findSlot(T, hash);
        }
        this.linkSteps(d, linked, slotAddress(T, ~i), word);
        i32[sw + SG_COUNT]++;
      }
    } finally {
      this.clearIntent(seg);
      this.unlock(seg);
    }
    if (expected === ANY) this.lastSetReplaced = old !== 0;
    if (refs === 0) this.countGone(old);
    return old;
  }

  /**
   * A replace without the segment's lock: the common write of a map that
   * lives full (a new value for a key it holds) touches no word another
   * writer of the segment writes but the key's slot. Two threads setting
   * keys of their own in one map made 1.45x the sets of one with the lock
   * (its word, a line both threads write on every set, moved between the
   * cores each time), where two maps made 1.96x and two threads whose keys
   * fell in different segments 1.96x.
   *
   * The replacer says what it is doing in its own record (the segment, the
   * entries, then its token: repairReplacer's words if it dies), then
   * loads the lock: free, no lock holder moves or empties a slot of the
   * segment until the token is cleared (waitForReplacers), so the slots
   * keep their keys, and the probe that finds the key's slot is exact.
   * The new entry's state is made LINKED, then compareExchange swaps the
   * slot from the word the probe read to the new one: another replacer
   * of the same key that swapped first makes it fail (then the lock is
   * taken, and the change made under it as before). The entry the swap
   * took out is this thread's to unlink: no slot names it, and only the
   * thread whose swap took a descriptor out of a slot unlinks it.
   * Returns what linkDescriptor returns, or LOCK_IT: the key has no entry,
   * the lock is held, or a swap lost: make the change under the lock.
   */
  private replaceUnlocked(seg: number, d: number, id: number, state: number, hash: number, word: number, keep: boolean, expected: number): number {
    const i32 = this.i32;
    const rec = this.writerRecord;
    const rw = rec >>> 2;
    if (i32[rw + WR_REPLACING] !== 0) this.repairOwnRecord();
    i32[rw + WR_REPLACING_SEGMENT] = seg;
    i32[rw + WR_LINKING] = id;
    i32[rw + WR_LINKING_STATE] = state;
    i32[rw + WR_UNLINKING] = 0;
    let old = LOCK_IT;
    let refs = -1;
    if (this.announce(rec + L.WR_REPLACING, THIS_THREAD, seg + L.SG_LOCK) === 0) {
      const T = this.table(seg);
      const i = this.findSlot(T, hash);
      if (i >= 0) {
        const slot = slotAddress(T, i);
        const seen = this.seen;
        const was = descriptorAddress(i32, this.hdr, seen >>> 8);
        if (expected !== ANY && was !== expected) old = UNCHANGED;
        else {
          const wasState = this.atomics.load(was + L.D_STATE);
          i32[rw + WR_UNLINKING] = seen >>> 8;
          i32[rw + WR_UNLINKING_STATE] = wasState;
          if (this.swapSteps(d, (state & ~STATE_MASK) | LINKED, slot, seen, word) === seen) {
            old = was;
            refs = this.unlinkEntry(was, wasState, keep ? 0 : 1);
            // The descriptor was reused and linked again in this slot between the probe and the swap: what the swap took out is its present state.
            if (refs < 0) refs = this.unlinkEntry(was, this.atomics.load(was + L.D_STATE), keep ? 0 : 1);
          } else this.store(d + L.D_STATE, state); // reserved again: the lock's path links it
        }
      }
    }
    this.store(rec + L.WR_REPLACING, 0); // the other words are read only while this one is set: the next replace writes them anew
    if (refs === 0) this.countGone(old);
    return old;
  }

  /** Remove `key`'s entry (freed once its readers release it). Returns whether there was one. */
  delete(key: string | Uint8Array): boolean {
    this.writer("delete");
    return this.remove(this.readKey(key), 0, false) !== 0;
  }

  /**
   * delete, and hand the caller the map's reference to the entry it
   * removed (a counted reference: release it when done), or 0 when the
   * key had none.
   */
  take(key: string | Uint8Array): number {
    this.writer("take");
    const d = this.remove(this.readKey(key), 0, true);
    return d === 0 ? 0 : this.countedRef(d);
  }

  /**
   * Remove the entry `ref` names if it is still in the map (not another
   * entry of the same key): for a writer that keeps its own order of
   * entries, such as an LRU list; any writer may use the reference reserve
   * gave it for as long as the entry is in the map. Returns whether it was.
   */
  unlink(ref: number): boolean {
    return this.unlinkRef(ref, "unlink", false) !== 0;
  }

  /** unlink, and hand the caller the map's reference to the entry (a counted reference: release it when done); 0 when it was not in the map. */
  takeEntry(ref: number): number {
    const d = this.unlinkRef(ref, "takeEntry", true);
    return d === 0 ? 0 : this.countedRef(d);
  }

  private unlinkRef(ref: number, op: string, keep: boolean): number {
    this.writer(op);
    const d = this.descriptorOf(ref, op);
    const state = this.i32[(d >>> 2) + W_STATE]!;
    if ((state & STATE_MASK) !== LINKED) return 0;
    return this.remove(this.i32[(d >>> 2) + W_HASH]!, state, keep, d);
  }

  /**
   * Take an entry out of its segment: the key in the scratch (d 0), or
   * descriptor d if its state is still `state` under the lock; backward
   * shift, then its state UNLINKED and the index's reference dropped
   * (unless `keep`) in one step. Returns the descriptor (0: none).
   */
  private remove(hash: number, state: number, keep: boolean, d = 0): number {
    const i32 = this.i32;
    const seg = this.segmentOf(hash);
    const sw = seg >>> 2;
    this.lock(seg);
    let refs = -1;
    try {
      const T = this.table(seg);
      let i: number;
      if (d === 0) {
        i = this.findSlot(T, hash);
        if (i < 0) return 0;
        d = this.slotDescriptor(T, i);
        state = i32[(d >>> 2) + W_STATE]!;
      } else {
        if (i32[(d >>> 2) + W_STATE] !== state) return 0; // another writer took it out first
        const mask = this.mask(T);
        const id = i32[(d >>> 2) + W_ID]!;
        i = hash & mask;
        while (i32[slotAddress(T, i) >>> 2]! >>> 8 !== id) i = (i + 1) & mask;
      }
      i32[sw + SG_UNLINKING] = i32[(d >>> 2) + W_ID]!;
      i32[sw + SG_UNLINKING_STATE] = state;
      this.removeAt(seg, T, i, false);
      i32[sw + SG_COUNT]--;
      refs = this.unlinkEntry(d, state, keep ? 0 : 1);
    } finally {
      this.clearIntent(seg);
      this.unlock(seg);
    }
    if (refs === 0) this.countGone(d);
    return d;
  }

  /** Remove every entry, segment by segment, each under its lock. Returns how many there were. */
  clear(): number {
    this.writer("clear");
    const i32 = this.i32;
    let removed = 0;
    for (let s = 0; s <= this.segmentMask; s++) {
      const seg = this.hdr + L.SEGMENTS + s * L.SEGMENT_BYTES;
      const sw = seg >>> 2;
      this.lock(seg);
      try {
        const T = this.table(seg);
        const mask = this.mask(T);
        let empty = 0;
        while (i32[slotAddress(T, empty) >>> 2] !== 0) empty++;
        // Backwards from an empty slot: the slot after each one cleared is
        // empty by then, so it ends its cluster and no present key's path
        // runs through it (no SG_MOVES bump needed).
        for (let n = 0, i = (empty - 1) & mask; n < mask; n++, i = (i - 1) & mask) {
          if (i32[slotAddress(T, i) >>> 2] === 0) continue;
          const d = this.slotDescriptor(T, i);
          const state = i32[(d >>> 2) + W_STATE]!;
          i32[sw + SG_UNLINKING] = i32[(d >>> 2) + W_ID]!;
          i32[sw + SG_UNLINKING_STATE] = state;
          this.store(slotAddress(T, i), 0);
          i32[sw + SG_COUNT]--;
          if (this.unlinkEntry(d, state, 1) === 0) this.countGone(d);
          removed++;
        }
      } finally {
        this.clearIntent(seg);
        this.unlock(seg);
      }
    }
    return removed;
  }

  /**
   * Call `fn` with the reference of every entry in the map (any thread
   * that owns a shard; the map's own references, valid while the entries
   * stay: acquire to keep one): each segment's entries as they were when
   * it was read under its lock. `fn` may change the map: entries removed
   * before they are reached are skipped.
   */
  forEach(fn: (ref: number) => void): void {
    this.writer("forEach");
    const i32 = this.i32;
    for (let s = 0; s <= this.segmentMask; s++) {
      const seg = this.hdr + L.SEGMENTS + s * L.SEGMENT_BYTES;
      const refs: number[] = [];
      this.lock(seg);
      try {
        const T = this.table(seg);
        for (let i = 0; i <= this.mask(T); i++) if (i32[slotAddress(T, i) >>> 2] !== 0) refs.push(this.countedRef(this.slotDescriptor(T, i)));
      } finally {
        this.unlock(seg);
      }
      for (const ref of refs) {
        const state = i32[(descriptorAddress(i32, this.hdr, ref & L.ID_MASK) >>> 2) + W_STATE]!;
        if ((state & STATE_MASK) === LINKED && L.refGeneration(state) === (ref & L.GENERATION_MASK)) fn(ref);
      }
    }
  }

  /**
   * Make room now for `entries` more entries written by this thread: their
   * descriptors, made in its shard at once (chunks on its free list), so a
   * writer that will write many makes them together, before its entries,
   * instead of chunk by chunk among them later. Returns how many it made:
   * at least `entries`, whole chunks. OutOfMemoryError or
   * ERR_SHARDHEAP_MAP_FULL part way keeps what was made.
   */
  prepare(entries: number): number {
    const a = this.writer("prepare");
    return this.addDescriptors(a, parseInteger(entries, "SharedMap.prepare: entries", 0, L.MAX_ENTRIES));
  }

  /**
   * Free the retired entries of this thread's writer that no reader holds
   * now (a writer does this by itself every 32 entries or 64 KiB retired,
   * and when a new entry needs a descriptor; call it when memory must come
   * back at once, such as before deciding a shard is full). Returns how
   * many entries it freed.
   */
  reclaim(): number {
    const a = this.writer("reclaim");
    return this.reclaimWith(a, this.writerRecord);
  }

  /** The stored key at byte address `at` into the scratch (its length already set). */
  private loadKey(at: number): void {
    const n = (scratch.length + 3) >>> 2;
    if (scratch.words.length < n + 2) scratch.ofBytes(this.u8, at, at + scratch.length, this.seed);
    else for (let j = 0; j < n; j++) scratch.words[j] = this.i32[(at >>> 2) + j]!;
  }

  /**
   * The probe for the key in the scratch: its slot, or ~(the empty slot
   * that ends its path); the word read there in `seen`. The lock's holder
   * and replaceUnlocked both use it: for the latter the slots keep their
   * keys meanwhile (waitForReplacers) but other replacers swap them, so a
   * slot whose descriptor is read is read again with an atomic load (what
   * that descriptor holds was written before the swap that stored it
   * there). The others are passed on a plain read: a stale one can only
   * make the key look absent, and the lock's path then makes the change.
   * (An Atomics.load costs 7 ns here, the WebAssembly step's 2-3 ns.)
   */
  private findSlot(T: number, hash: number): number {
    const i32 = this.i32;
    const mask = this.mask(T);
    const slots = (T + L.TABLE_HEADER_BYTES) >>> 2;
    const tag = hash >>> 24;
    for (let i = hash & mask; ; i = (i + 1) & mask) {
      let s = i32[slots + i]!;
      if (s !== 0 && (s & 255) === tag) s = this.atomics.load((slots + i) << 2);
      if (s === 0) return ~i;
      if ((s & 255) !== tag) continue;
      const w = descriptorAddress(i32, this.hdr, s >>> 8) >>> 2;
      if (i32[w + W_HASH] === hash && i32[w + W_KEY_LENGTH] === scratch.length && scratch.equalsAt(i32, i32[w + W_PAYLOAD]! >>> 2)) {
        this.seen = s;
        return i;
      }
    }
  }

  /**
   * A table twice the size of T, made in this writer's shard and filled
   * privately, then published with one store; T kept until destroy. The
   * new table is in the intent until then (a repair frees it if the
   * writer died first).
   */
  private grow(a: ShardAllocator, seg: number, T: number): number {
    const i32 = this.i32;
    const capacity = (this.mask(T) + 1) * 2;
    if (capacity > L.MAX_CAPACITY) {
      throw new SharedMapError("ERR_SHARDHEAP_MAP_FULL", `SharedMap: a segment's table cannot grow past ${L.MAX_CAPACITY} slots`);
    }
    const T2 = newTable(this.heap, a, capacity);
    const sw = seg >>> 2;
    i32[sw + (L.SG_GROWING >>> 2)] = T2;
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
    i32[(T + L.T_NEXT_OLD) >>> 2] = i32[sw + (L.SG_OLD_TABLES >>> 2)]!;
    i32[sw + (L.SG_OLD_TABLES >>> 2)] = T;
    this.store(seg + L.SG_TABLE, T2);
    i32[sw + (L.SG_GROWING >>> 2)] = 0;
    return T2;
  }
}
