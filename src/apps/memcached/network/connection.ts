/**
 * One client connection, on the shard that accepted it: bytes in
 * (reader.ts frames them, protocol.ts reads each line), each request run
 * here, on this shard, whatever its key (store.ts: the cache's one index,
 * read and written by every shard), answers out in request order. A get
 * reads the index in place: no message (lookup).
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
import type { SharedHeap } from "../../../memory/shared-heap.js";
import type { SharedMap } from "../../../memory/shared-map/shared-map.js";
import { VERSION, cacheBytesPerShard, type ServerConfig } from "../config.js";
import { MARK_KEY_BINARY, itemSize, type ItemViews } from "../store/item.js";
import { MODE_SET, REPLY, absoluteExptime, expired, parseCommand, parseU32 } from "../protocol/protocol.js";
import { MAX_HELD_BYTES, UnsentAnswers, type Holding } from "./backpressure.js";
import { MetaCommands, type MetaStoreCommand } from "../commands/meta-commands.js";
import { END, getKey, itemAnswer, MultiGet, type GetHost } from "../commands/multi-get.js";
import { RequestReader, type ReaderSink } from "../protocol/reader.js";
import type { PrefixCounts, PrefixStats } from "../stats/prefix-stats.js";
import { formatPrefixDump } from "../stats/prefix-stats.js";
import { ITEM_CLASSES } from "../stats/item-classes.js";
import { formatItems, formatSlabs } from "../stats/stats-classes.js";
import { addressText, descriptorOf, formatConns, type ConnEntry } from "../stats/stats-conns.js";
import { formatSettings, formatStats, STAT } from "../stats/stats.js";
import { R_DELETED, R_EXISTS, R_NO_MEMORY, R_NON_NUMERIC, R_NOT_FOUND, R_NOT_STORED, R_STORED, R_TOUCHED, type ItemStore } from "../store/store.js";

/** What a connection needs of its shard (shard.ts builds it). */
export interface ConnectionContext {
  readonly shard: number;
  readonly shards: number;
  readonly views: ItemViews;
  readonly store: ItemStore;
  /** This thread's SharedMap object of the cache's index (the store's). */
  readonly map: SharedMap;
  readonly heap: SharedHeap;
  readonly config: ServerConfig;
  /** This shard's row of counters. */
  readonly counters: Float64Array;
  /** Every shard's row of counters, by shard (read only: each is its shard's to write). */
  readonly rows: readonly Float64Array[];
  /** This shard's `stats detail` counts (on or off on every shard at once). */
  readonly detail: PrefixStats;
  /** Run a task (shard.ts) on every shard, this one too; results in shard order. */
  everyShard<T>(task: string, arg?: unknown): Promise<T[]>;
  /** flush_all on every shard: this one at once, the others by message. */
  flushAll(delay: number): Promise<void>;
  /** Every shard has taken back what others handed over to it (item-cache.ts drain): its counts are those of its items. */
  settled(): Promise<void>;
  /** A get found no item for `key`: get_flushed, here or on the shard whose flush_all removed it. */
  missed(key: string): void;
  /** stats reset on every shard. */
  resetStats(): Promise<void>;
}

type Chunk = Buffer | string;

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

const line = (text: string): Buffer => Buffer.from(`${text}\r\n`, "latin1");
/** Fixed answers as buffers, made once. */
const WORDS = new Map<string, Buffer>(Object.values(REPLY).map((w) => [w, line(w)]));
const word = (w: string): Buffer => WORDS.get(w) ?? line(w);
const VERSION_LINE = line(`VERSION ${VERSION}`);
/** Store results (store.ts R_*) -> answers. */
const STORE_ANSWER: Record<number, string> = {
  [R_STORED]: REPLY.STORED,
  [R_NOT_STORED]: REPLY.NOT_STORED,
  [R_EXISTS]: REPLY.EXISTS,
  [R_NOT_FOUND]: REPLY.NOT_FOUND,
  [R_DELETED]: REPLY.DELETED,
  [R_TOUCHED]: REPLY.TOUCHED,
  [R_NO_MEMORY]: REPLY.NO_MEMORY_STORING,
};
const noop = (): void => {};
/** The bytes `chunks` will write (strings are written as latin1: one byte a char). */
const lengthOf = (chunks: readonly Chunk[]): number => {
  let bytes = 0;
  for (const c of chunks) bytes += c.length;
  return bytes;
};
/** An answer ready in line. */
const ready = (chunks: Chunk[], refs: number[], close = false): Pending => ({ chunks, refs, ready: true, close, promised: 0, dropped: false });
/** cache_memlimit's bounds, in megabytes, and its answers, as memcached's. */
const MIN_MEMLIMIT_MB = 8;
const MAX_MEMLIMIT_MB = 1_000_000_000;
const MEMLIMIT_TOO_SMALL = "MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m";
const MEMLIMIT_NOT_BYTES = "MEMLIMIT_ADJUST_FAILED input value is megabytes not bytes";
const MEMLIMIT_FAILED = "MEMLIMIT_ADJUST_FAILED out of bounds or unable to adjust";
/** memcached's cap on a cachedump answer. */
const CACHEDUMP_BYTES = 2 << 20;
const DETAIL_USAGE = "CLIENT_ERROR usage: stats detail on|off|dump";
/** A binary request's answer: the response magic, status 0x0083 "not supported", a text body. */
const BINARY_REFUSAL = "shardheap memcached speaks the ASCII protocol only";

