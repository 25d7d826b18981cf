/**
 * A SharedMap's books: its counts (stats) and its invariants as sentences
 * (check), both read from the heap by a walk over every descriptor, every
 * writer record and every segment's slots, from any thread. The
 * invariants are those of layout.ts; on a map nobody changes or takes
 * references on meanwhile they are exact (a reader's count rising and
 * falling during the walk can only show as a held reference, never as a
 * violation of the rest).
 *
 * What a writer that died mid-change may leave (shared-map.ts, "A writer
 * that dies") is named in sentences that say "lost": one descriptor off
 * every list, a reservation nobody will publish, a chunk claimed and never
 * recorded, a segment still locked by the dead thread (its next writer
 * repairs it), a replace without the lock cut short (the segment's next
 * change repairs it). Every other sentence is a broken invariant.
 */
import { ownsAShard, describeOwner } from "../ownership.js";
import { liveObjectRegion, objectSizeIn, ownerShardOf } from "../pointers.js";
import type { SharedHeap } from "../shared-heap.js";
import { descriptorAddress } from "./atomics.js";
import * as L from "./layout.js";

export interface SharedMapStats {
  /** Entries in the map. */
  entries: number;
  /** Segments: each a table, a lock and an entry count of its own. */
  segments: number;
  /** Slots of the segments' current tables (entries may fill half of each before it grows). */
  capacity: number;
  /** Tables a resize replaced, kept until destroy (together smaller than the current ones). */
  oldTables: number;
  /** Entries reserved and not yet published or given up. */
  reserved: number;
  /** References held on entries, besides the map's own and the writers' of reservations. */
  held: number;
  /** Entries no longer in the map that are still referenced (freed when their last reference goes). */
  unlinkedHeld: number;
  /** Entries out of the map with no count left, waiting for a reclaim to find no hazard naming them. */
  retired: number;
  /** Descriptors made, by all writers: the most entries, reservations and referenced old entries there were at once. */
  descriptors: number;
  /** Of those, the free ones: on their writers' lists or handed back by other threads. */
  freeDescriptors: number;
  /** Reader records claimed (by SharedMap objects reading with hazard references), of those there are. */
  readers: number;
  readerRecords: number;
  /** Segments repaired after a writer died holding their lock. */
  repairs: number;
  /**
   * The map's own heap objects (header, reader records, tables,
   * descriptor chunks) and their bytes: what it holds besides its entries,
   * and keeps until destroy (tables and descriptors only grow).
   */
  structureObjects: number;
  structureBytes: number;
  /** structureBytes and structureObjects by the shard whose memory holds them (index: shard). */
  structureBytesByShard: number[];
  structureObjectsByShard: number[];
}

const word = (i32: Int32Array, at: number, offset: number): number => i32[(at + offset) >>> 2]!;
const segmentAt = (hdr: number, s: number): number => hdr + L.SEGMENTS + s * L.SEGMENT_BYTES;

/** Every chunk the directory records: [entry, address]. */
function chunks(i32: Int32Array, hdr: number): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  const next = Math.min(Atomics.load(i32, (hdr + L.M_NEXT_CHUNK) >>> 2), L.CHUNK_COUNT);
  for (let e = 0; e < next; e++) {
    const chunk = word(i32, hdr, L.M_DIRECTORY + 4 * e) >>> 0;
    if (chunk !== 0) out.push([e, chunk]);
  }
  return out;
}

/** Every id of a recorded chunk (id 0 is never one). */
function forEachId(i32: Int32Array, hdr: number, fn: (id: number, d: number) => void): void {
  for (const [e, chunk] of chunks(i32, hdr)) {
    const first = L.chunkFirstId(e);
    for (let j = first === 0 ? 1 : 0; j < L.chunkSize(e); j++) fn(first + j, chunk + j * L.DESCRIPTOR_BYTES);
  }
}

/** The maps' objects other than the header and the reader records: every segment's tables, and the chunks. */
export function tablesAndChunks(i32: Int32Array, hdr: number): number[] {
  const own = chunks(i32, hdr).map(([, chunk]) => chunk);
  for (let s = 0; s <= word(i32, hdr, L.M_SEGMENT_MASK); s++) {
    const seg = segmentAt(hdr, s);
    for (let t = word(i32, seg, L.SG_OLD_TABLES) >>> 0, n = 0; t !== 0 && n < 64; t = word(i32, t, L.T_NEXT_OLD) >>> 0, n++) own.push(t);
    if (word(i32, seg, L.SG_TABLE) !== 0) own.push(word(i32, seg, L.SG_TABLE) >>> 0);
  }
  return own;
}

