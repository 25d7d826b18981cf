/**
 * One thread's end of the messaging buffer (queue-layout.ts): the shard's
 * (or the main thread's) half of Seastar's smp_message_queue. It sends
 * calls and answers into the rings it produces, drains the rings it
 * consumes, runs the tasks it is asked for (shards only), and settles the
 * calls it made.
 *
 * Sending (submitTo, an answer):
 *   1. the record (header, then the value: wire-codec.ts) is written
 *      straight into the ring to the peer when it has room and nothing is
 *      waiting before it; otherwise it is encoded in a scratch buffer and
 *      appended to that peer's OverflowQueue (order kept, nothing dropped,
 *      the thread never blocks), and the consumer is asked to wake us when
 *      it makes room (NEED_SPACE);
 *   2. records are published (one Atomics.store of TAIL) every BATCH
 *      records and at the end of the current job (a microtask), so a burst
 *      of calls costs one store per 16 calls, as Seastar's batch_size;
 *   3. after publishing, the receiver is rung only if it said it sleeps
 *      (SLEEPING, taken by compareExchange so one sender rings).
 * A value that holds a SharedArrayBuffer, or whose encoding is larger
 * than half the ring (maxRecord), goes by the side path: postMessage on a
 * MessagePort between the two threads (created on first use, introduced
 * by the main thread: SideLinks), with a SIDE record in the ring marking
 * its place, so order holds across both paths.
 *
 * Receiving: the endpoint drains every ring it consumes each time its
 * loop turns (a setImmediate while there is work); with nothing to do it
 * sets SLEEPING, checks the rings once more (so a record published just
 * before is not missed: both sides use sequentially consistent atomics,
 * the Dekker pattern), and waits on its BELL word with Atomics.waitAsync,
 * which keeps the event loop free for timers and sockets.
 *
 * Peers that die (Smp notices, marks them DOWN and bumps MEMBERSHIP): on
 * its next turn the endpoint takes the answers the peer published before
 * it died, rejects every other call pending on it with ShardError, forgets
 * what it held for it, acknowledges (ACK), and leaves the peer's rings
 * alone until the main thread has emptied them and marked the peer UP
 * again (its new thread). Calls made meanwhile wait in the overflow queue
 * and go to the new thread; if it cannot start (GONE) they reject.
 * Answers to requests of a dead incarnation are dropped.
 *
 * Delivery is at most once, and a cut-off call says which side of the line
 * it was on (issue 18 item 5: of 20,000 calls cut by a death, 1,724 of the
 * rejected ones had run, and a caller retrying on ShardError ran them
 * twice). The receiver counts the records it takes from each ring and
 * stores the count in the ring's TAKEN word before acting on each; each
 * call remembers its record's number in the stream (Outgoing.records). A
 * call whose number is below TAKEN when its peer died may have run
 * (ERR_SHARDHEAP_CALL_MAY_HAVE_RUN); any other never started
 * (ERR_SHARDHEAP_CALL_NOT_STARTED), and is safe to send again. One
 * Atomics.store per record taken, on the receiver's own cache line.
 */
import type { MessagePort } from "node:worker_threads";
import { ShardError } from "../errors.js";
import { encodeError, encodeThrown, type ErrorRecord, type ThrownRecord } from "./error-codec.js";
import { describeTask, errorMessage, queueFull, rebuildThrown, unsendableArg, unsendableResult } from "./call-errors.js";
import { OverflowQueue } from "./overflow-queue.js";
import {
  ackWord,
  BELL,
  endpointWord,
  EPOCH,
  MEMBERSHIP,
  ringData,
  ringWord,
  SLEEPING,
  STATE,
  STATE_GONE,
  STATE_UP,
  TAKEN,
  type QueueGeometry,
} from "./queue-layout.js";
import { KIND_MASK, recordHeader, RingReader, RingWriter } from "./spsc-ring.js";
import { SHARED_MEMORY, ShapeCache, ShapeTable, WireBytes, WireReader, WireWriter } from "./wire-codec.js";

// Record kinds (spsc-ring.ts owns KIND_PAD = 1). Every record has a
// three-word header: [byteLength << 4 | kind, callId, taskId or 0].
const KIND_REQUEST = 2;
/** A request whose task id is new on this pair: the task's name precedes the argument. */
const KIND_REQUEST_NAMED = 3;
const KIND_RESULT = 4;
const KIND_THROWN = 5;
const KIND_UNSENDABLE = 6;
/** The value is not in the ring: it is the next side-path message from this peer. */
const SIDE = 8;
const HEADER_BYTES = 12;
/** Int32s a pending call keeps in Endpoint.calls. */
const CALL_WORDS = 3;

