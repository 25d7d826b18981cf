/**
 * One thread's end of the messaging buffer (queue-layout.ts): the shard's
 * (or the main thread's) half of Seastar's smp_message_queue. It sends
 * calls and answers into the rings it produces, drains the rings it
 * consumes, runs the tasks it is asked for (shards only), and settles the
 * calls it made. This file puts the parts together and is what the rest
 * of the runtime talks to (Smp in smp.ts, a shard's bootstrap in
 * shard-worker.ts, submitTo / invokeOnAll in submit.ts); each part is a
 * file of its own:
 *
 *   outgoing.ts      sending: per peer an Outgoing (the ring to it, the
 *                    overflow behind it, batching and publishing), and
 *                    the Sender they share (the encoder, the side path)
 *   incoming.ts      receiving: per peer an Incoming (draining its ring,
 *                    running the tasks it asks for, answering), and the
 *                    Receiver they share (the decoder, the task host)
 *   pending-calls.ts the calls this endpoint made, until they settle
 *   peer-deaths.ts   a peer's thread died: its calls rejected (never
 *                    started, or may have run), its state forgotten
 *   endpoint-loop.ts when the endpoint turns and when it sleeps
 *   records.ts       the records in the rings, and a peer's state
 *
 * A call (submitTask): an id from PendingCalls, its record sent by the
 * peer's Outgoing (into the ring, or the overflow), then the call opened
 * in PendingCalls with its record's number. A turn of the loop (turn
 * below): PeerDeaths looks at MEMBERSHIP, the Sender moves overflow into
 * rings with room, every Incoming of a peer that is up drains, the Sender
 * publishes. An answer to our call settles it (Incoming -> PendingCalls);
 * a request runs its task and its answer goes out through the Outgoing to
 * the same peer (Incoming -> Outgoing).
 */
import type { MessagePort } from "node:worker_threads";
import { ShardError } from "../errors.js";
import { callName, downError, queueFull, unsendableArg, type CallName } from "./call-errors.js";
import { EndpointLoop } from "./endpoint-loop.js";
import { Incoming, Receiver, type TaskHost } from "./incoming.js";
import { Outgoing, Sender } from "./outgoing.js";
import { PeerDeaths } from "./peer-deaths.js";
import { PendingCalls } from "./pending-calls.js";
import { endpointWord, EPOCH, ringData, ringWord, TAKEN, type QueueGeometry } from "./queue-layout.js";
import type { PeerState, SideLinks } from "./records.js";
import { RingReader, RingWriter } from "./spsc-ring.js";

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

export class Endpoint {
  readonly self: number;
  readonly shards: number;
  private readonly i32: Int32Array;
  private readonly g: QueueGeometry;
  /** Per peer: what this endpoint knows of it, its sending and its receiving side (undefined: the main thread to itself). */
  private readonly peers: PeerState[];
  private readonly out: Array<Outgoing | undefined>;
  private readonly inc: Array<Incoming | undefined>;
  private readonly calls: PendingCalls;
  private readonly sender: Sender;
  private readonly receiver: Receiver;
  private readonly deaths: PeerDeaths;
  private readonly loop: EndpointLoop;

  constructor(o: EndpointOptions) {
    this.self = o.self;
    this.shards = o.shards;
    const g = (this.g = o.geometry);
    const i32 = (this.i32 = new Int32Array(o.buffer));
    const E = g.endpoints;
    this.calls = new PendingCalls(E, o.maxPendingCalls, o.keepAlive === true);
    this.loop = new EndpointLoop(
      i32,
      g,
      this.self,
      { turn: () => this.turn(), hasWork: () => this.hasWork(), pendingCalls: () => this.calls.count },
      o.host,
    );
    this.sender = new Sender(i32, o.buffer, g, o.links, this.loop);
    this.receiver = new Receiver(i32, this.sender.bytes, this.self, o.host, this.calls, this.loop, this.sender.flush);
    this.peers = Array.from({ length: E }, () => ({ epoch: 0, up: true, gone: false }));
    // The main thread receives no calls, so no ring leads to it from
    // itself; every endpoint sends only to shards, and answers anyone.
    const mainToItself = (peer: number): boolean => peer === this.self && peer === this.shards;
    this.out = this.peers.map((state, to) =>
      mainToItself(to) ? undefined : new Outgoing(to, new RingWriter(i32, ringWord(g, this.self, to), ringData(g, this.self, to), g.ringBytes), state, this.sender, g, this.self),
    );
    this.inc = this.peers.map((state, from) => {
      const out = this.out[from];
      if (out === undefined) return undefined;
      const ring = new RingReader(i32, ringWord(g, from, this.self), ringData(g, from, this.self), g.ringBytes);
      return new Incoming(from, ring, ringWord(g, from, this.self) + TAKEN, state, out, this.receiver);
    });
    this.deaths = new PeerDeaths({
      i32,
      g,
      self: this.self,
      shards: this.shards,
      peers: this.peers,
      out: this.out,
      inc: this.inc,
      calls: this.calls,
      sender: this.sender,
      receiver: this.receiver,
      links: o.links,
    });
    this.deaths.read(true);
  }

