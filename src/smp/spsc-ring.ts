/**
 * One single-producer/single-consumer ring of variable-length records in
 * the messaging buffer (queue-layout.ts): RingWriter is the producer's
 * half, RingReader the consumer's; each lives on its own thread and keeps
 * its counter locally, publishing it with one Atomics.store a batch.
 *
 * A record starts on a 4-byte boundary with one header word,
 * (byteLength << 4) | kind, byteLength counting the header; the next
 * record starts at the following 4-byte boundary. A record never wraps:
 * when it does not fit before the end of the ring, the producer writes a
 * PAD record over the rest and starts again at offset 0. The records'
 * meaning (kinds above PAD) is the endpoint's business (records.ts).
 *
 * Memory order: the producer writes a record's bytes with plain stores,
 * then Atomics.store(TAIL) (sequentially consistent, so a release); the
 * consumer reads TAIL with Atomics.load (an acquire) before reading the
 * bytes below it, and releases them with Atomics.store(HEAD) only after it
 * has decoded them. The same for the producer's reads of HEAD.
 */
import { HEAD, NEED_SPACE, TAIL } from "./queue-layout.js";

/** The header word's kind bits. */
export const KIND_BITS = 4;
export const KIND_MASK = (1 << KIND_BITS) - 1;
/** Filler to the end of the ring: the next record is at offset 0. */
export const KIND_PAD = 1;
/** Largest record byteLength the header word can state. */
export const MAX_RECORD_BYTES = (2 ** 31 - 1) >>> KIND_BITS;

export function recordHeader(byteLength: number, kind: number): number {
  return (byteLength << KIND_BITS) | kind;
}

/** The byteLength a header word states. */
export function recordHeaderLength(header: number): number {
  return header >>> KIND_BITS;
}

const align4 = (n: number): number => (n + 3) & ~3;

/** What both halves of a ring know of it. */
abstract class RingEnd {
  protected readonly mask: number;

  /**
   * @param i32 the messaging buffer as words
   * @param word the ring's header word (queue-layout ringWord)
   * @param base byte offset of the ring's data
   * @param capacity ring bytes, a power of two
   */
  constructor(
    protected readonly i32: Int32Array,
    protected readonly word: number,
    readonly base: number,
    readonly capacity: number,
  ) {
    this.mask = capacity - 1;
  }
}

export class RingWriter extends RingEnd {
  /** Bytes written (mod 2^32, as an int32 difference), published or not. */
  private tail = 0;
  private published = 0;
  /** The consumer's HEAD as last read. */
  private head = 0;

  /** Unpublished bytes are waiting (publish() would store a new TAIL). */
  get dirty(): boolean {
    return this.tail !== this.published;
  }

  /**
   * Byte offset (in the whole buffer) where `bytes` (header included) can be
   * written now, contiguously, or -1 when the ring has no room for them yet.
   * Writes a PAD record first when the record must wrap. Follow with
   * commit(bytes) once the record is written.
   */
  reserve(bytes: number): number {
    const need = align4(bytes);
    let idx = this.tail & this.mask;
    let toEnd = this.capacity - idx;
    if (need > toEnd) {
      // Wrap: pad out the rest (the consumer skips it), then start at 0.
      if (this.free(toEnd) < toEnd) return -1;
      this.i32[(this.base + idx) >>> 2] = recordHeader(toEnd, KIND_PAD);
      this.tail = (this.tail + toEnd) | 0;
      idx = 0;
      toEnd = this.capacity;
    }
    if (this.free(need) < need) return -1;
    return this.base + idx;
  }

  /**
   * Contiguous bytes writable at the current position without waiting or
   * wrapping, for writing a record straight into the ring before its
   * length is known.
   */
  room(): number {
    const toEnd = this.capacity - (this.tail & this.mask);
    return Math.min(toEnd, this.free(toEnd));
  }

  /** Byte offset of the current write position (valid for room() bytes). */
  position(): number {
    return this.base + (this.tail & this.mask);
  }

  /** The record of `bytes` just written at the reserved position is complete. */
  commit(bytes: number): void {
    this.tail = (this.tail + align4(bytes)) | 0;
  }

  /** Make every committed record visible to the consumer. */
  publish(): void {
    if (this.tail === this.published) return;
    this.published = this.tail;
    Atomics.store(this.i32, this.word + TAIL, this.tail);
  }

  /**
   * Ask the consumer to wake this producer once it makes room (the producer
   * holds overflow). Returns true when room has appeared meanwhile: then
   * retry at once instead of sleeping.
   */
  wantSpace(bytes: number): boolean {
    Atomics.store(this.i32, this.word + NEED_SPACE, 1);
    this.head = Atomics.load(this.i32, this.word + HEAD);
    return this.capacity - ((this.tail - this.head) | 0) >= align4(bytes) + 4;
  }

  /** Forget everything (the ring was reset by the main thread after the peer went down). */
  reset(): void {
    this.tail = this.published = this.head = 0;
  }

  /** Free bytes, reading the consumer's HEAD again only when the cached one is not enough. */
  private free(need: number): number {
    let free = this.capacity - ((this.tail - this.head) | 0);
    if (free < need) {
      this.head = Atomics.load(this.i32, this.word + HEAD);
      free = this.capacity - ((this.tail - this.head) | 0);
    }
    return free;
  }
}

export class RingReader extends RingEnd {
  private head = 0;
  private released = 0;
  /** The producer's TAIL as last read. */
  private tail = 0;

  /**
   * Byte offset of the next record (its header word is i32[offset >>> 2]),
   * or -1 when the ring is empty. PAD records are skipped.
   */
  next(): number {
    if (this.head === this.tail) {
      this.tail = Atomics.load(this.i32, this.word + TAIL);
      if (this.head === this.tail) return -1;
    }
    let at = this.base + (this.head & this.mask);
    if ((this.i32[at >>> 2]! & KIND_MASK) === KIND_PAD) {
      this.head = (this.head + (this.capacity - (this.head & this.mask))) | 0;
      if (this.head === this.tail) {
        this.tail = Atomics.load(this.i32, this.word + TAIL);
        if (this.head === this.tail) return -1;
      }
      at = this.base;
    }
    return at;
  }

  /** True when a record is waiting (reads TAIL). */
  hasRecords(): boolean {
    return this.head !== this.tail || this.head !== Atomics.load(this.i32, this.word + TAIL);
  }

  /** Done with the record next() returned (`byteLength` from its header). */
  advance(byteLength: number): void {
    this.head = (this.head + align4(byteLength)) | 0;
  }

  /**
   * Hand the consumed bytes back to the producer. Returns true when the
   * producer asked to be woken for room (NEED_SPACE), which is cleared.
   */
  release(): boolean {
    if (this.head === this.released) return false;
    this.released = this.head;
    Atomics.store(this.i32, this.word + HEAD, this.head);
    return Atomics.load(this.i32, this.word + NEED_SPACE) !== 0 && Atomics.compareExchange(this.i32, this.word + NEED_SPACE, 1, 0) === 1;
  }

  reset(): void {
    this.head = this.released = this.tail = 0;
  }
}
