/**
 * The writer's side of a SharedMap (shared-map.ts, "The protocol",
 * Owner): set, reserve and publish, delete, unlink, clear, forEach and
 * reclaim, on the thread that owns the map's shard; the owner's own probe,
 * the backward shift, the unlink order and the resize.
 */
import { SharedMapError } from "../../errors.js";
import { checkSize } from "../pointers.js";
import type { ShardAllocator } from "../shard-allocator.js";
import { descriptorAddress } from "./atomics.js";
import { newTable, scratch, slotAddress } from "./core.js";
import * as L from "./layout.js";
import { MapReader } from "./reader.js";

// Hot-path constants as module-local values (shard-allocator.ts: V8 folds
// these to constants; imported bindings cost a load and a hole check).
const { GENERATION_MASK, ID_MASK, STATE_MASK, LINKED, UNLINKED, W_HASH, W_KEY_LENGTH, W_PAYLOAD, W_STATE, W_ID, W_VALUE_LENGTH } = L;

export class MapWriter extends MapReader {
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

  protected findSlot(T: number, hash: number): number {
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
  protected removeAt(T: number, i: number): void {
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

  protected bumpMoves(): void {
    this.store(this.hdr + L.M_MOVES, this.i32[this.hdrWord + (L.M_MOVES >>> 2)]! + 1);
  }

  /** A descriptor just taken out of the table: UNLINKED, then the index's reference dropped. */
  protected unlinked(d: number): void {
    const w = d >>> 2;
    this.store(d + L.D_STATE, (this.i32[w + W_STATE]! & GENERATION_MASK) | UNLINKED);
    const r = this.releaseStep(d);
    if (r === 0) this.countGone(d);
    else if (r < 0) throw new SharedMapError("ERR_SHARDHEAP_MAP_REFERENCE", `SharedMap: an entry's own reference was released by someone else (descriptor ${this.i32[w + W_ID]}): a reference was released twice`);
  }

  /** A table twice the size of T, filled, then published with one store; T kept until destroy. */
  protected grow(a: ShardAllocator, T: number): number {
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
}
