/**
 * Receiving: what one endpoint (endpoint.ts) does with the records that
 * arrive in the rings it consumes. One Incoming per peer drains that
 * peer's ring each turn of the loop (endpoint-loop.ts; endpoint.ts calls
 * drain), and for each record
 *   - an answer to one of this endpoint's calls settles it (PendingCalls,
 *     pending-calls.ts), with the task's error rebuilt (call-errors.ts);
 *   - a request runs its task (shards only; TaskHost, shard-worker.ts),
 *     or waits in order until the module has loaded, and its result or
 *     what it threw goes back through the Outgoing to the same peer
 *     (outgoing.ts): the answer* methods, which never throw.
 * The endpoint's Receiver holds what every Incoming shares: the decoder,
 * the task host and the requests deferred until its module loads.
 *
 * Before acting on a record the Incoming publishes its count of records
 * taken in the ring's TAKEN word (one Atomics.store per record, on the
 * receiver's own cache line): should this thread die, the sender tells
 * from it a call that never started from one that may have run
 * (peer-deaths.ts). A SIDE record's value arrives by postMessage on the
 * side port (side-links.ts): until it has, draining that ring stops.
 * DRAIN_LIMIT records a ring a turn, so other work gets the loop between.
 */
import type { MessagePort } from "node:worker_threads";
import { ShardError } from "../errors.js";
import { describeTask, errorMessage, rebuildThrown, unsendableResult } from "./call-errors.js";
import { encodeError, encodeThrown, type ErrorRecord, type ThrownRecord } from "./error-codec.js";
import type { Outgoing, TurnScheduler } from "./outgoing.js";
import type { PendingCalls } from "./pending-calls.js";
import * as records from "./records.js";
import type { PeerState, SideMessage } from "./records.js";
import { KIND_MASK, type RingReader } from "./spsc-ring.js";
import { ShapeCache, WireBytes, WireReader } from "./wire-codec.js";

// Module-private copies: V8 compiles a switch over a module's own consts
// to a jump table, but loads an imported binding from its cell at every
// use (a 14-case switch over a steady run of values: 2.0 ns a dispatch
// against 6-9.6 ns, node 20.20).
const { HEADER_BYTES, KIND_REQUEST, KIND_REQUEST_NAMED, KIND_RESULT, KIND_THROWN, KIND_UNSENDABLE, SIDE } = records;

/** Records taken from one ring in one turn, at most: other work gets the loop between. */
const DRAIN_LIMIT = 4096;

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

/** A request that arrived before the module had loaded. */
interface Deferred {
  readonly inc: Incoming;
  readonly epoch: number;
  readonly callId: number;
  readonly taskId: number;
  readonly arg: unknown;
}

/** What every Incoming of one endpoint shares. */
export class Receiver {
  readonly reader: WireReader;
  /** No more answers are sent (the endpoint stopped). */
  stopped = false;
  /** Module not loaded yet: requests wait here, in arrival order (from every peer). */
  private deferred: Deferred[] | undefined;

  constructor(
    readonly i32: Int32Array,
    bytes: WireBytes,
    /** This endpoint's id (messages name it). */
    readonly self: number,
    readonly host: TaskHost | undefined,
    readonly calls: PendingCalls,
    readonly turns: TurnScheduler,
    /** Publish what the deferred tasks answered (Sender.flush). */
    private readonly flush: () => void,
  ) {
    this.reader = new WireReader(bytes);
    if (host) {
      this.deferred = [];
      // From an immediate, as every turn (one stack under every task).
      const runDeferred = (): void => void setImmediate(() => this.runDeferred());
      host.ready.then(runDeferred, runDeferred);
    }
  }

  /** A request from `inc`'s peer (incarnation `epoch`): run it now, or after the module has loaded. */
  request(inc: Incoming, epoch: number, callId: number, taskId: number, arg: unknown): void {
    if (this.deferred !== undefined) this.deferred.push({ inc, epoch, callId, taskId, arg });
    else inc.run(epoch, callId, taskId, arg);
  }

  private runDeferred(): void {
    const deferred = this.deferred ?? [];
    this.deferred = undefined;
    for (const d of deferred) d.inc.run(d.epoch, d.callId, d.taskId, d.arg);
    this.flush();
  }

  /** `peer` went down: its deferred requests are dropped (no one is left to answer to). */
  drop(peer: number): void {
    if (this.deferred) this.deferred = this.deferred.filter((d) => d.inc.peer !== peer);
  }
}