/** Records published together (Seastar's batch_size). */
const BATCH = 16;
/** Records taken from one ring in one turn, at most: other work gets the loop between. */
const DRAIN_LIMIT = 4096;
/** Below this much contiguous room, encode in scratch rather than try the ring in place. */
const MIN_DIRECT_ROOM = 64;
/**
 * How long an endpoint that waits for answers to its own calls keeps
 * polling with nothing to do before it sleeps (ms); one with no call out
 * sleeps at once. A sleeping receiver costs its sender a futex wake and
 * itself an event-loop wake-up. The window adapts (pollWindow), between
 * MIN_ANSWER_POLL_MS and this: when an answer wakes the endpoint soon
 * after it went to sleep (within ANSWER_POLL_MS), polling longer would
 * have caught it, so the window doubles (at least to 1.5x that wait); when
 * the wake comes later (slow tasks, a flood the callee is still working
 * through), polling only took a core from the callee, so it halves.
 *
 * 50 us, about what one wake-up costs in CPU on these VMs (two threads
 * ping-ponging through Atomics.wait: 75 us of CPU a round trip, two
 * wake-ups, on a quiet machine; 18 us under load), so a poll that misses
 * costs about what the sleep it replaced would have (spin, then block).
 * It was 200 us (Seastar's idle poll). Issue 19 measured a hop's CPU, both
 * shards' threads (bench/messaging-hops.ts, runs of the old and the new
 * code alternating; and in one process with the policies side by side,
 * paired rounds). Requests arriving on sockets, each hopping to the other
 * shard and back, as a server's: on a quiet machine (load 0.3-0.5) 115 us
 * a hop instead of 166-205 at 2k hops/s, 67-76 instead of 82-84 at 10k,
 * the same at 40k (26-28), 8-9 instead of 12-14 in bursts of 16; under
 * load (5-10, paired) 0.64-0.99x. At 200 us two shards calling each other
 * at once each polled for the other, and on 2 cores a poller takes the
 * core its callee needs. The price: calls one after another between idle
 * shards, 38 us of CPU a hop instead of 28-32 on the quiet machine (a
 * 200 us poll kept both threads from ever blocking: 0.03-0.10 sleeps a hop
 * instead of 0.75), though 0.82-0.90x under load, and bench/messaging.ts's
 * sequential calls stayed at 24-25 us (load 2-4). 100 us sat in between
 * (0.80x at 2k hops/s quiet), 25 us was no better than 50. Never polling
 * cost about what 50 us did per hop (0.68-0.99x of 200 under load) but
 * made a flood of calls 1.7x slower (each batch of answers then wakes the
 * caller). Rejected too: polling after work with no call out (an idle
 * window adapting up to 200 us: 1.04-2.7x the CPU; up to 50 us besides
 * this window: 1.03-1.2x), polling for the answer to a call made while
 * the endpoint slept (from a socket callback: 1.12-1.3x), polling only
 * when the callee was awake at the call (1.13x at 2k hops/s with 200 us),
 * and sleeping right after a turn with work instead of looking once more
 * (more wake-ups, no cheaper).
 */
const ANSWER_POLL_MS = 0.05;
const MIN_ANSWER_POLL_MS = 0.0125;
/** Largest record carried in a ring (besides half the ring): anything larger goes by the side path. */
const MAX_RING_RECORD = 256 * 1024;

export type TaskFunction = (arg: unknown, context: unknown) => unknown;

/** What runs the tasks others ask of a shard (shard-worker.ts). The main thread has none. */
export interface TaskHost {
  /** The module's exported function `name`, or undefined. Valid once `ready` has settled. */
  lookup(name: string): TaskFunction | undefined;
  /** Smp.start was given a module (without one there are no tasks at all, and a call says so). */
  readonly hasModule: boolean;
  /** The second argument of every task (the ShardContext). */
  readonly context: unknown;
  /** Settles once the module has loaded (tasks that arrive earlier wait for it, in order). */
  readonly ready: Promise<unknown>;
  /** The endpoint has work (a turn) / has gone to sleep. */
  busy(): void;
  idle(): void;
}

/** Ports for the side path, made on first use (see side-links.ts). */
export interface SideLinks {
  /** A port whose messages arrive at incarnation `peerEpoch` of `peer`'s endpoint as side messages from this one. */
  portTo(peer: number, peerEpoch: number): MessagePort;
  /** Forget the port to `peer` (it went down). */
  drop(peer: number): void;
}

export interface EndpointOptions {
  readonly buffer: SharedArrayBuffer;
  readonly geometry: QueueGeometry;
  /** This endpoint's index (a shard id, or `shards` for the main thread). */
  readonly self: number;
  readonly shards: number;
  readonly links: SideLinks;
  readonly host?: TaskHost;
  /** Hold the process open while calls are pending (the main thread: piscina unrefs idle workers). */
  readonly keepAlive?: boolean;
  /** Calls one peer may have pending from this endpoint at once (Smp.start's maxPendingCalls); Infinity: no bound. */
  readonly maxPendingCalls: number;
}

/** A side-path message: a value holding shared memory, or an encoding too big for the ring. */
type SideMessage = { readonly value: unknown } | { readonly bytes: ArrayBuffer };

class Outgoing {
  readonly overflow = new OverflowQueue();
  /** Task name -> id on this pair (the receiver learns a name with its first request). */
  readonly taskIds = new Map<string, number>();
  /** ... and back: id -> name. */
  taskNames: string[] = [];
  nextTaskId = 0;
  lastTask: string | undefined;
  lastTaskId = 0;
  /** Object shapes sent on this pair (wire-codec.ts). */
  shapes = new ShapeTable();
  /** Records committed since the last publish. */
  batched = 0;
  /**
   * Records that entered this peer's stream (the ring, or the overflow
   * behind it) since its incarnation began, each call's and answer's one:
   * a call's record is number `records - 1` once it is sent, and the peer
   * has taken it iff that is below the ring's TAKEN (item 5).
   */
  records = 0;
  /** The writer encoding a record for this peer in place right now (a nested emit to the peer moves it out of the way). */
  writer: WireWriter | undefined;
  constructor(
    readonly peer: number,
    readonly ring: RingWriter,
    readonly maxRecord: number,
  ) {}
}

class Incoming {
  /** Task names by id, as this peer defined them. */
  tasks: string[] = [];
  /** The functions they name, looked up on first use (the module's exports do not change). */
  fns: Array<TaskFunction | undefined> = [];
  /** Object shapes this peer defined. */
  shapes = new ShapeCache();
  /** Side-path messages received, waiting for their ring records. */
  side: SideMessage[] = [];
  sideHead = 0;
  /** A SIDE record is next and its message has not arrived: stop draining this ring until it does. */
  waitingSide = false;
  port: MessagePort | undefined;
  /** Records taken from the ring since the peer's incarnation began (published in the ring's TAKEN word before each is acted on). */
  taken = 0;
  constructor(
    readonly peer: number,
    readonly ring: RingReader,
    /** Int32 index of the ring's TAKEN word. */
    readonly takenWord: number,
  ) {}
}

/** What the endpoint knows of a peer's incarnation. */
interface PeerState {
  epoch: number;
  up: boolean;
  /** Its thread died and no new one could start: calls to it reject. */
  gone: boolean;
}

/** A request that arrived before the module had loaded. */
interface Deferred {
  inc: Incoming;
  epoch: number;
  callId: number;
  taskId: number;
  arg: unknown;
}

