/**
 * The sender's side of backpressure: records that did not fit in a full
 * ring wait here, in order, until the consumer makes room (Seastar's
 * pending_fifo). Records are packed into 64 KiB chunks rather than kept
 * as one Uint8Array each: a million small calls backed up cost ~24 MB of
 * chunks instead of ~150 MB of typed-array objects. Nothing is dropped;
 * memory is bounded by the calls the caller has in flight (each record is
 * one call or one answer).
 */
const CHUNK_BYTES = 64 * 1024;

export class OverflowQueue {
  private chunks: Uint8Array[] = [];
  /** Read position in chunks[0]; write position in the last chunk. */
  private readPos = 0;
  private writePos = 0;
  /** Records waiting. */
  length = 0;

  /** Append a copy of `record` (header word first; its byte length is read from it). */
  push(record: Uint8Array): void {
    const n = align4(record.length);
    let last = this.chunks[this.chunks.length - 1];
    if (last === undefined || this.writePos + 4 + n > last.length) {
      last = new Uint8Array(Math.max(CHUNK_BYTES, 4 + n));
      this.chunks.push(last);
      this.writePos = 0;
    }
    new DataView(last.buffer).setUint32(this.writePos, record.length, true);
    last.set(record, this.writePos + 4);
    this.writePos += 4 + n;
    this.length++;
  }

  /** The oldest record (a view, valid until shift()), or undefined. */
  peek(): Uint8Array | undefined {
    if (this.length === 0) return undefined;
    let first = this.chunks[0]!;
    if (this.readPos >= (this.chunks.length === 1 ? this.writePos : first.length) || this.lengthAt(first, this.readPos) === 0) {
      // The rest of this chunk is unused: move to the next.
      this.chunks.shift();
      this.readPos = 0;
      first = this.chunks[0]!;
    }
    const n = this.lengthAt(first, this.readPos);
    return first.subarray(this.readPos + 4, this.readPos + 4 + n);
  }

  /** Drop the record peek() returned. */
  shift(): void {
    const first = this.chunks[0]!;
    this.readPos += 4 + align4(this.lengthAt(first, this.readPos));
    if (--this.length === 0) this.clear();
  }

  clear(): void {
    this.chunks = [];
    this.readPos = this.writePos = 0;
    this.length = 0;
  }

  private lengthAt(chunk: Uint8Array, pos: number): number {
    return pos + 4 > chunk.length ? 0 : chunk[pos]! | (chunk[pos + 1]! << 8) | (chunk[pos + 2]! << 16) | (chunk[pos + 3]! << 24);
  }
}

const align4 = (n: number): number => (n + 3) & ~3;