/** One peer's receiving side: the ring from it, the tasks and shapes it defined, its side-path messages. */
export class Incoming {
  /** Task names by id, as this peer defined them. */
  private tasks: string[] = [];
  /** The functions they name, looked up on first use (the module's exports do not change). */
  private fns: Array<TaskFunction | undefined> = [];
  /** Object shapes this peer defined. */
  private shapes = new ShapeCache();
  /** Side-path messages received, waiting for their ring records. */
  private side: SideMessage[] = [];
  private sideHead = 0;
  /** A SIDE record is next and its message has not arrived: stop draining this ring until it does. */
  private waitingSide = false;
  private port: MessagePort | undefined;
  /** Records taken from the ring since the peer's incarnation began (published in the ring's TAKEN word before each is acted on). */
  private taken = 0;

  constructor(
    readonly peer: number,
    readonly ring: RingReader,
    /** Int32 index of the ring's TAKEN word. */
    private readonly takenWord: number,
    /** What this endpoint knows of the peer (PeerDeaths keeps it). */
    readonly state: PeerState,
    /** The way back to the peer, for answers (and the names of this endpoint's tasks on the pair). */
    private readonly out: Outgoing,
    private readonly receiver: Receiver,
  ) {}

  /** Anything to drain (checked after SLEEPING is set)? */
  hasWork(): boolean {
    if (!this.state.up) return false;
    return this.waitingSide ? this.sideHead < this.side.length : this.ring.hasRecords();
  }

