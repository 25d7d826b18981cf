/**
 * One client connection, on the shard that accepted it: the socket side
 * of it. Bytes in (protocol/reader.ts frames them), each line handed to
 * the commands (commands/classic-commands.ts, which run it here, on this
 * shard, whatever its key), answers out in request order; this file is
 * the commands' host (commands/command-host.ts CommandHost): the order of
 * the answers, the references they hold, the socket's writes, reading
 * stopped and resumed (backpressure.ts), a value's data copied in place.
 *
 * Answers: a request answered at once appends its answer to `out`; one
 * that waits for other shards (flush_all, stats) takes a place in `queue`,
 * and everything after it waits behind it. `out` goes to the socket once
 * per socket read (and whenever a waiting answer completes) as one corked
 * write, so pipelined requests cost one writev.
 *
 * Values are written from the shared heap: a hit's answer is a Buffer view
 * of the item (item.ts) holding a reference to its map entry, taken on
 * this thread's SharedMap object and dropped when the socket has taken the
 * bytes (the write's callback) or the connection closes; the map frees an
 * item nobody holds once it is out of the map. A value being stored is
 * copied from the socket's buffers straight into its place: an entry this
 * shard reserves for it, in its own memory, published when the data ends.
 *
 * Bad input never costs more than this connection: every error is
 * answered with memcached's words and the connection carries on (or, for
 * a line too long, the binary protocol, an HTTP request or a failure of
 * this code, is answered and closed); reading stops (the socket and the
 * reader) while the client does not read its answers, within the bounds
 * of backpressure.ts, whatever the reader is doing.
 */
import type { Socket } from "node:net";
import type { CommandContext, CommandHost } from "../commands/command-host.js";
import { ClassicCommands } from "../commands/classic-commands.js";
import { reserveItem, storeReceived } from "../commands/storing.js";
import { itemAnswer, type MultiGet } from "../commands/multi-get.js";
import { line, serverError, word, type Chunk } from "../protocol/answers.js";
import type { MetaStoreCommand } from "../protocol/meta-protocol.js";
import { REPLY } from "../protocol/protocol.js";
import { RequestReader, type ReaderSink } from "../protocol/reader.js";
import { addressText, descriptorOf, type ConnEntry } from "../stats/stats-conns.js";
import { STAT } from "../stats/stats.js";
import { MAX_HELD_BYTES, UnsentAnswers, type Holding } from "./backpressure.js";

/** An answer in the queue: waiting for other shards, or ready behind one that is. */
interface Pending {
  chunks: Chunk[];
  /** References to the items the chunks are views of (held(): one each). */
  refs: number[];
  ready: boolean;
  /** End the connection once this answer is written. */
  close: boolean;
  /** Pieces counted for it until it is ready (a get's place: multi-get.ts). */
  promised: number;
  /** Taken out of line unwritten: an answer before it ended the connection. */
  dropped: boolean;
}

/** A storage command whose data is arriving. */
interface Incoming {
  cmd: MetaStoreCommand;
  /** The item being filled (0: the data is being skipped; its answer was given). */
  ptr: number;
  /** The map entry reserved for the item (this shard's reservation). */
  ref: number;
  /** Where the next data byte goes. */
  at: number;
}

/** The bytes `chunks` will write (strings are written as latin1: one byte a char). */
const lengthOf = (chunks: readonly Chunk[]): number => {
  let bytes = 0;
  for (const c of chunks) bytes += c.length;
  return bytes;
};
/** An answer ready in line. */
const ready = (chunks: Chunk[], refs: number[], close = false): Pending => ({ chunks, refs, ready: true, close, promised: 0, dropped: false });
/** A binary request's answer: the response magic, status 0x0083 "not supported", a text body. */
const BINARY_REFUSAL = "shardheap memcached speaks the ASCII protocol only";

