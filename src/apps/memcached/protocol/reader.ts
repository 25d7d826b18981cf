/**
 * Framing of a connection's byte stream, whatever the packets: command
 * lines (ended by \n, a \r before it dropped, as memcached's
 * try_read_command_ascii) and the data blocks after storage commands,
 * handed to a sink as they arrive. A request split over many packets and
 * many requests in one packet (pipelining) look the same to the sink.
 *
 * A data block goes to the sink in the pieces it arrives in, straight from
 * the socket's buffers (the connection copies them into the item in the
 * shared heap); only an unfinished command line is kept here, as a list of
 * pieces joined once its \n arrives (joining on every packet would cost
 * O(n^2) for a long line sent in small packets).
 *
 * The sink may suspend the reader from line() (a store whose item another
 * shard must first allocate, network/connection.ts): the bytes after that line,
 * and every chunk pushed meanwhile, wait here in order until resume().
 *
 * Limits, as memcached: a line with no \n within 2048 bytes ends the
 * connection unless it is a get (memcached lets multi-gets grow without bound; here
 * any line stops at MAX_GET_LINE). The binary protocol is recognised by
 * its first byte, 0x80, at the start of the connection (memcached's -B
 * auto, the default; with `negotiate` false, -B ascii, it is text too).
 */

/** memcached: no \n within this many bytes ends a connection unless it is a get. */
export const MAX_LINE = 2048;
/** A multi-get line may be this long (250-byte keys: some 4000 of them). */
export const MAX_GET_LINE = 1 << 20;
/** The binary protocol's request magic. */
const BINARY_MAGIC = 0x80;
const NL = 0x0a;
const CR = 0x0d;
const GET_PREFIX = /^ *(get|gets|gat|gats|bget) /;

export interface ReaderSink {
  /**
   * A command line (without its \r\n); `bytes`: the line as sent, its \n
   * (and \r) included (current memcached refuses a line under 4 bytes).
   * Returns the bytes of data that follow it (value and \r\n), or 0.
   */
  line(line: string, bytes: number): number;
  /** The next piece of the data block: chunk[start, end). */
  data(chunk: Buffer, start: number, end: number): void;
  /** The data block has all arrived. */
  dataEnd(): void;
  /** The connection opened with the binary protocol; `request`: the bytes it began with. */
  binary(request: Buffer): void;
  /** A line longer than the limits; `get`: a get past MAX_GET_LINE (else a line with no \n in MAX_LINE bytes). */
  lineTooLong(get: boolean): void;
}

export class RequestReader {
  private readonly sink: ReaderSink;
  /** Data bytes still to come for the current storage command. */
  private remaining = 0;
  /** Pieces of an unfinished line, and their total length. */
  private pieces: Buffer[] = [];
  private pending = 0;
  /** Decided once an unfinished line passes MAX_LINE: whether it is a get (allowed up to MAX_GET_LINE). */
  private longGet: boolean | undefined;
  /** Whether the first byte is still to be looked at (-B auto). */
  private first: boolean;
  private stopped = false;
  private paused = false;
  /** What arrived while suspended, oldest first (only the first may be a chunk's tail), and its bytes. */
  private held: Buffer[] = [];
  private heldLength = 0;

  constructor(sink: ReaderSink, negotiate = true) {
    this.sink = sink;
    this.first = negotiate;
  }

  /** Nothing more is read (after quit, a fatal error, the binary protocol). */
  stop(): void {
    this.stopped = true;
    this.pieces = [];
    this.held = [];
    this.heldLength = 0;
  }

  /** Read nothing more until resume() (called from the sink's line()). */
  suspend(): void {
    this.paused = true;
  }

  get suspended(): boolean {
    return this.paused;
  }

  /** Bytes read and held, not yet parsed (backpressure.ts MAX_HELD_BYTES bounds them). */
  get heldBytes(): number {
    return this.heldLength;
  }

  /** Go on with what was held, in order (a line in it may suspend again). */
  resume(): void {
    this.paused = false;
    while (!this.paused && !this.stopped && this.held.length > 0) {
      const chunk = this.held.shift()!;
      this.heldLength -= chunk.length;
      this.push(chunk);
    }
  }

  /** Whether a data block is being read (a client that leaves now left half a value). */
  get inData(): boolean {
    return this.remaining > 0;
  }

  push(chunk: Buffer): void {
    if (this.paused) {
      if (!this.stopped) {
        this.held.push(chunk);
        this.heldLength += chunk.length;
      }
      return;
    }
    let pos = 0;
    const end = chunk.length;
    if (this.first && end > 0) {
      this.first = false;
      if (chunk[0] === BINARY_MAGIC) {
        this.stop();
        this.sink.binary(chunk);
        return;
      }
    }
    while (pos < end && !this.stopped) {
      if (this.remaining > 0) {
        const stop = Math.min(end, pos + this.remaining);
        this.remaining -= stop - pos;
        this.sink.data(chunk, pos, stop);
        pos = stop;
        if (this.remaining === 0) this.sink.dataEnd();
        continue;
      }
      const nl = chunk.indexOf(NL, pos);
      if (nl < 0) {
        this.keep(chunk, pos, end);
        return;
      }
      let line: string;
      let bytes: number;
      if (this.pending > 0) {
        this.pieces.push(chunk.subarray(pos, nl));
        const whole = Buffer.concat(this.pieces, this.pending + nl - pos);
        this.pieces = [];
        this.pending = 0;
        line = whole.toString("latin1", 0, whole.length > 0 && whole[whole.length - 1] === CR ? whole.length - 1 : whole.length);
        bytes = whole.length + 1;
      } else {
        line = chunk.toString("latin1", pos, nl > pos && chunk[nl - 1] === CR ? nl - 1 : nl);
        bytes = nl + 1 - pos;
      }
      pos = nl + 1;
      this.longGet = undefined;
      if (line.length > MAX_GET_LINE) {
        this.stop();
        this.sink.lineTooLong(true);
        return;
      }
      this.remaining = this.sink.line(line, bytes);
      if (this.paused) {
        // Before anything held later: this tail came first.
        if (pos < end && !this.stopped) {
          this.held.unshift(chunk.subarray(pos));
          this.heldLength += end - pos;
        }
        return;
      }
    }
  }

  /** Keep an unfinished line, refusing one that is already too long. */
  private keep(chunk: Buffer, start: number, end: number): void {
    if (start === end) return;
    this.pieces.push(chunk.subarray(start, end));
    this.pending += end - start;
    if (this.pending <= MAX_LINE) return;
    if (this.longGet === undefined) {
      const head = Buffer.concat(this.pieces);
      this.pieces = [head];
      // memcached skips up to 100 leading spaces before looking for "get ".
      this.longGet = GET_PREFIX.test(head.toString("latin1", 0, 110));
    }
    if (!this.longGet || this.pending > MAX_GET_LINE) {
      this.stop();
      this.sink.lineTooLong(this.longGet);
    }
  }
}