/** Counts over every descriptor and segment (structure left for the caller: it needs the heap). */
export function countStates(i32: Int32Array, hdr: number): SharedMapStats {
  const s: SharedMapStats = {
    entries: 0, segments: word(i32, hdr, L.M_SEGMENT_MASK) + 1, capacity: 0, oldTables: 0, reserved: 0, held: 0, unlinkedHeld: 0, retired: 0,
    descriptors: 0, freeDescriptors: 0, readers: 0, readerRecords: 0, repairs: Atomics.load(i32, (hdr + L.M_REPAIRS) >>> 2),
    structureObjects: 0, structureBytes: 0, structureBytesByShard: [], structureObjectsByShard: [],
  };
  for (let n = 0; n < s.segments; n++) {
    const seg = segmentAt(hdr, n);
    const T = word(i32, seg, L.SG_TABLE) >>> 0;
    if (T !== 0) s.capacity += word(i32, T, L.T_MASK) + 1;
    for (let t = word(i32, seg, L.SG_OLD_TABLES) >>> 0, k = 0; t !== 0 && k < 64; t = word(i32, t, L.T_NEXT_OLD) >>> 0, k++) s.oldTables++;
  }
  forEachId(i32, hdr, (_id, d) => {
    s.descriptors++;
    const refs = Atomics.load(i32, (d + L.D_REFS) >>> 2);
    switch (Atomics.load(i32, (d + L.D_STATE) >>> 2) & L.STATE_MASK) {
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
  });
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
  const segments = word(i32, hdr, L.M_SEGMENT_MASK) + 1;
  const writers = word(i32, hdr, L.M_WRITERS);
  if (writers !== heap.shards) return [...problems, `SharedMap ${hdr}: ${writers} writer records for a heap of ${heap.shards} shards`];

  // Chunks and descriptors.
  const next = Atomics.load(i32, (hdr + L.M_NEXT_CHUNK) >>> 2);
  if (!(next >= 1 && next <= L.CHUNK_COUNT)) return [...problems, `SharedMap ${hdr}: ${next} chunks claimed, out of range`];
  let maxId = 0;
  for (let e = 0; e < L.CHUNK_COUNT; e++) {
    const chunk = word(i32, hdr, L.M_DIRECTORY + 4 * e) >>> 0;
    if (e >= next) {
      if (chunk !== 0) say(`directory entry ${e} is past the ${next} claimed`);
      continue;
    }
    maxId = L.chunkFirstId(e) + L.chunkSize(e);
    if (chunk === 0) say(`descriptor chunk ${e} was claimed and never recorded (its ids unused, its memory an orphan of the writer's shard): lost (a writer died mid-change)`);
    else if (objectBytes(chunk) < L.chunkSize(e) * L.DESCRIPTOR_BYTES) say(`descriptor chunk ${e} (${chunk}) is not a live object of ${L.chunkSize(e) * L.DESCRIPTOR_BYTES} bytes`);
  }
  const state = new Uint8Array(maxId);
  const writerOf = new Int32Array(maxId).fill(-1);
  const payloads = new Map<number, number>();
  forEachId(i32, hdr, (id, d) => {
    const w = d >>> 2;
    if (i32[w + L.W_ID] !== id) say(`descriptor ${id} says it is ${i32[w + L.W_ID]}`);
    const refs = Atomics.load(i32, w + L.W_REFS);
    const st = Atomics.load(i32, w + L.W_STATE) & L.STATE_MASK;
    state[id] = st;
    writerOf[id] = ownerShardOf(heap, d);
    if (st === L.FREE) {
      if (refs !== 0) say(`descriptor ${id} is free with ${refs} references`);
      return;
    }
    if (st === L.RESERVED && !ownsAShard(heap.regions, i32[w + L.W_NEXT]!)) {
      // Its count too may be missing: the thread died making it.
      say(`descriptor ${id} is a reservation of ${describeOwner(i32[w + L.W_NEXT]!)}, which owns no shard any more: lost with its payload until destroy (a writer died mid-change)`);
    } else if (st === L.RETIRED ? refs < 0 : refs < 1) {
      if (st === L.UNLINKED && refs === 0) say(`descriptor ${id} is out of the map with no reference left and not retired: lost (a writer died mid-change)`);
      else say(`descriptor ${id} is in use (state ${st}) with ${refs} references`);
    }
    const payload = i32[w + L.W_PAYLOAD]! >>> 0;
    const keyLength = i32[w + L.W_KEY_LENGTH]!;
    const valueLength = i32[w + L.W_VALUE_LENGTH]! >>> 0;
    const other = payloads.get(payload);
    if (other !== undefined) say(`descriptors ${other} and ${id} share payload ${payload}`);
    payloads.set(payload, id);
    if (ownerShardOf(heap, payload) !== writerOf[id]) say(`descriptor ${id}'s payload ${payload} is not in its writer's shard (${writerOf[id]})`);
    if (keyLength < 0 || keyLength > L.MAX_KEY_BYTES) {
      say(`descriptor ${id} has a key of ${keyLength} bytes`);
      return;
    }
    if (objectBytes(payload) < L.keyArea(keyLength) + valueLength) say(`descriptor ${id}'s payload ${payload} is not a live object of ${L.keyArea(keyLength) + valueLength} bytes`);
    else for (let b = keyLength; b < L.keyArea(keyLength); b++) if (heap.bytes(payload + b, 1)[0] !== 0) say(`descriptor ${id}'s key padding is not zero`);
  });

  // The writers' lists: every free descriptor on its writer's free list or
  // returned stack, every retired one on its retired list or stack, once.
  const listed = new Uint8Array(maxId);
  for (let s = 0; s < writers; s++) {
    const rec = hdr + L.writerOffset(segments, s);
    const replacing = Atomics.load(i32, (rec + L.WR_REPLACING) >>> 2);
    if (replacing !== 0) {
      say(ownsAShard(heap.regions, replacing)
        ? `shard ${s}'s writer ${describeOwner(replacing)} is replacing an entry (a change in progress: check a quiet map)`
        : `shard ${s}'s writer ${describeOwner(replacing)}, which owns no shard any more, was replacing an entry: lost until the segment's next change repairs it (a writer died mid-change)`);
    }
    const lists: Array<[string, number, number]> = [
      ["free list", L.WR_FREE, L.FREE],
      ["returned stack", L.WR_RETURNED, L.FREE],
      ["retired list", L.WR_RETIRED_LIST, L.RETIRED],
      ["retired stack", L.WR_RETIRED_STACK, L.RETIRED],
    ];
    for (const [name, head, want] of lists) {
      for (let id = word(i32, rec, head), steps = 0; id !== 0; steps++) {
        if (!(id >= 1 && id < maxId && writerOf[id] >= 0) || steps >= maxId) {
          say(`shard ${s}'s ${name} holds id ${id}, out of range or in a loop`);
          break;
        }
        if (listed[id]) say(`descriptor ${id} is listed twice`);
        if (state[id] !== want) say(`descriptor ${id} is on shard ${s}'s ${name} in state ${state[id]}`);
        if (writerOf[id] !== s) say(`descriptor ${id} (shard ${writerOf[id]}'s) is on shard ${s}'s ${name}`);
        listed[id] = 1;
        id = i32[(descriptorAddress(i32, hdr, id) + L.D_NEXT) >>> 2]!;
      }
    }
  }
  const offList = new Map<string, number[]>();
  for (let id = 1; id < maxId; id++) {
    if (writerOf[id] < 0 || listed[id] || (state[id] !== L.FREE && state[id] !== L.RETIRED)) continue;
    const key = `${state[id] === L.FREE ? "free" : "retired"} descriptors of shard ${writerOf[id]}`;
    offList.set(key, [...(offList.get(key) ?? []), id]);
  }
  for (const [what, ids] of offList) say(`${ids.length} ${what} are on no list (${ids.slice(0, 5).join(", ")}${ids.length > 5 ? ", ..." : ""}): lost (a writer died mid-change)`);

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
      if (!(id >= 1 && id < maxId) || ![L.LINKED, L.UNLINKED, L.RETIRED].includes(state[id]!)) say(`reader record ${r}'s hazard ${j} names descriptor ${id} (state ${state[id] ?? "none"})`);
      if (Atomics.load(i32, w + (L.R_CLAIM >>> 2)) === 0) say(`reader record ${r} is not claimed but its hazard ${j} is set`);
    }
  }

  // The segments.
  const named = new Uint8Array(maxId);
  for (let n = 0; n < segments; n++) checkSegment(heap, i32, hdr, n, state, named, say, objectBytes);
  for (let id = 1; id < maxId; id++) if (state[id] === L.LINKED && !named[id]) say(`descriptor ${id} is linked but in no slot`);
  return problems;
}