export class Connection implements ReaderSink, CommandHost {
  private readonly socket: Socket;
  readonly ctx: CommandContext;
  private readonly reader: RequestReader;
  private readonly queue: Pending[] = [];
  private out: Chunk[] = [];
  private outRefs: number[] = [];
  private endAfterOut = false;
  /**
   * The answers not yet written, counted from their making (backpressure.ts),
   * and the references each write still in the socket holds: the socket
   * calls back its writes in order, so one shared callback drops the
   * oldest's (no closure per write, and Node merges the callbacks of writes
   * that complete at once into one tick).
   */
  private readonly unsent = new UnsentAnswers();
  private readonly written = (): void => {
    const refs = this.unsent.written();
    if (refs !== undefined && refs.length > 0) this.releaseAll(refs);
    if (this.unsentFull) this.checkUnsent();
  };
  /**
   * The reader is suspended (and the socket paused): the answers not yet
   * written, or those waiting for other shards, passed their bounds; until
   * they are down to half (backpressure.ts).
   */
  private unsentFull = false;
  /** The most bytes the reader held unparsed. */
  private peakHeld = 0;
  private incoming: Incoming | undefined;
  /** Unix seconds, read once per socket read. */
  private readAt = 0;
  private closed = false;
  private paused = false;
  /** The client half-closed while the reader was suspended: end once what it sent is done. */
  private endWhenResumed = false;
  /** `stats conns`: the socket's descriptor, and when (Unix seconds) its last command came. */
  readonly id: number;
  private lastCommand = Math.floor(Date.now() / 1000);
  /** Every command a line asks for (the classic ones, which hand meta commands on). */
  private readonly commands: ClassicCommands;
  /** A get of many keys waiting between two keys for the socket, if any (multi-get.ts). */
  private getting: MultiGet | undefined;
  /** Requests run since the last socket read or yield (-R). */
  private requestsThisEvent = 0;
  /** The reader is suspended for a yield (-R). */
  private yielded = false;
  /** The reader is suspended until every shard has done this connection's flush_all. */
  private flushing = false;
  /** Unix second of the last bytes from the client (-o idle_timeout). */
  private lastRead = Math.floor(Date.now() / 1000);
  private readonly endYield = (): void => {
    this.yielded = false;
    this.requestsThisEvent = 0;
    this.resumeIfFree();
  };

  constructor(socket: Socket, ctx: CommandContext) {
    this.socket = socket;
    this.ctx = ctx;
    this.reader = new RequestReader(this, ctx.config.protocol === "auto");
    this.id = descriptorOf(socket);
    this.commands = new ClassicCommands(this);
    ctx.counters[STAT.curr_connections]++;
    ctx.counters[STAT.total_connections]++;
    socket.setNoDelay(true);
    // Keys are bytes (read as latin1, one char a byte): an answer that echoes one (k, me, cachedump) writes it back byte for byte.
    socket.setDefaultEncoding("latin1");
    socket.on("data", (chunk: Buffer) => this.received(chunk));
    // The client finished sending: answer what it asked, then close (the server runs with allowHalfOpen).
    socket.on("end", () => {
      if (this.reader.suspended) {
        this.endWhenResumed = true;
        return;
      }
      this.endAfter();
      this.flushOut();
    });
    socket.on("error", () => {}); // a reset by the client; "close" follows
    socket.on("close", () => this.closedByEither());
    socket.on("drain", () => this.maybeResume());
  }

  private received(chunk: Buffer): void {
    if (this.closed) return;
    this.lastRead = this.readAt = Math.floor(Date.now() / 1000);
    if (!this.yielded) this.requestsThisEvent = 0;
    this.ctx.counters[STAT.bytes_read] += chunk.length;
    this.feed(chunk);
    // The reader holds what it cannot parse yet (a yield, a reservation, answers unwritten): not without bound.
    const held = this.reader.heldBytes;
    if (held > this.peakHeld) this.peakHeld = held;
    if (held > MAX_HELD_BYTES) this.pause();
  }

  /** What this connection holds of its client's making (census: shard.ts). */
  holding(): Holding {
    const u = this.unsent;
    return { unsentBytes: u.bytes, unsentPieces: u.pieces, peakUnsentBytes: u.peakBytes, peakUnsentPieces: u.peakPieces, stopped: this.unsentFull ? 1 : 0, heldBytes: this.reader.heldBytes, peakHeldBytes: this.peakHeld };
  }

  /** Push bytes to the reader (or, with none, resume it), then write the answers. */
  private feed(chunk: Buffer | undefined): void {
    this.readAt = Math.floor(Date.now() / 1000);
    try {
      if (chunk !== undefined) this.reader.push(chunk);
      // A get of many keys waiting for the socket goes on first: what the reader holds came after it.
      else if (this.getting === undefined || this.getMore()) this.reader.resume();
    } catch (e) {
      // A defect here must not take the shard down: answer, and end this connection.
      this.reader.stop();
      this.answer(line(`SERVER_ERROR ${(e as Error)?.message ?? String(e)}`.replace(/[\r\n]+/g, " ")));
      this.endAfter();
      this.flushOut();
      return;
    }
    // A read cut by a yield (-R) writes its answers once the rest of it has run (endYield): one write
    // a read, as without the yield (a write per yield: pipelined, 32 requests a read, -R 20 made
    // 107-131k requests/s of 154-182k; the answers so far wait one turn of the loop).
    if (!this.yielded) this.flushOut();
  }

