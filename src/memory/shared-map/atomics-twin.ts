/**
 * The SharedMap's steps with Atomics, for a thread that attached the heap
 * by its buffer alone (no WebAssembly memory): the same protocol as the
 * WebAssembly module of atomics.ts, word for word (a byte address >>> 2
 * is the Int32Array index), kept in step with it: the tests run the races
 * on both kinds.
 */
import { D_REFS, D_STATE, HAZARDS_PER_READER, LINKED, M_DIRECTORY, M_SEGMENT_MASK, READER_BYTES, R_HAZARDS, SEGMENTS, SG_MOVES, SG_TABLE, STATE_MASK, TABLE_HEADER_BYTES, T_MASK, UNLINKED, WRITER_BYTES, WR_REPLACING, WR_REPLACING_SEGMENT, descriptorAt, segmentIndex } from "./layout.js";

/** The steps a SharedMap object works through (atomics.ts has what each returns). */
export interface MapAtomics {
  probe(hdr: number, hash: number, hazard: number): number;
  probeNext(hdr: number, hash: number): number;
  release(d: number): number;
  retain(d: number): number;
  unlinkEntry(d: number, expected: number, drop: number): number;
  reserveSteps(d: number, state: number): void;
  linkSteps(d: number, state: number, slot: number, word: number): void;
  announce(record: number, token: number, lock: number): number;
  swapSteps(d: number, state: number, slot: number, seen: number, word: number): number;
  findHazard(records: number, count: number, id: number): number;
  findReplacer(at: number, count: number, seg: number): number;
  load(address: number): number;
  store(address: number, value: number): void;
  compareExchange(address: number, expected: number, replacement: number): number;
  exchange(address: number, value: number): number;
}

/** The probe's verdicts besides a descriptor address. */
export const ABSENT = 0;
export const INVALID_HELD = 1;
export const NO_TABLE = 2;

/**
 * The same steps with Atomics, word for word (a byte address >>> 2 is the
 * Int32Array index). Kept in step with the WebAssembly above: the tests
 * run the races on both kinds.
 */
export class AtomicsMapSteps implements MapAtomics {
  private segment = 0;
  private table = 0;
  private moved = 0;
  private index = 0;
  private hazard = 0;
  constructor(private readonly i32: Int32Array) {}

  probe = (hdr: number, hash: number, hazard: number): number => {
    const seg = hdr + SEGMENTS + segmentIndex(hash, this.i32[(hdr + M_SEGMENT_MASK) >>> 2]!) * 128;
    return this.scan(hdr, seg, hash, 0, 0, 0, hazard);
  };
  probeNext = (hdr: number, hash: number): number => this.scan(hdr, this.segment, hash, this.table, this.moved, this.index + 1, this.hazard);

  private scan(hdr: number, seg: number, hash: number, T: number, moves: number, i: number, hazard: number): number {
    const i32 = this.i32;
    const table = (seg + SG_TABLE) >>> 2;
    const tag = hash >>> 24;
    for (;;) {
      if (T === 0) {
        T = Atomics.load(i32, table) >>> 0;
        moves = Atomics.load(i32, (seg + SG_MOVES) >>> 2);
        if (T === 0) return NO_TABLE;
        i = hash;
      }
      const mask = i32[(T + T_MASK) >>> 2]!;
      const slots = (T + TABLE_HEADER_BYTES) >>> 2;
      i &= mask;
      let steps = mask + 1;
      for (;;) {
        const s = Atomics.load(i32, slots + i);
        if (s === 0) {
          if (Atomics.load(i32, (seg + SG_MOVES) >>> 2) !== moves) break;
          return ABSENT;
        }
        if ((s & 255) !== tag) {
          i = (i + 1) & mask;
          if (--steps === 0) break;
          continue;
        }
        const d = descriptorAt(i32, (hdr + M_DIRECTORY) >>> 2, s >>> 8);
        if (hazard !== 0) {
          Atomics.store(i32, hazard >>> 2, s >>> 8);
          if (Atomics.load(i32, slots + i) === s && Atomics.load(i32, table) >>> 0 === T) return this.save(seg, T, moves, i, hazard, d);
          Atomics.store(i32, hazard >>> 2, 0);
        } else {
          const refs = (d >>> 2) + (D_REFS >>> 2);
          let c = Atomics.load(i32, refs);
          while (c !== 0) {
            const seen = Atomics.compareExchange(i32, refs, c, c + 1);
            if (seen === c) break;
            c = seen;
          }
          if (c !== 0) {
            if (Atomics.load(i32, slots + i) === s && Atomics.load(i32, table) >>> 0 === T) return this.save(seg, T, moves, i, hazard, d);
            for (c = Atomics.load(i32, refs); ; ) {
              if (c <= 1) return d | INVALID_HELD;
              const seen = Atomics.compareExchange(i32, refs, c, c - 1);
              if (seen === c) break;
              c = seen;
            }
          }
        }
        if (Atomics.load(i32, table) >>> 0 !== T) break; // the slot again, unless the table was replaced
      }
      T = 0;
    }
  }