function checkSegment(
  heap: SharedHeap, i32: Int32Array, hdr: number, n: number, state: Uint8Array, named: Uint8Array,
  say: (what: string) => void, objectBytes: (ptr: number) => number,
): void {
  const seg = segmentAt(hdr, n);
  const mask = word(i32, hdr, L.M_SEGMENT_MASK);
  const lock = Atomics.load(i32, (seg + L.SG_LOCK) >>> 2);
  if (lock !== 0) {
    say(ownsAShard(heap.regions, lock)
      ? `segment ${n} is locked by ${describeOwner(lock)} (a change in progress: check a quiet map)`
      : `segment ${n} is locked by ${describeOwner(lock)}, which owns no shard any more: lost until its next writer repairs it (a writer died mid-change)`);
  } else if ([L.SG_LINKING, L.SG_UNLINKING, L.SG_GROWING].some((f) => word(i32, seg, f) !== 0)) {
    say(`segment ${n} is unlocked with an intent left in it`);
  }
  const T = word(i32, seg, L.SG_TABLE) >>> 0;
  const tmask = T === 0 ? -1 : word(i32, T, L.T_MASK);
  const capacity = tmask + 1;
  if (T === 0 || capacity < L.MIN_CAPACITY || (capacity & tmask) !== 0 || capacity > L.MAX_CAPACITY) return say(`segment ${n}'s table ${T} has ${capacity} slots`);
  if (objectBytes(T) < L.TABLE_HEADER_BYTES + 4 * capacity) say(`segment ${n}'s table ${T} is not a live object of ${capacity} slots`);
  const slots = (T + L.TABLE_HEADER_BYTES) >>> 2;
  let used = 0;
  for (let i = 0; i < capacity; i++) {
    const s = i32[slots + i]!;
    if (s === 0) continue;
    used++;
    const id = s >>> 8;
    if (!(id >= 1 && id < state.length)) {
      say(`segment ${n}'s slot ${i} names id ${id}, out of range`);
      continue;
    }
    if (named[id]) say(`descriptor ${id} is in two slots`);
    named[id] = 1;
    if (state[id] !== L.LINKED) say(`segment ${n}'s slot ${i} names descriptor ${id}, which is not linked (state ${state[id]})`);
    const hash = i32[(descriptorAddress(i32, hdr, id) + L.D_HASH) >>> 2]!;
    if ((s & 255) !== hash >>> 24) say(`segment ${n}'s slot ${i}'s tag ${s & 255} is not descriptor ${id}'s (${hash >>> 24})`);
    if (L.segmentIndex(hash, mask) !== n) say(`descriptor ${id} is in segment ${n}, its key's is ${L.segmentIndex(hash, mask)}`);
    for (let j = hash & tmask; j !== i; j = (j + 1) & tmask) {
      if (i32[slots + j] === 0) {
        say(`descriptor ${id} in segment ${n}'s slot ${i} is cut off from its home ${hash & tmask} by the empty slot ${j}`);
        break;
      }
    }
  }
  if (used !== word(i32, seg, L.SG_COUNT)) say(`segment ${n}: ${used} slots are in use, it counts ${word(i32, seg, L.SG_COUNT)} entries`);
  if (used > capacity * L.MAX_LOAD) say(`segment ${n}: ${used} entries in ${capacity} slots: past the load limit`);
  let below = capacity;
  for (let t = word(i32, seg, L.SG_OLD_TABLES) >>> 0, k = 0; t !== 0; t = word(i32, t, L.T_NEXT_OLD) >>> 0, k++) {
    const slotsOld = word(i32, t, L.T_MASK) + 1;
    if (k >= 32 || objectBytes(t) < L.TABLE_HEADER_BYTES + 4 * slotsOld || slotsOld >= below) {
      say(`segment ${n}'s old table ${t} (${slotsOld} slots) is not a live table smaller than the one after it`);
      break;
    }
    below = slotsOld;
  }
}