export class Endpoint {
  readonly self: number;
  readonly shards: number;
  private readonly g: QueueGeometry;
  private readonly i32: Int32Array;
  private readonly bytes: WireBytes;
  private readonly writer = new WireWriter();
  private readonly reader: WireReader;
  private readonly out: Array<Outgoing | undefined>;
  private readonly inc: Array<Incoming | undefined>;
  private readonly peers: PeerState[];
  private readonly links: SideLinks;
  private readonly host: TaskHost | undefined;
  private readonly bell: number;
  private readonly sleeping: number;

  // Calls this endpoint made, by id (a slot; reused once settled): what a
  // pending call costs its sender, ~190 B (issue 18 item 8: 266 B measured
  // with 1M calls pending, of which the reject function every promise's
  // executor gets, kept for the rare error, was 64 B and five JS arrays of
  // slots 40 B). Only the resolve function is kept: a rejection resolves
  // the promise with a rejected one. The rest is int32s in `calls`.
  private resolves: Array<((v: unknown) => void) | undefined> = [];
  /** Per id, CALL_WORDS int32s: the peer, the number of its record in the peer's stream (Outgoing.records), its task id there. */
  private calls = new Int32Array(CALL_WORDS * 256);
  /** Ids handed out so far (the next new one). */
  private ids = 0;
  private freeIds: number[] = [];
  /** Calls one peer may have pending from this endpoint (maxPendingCalls). */
  private readonly maxPending: number;
  /** Calls pending per peer, and in all. */
  private readonly pendingTo: number[];
  private pending = 0;
  private settledWaiters: Array<Array<() => void> | undefined> = [];

  private dirty: Outgoing[] = [];
  private overflowing: Outgoing[] = [];
  private flushQueued = false;
  private scheduled = false;
  /** SLEEPING is set and a turn will come only from the bell. */
  private asleep = false;
  /** An Atomics.waitAsync is outstanding. */
  private waiting = false;
  /** host.idle() was the last of busy()/idle() reported (they come in pairs). */
  private idleReported = true;
  /** performance.now() of the last turn that found work. */
  private lastWork = 0;
  /** How long to poll for answers now (ms; see ANSWER_POLL_MS). */
  private pollWindow = ANSWER_POLL_MS;
  /** performance.now() when this endpoint last went to sleep with calls out, or -1. */
  private sleptAt = -1;
  private stopped = false;
  private membership = -1;
  /** emit() calls in progress (more than one: a getter called submitTo). */
  private emitting = 0;
  /** Module not loaded yet: requests wait here, in arrival order. */
  private deferred: Deferred[] | undefined;
  private readonly keepAlive: NodeJS.Timeout | undefined;

  constructor(o: EndpointOptions) {
    this.self = o.self;
    this.shards = o.shards;
    this.g = o.geometry;
    this.i32 = new Int32Array(o.buffer);
    this.bytes = new WireBytes(o.buffer);
    this.reader = new WireReader(this.bytes);
    this.links = o.links;
    this.host = o.host;
    this.maxPending = o.maxPendingCalls;
    const E = this.g.endpoints;
    this.bell = endpointWord(this.g, this.self) + BELL;
    this.sleeping = endpointWord(this.g, this.self) + SLEEPING;
    const maxRecord = Math.min(this.g.ringBytes / 2, MAX_RING_RECORD);
    // The main thread receives no calls, so no ring leads to it from
    // itself; every endpoint sends only to shards, and answers anyone.
    this.out = Array.from({ length: E }, (_, to) =>
      to === this.self && to === this.shards ? undefined : new Outgoing(to, new RingWriter(this.i32, ringWord(this.g, this.self, to), ringData(this.g, this.self, to), this.g.ringBytes), maxRecord),
    );
    this.inc = Array.from({ length: E }, (_, from) =>
      from === this.self && from === this.shards
        ? undefined
        : new Incoming(from, new RingReader(this.i32, ringWord(this.g, from, this.self), ringData(this.g, from, this.self), this.g.ringBytes), ringWord(this.g, from, this.self) + TAKEN),
    );
    this.pendingTo = new Array<number>(E).fill(0);
    this.peers = Array.from({ length: E }, () => ({ epoch: 0, up: true, gone: false }));
    this.readMembership(true);
    if (this.host) {
      this.deferred = [];
      // From an immediate, as every turn (one stack under every task).
      const runDeferred = (): void => void setImmediate(() => this.runDeferred());
      this.host.ready.then(runDeferred, runDeferred);
    }
    if (o.keepAlive) {
      this.keepAlive = setInterval(() => undefined, 1 << 30);
      this.keepAlive.unref();
    }
  }

  /** Start draining (call once, after the peers' side ports can arrive). */
  start(): void {
    this.scheduleTurn();
  }

  /**
   * Stop draining and waiting; pending calls stay pending (the thread is
   * about to end), unless `reason` is given: then each rejects with
   * reason(peer, task, started), `started` saying whether its shard had
   * taken it (call once the shards' threads are gone).
   */
  stop(reason?: (peer: number, task: string, started: boolean) => Error): void {
    this.stopped = true;
    if (this.keepAlive) clearInterval(this.keepAlive);
    if (this.waiting) {
      Atomics.add(this.i32, this.bell, 1);
      Atomics.notify(this.i32, this.bell);
    }
    if (reason) {
      for (let id = 0; id < this.ids; id++) {
        if (this.resolves[id] !== undefined) this.settle(id, false, reason(this.peerOf(id), this.taskOf(id), this.startedOn(id)));
      }
    }
  }

  /** Calls pending on `peer`. */
  pendingOn(peer: number): number {
    return this.pendingTo[peer]!;
  }

  /** Would a call to `peer` now be refused for its bound (maxPendingCalls)? Then the error, naming `call`. */
  refusal(peer: number, call: string): ShardError | undefined {
    return this.pendingTo[peer]! >= this.maxPending ? queueFull(peer, call, this.maxPending) : undefined;
  }