  /** Start draining (call once, after the peers' side ports can arrive). */
  start(): void {
    this.loop.scheduleTurn();
  }

  /**
   * Stop draining and waiting; pending calls stay pending (the thread is
   * about to end), unless `reason` is given: then each rejects with
   * reason(peer, task, started), `started` saying whether its shard had
   * taken it (call once the shards' threads are gone).
   */
  stop(reason?: (peer: number, task: string, started: boolean) => Error): void {
    this.receiver.stopped = true;
    this.calls.stop();
    this.loop.stop();
    if (reason) this.calls.rejectPending(undefined, (id) => reason(this.calls.peerOf(id), this.taskOf(id), this.deaths.startedOn(id)));
  }

  /** Calls pending on `peer`. */
  pendingOn(peer: number): number {
    return this.calls.pendingOn(peer);
  }

  /** Would a call to `peer` now be refused for its bound (maxPendingCalls)? Then the error, naming `call`. */
  refusal(peer: number, call: string): ShardError | undefined {
    return this.calls.atBound(peer) ? queueFull(peer, call, this.calls.maxPending) : undefined;
  }

  /** Resolves once no call is pending on `peer`. */
  settledOn(peer: number): Promise<void> {
    return this.calls.settledOn(peer);
  }

  /** The main thread changed MEMBERSHIP (a shard went down, came back or is gone): take a turn soon to read it. */
  membershipChanged(): void {
    this.loop.scheduleTurn();
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
  submitTask(peer: number, task: string, arg: unknown, via: CallName): Promise<unknown> {
    if (this.loop.stopped) return Promise.reject(new ShardError(peer, `${callName(via, peer, task)}: the runtime has stopped`));
    // A peer that is down takes calls all the same: they wait for its new thread.
    if (this.peers[peer]!.gone) return Promise.reject(downError(peer, callName(via, peer, task)));
    const calls = this.calls;
    if (calls.atBound(peer)) return Promise.reject(queueFull(peer, callName(via, peer, task), calls.maxPending));
    const out = this.out[peer]!;
    // Taken now: a call made from inside this one's encoding gets another id.
    const id = calls.takeId();
    let taskId: number;
    try {
      taskId = out.sendRequest(id, task, arg);
    } catch (e) {
      calls.returnId(id);
      return Promise.reject(unsendableArg(callName(via, peer, task), e));
    }
    return calls.open(id, peer, out.records - 1, taskId);
  }

  /** The main thread (SideLinks) hands over a port from `peer` of incarnation `epoch`, for this endpoint's incarnation `toEpoch`. */
  acceptSidePort(peer: number, epoch: number, toEpoch: number, port: MessagePort): void {
    const inc = this.inc[peer];
    if (
      inc === undefined ||
      this.loop.stopped ||
      toEpoch !== this.peers[this.self]!.epoch ||
      Atomics.load(this.i32, endpointWord(this.g, peer) + EPOCH) !== epoch
    ) {
      port.close();
      return;
    }
    inc.acceptPort(port);
  }

  /** One turn of the loop: notice deaths, move overflow, drain every ring, publish; the records handled or moved. */
  private turn(): number {
    if (this.deaths.changed()) this.deaths.read(false);
    let work = this.sender.flushOverflow();
    for (const inc of this.inc) if (inc !== undefined && inc.state.up) work += inc.drain();
    this.sender.flush();
    return work;
  }

  /** Anything to drain or move, checked after SLEEPING is set. */
  private hasWork(): boolean {
    if (this.deaths.changed()) return true;
    for (const inc of this.inc) if (inc !== undefined && inc.hasWork()) return true;
    return this.sender.overflowReady();
  }

  /** The name of call `id`'s task (for messages; valid while the call is pending). */
  private taskOf(id: number): string {
    return this.out[this.calls.peerOf(id)]!.taskName(this.calls.taskIdOf(id));
  }
}