  /** Handle the records waiting from the peer; the number handled. */
  drain(): number {
    const ring = this.ring;
    const receiver = this.receiver;
    const i32 = receiver.i32;
    const peer = this.peer;
    let n = 0;
    if (this.waitingSide && this.sideHead >= this.side.length) return 0;
    this.waitingSide = false;
    for (let at = ring.next(); at >= 0 && n < DRAIN_LIMIT; at = ring.next()) {
      const i = at >>> 2;
      const header = i32[i]!;
      const kind = header & KIND_MASK;
      const byteLength = header >>> 4;
      let side: SideMessage | undefined;
      if (kind & SIDE) {
        side = this.side[this.sideHead];
        if (side === undefined) {
          this.waitingSide = true;
          break;
        }
        this.side[this.sideHead++] = undefined as unknown as SideMessage;
        if (this.sideHead === this.side.length) {
          this.side = [];
          this.sideHead = 0;
        }
      }
      // Taken: from here on the sender cannot tell whether this record's
      // task ran (it may start below), so it must say "may have run" if
      // this thread dies. Published before the task can start.
      Atomics.store(i32, this.takenWord, (this.taken = (this.taken + 1) | 0));
      const w1 = i32[i + 1]!;
      const w2 = i32[i + 2]!;
      const r = receiver.reader;
      r.pos = at + HEADER_BYTES;
      r.shapes = this.shapes;
      let advanced = false;
      try {
        switch (kind & ~SIDE) {
          case KIND_REQUEST_NAMED:
          case KIND_REQUEST: {
            if ((kind & ~SIDE) === KIND_REQUEST_NAMED) this.tasks[w2] = r.readString();
            const task = this.tasks[w2];
            let arg: unknown;
            let bad: unknown;
            try {
              arg = side ? readSide(side, this.shapes) : r.readValue();
            } catch (e) {
              bad = e;
            }
            ring.advance(byteLength);
            advanced = true;
            // A request of a forgotten incarnation, or of a peer now down (its
            // value is read all the same: it may define shapes).
            if (task === undefined || !this.state.up) break;
            if (bad !== undefined) this.answerThrown(this.state.epoch, w1, bad);
            else receiver.request(this, this.state.epoch, w1, w2, arg);
            break;
          }
          case KIND_RESULT:
          case KIND_THROWN:
          case KIND_UNSENDABLE: {
            let value: unknown;
            let bad: unknown;
            try {
              value = side ? readSide(side, this.shapes) : r.readValue();
            } catch (e) {
              bad = e;
            }
            ring.advance(byteLength);
            advanced = true;
            this.settleCall(w1, kind & ~SIDE, value, bad);
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
    if (ring.release()) this.out.wakePeer();
    return n;
  }

  /** An answer to this endpoint's call `id` (unless stale: the call was settled when the peer went down). */
  private settleCall(id: number, kind: number, value: unknown, bad: unknown): void {
    const calls = this.receiver.calls;
    const peer = this.peer;
    if (!calls.isPendingOn(id, peer)) return;
    const task = this.out.taskName(calls.taskIdOf(id));
    if (bad !== undefined) {
      calls.settle(id, false, new ShardError(peer, `shard ${peer}: the answer to ${describeTask(task)} could not be read: ${errorMessage(bad)}`, { cause: bad }));
    } else if (kind === KIND_RESULT) {
      calls.settle(id, true, value);
    } else if (kind === KIND_THROWN) {
      calls.settle(id, false, rebuildThrown(peer, task, value as ThrownRecord));
    } else {
      calls.settle(id, false, unsendableResult(peer, task, value as ErrorRecord));
    }
  }

  // --------------------------------------------------------- running tasks

  /** Run the peer's (incarnation `epoch`) call `callId` of its task `taskId`; the answer goes back when it settles. */
  run(epoch: number, callId: number, taskId: number, arg: unknown): void {
    const host = this.receiver.host;
    let result: unknown;
    let thenable: boolean;
    try {
      let fn = this.fns[taskId];
      if (fn === undefined) {
        const task = this.tasks[taskId]!;
        fn = host?.lookup(task);
        if (fn === undefined) throw new TypeError(noTask(this.receiver.self, task, host?.hasModule !== false));
        this.fns[taskId] = fn;
      }
      result = fn(arg, host!.context);
      // Inside the try: reading `then` may run a getter that throws.
      thenable = isThenable(result);
    } catch (e) {
      this.answerThrown(epoch, callId, e);
      return;
    }
    if (thenable) {
      Promise.resolve(result as PromiseLike<unknown>).then(
        (v) => this.answerValue(epoch, callId, v),
        (e: unknown) => this.answerThrown(epoch, callId, e),
      );
    } else {
      this.answerValue(epoch, callId, result);
    }
  }

  private answerValue(epoch: number, callId: number, value: unknown): void {
    const out = this.answerable(epoch);
    if (out === undefined) return;
    try {
      out.emit(KIND_RESULT, callId, 0, undefined, value);
    } catch (e) {
      // Not cloneable: the caller gets the DataCloneError, this shard lives on.
      this.answerLastResort(out, callId, KIND_UNSENDABLE, encodeError(e instanceof Error ? e : new Error(errorMessage(e))));
    }
  }

  private answerThrown(epoch: number, callId: number, thrown: unknown): void {
    const out = this.answerable(epoch);
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
    const self = this.receiver.self;
    try {
      out.emit(kind, callId, 0, undefined, record);
    } catch (e) {
      try {
        const error = new ShardError(self, `shard ${self}: the answer could not be sent: ${errorMessage(e)}`);
        out.emit(KIND_THROWN, callId, 0, undefined, encodeThrown(error));
      } catch {
        process.emitWarning(`shardheap: shard ${self} could not answer a call from endpoint ${out.peer}`, { code: "SHARDHEAP_MESSAGE" });
      }
    }
  }

  /** The way back to the caller, unless it went down since it asked (incarnation `epoch`): then the answer is dropped. */
  private answerable(epoch: number): Outgoing | undefined {
    if (this.receiver.stopped) return undefined;
    // MEMBERSHIP is read at each turn, not here: an answer written into the
    // ring of a peer that died since is harmless, as the main thread empties
    // that ring only after this endpoint has acknowledged the death.
    return this.state.up && this.state.epoch === epoch ? this.out : undefined;
  }

  // ------------------------------------------------------- the side path

  /** The side port from the peer (side-links.ts): its messages queue here until their SIDE records are drained. */
  acceptPort(port: MessagePort): void {
    this.port?.close();
    this.port = port;
    port.on("message", (m: SideMessage) => {
      if (this.port !== port) return;
      this.side.push(m);
      if (this.waitingSide) this.receiver.turns.scheduleTurn();
    });
    port.unref();
  }

  /** The peer's incarnation ended: forget its tasks, shapes and side messages. */
  reset(): void {
    this.tasks = [];
    this.fns = [];
    this.shapes = new ShapeCache();
    this.side = [];
    this.sideHead = 0;
    this.waitingSide = false;
    this.port?.close();
    this.port = undefined;
  }

  /** The peer is UP again, its ring emptied by the main thread: read it from offset 0. */
  restart(): void {
    this.ring.reset();
    this.taken = 0;
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