  private save(seg: number, T: number, moves: number, i: number, hazard: number, d: number): number {
    this.segment = seg;
    this.table = T;
    this.moved = moves;
    this.index = i;
    this.hazard = hazard;
    return d;
  }

  release = (d: number): number => {
    const i32 = this.i32;
    const refs = (d >>> 2) + (D_REFS >>> 2);
    let c = Atomics.load(i32, refs);
    for (;;) {
      if (c <= 0) return -1;
      if (c === 1 && (Atomics.load(i32, (d >>> 2) + (D_STATE >>> 2)) & STATE_MASK) === LINKED) return -2;
      const seen = Atomics.compareExchange(i32, refs, c, c - 1);
      if (seen === c) return c - 1;
      c = seen;
    }
  };

  retain = (d: number): number => Atomics.add(this.i32, (d >>> 2) + (D_REFS >>> 2), 1) + 1;

  reserveSteps = (d: number, state: number): void => {
    Atomics.store(this.i32, (d + D_STATE) >>> 2, state);
    Atomics.store(this.i32, (d + D_REFS) >>> 2, 1);
  };

  linkSteps = (d: number, state: number, slot: number, word: number): void => {
    Atomics.store(this.i32, (d + D_STATE) >>> 2, state);
    Atomics.store(this.i32, slot >>> 2, word);
  };

  announce = (record: number, token: number, lock: number): number => {
    Atomics.store(this.i32, record >>> 2, token);
    return Atomics.load(this.i32, lock >>> 2);
  };

  swapSteps = (d: number, state: number, slot: number, seen: number, word: number): number => {
    Atomics.store(this.i32, (d + D_STATE) >>> 2, state);
    return Atomics.compareExchange(this.i32, slot >>> 2, seen, word);
  };

  unlinkEntry = (d: number, expected: number, drop: number): number => {
    const pair = new BigInt64Array(this.i32.buffer, d, 1);
    for (;;) {
      if (Atomics.load(this.i32, (d + D_STATE) >>> 2) !== expected) return -1;
      const c = Atomics.load(this.i32, (d + D_REFS) >>> 2);
      const was = BigInt.asUintN(32, BigInt(c)) | (BigInt.asUintN(32, BigInt(expected)) << 32n);
      const now = BigInt.asUintN(32, BigInt(c - drop)) | (BigInt.asUintN(32, BigInt((expected & -8) | UNLINKED)) << 32n);
      if (BigInt.asUintN(64, Atomics.compareExchange(pair, 0, BigInt.asIntN(64, was), BigInt.asIntN(64, now))) === was) return c - drop;
    }
  };

  findHazard = (records: number, count: number, id: number): number => {
    for (let r = 0; r < count; r++) {
      const first = (records + r * READER_BYTES + R_HAZARDS) >>> 2;
      for (let j = 0; j < HAZARDS_PER_READER; j++) if (Atomics.load(this.i32, first + j) === id) return 1;
    }
    return 0;
  };

  findReplacer = (at: number, count: number, seg: number): number => {
    for (let r = 0; r < count; r++, at += WRITER_BYTES) {
      if (Atomics.load(this.i32, at >>> 2) !== 0 && Atomics.load(this.i32, (at + WR_REPLACING_SEGMENT - WR_REPLACING) >>> 2) === seg) return at;
    }
    return 0;
  };

  load = (address: number): number => Atomics.load(this.i32, address >>> 2);
  store = (address: number, value: number): void => {
    Atomics.store(this.i32, address >>> 2, value);
  };
  compareExchange = (address: number, expected: number, replacement: number): number =>
    Atomics.compareExchange(this.i32, address >>> 2, expected, replacement);
  exchange = (address: number, value: number): number => Atomics.exchange(this.i32, address >>> 2, value);
}