  /** Resolves once no call is pending on `peer`. */
  settledOn(peer: number): Promise<void> {
    if (this.pendingTo[peer] === 0) return Promise.resolve();
    return new Promise((resolve) => (this.settledWaiters[peer] ??= []).push(resolve));
  }

  /** Take a turn soon (the main thread, after it changed MEMBERSHIP). */
  poke(): void {
    this.scheduleTurn();
  }

  /** Is `peer` taking calls (not down, not restarting)? */
  isUp(peer: number): boolean {
    return this.peers[peer]!.up;
  }

  /**
   * Run `task` on shard `peer` with `arg` (validated by the caller; `via`
   * names the call in messages). Rejects with the task's error, a
   * ShardError when the shard is down or goes down first, or a TypeError
   * naming the call when `arg` cannot be cloned (then nothing was sent).
   */
  call(peer: number, task: string, arg: unknown, via: CallName): Promise<unknown> {
    if (this.stopped) return Promise.reject(new ShardError(peer, `${callName(via, peer, task)}: the runtime has stopped`));
    // A peer that is down takes calls all the same: they wait for its new thread.
    if (this.peers[peer]!.gone) return Promise.reject(downError(peer, callName(via, peer, task)));
    if (this.pendingTo[peer]! >= this.maxPending) return Promise.reject(queueFull(peer, callName(via, peer, task), this.maxPending));
    const out = this.out[peer]!;
    // A burst of calls names one task: compare with the last before the Map.
    let taskId = task === out.lastTask ? out.lastTaskId : out.taskIds.get(task);
    const named = taskId === undefined;
    if (taskId === undefined) {
      // Never reused, not even when this call fails: a call made from
      // inside its argument (a getter) may have taken the next one.
      taskId = out.nextTaskId++;
      out.taskIds.set(task, taskId);
      out.taskNames[taskId] = task;
    }
    // Taken now: a call made from inside this one's emit gets another id.
    const id = this.freeIds.length > 0 ? this.freeIds.pop()! : this.newId();
    try {
      this.emit(out, named ? KIND_REQUEST_NAMED : KIND_REQUEST, id, taskId, named ? task : undefined, arg);
    } catch (e) {
      if (named) out.taskIds.delete(task);
      this.freeIds.push(id);
      out.lastTask = undefined;
      return Promise.reject(unsendableArg(callName(via, peer, task), e));
    }
    out.lastTask = task;
    out.lastTaskId = taskId;
    const at = id * CALL_WORDS; // `calls` read after the emit: a call made inside it may have grown it
    this.calls[at] = peer;
    this.calls[at + 1] = out.records - 1;
    this.calls[at + 2] = taskId;
    // One executor for every call (it stores the resolver here): a
    // closure per call is one more allocation on the hottest path.
    const promise = new Promise<unknown>(this.executor);
    this.resolves[id] = this.nextResolve;
    this.pendingTo[peer]!++;
    if (this.pending++ === 0) this.keepAlive?.ref();
    return promise;
  }

  private nextResolve: ((v: unknown) => void) | undefined;
  private readonly executor = (resolve: (v: unknown) => void): void => {
    this.nextResolve = resolve;
  };

  /** A call id never handed out before (the slots grow by doubling). */
  private newId(): number {
    const id = this.ids++;
    if ((id + 1) * CALL_WORDS > this.calls.length) {
      const bigger = new Int32Array(this.calls.length * 2);
      bigger.set(this.calls);
      this.calls = bigger;
    }
    return id;
  }

  private peerOf(id: number): number {
    return this.calls[id * CALL_WORDS]!;
  }

  /** The name of call `id`'s task (for messages; valid while the call is pending). */
  private taskOf(id: number): string {
    return this.out[this.peerOf(id)]!.taskNames[this.calls[id * CALL_WORDS + 2]!]!;
  }

  // ------------------------------------------------------------- sending

  /**
   * Write one record to `out`: in place in the ring when it fits, else via
   * scratch into the ring or the overflow queue, or by the side path.
   * Throws the value's DataCloneError; nothing is written then.
   */
  private emit(out: Outgoing, kind: number, w1: number, w2: number, name: string | undefined, value: unknown): void {
    // A getter inside `value` may itself call submitTo: that nested emit
    // gets a writer of its own (and moves this one out of its way: emitWith).
    const nested = this.emitting++ !== 0;
    const w = nested ? new WireWriter() : this.writer;
    // A nested emit sends keys inline: the outer one may still drop a shape it added.
    w.useShapes(nested ? undefined : out.shapes);
    try {
      this.emitWith(w, out, kind, w1, w2, name, value);
    } finally {
      this.emitting--;
    }
  }

