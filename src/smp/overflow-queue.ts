/**
 * The sender's side of backpressure: records that did not fit in a full
 * ring wait here, in order, until the consumer makes room (Seastar's
 * pending_fifo). Records are kept exactly as the ring holds them (a header
 * word stating the length, 4-byte aligned), packed into 64 KiB chunks: the
 * sender encodes straight into the tail chunk, and moving a record into
 * the ring is a copy of its words, with no object per record. A million
 * small calls backed up cost ~24 MB of chunks (as one Uint8Array per
 * record they cost ~150 MB and most of the sender's time in allocation).
 * Nothing is dropped; memory is bounded by the calls the caller has in
 * flight (each record is one call or one answer).
 */
import { recordHeaderLength, type RingWriter } from "./spsc-ring.js";
import { WireBytes } from "./wire-codec.js";

const CHUNK_BYTES = 64 * 1024;
/** Below this many bytes left in the tail chunk, the next record starts a new one. */
const MIN_TAIL_ROOM = 256;
/** Records up to this size are copied word by word (no subarray); larger ones with one set(). */
const WORD_COPY_BYTES = 256;

const align4 = (n: number): number => (n + 3) & ~3;

class Chunk extends WireBytes {
  /** Bytes holding records (the rest of a retired chunk is unused). */
  end = 0;
  constructor(bytes: number) {
    super(new ArrayBuffer(bytes));
  }
}

export class OverflowQueue {
  private chunks: Chunk[] = [];
  /** Read position in chunks[0]. */
  private readPos = 0;
  /** Records waiting. */
  length = 0;

  /** The chunk to encode the next record in, from tailPos() up to tailLimit(). */
  tailChunk(): WireBytes {
    let tail = this.chunks[this.chunks.length - 1];
    if (tail === undefined || tail.u8.length - tail.end < MIN_TAIL_ROOM) {
      tail = new Chunk(CHUNK_BYTES);
      this.chunks.push(tail);
    }
    return tail;
  }

  tailPos(): number {
    return this.chunks[this.chunks.length - 1]!.end;
  }

  /** A record of `byteLength` bytes (header written) is complete at tailPos(). */
  commitTail(byteLength: number): void {
    this.chunks[this.chunks.length - 1]!.end += align4(byteLength);
    this.length++;
  }

  /** Append a copy of `record` (a complete record, header first). */
  push(record: Uint8Array): void {
    const n = align4(record.length);
    let tail = this.chunks[this.chunks.length - 1];
    if (tail === undefined || tail.u8.length - tail.end < n) {
      tail = new Chunk(Math.max(CHUNK_BYTES, n));
      this.chunks.push(tail);
    }
    tail.u8.set(record, tail.end);
    tail.end += n;
    this.length++;
  }

  /** Byte length of the oldest record (0 when empty). */
  nextLength(): number {
    if (this.length === 0) return 0;
    let head = this.chunks[0]!;
    if (this.readPos >= head.end) {
      this.chunks.shift();
      this.readPos = 0;
      head = this.chunks[0]!;
    }
    return recordHeaderLength(head.i32[this.readPos >>> 2]!);
  }

  /**
   * Move the oldest records into `ring` (whose buffer `i32` / `u8` view)
   * while it has room; calls `moved` after each. Returns how many moved.
   */
  moveInto(ring: RingWriter, i32: Int32Array, u8: Uint8Array, moved: () => void): number {
    let count = 0;
    for (let n = this.nextLength(); n > 0; n = this.nextLength()) {
      const at = ring.reserve(n);
      if (at < 0) break;
      const head = this.chunks[0]!;
      if (n <= WORD_COPY_BYTES) {
        const from = this.readPos >>> 2;
        const to = at >>> 2;
        const words = (n + 3) >>> 2;
        for (let k = 0; k < words; k++) i32[to + k] = head.i32[from + k]!;
      } else {
        u8.set(head.u8.subarray(this.readPos, this.readPos + n), at);
      }
      ring.commit(n);
      this.readPos += align4(n);
      count++;
      if (--this.length === 0) this.clear();
      moved();
    }
    return count;
  }

  clear(): void {
    this.chunks = [];
    this.readPos = 0;
    this.length = 0;
  }
}