  // ---- ReaderSink ----

  line(text: string, bytes: number): number {
    // -R: after that many requests in one read, the others on this shard get a turn (memcached's conn_yields).
    if (++this.requestsThisEvent >= this.ctx.config.requestsPerEvent) this.yieldAfterThis();
    this.lastCommand = this.readAt;
    const data = this.commands.run(text, bytes);
    this.checkUnsent();
    return data;
  }

  data(chunk: Buffer, start: number, end: number): void {
    const inc = this.incoming;
    if (inc === undefined || inc.ptr === 0) return;
    chunk.copy(this.ctx.views.bytes, inc.at, start, end);
    inc.at += end - start;
  }

  dataEnd(): void {
    const inc = this.incoming;
    this.incoming = undefined;
    if (inc === undefined || inc.ptr === 0) return;
    storeReceived(this, inc.cmd, inc.ptr, inc.ref);
  }

  binary(request: Buffer): void {
    // A binary response (header as memcached's protocol_binary.h) a binary client can read, then the end.
    const body = Buffer.from(BINARY_REFUSAL, "latin1");
    const header = Buffer.alloc(24);
    header[0] = 0x81; // response magic
    header[1] = request.length > 1 ? request[1]! : 0; // the request's opcode
    header.writeUInt16BE(0x0083, 6); // status: not supported
    header.writeUInt32BE(body.length, 8);
    if (request.length >= 16) request.copy(header, 12, 12, 16); // its opaque
    this.answer(Buffer.concat([header, body]));
    this.endAfter();
  }

  lineTooLong(get: boolean): void {
    // memcached closes without a word on a line with no \n in 2048 bytes; a get past shardheap's own
    // bound (memcached has none) is told why.
    if (get) this.answer(word(REPLY.LINE_TOO_LONG));
    this.endAfter();
  }

  // ---- requests ----

  // ---- CommandHost ----

  now(): number {
    return this.readAt;
  }

  /** A get of many keys: answered until done, or until the socket has written half the connection's unsent answers (the reader suspended meanwhile: checkUnsent). */
  runGet(g: MultiGet): void {
    if (!g.run()) this.getting = g;
  }

  /** Go on with the get that waited; whether it is done. */
  private getMore(): boolean {
    if (!this.getting!.run()) return false;
    this.getting = undefined;
    return true;
  }

  /** A get's hit: its answer now, straight into `out` when nothing waits, its reference dropped once written. */
  hit(ref: number, withCas: boolean, last: boolean): void {
    const ptr = this.ctx.map.valuePointer(ref);
    if (this.queue.length === 0) {
      const out = this.out;
      const from = out.length;
      itemAnswer(this.ctx.views, ptr, withCas, last, out);
      for (let i = from; i < out.length; i++) this.unsent.add(out[i]!);
      this.outRefs.push(ref);
    } else {
      const chunks: Chunk[] = [];
      itemAnswer(this.ctx.views, ptr, withCas, last, chunks);
      this.unsent.addAll(chunks);
      this.queue.push(ready(chunks, [ref]));
    }
  }

  full(): boolean {
    this.checkUnsent();
    return this.unsentFull;
  }

  /** A storage command's line: its data goes into the entry reserved for it (storing.ts reserveItem), or nowhere when refused. */
  beginStore(cmd: MetaStoreCommand): number {
    const { ptr, ref } = reserveItem(this, cmd);
    this.incoming = { cmd, ptr, ref, at: ptr === 0 ? 0 : this.ctx.views.dataStart(ptr) };
    return cmd.bytes + 2;
  }

  holdReadingUntil(done: Promise<unknown>): void {
    this.flushing = true;
    this.reader.suspend();
    const go = (): void => {
      this.flushing = false;
      this.resumeIfFree();
    };
    done.then(go, go);
  }

  endAfterAnswers(): void {
    this.reader.stop();
    this.endAfter();
  }

  /** Go on reading unless something else still holds the reader: a yield, unsent answers. */
  private resumeIfFree(): void {
    // Not once the socket is destroyed (reset by the client, or on an error): it calls back every write
    // not yet done, with ERR_STREAM_DESTROYED, on the next tick, and its 'close' (closedByEither) comes
    // only in the loop's close phase. Going on from those callbacks, a get stopped at the bound answered
    // the rest of its line into the dead socket, a write and an error each time: 8 gets of 400,000 keys
    // of 100 KB items, ~9,500 writes each, kept both shards from anything else for 15-40 s.
    if (!this.closed && !this.socket.destroyed && !this.yielded && !this.flushing && !this.unsentFull) this.resumeReading();
  }