  private emitWith(w: WireWriter, out: Outgoing, kind: number, w1: number, w2: number, name: string | undefined, value: unknown): void {
    // A getter of the value an emit to this same peer is encoding, calling
    // submitTo: that encoding moves to its scratch buffer (it goes on there,
    // reading nothing again) and this record takes the place; it is sent
    // first, as postMessage would send it.
    out.writer?.spill();
    // Fast paths: encode in place, in the ring when nothing waits before
    // this record, else at the tail of the overflow queue; a value larger
    // than the room there moves to scratch as it grows (spill).
    // Nothing goes into the ring of a peer that is down (the main thread
    // empties it before the peer's new thread starts): queue behind.
    const queued = out.overflow.length !== 0 || !this.peers[out.peer]!.up;
    let target: WireBytes | undefined;
    let at = 0;
    if (!queued) {
      const room = out.ring.room();
      if (room >= MIN_DIRECT_ROOM) {
        target = this.bytes;
        at = out.ring.position();
        w.into(target, at + HEADER_BYTES, at + Math.min(room, out.maxRecord), at);
      }
    } else {
      target = out.overflow.tailChunk();
      at = out.overflow.tailPos();
      w.into(target, at + HEADER_BYTES, Math.min(target.u8.length, at + out.maxRecord), at);
    }
    if (target === undefined) w.intoScratch(HEADER_BYTES);
    const outer = out.writer;
    out.writer = w;
    let valueAt: number;
    try {
      if (name !== undefined) w.writeString(name);
      valueAt = w.pos - w.recordStart;
      w.writeValue(value);
    } catch (e) {
      if (e !== SHARED_MEMORY) throw e;
      out.writer = outer;
      const side = w.sideValue;
      w.sideValue = undefined;
      return this.emitSide(out, kind, w1, w2, name, { value: side });
    } finally {
      out.writer = outer;
    }
    w.keepShapes(); // from here on the record is sent, one way or the other
    if (target !== undefined && !w.spilled) {
      const length = w.pos - at;
      const i = at >>> 2;
      target.i32[i] = recordHeader(length, kind);
      target.i32[i + 1] = w1;
      target.i32[i + 2] = w2;
      if (queued) {
        out.overflow.commitTail(length);
        out.records++;
        if (out.overflow.length === 1) this.startedOverflow(out);
      } else {
        out.ring.commit(length);
        this.committedNew(out);
      }
      return;
    }
    // In scratch: from the start, or moved there (larger than the room in place, or a nested call took it).
    const scratch = w.target;
    if (w.pos > out.maxRecord) {
      const bytes = scratch.u8.slice(valueAt, w.pos).buffer;
      return this.emitSide(out, kind, w1, w2, name, { bytes }, [bytes]);
    }
    scratch.i32[0] = recordHeader(w.pos, kind);
    scratch.i32[1] = w1;
    scratch.i32[2] = w2;
    this.enqueue(out, scratch.u8.subarray(0, w.pos));
  }

  /** Post the value on the side path, then a SIDE record (with the task's name, if new) in its place. */
  private emitSide(out: Outgoing, kind: number, w1: number, w2: number, name: string | undefined, message: SideMessage, transfer: ArrayBuffer[] = []): void {
    this.links.portTo(out.peer, this.peers[out.peer]!.epoch).postMessage(message, transfer);
    const w = new WireWriter();
    w.intoScratch(HEADER_BYTES);
    if (name !== undefined) w.writeString(name);
    const scratch = w.target;
    scratch.i32[0] = recordHeader(w.pos, kind | SIDE);
    scratch.i32[1] = w1;
    scratch.i32[2] = w2;
    this.enqueue(out, scratch.u8.subarray(0, w.pos));
  }

  /** A complete record (header included) into the ring, or behind the others waiting. */
  private enqueue(out: Outgoing, record: Uint8Array): void {
    if (out.overflow.length === 0 && this.peers[out.peer]!.up) {
      const at = out.ring.reserve(record.length);
      if (at >= 0) {
        this.bytes.u8.set(record, at);
        out.ring.commit(record.length);
        this.committedNew(out);
        return;
      }
    }
    out.overflow.push(record);
    out.records++;
    if (out.overflow.length === 1) this.startedOverflow(out);
  }

  /** `out` has just started keeping records back: retry at every turn, and ask the consumer to wake us for room. */
  private startedOverflow(out: Outgoing): void {
    this.overflowing.push(out);
    if (this.peers[out.peer]!.up && out.ring.wantSpace(out.overflow.nextLength())) this.scheduleTurn();
  }

  /** A record entered `out`'s ring (from the emit, not moved from the overflow: flushOverflow). */
  private committedNew(out: Outgoing): void {
    out.records++;
    this.committed(out);
  }

  private committed(out: Outgoing): void {
    if (out.batched++ === 0) this.dirty.push(out);
    if (out.batched >= BATCH) this.publish(out);
    else if (!this.flushQueued) {
      this.flushQueued = true;
      queueMicrotask(this.flush);
    }
  }

  private publish(out: Outgoing): void {
    out.batched = 0;
    out.ring.publish();
    this.wake(out.peer);
  }

  /** Publish everything committed (end of a job or a turn). */
  private readonly flush = (): void => {
    this.flushQueued = false;
    const dirty = this.dirty;
    if (dirty.length === 0) return;
    this.dirty = [];
    for (const out of dirty) if (out.batched > 0) this.publish(out);
  };

  private wake(peer: number): void {
    wakeEndpoint(this.i32, this.g, peer);
  }

  /** Move waiting records into rings with room; the number moved. */
  private flushOverflow(): number {
    if (this.overflowing.length === 0) return 0;
    let moved = 0;
    const still: Outgoing[] = [];
    for (const out of this.overflowing) {
      if (!this.peers[out.peer]!.up) {
        still.push(out); // waits for the peer's new thread
        continue;
      }
      moved += out.overflow.moveInto(out.ring, this.i32, this.bytes.u8, () => this.committed(out));
      const next = out.overflow.nextLength();
      if (next > 0) {
        still.push(out);
        // Ask to be woken for room; if room appeared meanwhile, the next turn retries.
        if (out.ring.wantSpace(next)) moved++;
      }
    }
    this.overflowing = still;
    return moved;
  }

  // ----------------------------------------------------------- receiving

  private scheduleTurn(): void {
    if (this.scheduled || this.stopped) return;
    this.scheduled = true;
    if (this.asleep) {
      this.asleep = false;
      Atomics.store(this.i32, this.sleeping, 0);
    }
    // Every turn, and so every task, runs from an immediate: the stack
    // under a task is then always the same one frame of Node's
    // (processImmediate), so each allocation site has one stack in the
    // heap profile. Run from a microtask the stack was clean only when no
    // other immediate (the doorbell's) shared the loop's pass, so a site
    // showed up under two roots.
    setImmediate(this.turn);
  }

  /** One turn of the loop: notice deaths, move overflow, drain every ring, publish. */
  private readonly turn = (): void => {
    this.scheduled = false;
    if (this.stopped) return;
    if (this.asleep) {
      this.asleep = false;
      Atomics.store(this.i32, this.sleeping, 0);
    }
    if (this.idleReported) {
      this.idleReported = false;
      this.host?.busy();
    }
    if (Atomics.load(this.i32, MEMBERSHIP) !== this.membership) this.readMembership(false);
    let work = this.flushOverflow();
    for (const inc of this.inc) if (inc !== undefined && this.peers[inc.peer]!.up) work += this.drain(inc);
    this.flush();
    if (work > 0) {
      this.lastWork = performance.now();
      if (this.sleptAt >= 0) this.adaptPollWindow(this.lastWork - this.sleptAt);
      this.scheduleTurn();
    } else if (this.pending > 0 && performance.now() - this.lastWork < this.pollWindow) {
      this.scheduleTurn();
    } else {
      this.sleptAt = this.pending > 0 ? performance.now() : -1;
      this.sleep();
    }
  };

