/**
 * Records for the ring tests (spsc-ring.test.ts, overflow-queue.test.ts):
 * sizes that, in a small ring, start a record at every offset and make the
 * writer pad every possible length before wrapping; payload bytes that are
 * a function of the record's sequence number; a model of where each record
 * must land, kept apart from spsc-ring.ts; and the check that says what is
 * wrong with a record as read.
 */
import { createQueueBuffer, queueGeometry, ringData, ringWord } from "../../src/smp/queue-layout.js";
import { KIND_MASK, RingReader, RingWriter, recordHeader, recordHeaderLength } from "../../src/smp/spsc-ring.js";

/** The ring the tests use: small, so thousands of records wrap hundreds of times. */
export const RING_BYTES = 256;
/** The kind the test records carry: any kind above PAD (the ring reads no other). */
export const KIND_TEST = 5;

const align4 = (n: number): number => (n + 3) & ~3;

/** A ring from endpoint 0 to endpoint 1 of a 2-endpoint messaging buffer, with both its halves. */
export function testRing(ringBytes = RING_BYTES) {
  const g = queueGeometry(2, ringBytes);
  const buffer = createQueueBuffer(g);
  const i32 = new Int32Array(buffer);
  const u8 = new Uint8Array(buffer);
  const word = ringWord(g, 0, 1);
  const base = ringData(g, 0, 1);
  return { buffer, i32, u8, word, base, writer: new RingWriter(i32, word, base, ringBytes), reader: new RingReader(i32, word, base, ringBytes) };
}

/** Byte k of the payload (after the header word) of record `seq`. fixtures/ring-writer.mjs has the same line. */
export const recordByte = (seq: number, k: number): number => (seq * 131 + k * 7 + 1) & 255;

/** Write record `seq` of `byteLength` bytes (header included) at byte `at`: the header word, then payload bytes [from, to). */
export function writeRecord(i32: Int32Array, u8: Uint8Array, at: number, seq: number, byteLength: number, from = 0, to = byteLength - 4): void {
  if (from === 0) i32[at >>> 2] = recordHeader(byteLength, KIND_TEST);
  for (let k = from; k < to; k++) u8[at + 4 + k] = recordByte(seq, k);
}

/** Record `seq` as a Uint8Array (what OverflowQueue.push takes). */
export function recordBytes(seq: number, byteLength: number): Uint8Array {
  const bytes = new Uint8Array(align4(byteLength));
  writeRecord(new Int32Array(bytes.buffer), bytes, 0, seq, byteLength);
  return bytes.subarray(0, byteLength);
}

/** Where the records of `sizes` start in a ring of `ringBytes`, and the pad (0: none) the writer puts before each. */
export interface RingPlan {
  readonly offsets: Int32Array;
  readonly pads: Int32Array;
}

/**
 * The writer's rule, modelled: a record starts where the last one ended,
 * 4-aligned, unless it does not fit before the end of the ring; then the
 * rest is a pad and it starts at 0.
 */
export function ringPlan(sizes: Int32Array, ringBytes: number): RingPlan {
  const offsets = new Int32Array(sizes.length);
  const pads = new Int32Array(sizes.length);
  let pos = 0;
  for (let s = 0; s < sizes.length; s++) {
    const need = align4(sizes[s]!);
    if (need > ringBytes - pos) {
      pads[s] = ringBytes - pos;
      pos = 0;
    }
    offsets[s] = pos;
    pos = (pos + need) % ringBytes;
  }
  return { offsets, pads };
}

/**
 * Record sizes (header included, 4 to `ringBytes`) for a ring of
 * `ringBytes`: `rounds` passes that each bring the write position to every
 * offset from ringBytes - 4 down to 4 and then write a record too long for
 * the rest (so the writer pads every length 4 .. ringBytes - 4, and records
 * end exactly at the end of the ring on the way), then `randomCount` sizes
 * from a fixed-seed generator. Lengths cover every residue mod 4.
 */
export function wrapSizes(ringBytes: number, rounds: number, randomCount: number): Int32Array {
  const sizes: number[] = [];
  let pos = 0;
  let ragged = 0; // how many bytes short of a whole word the next record is, 0..3
  const add = (need: number): void => {
    const byteLength = need > 4 ? need - (ragged++ & 3) : 4;
    sizes.push(byteLength);
    pos = need > ringBytes - pos ? need % ringBytes : (pos + need) % ringBytes;
  };
  for (let round = 0; round < rounds; round++) {
    for (let pad = 4; pad <= ringBytes - 4; pad += 4) {
      const target = ringBytes - pad;
      if (target <= pos) add(ringBytes - pos); // to the end exactly
      if (target > pos) add(target - pos);
      add(Math.min(ringBytes, pad + 4 + (((pad * 13 + round * 20) % 64) & ~3)));
    }
  }
  let seed = 0x2545f491;
  for (let k = 0; k < randomCount; k++) {
    seed ^= seed << 13;
    seed ^= seed >>> 17;
    seed ^= seed << 5;
    // Mostly small (as calls are), one in eight up to the whole ring.
    const most = (seed & 7) === 0 ? ringBytes : 64;
    sizes.push(4 + ((seed >>> 3) % (most - 3)));
  }
  return Int32Array.from(sizes);
}

/**
 * What is wrong with record `seq` as the reader found it at byte `at` of
 * the buffer (`ringBase` = the ring's data), or undefined. `halfFrom`: the
 * payload byte the writer's second half starts at, to say so when that is
 * where the bytes go wrong.
 */
export function recordProblem(
  i32: Int32Array,
  u8: Uint8Array,
  at: number,
  ringBase: number,
  seq: number,
  byteLength: number,
  plan: RingPlan,
  halfFrom = Infinity,
): string | undefined {
  const where = `record #${seq} (${byteLength} bytes, written at ring offset ${plan.offsets[seq]}${plan.pads[seq] ? ` after a ${plan.pads[seq]}-byte pad` : ""})`;
  if (at - ringBase !== plan.offsets[seq]) return `${where}: the reader is at ring offset ${at - ringBase}`;
  const header = i32[at >>> 2]!;
  if (recordHeaderLength(header) !== byteLength || (header & KIND_MASK) !== KIND_TEST) {
    return `${where}: its header says ${recordHeaderLength(header)} bytes, kind ${header & KIND_MASK} (written: ${byteLength}, kind ${KIND_TEST})`;
  }
  for (let k = 0; k < byteLength - 4; k++) {
    const got = u8[at + 4 + k]!;
    if (got !== recordByte(seq, k)) {
      const why = k >= halfFrom ? ", in the half written after the pause: the reader read it before the writer wrote it (TAIL published before the bytes?)" : "";
      return `${where}: payload byte ${k} is ${got}, written ${recordByte(seq, k)}${why}`;
    }
  }
  return undefined;
}

/** Payload bytes the two-half writer writes before its pause (fixtures/ring-writer.mjs computes the same). */
export const firstHalf = (byteLength: number): number => (byteLength - 4) >>> 1;
