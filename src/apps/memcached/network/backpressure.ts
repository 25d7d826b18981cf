/**
 * What one connection may hold of its client's making, and the count of
 * it: answers not yet written (connection.ts stops reading past a bound,
 * and reads again once the socket has written half of them) and the raw
 * bytes read and not yet parsed (reader.ts holds them while a request
 * waits).
 *
 * An answer is counted by the bytes it will write, a hit's value included
 * though the answer holds only a view of the item in the shared heap (and
 * a reference that keeps the item alive until the socket has written it),
 * and by its pieces (Buffer views and strings): a piece costs JS memory
 * whatever its length, in the connection's lists and in the socket's
 * write queue. Both are counted from the answer's making until the
 * socket calls back its write, whatever waits meanwhile: the reader
 * yielding (-R), an answer of another shard ahead of it in line, the
 * socket's buffer.
 */
import type { Chunk } from "../protocol/answers.js";

/**
 * A connection stops reading once its answers not yet written pass this
 * many bytes (plus the answer of the request that passed it: a request is
 * never cut; but a get of many keys stops between two keys, past it by
 * one key's answer, multi-get.ts), and goes on once half of them are
 * written.
 */
export const MAX_UNSENT_BYTES = 4 << 20;
/**
 * ... or this many pieces: a piece costs JS memory whatever its length
 * (its view, its slots in the connection's lists and the socket's write
 * queue: 190-290 B measured), and 4 MiB of small answers are many pieces
 * (22-byte get hits: 190,000). A connection stopped by 16,384 pieces of
 * small answers held 3.1 MiB of JS memory; by 4,096, 1.3 MiB.
 */
export const MAX_UNSENT_PIECES = 4096;
/**
 * ... or once this many answers wait in line behind one another shard has
 * yet to give (their size unknown until it does: those already asked
 * come, counted as they do).
 */
export const MAX_WAITING = 4096;
/**
 * A connection stops reading its socket while the reader holds this many
 * bytes read and not yet parsed (plus the read that passed it, at most
 * 64 KiB), and reads again once it holds half. Under -R the reader yields
 * after N requests and the socket goes on reading meanwhile (pausing it
 * per yield cost a read stop and start each: connection.ts); without this
 * bound a client that pipelined 400,000 gets had all 3.5 MiB read within
 * 0.5 s, held unparsed while the answers waited.
 */
export const MAX_HELD_BYTES = 256 << 10;

/** What a connection holds now of its client's making, and the most it held; or a shard's connections, summed (census: shard.ts). */
export interface Holding {
  /** Answers not yet written: their bytes and pieces. */
  unsentBytes: number;
  unsentPieces: number;
  /** The most one connection held, since it opened (a shard's: of those open now). */
  peakUnsentBytes: number;
  peakUnsentPieces: number;
  /** Connections whose reading stopped for unwritten answers (a connection's: 0 or 1). */
  stopped: number;
  /** Bytes read and not yet parsed. */
  heldBytes: number;
  peakHeldBytes: number;
}

/** A write handed to the socket and not yet called back. */
interface Write {
  bytes: number;
  pieces: number;
  /** The references its pieces are views of (connection.ts held()). */
  refs: number[];
}

/** A connection's answers from their making until the socket has written them. */
export class UnsentAnswers {
  /** Answers made and not yet handed to the socket (in line, or waiting behind another shard's). */
  private madeBytes = 0;
  private madePieces = 0;
  /** Handed to the socket and not yet written, oldest first: the socket calls back its writes in order. */
  private writes: Write[] = [];
  private writingBytes = 0;
  private writingPieces = 0;
  /**
   * Pieces of answers another shard has yet to give a get (multi-get.ts),
   * counted against the bound before they come: what is asked is answered
   * whatever follows, so a get of many keys asks no more than the bound
   * holds.
   */
  private promised = 0;
  /** The most there were at once (census: shard.ts). */
  peakBytes = 0;
  peakPieces = 0;

  get bytes(): number {
    return this.madeBytes + this.writingBytes;
  }

  get pieces(): number {
    return this.madePieces + this.writingPieces;
  }

  /** An answer's piece made (strings here are ASCII: one byte a char). */
  add(chunk: Chunk): void {
    this.madeBytes += chunk.length;
    this.madePieces++;
  }

  addAll(chunks: readonly Chunk[]): void {
    for (const c of chunks) this.madeBytes += c.length;
    this.madePieces += chunks.length;
  }

  /** An answer of `pieces` is asked of another shard (negative: it came, or never will). */
  promise(pieces: number): void {
    this.promised += pieces;
  }

  /** Pieces made, `bytes` long, handed to the socket as one write; `refs` drop when it is written. */
  handed(bytes: number, pieces: number, refs: number[]): void {
    this.madeBytes -= bytes;
    this.madePieces -= pieces;
    this.writingBytes += bytes;
    this.writingPieces += pieces;
    this.writes.push({ bytes, pieces, refs });
  }

  /** Pieces made, `bytes` long, that will never be written (the socket has ended). */
  discard(bytes: number, pieces: number): void {
    this.madeBytes -= bytes;
    this.madePieces -= pieces;
  }

  /** The socket wrote the oldest write: the references it held, to drop. */
  written(): number[] | undefined {
    const w = this.writes.shift();
    if (w === undefined) return undefined;
    this.writingBytes -= w.bytes;
    this.writingPieces -= w.pieces;
    return w.refs;
  }

  /**
   * Whether past a bound (reading must stop), with `waiting` answers in
   * line. Called after each request and each answer from another shard,
   * the only times the count grows, so the peaks it records are the real
   * ones.
   */
  over(waiting: number): boolean {
    const bytes = this.bytes;
    const pieces = this.pieces;
    if (bytes > this.peakBytes) this.peakBytes = bytes;
    if (pieces > this.peakPieces) this.peakPieces = pieces;
    return bytes > MAX_UNSENT_BYTES || pieces + this.promised > MAX_UNSENT_PIECES || waiting > MAX_WAITING;
  }

  /** Whether down to half the bounds (reading may go on). */
  drained(waiting: number): boolean {
    return this.bytes <= MAX_UNSENT_BYTES / 2 && this.pieces + this.promised <= MAX_UNSENT_PIECES / 2 && waiting <= MAX_WAITING / 2;
  }

  /** The connection closed: nothing more will be written; the references of the writes not called back, to drop. */
  clear(): number[][] {
    const refs = this.writes.map((w) => w.refs);
    this.writes = [];
    this.madeBytes = this.madePieces = this.writingBytes = this.writingPieces = this.promised = 0;
    return refs;
  }
}
