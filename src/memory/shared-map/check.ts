/**
 * A SharedMap's books: its counts (stats) and its invariants as sentences
 * (check), both read from the heap by a walk over every descriptor and
 * slot, from any thread. The invariants are those of layout.ts;
 * on a map nobody changes or takes references on meanwhile they are exact
 * (a reader's count rising and falling during the walk can only show as a
 * held reference, never as a violation of the rest).
 */
import { liveObjectRegion, objectSizeIn } from "../pointers.js";
import type { SharedHeap } from "../shared-heap.js";
import { descriptorAddress } from "./atomics.js";
import * as L from "./layout.js";

export interface SharedMapStats {
  /** Entries in the map. */
  entries: number;
  /** Slots of the current table (entries may fill half of them before it grows). */
  capacity: number;
  /** Tables a resize replaced, kept until destroy (together smaller than the current one). */
  oldTables: number;
  /** Entries reserved and not yet published or given up. */
  reserved: number;
  /** References held on entries, besides the map's own and the writers' of reservations. */
  held: number;
  /** Entries no longer in the map that are still referenced (freed when their last reference goes). */
  unlinkedHeld: number;
  /** Entries out of the map with no count left, waiting for a reclaim to find no hazard naming them. */
  retired: number;
  /** Descriptors made: the most entries, reservations and referenced old entries there were at once. */
  descriptors: number;
  /** Of those, the free ones: on the owner's list or handed back by other threads. */
  freeDescriptors: number;
  /** Reader records claimed (by SharedMap objects reading with hazard references), of those there are. */
  readers: number;
  readerRecords: number;
  /**
   * The map's own heap objects (header, reader records, tables, descriptor
   * chunks) and their bytes: what it holds besides its entries, and keeps
   * until destroy (tables and descriptors only grow).
   */
  structureObjects: number;
  structureBytes: number;
}

const word = (i32: Int32Array, hdr: number, slot: number): number => i32[(hdr + slot) >>> 2]!;

/** Counts over every descriptor and the current table. */
export function countStates(i32: Int32Array, hdr: number): SharedMapStats {
  const s: SharedMapStats = { entries: 0, capacity: 0, oldTables: 0, reserved: 0, held: 0, unlinkedHeld: 0, retired: 0, descriptors: 0, freeDescriptors: 0, readers: 0, readerRecords: 0, structureObjects: 0, structureBytes: 0 };
  const T = word(i32, hdr, L.M_TABLE) >>> 0;
  s.capacity = T === 0 ? 0 : i32[(T + L.T_MASK) >>> 2]! + 1;
  for (let t = word(i32, hdr, L.M_OLD_TABLES) >>> 0, n = 0; t !== 0 && n < 64; t = i32[(t + L.T_NEXT_OLD) >>> 2]! >>> 0, n++) s.oldTables++;
  const next = word(i32, hdr, L.M_NEXT_ID);
  s.descriptors = next - 1;
  for (let id = 1; id < next; id++) {
    const w = descriptorAddress(i32, hdr, id) >>> 2;
    const refs = Atomics.load(i32, w + (L.D_REFS >>> 2));
    switch (Atomics.load(i32, w + (L.D_STATE >>> 2)) & L.STATE_MASK) {
      case L.FREE:
        s.freeDescriptors++;
        break;
      case L.RESERVED:
        s.reserved++;
        s.held += refs - 1;
        break;
      case L.LINKED:
        s.entries++;
        s.held += refs - 1;
        break;
      case L.UNLINKED:
        s.unlinkedHeld++;
        s.held += refs;
        break;
      case L.RETIRED:
        s.retired++;
        s.held += refs;
        break;
    }
  }
  const records = word(i32, hdr, L.M_READERS) >>> 0;
  s.readerRecords = word(i32, hdr, L.M_READER_RECORDS);
  for (let r = 0, high = Atomics.load(i32, (hdr + L.M_READER_HIGH) >>> 2); r < high; r++) {
    const w = (records + r * L.READER_BYTES) >>> 2;
    if (Atomics.load(i32, w + (L.R_CLAIM >>> 2)) !== 0) s.readers++;
    for (let j = 0; j < L.HAZARDS_PER_READER; j++) if (Atomics.load(i32, w + (L.R_HAZARDS >>> 2) + j) !== 0) s.held++;
  }
  return s;
}