  /** Go on reading what the suspended reader holds, then end if the client half-closed meanwhile. */
  private resumeReading(): void {
    this.feed(undefined);
    if (this.endWhenResumed && !this.reader.suspended) {
      this.endWhenResumed = false;
      this.endAfter();
      this.flushOut();
    }
    this.maybeResume();
  }

  /**
   * Stop reading once this line is done, until the loop's next turn
   * (setImmediate: after the I/O of other connections).
   */
  private yieldAfterThis(): void {
    if (this.yielded) return;
    this.yielded = true;
    this.ctx.counters[STAT.conn_yields]++;
    // The reader holds what follows this line, and whatever arrives meanwhile (reader.ts suspend): for
    // one turn of the loop, so the socket keeps reading (pausing and resuming it cost a read stop and
    // start per yield: pipelined, 32 requests a read, -R 20 made 116-119k requests/s of 139-178k).
    this.reader.suspend();
    setImmediate(this.endYield);
  }

  /** Seconds since the client last sent anything; 0 while this connection waits on its own work (answers to come, a half-read value). */
  idleSince(now: number): number {
    if (this.queue.length > 0 || this.reader.suspended || this.reader.inData) return 0;
    return now - this.lastRead;
  }

  /** Close an idle connection (-o idle_timeout), counted as memcached's idle_kicks. */
  kickIdle(): void {
    if (this.closed) return;
    this.ctx.counters[STAT.idle_kicks]++;
    this.socket.destroy();
  }

  /** `stats conns`: this connection's lines; `asking`: it is the one that asked. */
  describe(now: number, asking: boolean): ConnEntry {
    const s = this.socket;
    const state = asking ? "conn_parse_cmd" : this.incoming !== undefined ? (this.incoming.ptr === 0 ? "conn_swallow" : "conn_nread") : this.queue.length > 0 || s.writableLength > 0 ? "conn_mwrite" : "conn_waiting";
    return {
      id: this.id,
      lines: [
        ["addr", addressText(s.remoteAddress, s.remotePort, s.remoteFamily)],
        ["listen_addr", addressText(s.localAddress, s.localPort, s.localFamily)],
        ["state", state],
        ["secs_since_last_cmd", Math.max(0, now - this.lastCommand)],
      ],
    };
  }

  // ---- answers in order ----

  /** An answer ready now: straight to `out`, or behind the answers still waiting. */
  answer(chunk: Chunk): void {
    this.unsent.add(chunk);
    if (this.queue.length === 0) this.out.push(chunk);
    else this.queue.push(ready([chunk], []));
  }

  /** A place in line now for an answer other shards will complete (a SERVER_ERROR if they fail: one failed, or is stopping). */
  answerLater(answer: Promise<Chunk>): void {
    const place = this.placeInLine();
    answer.then(
      (chunk) => this.settle(place, [chunk], []),
      (e: unknown) => this.settle(place, [serverError(e)], []),
    );
  }

  /** A place in line for an answer other shards will complete. */
  private placeInLine(): Pending {
    const p: Pending = { chunks: [], refs: [], ready: false, close: false, promised: 0, dropped: false };
    this.queue.push(p);
    return p;
  }

  /** An answer of several pieces ready now (meta-commands.ts), behind any still waiting. */
  answerAll(chunks: Chunk[], refs: number[]): void {
    this.unsent.addAll(chunks);
    if (this.queue.length === 0) {
      for (const c of chunks) this.out.push(c);
      for (const r of refs) this.outRefs.push(r);
    } else {
      this.queue.push(ready(chunks, refs));
    }
  }

  private settle(p: Pending, chunks: Chunk[], refs: number[]): void {
    if (this.closed || p.dropped) {
      this.releaseAll(refs);
      return;
    }
    this.unsent.promise(-p.promised);
    p.chunks = chunks;
    p.refs = refs;
    p.ready = true;
    this.unsent.addAll(chunks);
    while (this.queue.length > 0 && this.queue[0]!.ready) {
      const head = this.queue.shift()!;
      for (const c of head.chunks) this.out.push(c);
      for (const r of head.refs) this.outRefs.push(r);
      if (head.close) {
        this.endAfterOut = true;
        this.dropQueue();
      }
    }
    // Once the other answers completed in this turn are in too: a write per answer made the socket
    // writes (writev) 15% of a shard's time under the pipelined bench load at --smp 2, when answers
    // came back from other shards.
    if (!this.flushQueued) {
      this.flushQueued = true;
      queueMicrotask(this.flushQueuedOut);
    }
    this.checkUnsent();
  }