  /** An endpoint that slept with calls out was woken with work after `waited` ms. */
  private adaptPollWindow(waited: number): void {
    this.sleptAt = -1;
    this.pollWindow =
      waited < ANSWER_POLL_MS
        ? Math.min(ANSWER_POLL_MS, Math.max(this.pollWindow * 2, waited * 1.5))
        : Math.max(MIN_ANSWER_POLL_MS, this.pollWindow / 2);
  }

  /** Nothing to do: say so, look once more, then wait on the bell. */
  private sleep(): void {
    const seen = Atomics.load(this.i32, this.bell);
    Atomics.store(this.i32, this.sleeping, 1);
    this.asleep = true;
    if (this.hasWork()) {
      this.scheduleTurn();
      return;
    }
    if (!this.idleReported) {
      this.idleReported = true;
      this.host?.idle();
    }
    if (this.waiting) return; // the outstanding wait still watches the bell at `seen`
    const wait = Atomics.waitAsync(this.i32, this.bell, seen);
    if (!wait.async) {
      this.scheduleTurn();
      return;
    }
    this.waiting = true;
    void wait.value.then(this.rung);
  }

  private readonly rung = (): void => {
    this.waiting = false;
    if (this.stopped) return;
    if (this.asleep) this.scheduleTurn();
  };

  /** Anything to drain or move, checked after SLEEPING is set. */
  private hasWork(): boolean {
    if (Atomics.load(this.i32, MEMBERSHIP) !== this.membership) return true;
    for (const inc of this.inc) {
      if (inc === undefined || !this.peers[inc.peer]!.up) continue;
      if (inc.waitingSide ? inc.sideHead < inc.side.length : inc.ring.hasRecords()) return true;
    }
    for (const out of this.overflowing) {
      const next = out.overflow.nextLength();
      if (next > 0 && this.peers[out.peer]!.up && out.ring.wantSpace(next)) return true;
    }
    return false;
  }

  /** Handle the records waiting from one peer; the number handled. */
  private drain(inc: Incoming): number {
    const ring = inc.ring;
    const i32 = this.i32;
    const peer = inc.peer;
    let n = 0;
    if (inc.waitingSide && inc.sideHead >= inc.side.length) return 0;
    inc.waitingSide = false;
    for (let at = ring.next(); at >= 0 && n < DRAIN_LIMIT; at = ring.next()) {
      const i = at >>> 2;
      const header = i32[i]!;
      const kind = header & KIND_MASK;
      const byteLength = header >>> 4;
      let side: SideMessage | undefined;
      if (kind & SIDE) {
        side = inc.side[inc.sideHead];
        if (side === undefined) {
          inc.waitingSide = true;
          break;
        }
        inc.side[inc.sideHead++] = undefined as unknown as SideMessage;
        if (inc.sideHead === inc.side.length) {
          inc.side = [];
          inc.sideHead = 0;
        }
      }
      // Taken: from here on the sender cannot tell whether this record's
      // task ran (it may start below), so it must say "may have run" if
      // this thread dies (item 5). Published before the task can start.
      Atomics.store(i32, inc.takenWord, (inc.taken = (inc.taken + 1) | 0));
      const w1 = i32[i + 1]!;
      const w2 = i32[i + 2]!;
      const r = this.reader;
      r.pos = at + HEADER_BYTES;
      r.shapes = inc.shapes;
      let advanced = false;
      try {
        switch (kind & ~SIDE) {
          case KIND_REQUEST_NAMED:
          case KIND_REQUEST: {
            if ((kind & ~SIDE) === KIND_REQUEST_NAMED) inc.tasks[w2] = r.readString();
            const task = inc.tasks[w2];
            let arg: unknown;
            let bad: unknown;
            try {
              arg = side ? readSide(side, inc.shapes) : r.readValue();
            } catch (e) {
              bad = e;
            }
            ring.advance(byteLength);
            advanced = true;
            // A request of a forgotten incarnation, or of a peer now down (its
            // value is read all the same: it may define shapes).
            if (task === undefined || !this.peers[peer]!.up) break;
            if (bad !== undefined) this.answerThrown(peer, this.peers[peer]!.epoch, w1, bad);
            else this.request(inc, w1, w2, arg);
            break;
          }
          case KIND_RESULT:
          case KIND_THROWN:
          case KIND_UNSENDABLE: {
            let value: unknown;
            let bad: unknown;
            try {
              value = side ? readSide(side, inc.shapes) : r.readValue();
            } catch (e) {
              bad = e;
            }
            ring.advance(byteLength);
            advanced = true;
            this.answer(peer, w1, kind & ~SIDE, value, bad);
            break;
          }
          default:
            ring.advance(byteLength);
            advanced = true;
        }
      } catch (e) {
        // Only a corrupt record, or a failure to answer, gets here (a task's own errors are answers).
        if (!advanced) ring.advance(byteLength);
        process.emitWarning(`shardheap: dropped a message from endpoint ${peer}: ${errorMessage(e)}`, { code: "SHARDHEAP_MESSAGE" });
      }
      n++;
    }
    if (ring.release()) this.wake(peer);
    return n;
  }

