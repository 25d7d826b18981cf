/**
 * Sending: the records one endpoint (endpoint.ts) writes into the rings it
 * produces, calls (Endpoint.submitTask -> Outgoing.sendRequest) and
 * answers (Incoming's answer*, incoming.ts -> Outgoing.emit). One
 * Outgoing per peer holds that pair's ring writer, its overflow queue,
 * its task ids and object shapes; the endpoint's Sender holds what they
 * share: the encoder, the rings waiting to be published, and the peers
 * with records held back.
 *
 *   1. A record (records.ts; its value: wire-codec.ts) is written
 *      straight into the ring to the peer when it has room and nothing is
 *      waiting before it; otherwise it is encoded in a scratch buffer or
 *      the overflow's tail and waits in that peer's OverflowQueue (order
 *      kept, nothing dropped, the thread never blocks), and the consumer
 *      is asked to wake us when it makes room (NEED_SPACE). Each turn of
 *      the loop (endpoint-loop.ts) moves what waits into rings with room
 *      (Sender.flushOverflow).
 *   2. Records are published (one Atomics.store of TAIL) every BATCH
 *      records and at the end of the current job (a microtask), so a burst
 *      of calls costs one store per 16 calls, as Seastar's batch_size.
 *   3. After publishing, the receiver is rung only if it said it sleeps
 *      (wakeEndpoint: SLEEPING, taken by compareExchange so one sender
 *      rings).
 * A value that holds a SharedArrayBuffer, or whose encoding is larger than
 * half the ring (maxRecord), goes by the side path: postMessage on a
 * MessagePort between the two threads (made on first use, introduced by
 * the main thread: side-links.ts), with a SIDE record in the ring marking
 * its place, so order holds across both paths.
 *
 * A peer that is down gets nothing in its ring (the main thread empties
 * it before the peer's new thread starts): its records wait in the
 * overflow, and go to the new thread. PeerDeaths (peer-deaths.ts) resets
 * an Outgoing when its peer's incarnation ends.
 */
import { ringWord, TAKEN, type QueueGeometry } from "./queue-layout.js";
import * as records from "./records.js";
import type { PeerState, SideLinks, SideMessage } from "./records.js";
import { OverflowQueue } from "./overflow-queue.js";
import { recordHeader, type RingWriter } from "./spsc-ring.js";
import { SHARED_MEMORY, ShapeTable, WireBytes, WireWriter } from "./wire-codec.js";
import { wakeEndpoint } from "./endpoint-loop.js";

// Module-private copies: V8 folds a module's own consts into the code that
// uses them, but loads an imported binding from its cell at every use.
const { HEADER_BYTES, KIND_REQUEST, KIND_REQUEST_NAMED, SIDE } = records;

/** Records published together (Seastar's batch_size). */
const BATCH = 16;
/** Below this much contiguous room, encode in scratch rather than try the ring in place. */
const MIN_DIRECT_ROOM = 64;
/** Largest record carried in a ring (besides half the ring): anything larger goes by the side path. */
const MAX_RING_RECORD = 256 * 1024;

/** Whoever turns the endpoint's loop (endpoint-loop.ts). */
export interface TurnScheduler {
  scheduleTurn(): void;
}

/** What every Outgoing of one endpoint shares. */
export class Sender {
  /** The messaging buffer, as the codec writes it. */
  readonly bytes: WireBytes;
  /** The encoder of every record but a nested one (see Outgoing.emit). */
  readonly writer = new WireWriter();
  /** Outgoing.emit calls in progress (more than one: a getter called submitTo). */
  emitting = 0;
  /** Outgoings with records committed and not yet published (some may have been published since: batched is 0 then). */
  dirty: Outgoing[] = [];
  /** Outgoings whose overflow holds records. */
  overflowing: Outgoing[] = [];
  private flushQueued = false;

  constructor(
    readonly i32: Int32Array,
    buffer: SharedArrayBuffer,
    private readonly g: QueueGeometry,
    readonly links: SideLinks,
    readonly turns: TurnScheduler,
  ) {
    this.bytes = new WireBytes(buffer);
  }

  /** Ring `peer`'s bell if it sleeps. */
  wake(peer: number): void {
    wakeEndpoint(this.i32, this.g, peer);
  }

  /** Publish at the end of the current job (a microtask), unless that is arranged already. */
  publishSoon(): void {
    if (!this.flushQueued) {
      this.flushQueued = true;
      queueMicrotask(this.flush);
    }
  }

  /** Publish everything committed (end of a job or a turn). */
  readonly flush = (): void => {
    this.flushQueued = false;
    const dirty = this.dirty;
    if (dirty.length === 0) return;
    this.dirty = [];
    for (const out of dirty) if (out.batched > 0) out.publish();
  };