export class Connection implements ReaderSink {
  private readonly socket: Socket;
  private readonly ctx: ConnectionContext;
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
  private now = 0;
  private closed = false;
  private paused = false;
  /** The client half-closed while the reader was suspended: end once what it sent is done. */
  private endWhenResumed = false;
  /** `stats conns`: the socket's descriptor, and when (Unix seconds) its last command came. */
  readonly id: number;
  private lastCommand = Math.floor(Date.now() / 1000);
  /** mg, ms, md, ma, mn, me (meta-commands.ts). */
  private readonly meta: MetaCommands;
  /** get, gets, gat, gats (multi-get.ts), and the one of many keys waiting between two keys for the socket, if any. */
  private readonly gets: GetHost;
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

  constructor(socket: Socket, ctx: ConnectionContext) {
    this.socket = socket;
    this.ctx = ctx;
    this.reader = new RequestReader(this, ctx.config.protocol === "auto");
    this.id = descriptorOf(socket);
    this.meta = new MetaCommands({
      ctx,
      now: () => this.now,
      answer: (chunks, refs) => this.deliver(chunks, refs),
      beginStore: (cmd) => this.beginStore(cmd),
    });
    this.gets = {
      ctx,
      now: () => this.now,
      lookup: (key) => this.lookup(key),
      hit: (ref, withCas, last) => this.hit(ref, withCas, last),
      answer: (chunk) => this.answer(chunk),
      full: () => {
        this.checkUnsent();
        return this.unsentFull;
      },
    };
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
    this.lastRead = this.now = Math.floor(Date.now() / 1000);
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
    this.now = Math.floor(Date.now() / 1000);
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
    const data = this.command(text, bytes);
    this.checkUnsent();
    return data;
  }