  private flushQueued = false;
  private readonly flushQueuedOut = (): void => {
    this.flushQueued = false;
    this.flushOut();
  };

  /** End the connection once every answer so far is written. */
  private endAfter(): void {
    if (this.queue.length === 0) this.endAfterOut = true;
    else this.queue.push(ready([], [], true));
  }

  /**
   * An answer ended the connection: nothing after it in line is written (a
   * get of many keys whose owner failed: its keys after that one, and
   * what came after it).
   */
  private dropQueue(): void {
    this.getting = undefined;
    this.reader.stop();
    for (const p of this.queue) {
      if (p.ready) {
        this.unsent.discard(lengthOf(p.chunks), p.chunks.length);
        this.releaseAll(p.refs);
      } else {
        p.dropped = true;
        this.unsent.promise(-p.promised);
      }
    }
    this.queue.length = 0;
  }

  /** Write `out` (one corked writev), its references dropped when the socket has taken it. */
  private flushOut(): void {
    const out = this.out;
    const refs = this.outRefs;
    if (out.length > 0) {
      this.out = [];
      this.outRefs = [];
      const socket = this.socket;
      const bytes = lengthOf(out);
      if (this.closed || socket.writableEnded || socket.destroyed) {
        this.unsent.discard(bytes, out.length);
        this.releaseAll(refs);
      } else {
        this.ctx.counters[STAT.bytes_written] += bytes;
        this.unsent.handed(bytes, out.length, refs);
        const done = this.written;
        if (out.length === 1) {
          socket.write(out[0]!, done);
        } else {
          socket.cork();
          const last = out.length - 1;
          for (let i = 0; i < last; i++) socket.write(out[i]!);
          socket.write(out[last]!, done);
          socket.uncork();
        }
      }
    }
    if (this.endAfterOut && !this.closed) {
      this.endAfterOut = false;
      this.reader.stop();
      this.socket.end();
    }
  }

  private pause(): void {
    if (this.paused) return;
    this.paused = true;
    this.socket.pause();
  }

  /**
   * Read the socket again unless something still holds it: a suspended
   * reader that waits for its socket (answers not yet written), or what
   * the reader holds (it may hold a little while
   * it yields: the socket reads meanwhile).
   */
  private maybeResume(): void {
    if (!this.paused || this.closed || this.unsentFull) return;
    if (this.reader.heldBytes > MAX_HELD_BYTES / 2) return;
    this.paused = false;
    this.socket.resume();
  }

  /**
   * After answers were made, written or completed by another shard: stop
   * reading (the reader and the socket) past the bounds (backpressure.ts),
   * read again once down to half.
   */
  private checkUnsent(): void {
    if (this.closed) return;
    const waiting = this.queue.length;
    if (this.unsent.over(waiting)) {
      if (this.unsentFull) return;
      this.unsentFull = true;
      this.reader.suspend();
      this.pause();
      // What is made goes to the socket now, so its write can call back (a yielded reader writes only once it resumes).
      this.flushOut();
    } else if (this.unsentFull && this.unsent.drained(waiting)) {
      this.unsentFull = false;
      this.resumeIfFree();
    }
  }

  /** Drop the references answers held (the map frees an item out of the map once its last one goes). */
  private releaseAll(refs: number[]): void {
    const map = this.ctx.map;
    for (const ref of refs) map.release(ref);
  }

  private closedByEither(): void {
    if (this.closed) return;
    this.closed = true;
    this.reader.stop();
    this.ctx.counters[STAT.curr_connections]--;
    // Half a value, its client gone.
    const inc = this.incoming;
    this.incoming = undefined;
    if (inc !== undefined && inc.ptr !== 0) this.ctx.store.giveUp(inc.ref);
    // What the socket will never write.
    for (const refs of this.unsent.clear()) this.releaseAll(refs);
    this.releaseAll(this.outRefs);
    this.outRefs = [];
    this.out = [];
    this.getting = undefined;
    for (const p of this.queue) if (p.ready) this.releaseAll(p.refs);
    this.queue.length = 0;
  }

  /** Close now (the server is stopping). */
  destroy(): void {
    this.socket.destroy();
  }
}