  /** Move waiting records into rings with room; the number moved. */
  flushOverflow(): number {
    if (this.overflowing.length === 0) return 0;
    let moved = 0;
    const still: Outgoing[] = [];
    for (const out of this.overflowing) {
      if (!out.state.up) {
        still.push(out); // waits for the peer's new thread
        continue;
      }
      moved += out.moveOverflow();
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

  /** A ring with records waiting for it has room now (checked after SLEEPING is set). */
  overflowReady(): boolean {
    for (const out of this.overflowing) {
      const next = out.overflow.nextLength();
      if (next > 0 && out.state.up && out.ring.wantSpace(next)) return true;
    }
    return false;
  }

  /** `out`'s peer went down: nothing of it is published or moved. */
  drop(out: Outgoing): void {
    this.overflowing = this.overflowing.filter((o) => o !== out);
    this.dirty = this.dirty.filter((o) => o !== out);
  }
}

/** One peer's sending side: the ring to it and what waits behind, the task ids and shapes of the pair. */
export class Outgoing {
  readonly overflow = new OverflowQueue();
  /** Task name -> id on this pair (the receiver learns a name with its first request). */
  readonly taskIds = new Map<string, number>();
  /** ... and back: id -> name. */
  private taskNames: string[] = [];
  private nextTaskId = 0;
  private lastTask: string | undefined;
  private lastTaskId = 0;
  /** Object shapes sent on this pair (wire-codec.ts). */
  private shapes = new ShapeTable();
  /** Records committed since the last publish. */
  batched = 0;
  /**
   * Records that entered this peer's stream (the ring, or the overflow
   * behind it) since its incarnation began, each call's and answer's one:
   * a call's record is number `records - 1` once it is sent, and the peer
   * has taken it iff that is below the ring's TAKEN (peer-deaths.ts).
   */
  records = 0;
  /** The writer encoding a record for this peer in place right now (a nested emit to the peer moves it out of the way). */
  private writer: WireWriter | undefined;
  /** Largest record in the ring: half of it, at most MAX_RING_RECORD. */
  readonly maxRecord: number;
  /** Int32 index of the ring's TAKEN word (the peer's count of records taken). */
  private readonly takenWord: number;

  constructor(
    readonly peer: number,
    readonly ring: RingWriter,
    /** What this endpoint knows of the peer (PeerDeaths keeps it). */
    readonly state: PeerState,
    private readonly sender: Sender,
    g: QueueGeometry,
    self: number,
  ) {
    this.maxRecord = Math.min(ring.capacity / 2, MAX_RING_RECORD);
    this.takenWord = ringWord(g, self, peer) + TAKEN;
  }

  /** The name of this pair's task `taskId` (for messages; valid while a call naming it is pending). */
  taskName(taskId: number): string {
    return this.taskNames[taskId]!;
  }

  /** The peer's count of records taken from this ring (read after its death, before the ring is emptied). */
  taken(): number {
    return Atomics.load(this.sender.i32, this.takenWord);
  }

  /**
   * Send call `id`'s request for `task` with `arg`; its task id on this
   * pair. Throws the argument's DataCloneError; nothing is sent then. The
   * call's record is number `records - 1` once this returns.
   */
  sendRequest(id: number, task: string, arg: unknown): number {
    // A burst of calls names one task: compare with the last before the Map.
    let taskId = task === this.lastTask ? this.lastTaskId : this.taskIds.get(task);
    const named = taskId === undefined;
    if (taskId === undefined) {
      // Never reused, not even when this call fails: a call made from
      // inside its argument (a getter) may have taken the next one.
      taskId = this.nextTaskId++;
      this.taskIds.set(task, taskId);
      this.taskNames[taskId] = task;
    }
    try {
      this.emit(named ? KIND_REQUEST_NAMED : KIND_REQUEST, id, taskId, named ? task : undefined, arg);
    } catch (e) {
      if (named) this.taskIds.delete(task);
      this.lastTask = undefined;
      throw e;
    }
    this.lastTask = task;
    this.lastTaskId = taskId;
    return taskId;
  }

  /**
   * Write one record: in place in the ring when it fits, else via scratch
   * into the ring or the overflow queue, or by the side path. Throws the
   * value's DataCloneError; nothing is written then.
   */
  emit(kind: number, w1: number, w2: number, name: string | undefined, value: unknown): void {
    const sender = this.sender;
    // A getter inside `value` may itself call submitTo: that nested emit
    // gets a writer of its own (and moves this one out of its way: emitWith).
    const nested = sender.emitting++ !== 0;
    const w = nested ? new WireWriter() : sender.writer;
    // A nested emit sends keys inline: the outer one may still drop a shape it added.
    w.useShapes(nested ? undefined : this.shapes);
    try {
      this.emitWith(w, kind, w1, w2, name, value);
    } finally {
      sender.emitting--;
    }
  }

  private emitWith(w: WireWriter, kind: number, w1: number, w2: number, name: string | undefined, value: unknown): void {
    // A getter of the value an emit to this same peer is encoding, calling
    // submitTo: that encoding moves to its scratch buffer (it goes on there,
    // reading nothing again) and this record takes the place; it is sent
    // first, as postMessage would send it.
    this.writer?.spill();
    // Fast paths: encode in place, in the ring when nothing waits before
    // this record, else at the tail of the overflow queue; a value larger
    // than the room there moves to scratch as it grows (spill).
    // Nothing goes into the ring of a peer that is down (the main thread
    // empties it before the peer's new thread starts): queue behind.
    const queued = this.overflow.length !== 0 || !this.state.up;
    let target: WireBytes | undefined;
    let at = 0;
    if (!queued) {
      const room = this.ring.room();
      if (room >= MIN_DIRECT_ROOM) {
        target = this.sender.bytes;
        at = this.ring.position();
        w.into(target, at + HEADER_BYTES, at + Math.min(room, this.maxRecord), at);
      }
    } else {
      target = this.overflow.tailChunk();
      at = this.overflow.tailPos();
      w.into(target, at + HEADER_BYTES, Math.min(target.u8.length, at + this.maxRecord), at);
    }
    if (target === undefined) w.intoScratch(HEADER_BYTES);
    const outer = this.writer;
    this.writer = w;
    let valueAt: number;
    try {
      if (name !== undefined) w.writeString(name);
      valueAt = w.pos - w.recordStart;
      w.writeValue(value);
    } catch (e) {
      if (e !== SHARED_MEMORY) throw e;
      this.writer = outer;
      const side = w.sideValue;
      w.sideValue = undefined;
      return this.emitSide(kind, w1, w2, name, { value: side });
    } finally {
      this.writer = outer;
    }
    w.keepShapes(); // from here on the record is sent, one way or the other
    if (target !== undefined && !w.spilled) {
      const length = w.pos - at;
      const i = at >>> 2;
      target.i32[i] = recordHeader(length, kind);
      target.i32[i + 1] = w1;
      target.i32[i + 2] = w2;
      if (queued) {
        this.overflow.commitTail(length);
        this.records++;
        if (this.overflow.length === 1) this.startedOverflow();
      } else {
        this.ring.commit(length);
        this.records++;
        this.committed();
      }
      return;
    }
    // In scratch: from the start, or moved there (larger than the room in place, or a nested call took it).
    const scratch = w.target;
    if (w.pos > this.maxRecord) {
      const bytes = scratch.u8.slice(valueAt, w.pos).buffer;
      return this.emitSide(kind, w1, w2, name, { bytes }, [bytes]);
    }
    scratch.i32[0] = recordHeader(w.pos, kind);
    scratch.i32[1] = w1;
    scratch.i32[2] = w2;
    this.enqueue(scratch.u8.subarray(0, w.pos));
  }

  /** Post the value on the side path, then a SIDE record (with the task's name, if new) in its place. */
  private emitSide(kind: number, w1: number, w2: number, name: string | undefined, message: SideMessage, transfer: ArrayBuffer[] = []): void {
    this.sender.links.portTo(this.peer, this.state.epoch).postMessage(message, transfer);
    const w = new WireWriter();
    w.intoScratch(HEADER_BYTES);
    if (name !== undefined) w.writeString(name);
    const scratch = w.target;
    scratch.i32[0] = recordHeader(w.pos, kind | SIDE);
    scratch.i32[1] = w1;
    scratch.i32[2] = w2;
    this.enqueue(scratch.u8.subarray(0, w.pos));
  }

  /** A complete record (header included) into the ring, or behind the others waiting. */
  private enqueue(record: Uint8Array): void {
    this.records++;
    if (this.overflow.length === 0 && this.state.up) {
      const at = this.ring.reserve(record.length);
      if (at >= 0) {
        this.sender.bytes.u8.set(record, at);
        this.ring.commit(record.length);
        this.committed();
        return;
      }
    }
    this.overflow.push(record);
    if (this.overflow.length === 1) this.startedOverflow();
  }

  /** This Outgoing has just started keeping records back: retry at every turn, and ask the consumer to wake us for room. */
  private startedOverflow(): void {
    this.sender.overflowing.push(this);
    if (this.state.up && this.ring.wantSpace(this.overflow.nextLength())) this.sender.turns.scheduleTurn();
  }

  /** A record entered the ring: publish with the batch, or at the end of the job. */
  private committed(): void {
    if (this.batched++ === 0) this.sender.dirty.push(this);
    if (this.batched >= BATCH) this.publish();
    else this.sender.publishSoon();
  }

  /** Make the committed records visible to the peer, and ring it if it sleeps. */
  publish(): void {
    this.batched = 0;
    this.ring.publish();
    this.sender.wake(this.peer);
  }

  /** Ring the peer's bell if it sleeps (its consumer made room it asked for: incoming.ts). */
  wakePeer(): void {
    this.sender.wake(this.peer);
  }

  /** Move waiting records into the ring while it has room; the number moved. */
  moveOverflow(): number {
    return this.overflow.moveInto(this.ring, this.sender.i32, this.sender.bytes.u8, this.committedMoved);
  }

  /** A record moved from the overflow into the ring (counted in `records` when it entered the overflow). */
  private readonly committedMoved = (): void => this.committed();

  /** The peer's incarnation ended: forget the pair's stream, tasks and shapes, and what waited for it. */
  reset(): void {
    this.records = 0;
    this.overflow.clear();
    this.taskIds.clear();
    this.taskNames = [];
    this.nextTaskId = 0;
    this.lastTask = undefined;
    this.shapes = new ShapeTable();
    this.batched = 0;
    this.sender.drop(this);
  }
}