  /** An answer to one of our calls. */
  private answer(peer: number, id: number, kind: number, value: unknown, bad: unknown): void {
    if (this.resolves[id] === undefined || this.peerOf(id) !== peer) return; // stale: the call was settled when the peer went down
    const task = this.taskOf(id);
    if (bad !== undefined) {
      this.settle(id, false, new ShardError(peer, `shard ${peer}: the answer to ${describeTask(task)} could not be read: ${errorMessage(bad)}`, { cause: bad }));
    } else if (kind === KIND_RESULT) {
      this.settle(id, true, value);
    } else if (kind === KIND_THROWN) {
      this.settle(id, false, rebuildThrown(peer, task, value as ThrownRecord));
    } else {
      this.settle(id, false, unsendableResult(peer, task, value as ErrorRecord));
    }
  }

  private settle(id: number, ok: boolean, value: unknown): void {
    const resolve = this.resolves[id]!;
    const peer = this.peerOf(id);
    this.resolves[id] = undefined;
    this.freeIds.push(id);
    if (--this.pendingTo[peer]! === 0) {
      const waiters = this.settledWaiters[peer];
      if (waiters !== undefined) {
        this.settledWaiters[peer] = undefined;
        for (const w of waiters) w();
      }
    }
    if (--this.pending === 0) this.keepAlive?.unref();
    // A rejection resolves with a rejected promise (its handler is added in
    // the same microtask drain: no unhandled-rejection report).
    resolve(ok ? value : Promise.reject(value));
  }

  // --------------------------------------------------------- running tasks

  /** A request from `inc`'s peer for its task `taskId`: run it now, or after the module has loaded. */
  private request(inc: Incoming, callId: number, taskId: number, arg: unknown): void {
    const peer = inc.peer;
    const epoch = this.peers[peer]!.epoch;
    if (this.deferred !== undefined) this.deferred.push({ inc, epoch, callId, taskId, arg });
    else this.run(inc, epoch, callId, taskId, arg);
  }

  private runDeferred(): void {
    const deferred = this.deferred ?? [];
    this.deferred = undefined;
    for (const d of deferred) this.run(d.inc, d.epoch, d.callId, d.taskId, d.arg);
    this.flush();
  }

  private run(inc: Incoming, epoch: number, callId: number, taskId: number, arg: unknown): void {
    const peer = inc.peer;
    const host = this.host;
    let result: unknown;
    let thenable: boolean;
    try {
      let fn = inc.fns[taskId];
      if (fn === undefined) {
        const task = inc.tasks[taskId]!;
        fn = host?.lookup(task);
        if (fn === undefined) throw new TypeError(noTask(this.self, task, host?.hasModule !== false));
        inc.fns[taskId] = fn;
      }
      result = fn(arg, host!.context);
      // Inside the try: reading `then` may run a getter that throws.
      thenable = isThenable(result);
    } catch (e) {
      this.answerThrown(peer, epoch, callId, e);
      return;
    }
    if (thenable) {
      Promise.resolve(result as PromiseLike<unknown>).then(
        (v) => this.answerValue(peer, epoch, callId, v),
        (e: unknown) => this.answerThrown(peer, epoch, callId, e),
      );
    } else {
      this.answerValue(peer, epoch, callId, result);
    }
  }

  private answerValue(peer: number, epoch: number, callId: number, value: unknown): void {
    const out = this.answerable(peer, epoch);
    if (out === undefined) return;
    try {
      this.emit(out, KIND_RESULT, callId, 0, undefined, value);
    } catch (e) {
      // Not cloneable: the caller gets the DataCloneError, this shard lives on.
      this.answerLastResort(out, callId, KIND_UNSENDABLE, encodeError(e instanceof Error ? e : new Error(errorMessage(e))));
    }
  }

  private answerThrown(peer: number, epoch: number, callId: number, thrown: unknown): void {
    const out = this.answerable(peer, epoch);
    if (out === undefined) return;
    this.answerLastResort(out, callId, KIND_THROWN, encodeThrown(thrown));
  }

  /**
   * An answer made of records that always encode (error-codec.ts). Should
   * even that fail, the caller still gets an error and this thread never
   * throws from here (an answer may be sent from a promise callback, where
   * a throw would be an unhandled rejection and end the shard).
   */
  private answerLastResort(out: Outgoing, callId: number, kind: number, record: ThrownRecord | ErrorRecord): void {
    try {
      this.emit(out, kind, callId, 0, undefined, record);
    } catch (e) {
      try {
        const error = new ShardError(this.self, `shard ${this.self}: the answer could not be sent: ${errorMessage(e)}`);
        this.emit(out, KIND_THROWN, callId, 0, undefined, encodeThrown(error));
      } catch {
        process.emitWarning(`shardheap: shard ${this.self} could not answer a call from endpoint ${out.peer}`, { code: "SHARDHEAP_MESSAGE" });
      }
    }
  }

  /** The way back to the caller, unless it went down since it asked (then the answer is dropped). */
  private answerable(peer: number, epoch: number): Outgoing | undefined {
    if (this.stopped) return undefined;
    // MEMBERSHIP is read at each turn, not here: an answer written into the
    // ring of a peer that died since is harmless, as the main thread empties
    // that ring only after this endpoint has acknowledged the death.
    const state = this.peers[peer]!;
    return state.up && state.epoch === epoch ? this.out[peer] : undefined;
  }

  // ------------------------------------------------------- the side path

  /** The main thread (SideLinks) hands over a port from `peer` of incarnation `epoch`, for this endpoint's incarnation `toEpoch`. */
  acceptSidePort(peer: number, epoch: number, toEpoch: number, port: MessagePort): void {
    const inc = this.inc[peer];
    if (
      inc === undefined ||
      this.stopped ||
      toEpoch !== this.peers[this.self]!.epoch ||
      Atomics.load(this.i32, endpointWord(this.g, peer) + EPOCH) !== epoch
    ) {
      port.close();
      return;
    }
    inc.port?.close();
    inc.port = port;
    port.on("message", (m: SideMessage) => {
      if (inc.port !== port) return;
      inc.side.push(m);
      if (inc.waitingSide) this.scheduleTurn();
    });
    port.unref();
  }

  // --------------------------------------------------- peers going down