/** Every invariant of layout.ts that does not hold, as a sentence; [] when the map is sound. */
export function checkMap(heap: SharedHeap, i32: Int32Array, hdr: number): string[] {
  const problems: string[] = [];
  const say = (what: string): void => {
    if (problems.length < 100) problems.push(`SharedMap ${hdr}: ${what}`);
  };
  const objectBytes = (ptr: number): number => {
    try {
      return objectSizeIn(liveObjectRegion(heap, ptr, "check"), ptr);
    } catch {
      return -1;
    }
  };
  if (word(i32, hdr, L.M_MAGIC) !== L.MAP_MAGIC) return [`SharedMap ${hdr}: not a map (its magic number is gone: destroyed?)`];
  const shard = word(i32, hdr, L.M_SHARD);
  if (heap.ownerOf(hdr) !== shard) say(`the header names shard ${shard}, its memory is shard ${heap.ownerOf(hdr)}'s`);

  // Chunks and descriptors.
  const next = word(i32, hdr, L.M_NEXT_ID);
  if (!(next >= 1 && next <= L.MAX_ID + 1)) return [...problems, `SharedMap ${hdr}: next id ${next} is out of range`];
  for (let k = 0; k < L.CHUNK_COUNT; k++) {
    const chunk = word(i32, hdr, L.M_DIRECTORY + 4 * k) >>> 0;
    const needed = L.chunkFirstId(k) < next;
    if (needed && chunk === 0) return [...problems, `SharedMap ${hdr}: ids below ${next} are in use but descriptor chunk ${k} is missing`];
    const count = Math.min(L.chunkSize(k), L.MAX_ID + 1 - L.chunkFirstId(k));
    if (chunk !== 0 && objectBytes(chunk) < count * L.DESCRIPTOR_BYTES) say(`descriptor chunk ${k} (${chunk}) is not a live object of ${count * L.DESCRIPTOR_BYTES} bytes`);
  }
  const state = new Uint8Array(next);
  const payloads = new Map<number, number>();
  let reserved = 0;
  for (let id = 1; id < next; id++) {
    const d = descriptorAddress(i32, hdr, id);
    const w = d >>> 2;
    if (i32[w + (L.D_ID >>> 2)] !== id) say(`descriptor ${id} says it is ${i32[w + (L.D_ID >>> 2)]}`);
    const refs = Atomics.load(i32, w + (L.D_REFS >>> 2));
    const st = Atomics.load(i32, w + (L.D_STATE >>> 2)) & L.STATE_MASK;
    state[id] = st;
    if (st === L.FREE) {
      if (refs !== 0) say(`descriptor ${id} is free with ${refs} references`);
      continue;
    }
    if (st === L.RESERVED) reserved++;
    if (st === L.RETIRED ? refs < 0 : refs < 1) say(`descriptor ${id} is in use (state ${st}) with ${refs} references`);
    const payload = i32[w + (L.D_PAYLOAD >>> 2)]! >>> 0;
    const keyLength = i32[w + (L.D_KEY_LENGTH >>> 2)]!;
    const valueLength = i32[w + (L.D_VALUE_LENGTH >>> 2)]! >>> 0;
    const other = payloads.get(payload);
    if (other !== undefined) say(`descriptors ${other} and ${id} share payload ${payload}`);
    payloads.set(payload, id);
    if (heap.ownerOf(payload) !== shard) say(`descriptor ${id}'s payload ${payload} is not in shard ${shard}'s memory`);
    if (keyLength < 0 || keyLength > L.MAX_KEY_BYTES) {
      say(`descriptor ${id} has a key of ${keyLength} bytes`);
      continue;
    }
    if (objectBytes(payload) < L.keyArea(keyLength) + valueLength) say(`descriptor ${id}'s payload ${payload} is not a live object of ${L.keyArea(keyLength) + valueLength} bytes`);
    else for (let b = keyLength; b < L.keyArea(keyLength); b++) if (heap.bytes(payload + b, 1)[0] !== 0) say(`descriptor ${id}'s key padding is not zero`);
  }
  if (reserved !== word(i32, hdr, L.M_RESERVED)) say(`${reserved} reservations, the header counts ${word(i32, hdr, L.M_RESERVED)}`);

  // The lists: every free descriptor on the free list or the returned
  // stack, every retired one on the retired list or stack, exactly once.
  const listed = new Uint8Array(next);
  const onLists = (heads: ReadonlyArray<readonly [string, number]>, want: number): number => {
    let n = 0;
    for (const [name, head] of heads) {
      for (let id = word(i32, hdr, head), steps = 0; id !== 0; steps++) {
        if (!(id >= 1 && id < next) || steps >= next) {
          say(`the ${name} holds id ${id}, out of range or in a loop`);
          break;
        }
        if (listed[id]) say(`descriptor ${id} is listed twice`);
        if (state[id] !== want) say(`descriptor ${id} is on the ${name} in state ${state[id]}`);
        listed[id] = 1;
        n++;
        id = i32[(descriptorAddress(i32, hdr, id) + L.D_NEXT) >>> 2]!;
      }
    }
    return n;
  };
  const free = onLists([["free list", L.M_FREE], ["returned stack", L.M_RETURNED]], L.FREE);
  const retiredHere = onLists([["retired list", L.M_RETIRED_LIST]], L.RETIRED);
  const retired = retiredHere + onLists([["retired stack", L.M_RETIRED_STACK]], L.RETIRED);
  const inState = (want: number): number => state.reduce((n, st, id) => n + (id > 0 && st === want ? 1 : 0), 0);
  if (free !== inState(L.FREE)) say(`${inState(L.FREE)} descriptors are free, ${free} are on the free list and the returned stack`);
  if (retired !== inState(L.RETIRED)) say(`${inState(L.RETIRED)} descriptors are retired, ${retired} are on the retired list and stack`);
  if (retiredHere !== word(i32, hdr, L.M_RETIRED_COUNT)) say(`${retiredHere} descriptors on the retired list, the header counts ${word(i32, hdr, L.M_RETIRED_COUNT)}`);

  // The reader records: hazards name descriptors that may still be read.
  const records = word(i32, hdr, L.M_READERS) >>> 0;
  const recordCount = word(i32, hdr, L.M_READER_RECORDS);
  const high = Atomics.load(i32, (hdr + L.M_READER_HIGH) >>> 2);
  if (objectBytes(records) < Math.max(1, recordCount) * L.READER_BYTES) say(`the reader records (${records}) are not a live object of ${recordCount} records`);
  if (high < 0 || high > recordCount) say(`${high} reader records claimed of ${recordCount}`);
  for (let r = 0; r < Math.min(high, recordCount); r++) {
    const w = (records + r * L.READER_BYTES) >>> 2;
    for (let j = 0; j < L.HAZARDS_PER_READER; j++) {
      const id = Atomics.load(i32, w + (L.R_HAZARDS >>> 2) + j);
      if (id === 0) continue;
      if (!(id >= 1 && id < next) || ![L.LINKED, L.UNLINKED, L.RETIRED].includes(state[id]!)) say(`reader record ${r}'s hazard ${j} names descriptor ${id} (state ${state[id] ?? "none"})`);
      if (Atomics.load(i32, w + (L.R_CLAIM >>> 2)) === 0) say(`reader record ${r} is not claimed but its hazard ${j} is set`);
    }
  }

  // The current table.
  const T = word(i32, hdr, L.M_TABLE) >>> 0;
  const mask = T === 0 ? -1 : i32[(T + L.T_MASK) >>> 2]!;
  const capacity = mask + 1;
  if (T === 0 || capacity < L.MIN_CAPACITY || (capacity & mask) !== 0 || capacity > L.MAX_CAPACITY) return [...problems, `SharedMap ${hdr}: table ${T} has ${capacity} slots`];
  if (objectBytes(T) < L.TABLE_HEADER_BYTES + 4 * capacity) say(`table ${T} is not a live object of ${capacity} slots`);
  const slots = (T + L.TABLE_HEADER_BYTES) >>> 2;
  const named = new Uint8Array(next);
  let used = 0;
  for (let i = 0; i < capacity; i++) {
    const s = i32[slots + i]!;
    if (s === 0) continue;
    used++;
    const id = s >>> 8;
    if (!(id >= 1 && id < next)) {
      say(`slot ${i} names id ${id}, out of range`);
      continue;
    }
    if (named[id]) say(`descriptor ${id} is in two slots`);
    named[id] = 1;
    if (state[id] !== L.LINKED) say(`slot ${i} names descriptor ${id}, which is not linked (state ${state[id]})`);
    const hash = i32[(descriptorAddress(i32, hdr, id) + L.D_HASH) >>> 2]!;
    if ((s & 255) !== hash >>> 24) say(`slot ${i}'s tag ${s & 255} is not descriptor ${id}'s (${hash >>> 24})`);
    for (let j = hash & mask; j !== i; j = (j + 1) & mask) {
      if (i32[slots + j] === 0) {
        say(`descriptor ${id} in slot ${i} is cut off from its home ${hash & mask} by the empty slot ${j}`);
        break;
      }
    }
  }
  let linked = 0;
  for (let id = 1; id < next; id++) {
    if (state[id] !== L.LINKED) continue;
    linked++;
    if (!named[id]) say(`descriptor ${id} is linked but in no slot`);
  }
  if (used !== word(i32, hdr, L.M_COUNT)) say(`${used} slots are in use, the header counts ${word(i32, hdr, L.M_COUNT)} entries`);
  if (used !== linked) say(`${used} slots are in use, ${linked} descriptors are linked`);
  if (used > capacity * L.MAX_LOAD) say(`${used} entries in ${capacity} slots: past the load limit`);

  // The old tables: live, each smaller than the next.
  let below = capacity;
  for (let t = word(i32, hdr, L.M_OLD_TABLES) >>> 0, n = 0; t !== 0; t = i32[(t + L.T_NEXT_OLD) >>> 2]! >>> 0, n++) {
    const slotsOld = i32[(t + L.T_MASK) >>> 2]! + 1;
    if (n >= L.CHUNK_COUNT + 24 || objectBytes(t) < L.TABLE_HEADER_BYTES + 4 * slotsOld || slotsOld >= below) {
      say(`old table ${t} (${slotsOld} slots) is not a live table smaller than the one after it`);
      break;
    }
    below = slotsOld;
  }
  return problems;
}