  private command(text: string, bytes: number): number {
    // -R: after that many requests in one read, the others on this shard get a turn (memcached's conn_yields).
    if (++this.requestsThisEvent >= this.ctx.config.requestsPerEvent) this.yieldAfterThis();
    const cmd = parseCommand(text, bytes);
    this.lastCommand = this.now;
    switch (cmd.kind) {
      case "get": {
        const touchTo = cmd.touch ? absoluteExptime(cmd.exptime, this.now) : undefined;
        if (typeof cmd.keys === "string") getKey(this.gets, cmd.keys, cmd.withCas, touchTo, true, this.ctx.detail.enabled);
        else this.getMany(new MultiGet(this.gets, cmd.keys, cmd.withCas, touchTo));
        return 0;
      }
      case "store":
        if (this.ctx.detail.enabled) this.ctx.detail.set(cmd.key);
        return this.beginStore(cmd);
      case "delete":
        if (this.ctx.detail.enabled) this.ctx.detail.delete(cmd.key);
        this.result(this.ctx.store.delete(cmd.key, this.now), cmd.noreply);
        return 0;
      case "arith":
        this.result(this.ctx.store.arith(cmd.key, cmd.incr, cmd.delta, this.now), cmd.noreply);
        return 0;
      case "touch":
        this.result(this.ctx.store.touch(cmd.key, absoluteExptime(cmd.exptime, this.now), this.now), cmd.noreply);
        return 0;
      case "flush": {
        this.ctx.counters[STAT.cmd_flush]++;
        // As memcached: counted, then refused (-F), then the delay read.
        if (!this.ctx.config.flushAllowed || cmd.delay === undefined) {
          if (!cmd.noreply) this.answer(word(this.ctx.config.flushAllowed ? REPLY.BAD_EXPTIME : REPLY.FLUSH_REFUSED));
          return 0;
        }
        const done = this.ctx.flushAll(cmd.delay);
        this.whenDone(done, word(REPLY.OK), cmd.noreply);
        // Nothing after it runs until every shard has flushed: a get reads the index directly, and saw
        // the other shard's items still there (memcached-memory.test.ts: flush_all, then a get, pipelined).
        this.flushing = true;
        this.reader.suspend();
        const go = (): void => {
          this.flushing = false;
          this.resumeIfFree();
        };
        done.then(go, go);
        return 0;
      }
      case "version":
        this.answer(VERSION_LINE);
        return 0;
      case "verbosity":
        if (!cmd.noreply) this.answer(word(REPLY.OK));
        return 0;
      case "stats":
        this.stats(cmd.args);
        return 0;
      case "memlimit":
        this.memoryLimit(cmd.megabytes, cmd.noreply);
        return 0;
      case "quit":
        this.reader.stop();
        this.endAfter();
        return 0;
      case "meta":
        return this.meta.run(cmd.tokens);
      case "answer":
        this.answer(word(cmd.reply));
        return 0;
      case "error":
        if (!cmd.noreply) this.answer(word(cmd.reply));
        if (cmd.close) {
          this.reader.stop();
          this.endAfter();
          return 0;
        }
        // A malformed storage line's data block: skipped, never run as commands.
        return cmd.swallow;
    }
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
    const { ctx } = this;
    const { cmd, ptr } = inc;
    if (!ctx.views.terminated(ptr)) {
      ctx.store.giveUp(inc.ref);
      if (!cmd.noreply) this.answer(word(REPLY.BAD_DATA_CHUNK));
      return;
    }
    const meta = cmd.meta;
    if (meta === undefined) {
      const result = ctx.store.storeReserved(cmd.mode, cmd.key, inc.ref, cmd.cas, this.now);
      if (!cmd.noreply) this.answer(word(STORE_ANSWER[result]!));
      return;
    }
    const stored = ctx.store.storeMeta(cmd.mode, cmd.key, inc.ref, cmd.cas, this.now, { casIn: meta.casIn, invalidate: meta.invalidate, vivify: meta.vivify });
    const chunk = this.meta.storeAnswer(meta, cmd.bytes, stored);
    if (chunk !== undefined) this.answer(chunk);
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

  /** A get of many keys: answered until done, or until the socket has written half the connection's unsent answers (the reader suspended meanwhile: checkUnsent). */
  private getMany(g: MultiGet): void {
    if (!g.run()) this.getting = g;
  }

  /** Go on with the get that waited; whether it is done. */
  private getMore(): boolean {
    if (!this.getting!.run()) return false;
    this.getting = undefined;
    return true;
  }

  /**
   * A get's lookup, on this thread, in the cache's index: a reference to
   * the live item, or 0. Counted by this shard: cmd_get, and a hit or a
   * miss. An expired item is a miss, taken out of the map here.
   */
  private lookup(key: string): number {
    const { ctx } = this;
    const c = ctx.counters;
    c[STAT.cmd_get]++;
    const map = ctx.map;
    const ref = map.acquire(key);
    if (ref !== 0) {
      const ptr = map.valuePointer(ref);
      if (!expired(ctx.views.exptime(ptr), this.now)) {
        c[STAT.get_hits]++;
        ctx.views.setReferenced(ptr, true);
        // The meta protocol's l and me's la: the last hit, in the header line the referenced byte is in.
        ctx.views.setAccessed(ptr, this.now);
        return ref;
      }
      c[STAT.get_expired]++;
      ctx.store.cache.expire(ref, ptr);
      map.release(ref);
    } else {
      ctx.missed(key);
    }
    c[STAT.get_misses]++;
    return 0;
  }

  /** A get's hit: its answer now, straight into `out` when nothing waits, its reference dropped once written. */
  private hit(ref: number, withCas: boolean, last: boolean): void {
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

  /** A storage command's line: an entry reserved in this shard's memory for the item its data fills (0: refused). */
  private beginStore(cmd: MetaStoreCommand): number {
    const { ctx } = this;
    const size = itemSize(cmd.key.length, cmd.flags, cmd.bytes);
    if (size > ctx.config.maxItemSize) {
      ctx.counters[STAT.store_too_large]++;
      if (!cmd.noreply) this.answer(word(REPLY.TOO_LARGE));
      this.beginData(cmd, 0, true);
    } else {
      this.beginData(cmd, ctx.store.reserve(cmd.key, size), false);
    }
    return cmd.bytes + 2;
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

  /**
   * Where the data goes: the entry `ref` reserved for it, or, with 0,
   * nowhere (refused: for want of memory, answered here, unless
   * `answered` says the refusal was answered already).
   */
  private beginData(cmd: MetaStoreCommand, ref: number, answered: boolean): void {
    const { ctx } = this;
    const ptr = ref === 0 ? 0 : ctx.map.valuePointer(ref);
    if (ptr === 0) {
      if (!answered) {
        ctx.counters[STAT.store_no_memory]++;
        if (!cmd.noreply) this.answer(word(REPLY.NO_MEMORY_STORING));
      }
      // memcached: a set that fails leaves no stale value behind.
      if (cmd.mode === MODE_SET) ctx.store.forget(cmd.key);
    } else {
      // The allocated size is the store's to write when it links the item (item-cache.ts link).
      ctx.views.writeHead(ptr, 0, cmd.key, cmd.flags, absoluteExptime(cmd.exptime, this.now), cmd.bytes);
      if (cmd.meta?.flags.binary) ctx.views.setMarks(ptr, MARK_KEY_BINARY);
    }
    this.incoming = { cmd, ptr, ref, at: ptr === 0 ? 0 : ctx.views.dataStart(ptr) };
  }

  /** A one-key command's result, answered unless noreply. */
  private result(r: string | number, noreply: boolean): void {
    if (!noreply) this.answer(this.resultLine(r, REPLY.NO_MEMORY));
  }

  /**
   * `stats` and its subcommands, as memcached 1.6 answers them (extra
   * arguments ignored, as memcached does). A plain `stats` (and settings,
   * slabs, cachedump...) after operations this connection sent to other
   * shards waits for their answers, so what it shows counts them.
   */
  private stats(args: string[]): void {
    const { ctx } = this;
    const sub = args[0];
    const config = ctx.config;
    switch (sub) {
      case undefined:
        return this.statsAnswer(() => formatStats(config, ctx.heap));
      case "reset":
        return this.whenDone(ctx.resetStats(), word(REPLY.RESET), false);
      case "settings":
        return this.statsAnswer(() => formatSettings(config, ctx.detail.enabled));
      case "slabs":
        return this.statsAnswer(() => formatSlabs(config, ctx.heap));
      case "items":
        return this.statsLater(() => ctx.everyShard<number[]>("classAges").then((ages) => formatItems(config, ages)));
      case "sizes":
        // memcached tracks the item size histogram only with -o track_sizes, which this server does not offer.
        return this.answer("STAT sizes_status disabled\r\nEND\r\n");
      case "detail":
      case "cachedump":
        // memcached's -X turns both off, in its words.
        if (!config.dumpEnabled) return this.answer(line(`CLIENT_ERROR stats ${sub} not allowed`));
        return sub === "detail" ? this.statsDetail(args[1], args[2]) : this.cachedump(args);
      case "conns": {
        const asking = ctx.shard * 2 ** 32 + this.id;
        return this.statsLater(() => ctx.everyShard<ConnEntry[]>("connectionList", asking).then(formatConns));
      }
      default:
        return this.answer(word(REPLY.ERROR));
    }
  }

  /** A stats answer made here, once every shard has taken back what others handed over (so the counts are its items'). */
  private statsAnswer(make: () => string): void {
    this.statsLater(async () => make());
  }

  /** A stats answer other shards help make, once every shard has taken back what others handed over. */
  private statsLater(make: () => Promise<string>): void {
    const pending = this.later();
    this.ctx
      .settled()
      .then(make)
      .then(
        (text) => this.settle(pending, [text], []),
        (e: unknown) => this.settle(pending, [this.failure(e instanceof Error ? e : new Error(String(e)))], []),
      );
  }

  /** `stats detail on|off|dump`; `dump bytes` adds each prefix's live item bytes (prefix-stats.ts). */
  private statsDetail(what: string | undefined, extra: string | undefined): void {
    const { ctx } = this;
    if (what === "on" || what === "off") {
      // Here at once, so the commands that follow on this connection are counted (or not); the other shards by message.
      ctx.detail.enabled = what === "on";
      this.whenDone(ctx.everyShard("statsDetail", what === "on").then(noop), word(REPLY.OK), false);
    }
    else if (what === "dump") this.statsLater(() => ctx.everyShard<PrefixCounts[]>("prefixCounts", extra === "bytes").then(formatPrefixDump));
    else this.answer(line(DETAIL_USAGE));
  }

  /** `stats cachedump <class> <limit>`: the class's items, each shard's most recent first, up to 2 MB as memcached. */
  private cachedump(args: string[]): void {
    if (args.length < 3) return this.answer(line("CLIENT_ERROR bad command line"));
    const id = parseU32(args[1]!);
    const limit = parseU32(args[2]!);
    if (id < 0 || limit < 0) return this.answer(word(REPLY.BAD_FORMAT));
    // memcached's MAX_NUMBER_OF_SLAB_CLASSES (64) bounds the id; its classes past 39 are empty, as here.
    if (id >= 64) return this.answer(line("CLIENT_ERROR Illegal slab id"));
    if (id === 0 || id > ITEM_CLASSES) return this.answer(END);
    this.statsLater(async () => {
      const perShard = await this.ctx.everyShard<Array<[string, number, number]>>("cacheDump", [id, limit, CACHEDUMP_BYTES]);
      let out = "";
      let shown = 0;
      for (const rows of perShard) {
        for (const [key, bytes, exptime] of rows) {
          if (limit !== 0 && shown >= limit) break;
          const text = `ITEM ${key} [${bytes} b; ${exptime} s]\r\n`;
          if (out.length + text.length + 5 > CACHEDUMP_BYTES) break;
          out += text;
          shown++;
        }
      }
      return out + "END\r\n";
    });
  }

  /** cache_memlimit: the cache's size, split over the shards; no more than the heap holds (memcached's answers otherwise). */
  private memoryLimit(megabytes: number, noreply: boolean): void {
    const say = (text: string): void => {
      if (!noreply) this.answer(line(text));
    };
    if (megabytes < MIN_MEMLIMIT_MB) return say(MEMLIMIT_TOO_SMALL);
    if (megabytes > MAX_MEMLIMIT_MB) return say(MEMLIMIT_NOT_BYTES);
    const { config } = this.ctx;
    const bytes = megabytes * 1024 * 1024;
    // Each shard's items live in its region: a limit past the regions would promise memory that is not there.
    if (bytes > config.shards * cacheBytesPerShard(config)) return say(MEMLIMIT_FAILED);
    this.whenDone(this.ctx.everyShard("setMemoryLimit", bytes).then(noop), word(REPLY.OK), noreply);
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

  /** An operation's result as its answer line. */
  private resultLine(r: string | number, noMemory: string): Chunk {
    if (typeof r === "string") return `${r}\r\n`;
    if (r === R_NON_NUMERIC) return word(REPLY.NON_NUMERIC);
    if (r === R_NO_MEMORY) return word(noMemory);
    return word(STORE_ANSWER[r]!);
  }

  /** Other shards could not answer (one failed or is stopping). */
  private failure(e: Error): Buffer {
    return line(`SERVER_ERROR ${e.message}`.replace(/[\r\n]+/g, " "));
  }

  private whenDone(done: Promise<void>, answer: Buffer, noreply: boolean): void {
    const pending = noreply ? undefined : this.later();
    done.then(
      () => pending && this.settle(pending, [answer], []),
      (e: unknown) => pending && this.settle(pending, [this.failure(e instanceof Error ? e : new Error(String(e)))], []),
    );
  }

  // ---- answers in order ----

  /** An answer ready now: straight to `out`, or behind the answers still waiting. */
  private answer(chunk: Chunk): void {
    this.unsent.add(chunk);
    if (this.queue.length === 0) this.out.push(chunk);
    else this.queue.push(ready([chunk], []));
  }

  /** A place in line for an answer other shards will complete. */
  private later(): Pending {
    const p: Pending = { chunks: [], refs: [], ready: false, close: false, promised: 0, dropped: false };
    this.queue.push(p);
    return p;
  }

  /** An answer of several pieces ready now (meta-commands.ts), behind any still waiting. */
  private deliver(chunks: Chunk[], refs: number[]): void {
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