  /**
   * Compare every peer's EPOCH and STATE with what this endpoint knew. A
   * new epoch means the peer went down: settle and forget everything
   * between us, then acknowledge. A peer UP again (its rings emptied by
   * the main thread) is talked to from offset 0.
   */
  private readMembership(initial: boolean): void {
    this.membership = Atomics.load(this.i32, MEMBERSHIP);
    let acked = false;
    for (let p = 0; p < this.g.endpoints; p++) {
      const w = endpointWord(this.g, p);
      const epoch = Atomics.load(this.i32, w + EPOCH);
      const stateWord = Atomics.load(this.i32, w + STATE);
      const up = stateWord === STATE_UP;
      const state = this.peers[p]!;
      if (initial) {
        state.epoch = epoch;
        state.up = up;
        state.gone = stateWord === STATE_GONE;
        Atomics.store(this.i32, ackWord(this.g, this.self, p), epoch);
        continue;
      }
      if (epoch !== state.epoch) {
        const wasUp = state.up;
        state.epoch = epoch;
        state.up = false;
        // Answers it published before it died are answers: take them first
        // (its requests are not run: no one is left to answer to).
        const inc = this.inc[p];
        if (wasUp && inc !== undefined) this.drain(inc);
        this.forget(p);
        Atomics.store(this.i32, ackWord(this.g, this.self, p), epoch);
        acked = true;
      }
      if (stateWord === STATE_GONE && !state.gone) {
        // Its new thread could not start: what waited for it rejects.
        state.gone = true;
        this.forget(p);
      }
      if (!state.up && up) {
        this.out[p]?.ring.reset();
        const inc = this.inc[p];
        if (inc !== undefined) {
          inc.ring.reset();
          inc.taken = 0;
        }
        state.up = true;
      }
    }
    if (acked) this.wake(this.shards);
  }

  /**
   * Had call `id`'s shard taken its record when its thread died? The
   * receiver stores its count of records taken in the ring's TAKEN word
   * before it acts on each (drain); a record numbered at or past that
   * count (still in the ring, or in the overflow) was never taken, so its
   * task never started. Read after the death, before the ring is emptied
   * (the main thread waits for this endpoint's ACK), so nothing moves it.
   */
  private startedOn(id: number): boolean {
    const taken = Atomics.load(this.i32, ringWord(this.g, this.self, this.peerOf(id)) + TAKEN);
    return ((this.calls[id * CALL_WORDS + 1]! - taken) | 0) < 0;
  }

  /**
   * `peer` went down: every call pending on it rejects, saying whether it
   * never started or may have run; what was kept for it or from it is
   * dropped.
   */
  private forget(peer: number): void {
    for (let id = 0; id < this.ids; id++) {
      if (this.resolves[id] === undefined || this.peerOf(id) !== peer) continue;
      const task = this.taskOf(id);
      this.settle(
        id,
        false,
        this.startedOn(id)
          ? new ShardError(peer, `shard ${peer}: ${describeTask(task)} was cut off: the shard's thread died after taking it; it may have run`, { code: "ERR_SHARDHEAP_CALL_MAY_HAVE_RUN" })
          : new ShardError(peer, `shard ${peer}: ${describeTask(task)} never started: the shard's thread died before taking it`, { code: "ERR_SHARDHEAP_CALL_NOT_STARTED" }),
      );
    }
    const out = this.out[peer];
    if (out) {
      out.records = 0;
      out.overflow.clear();
      out.taskIds.clear();
      out.taskNames = [];
      out.nextTaskId = 0;
      out.lastTask = undefined;
      out.shapes = new ShapeTable();
      out.batched = 0;
      this.overflowing = this.overflowing.filter((o) => o !== out);
      this.dirty = this.dirty.filter((o) => o !== out);
    }
    const inc = this.inc[peer];
    if (inc) {
      inc.tasks = [];
      inc.fns = [];
      inc.shapes = new ShapeCache();
      inc.side = [];
      inc.sideHead = 0;
      inc.waitingSide = false;
      inc.port?.close();
      inc.port = undefined;
    }
    if (this.deferred) this.deferred = this.deferred.filter((d) => d.inc.peer !== peer);
    this.links.drop(peer);
  }
}

/** Why there is no task `task` on `shard`: its module does not export it, or no module was given at all. */
function noTask(shard: number, task: string, hasModule: boolean): string {
  if (hasModule) return `shard ${shard}: the module exports no function named ${JSON.stringify(task)}`;
  return `shard ${shard}: no task ${JSON.stringify(task)}: no module was given to Smp.start (its { module } option names the file whose exported functions are the tasks)`;
}

function readSide(side: SideMessage, shapes: ShapeCache): unknown {
  if ("value" in side) return side.value;
  const reader = new WireReader(new WireBytes(side.bytes));
  reader.shapes = shapes;
  return reader.readValue();
}

function isThenable(v: unknown): v is PromiseLike<unknown> {
  if (v instanceof Promise) return true;
  return (typeof v === "object" || typeof v === "function") && v !== null && typeof (v as { then?: unknown }).then === "function";
}

/** Ring endpoint `e`'s bell if it sleeps (only one waker wins the flag: a compareExchange of SLEEPING). */
export function wakeEndpoint(i32: Int32Array, g: QueueGeometry, e: number): void {
  const w = endpointWord(g, e) + SLEEPING;
  if (Atomics.load(i32, w) !== 0 && Atomics.compareExchange(i32, w, 1, 0) === 1) {
    const bell = endpointWord(g, e) + BELL;
    Atomics.add(i32, bell, 1);
    Atomics.notify(i32, bell);
  }
}

/** Which API made a call, for messages: submitTo names the shard, invokeOnAll does not. */
export type CallName = "submitTo" | "invokeOnAll";

export function callName(via: CallName, peer: number, task: string): string {
  return via === "submitTo" ? `submitTo(${peer}, ${JSON.stringify(task)})` : `invokeOnAll(${JSON.stringify(task)})`;
}

export function downError(peer: number, call: string): ShardError {
  return new ShardError(peer, `${call}: shard ${peer} is gone (its thread died and a new one could not start)`, { code: "ERR_SHARDHEAP_CALL_NOT_STARTED" });
}
