/**
 * Peers that die, as one endpoint (endpoint.ts) sees them. Smp (smp.ts)
 * notices a shard's thread die, gives the shard a new EPOCH, marks it
 * DOWN, bumps MEMBERSHIP and rings every bell. Each endpoint, on its next
 * turn (endpoint-loop.ts; endpoint.ts asks changed() first), reads the
 * peers' words here: it takes the answers the peer published before it
 * died (Incoming.drain), rejects every other call pending on it
 * (PendingCalls), forgets what it held for it and from it (Outgoing.reset,
 * Incoming.reset, the deferred requests, the side port), acknowledges
 * (ACK), and leaves the peer's rings alone until the main thread has
 * emptied them and marked the peer UP again (its new thread). Calls made
 * meanwhile wait in the overflow (outgoing.ts) and go to the new thread;
 * if it cannot start (GONE) they reject. Answers to requests of a dead
 * incarnation are dropped (Incoming.answerable).
 *
 * Delivery is at most once, and a cut-off call says which side of the
 * line it was on: of 20,000 calls cut by a death, 1,724 of the rejected
 * ones had run, and a caller retrying on ShardError ran them twice. The
 * receiver counts the records it takes from each ring and stores the
 * count in the ring's TAKEN word before acting on each (incoming.ts);
 * each call remembers its record's number in the stream (Outgoing.records,
 * kept by PendingCalls). A call whose number is below TAKEN when its peer
 * died may have run (ERR_SHARDHEAP_CALL_MAY_HAVE_RUN); any other never
 * started (ERR_SHARDHEAP_CALL_NOT_STARTED), and is safe to send again.
 */
import { ShardError } from "../errors.js";
import { describeTask } from "./call-errors.js";
import type { Incoming, Receiver } from "./incoming.js";
import type { Outgoing, Sender } from "./outgoing.js";
import type { PendingCalls } from "./pending-calls.js";
import { ackWord, endpointWord, EPOCH, MEMBERSHIP, STATE, STATE_GONE, STATE_UP, type QueueGeometry } from "./queue-layout.js";
import type { PeerState, SideLinks } from "./records.js";

/** The endpoint's parts a death touches. */
export interface EndpointParts {
  readonly i32: Int32Array;
  readonly g: QueueGeometry;
  /** This endpoint's id; `shards` is the main thread's. */
  readonly self: number;
  readonly shards: number;
  /** Per peer, what this endpoint knows of it (the same objects its Outgoing and Incoming read). */
  readonly peers: readonly PeerState[];
  readonly out: ReadonlyArray<Outgoing | undefined>;
  readonly inc: ReadonlyArray<Incoming | undefined>;
  readonly calls: PendingCalls;
  readonly sender: Sender;
  readonly receiver: Receiver;
  readonly links: SideLinks;
}

export class PeerDeaths {
  /** MEMBERSHIP as last read. */
  private membership = -1;

  constructor(private readonly parts: EndpointParts) {}

  /** Has MEMBERSHIP moved since read()? (One load: asked every turn.) */
  changed(): boolean {
    return Atomics.load(this.parts.i32, MEMBERSHIP) !== this.membership;
  }

  /**
   * Compare every peer's EPOCH and STATE with what this endpoint knew. A
   * new epoch means the peer went down: settle and forget everything
   * between us, then acknowledge. A peer UP again (its rings emptied by
   * the main thread) is talked to from offset 0. `initial`: the
   * endpoint's first look, which only learns the peers' states.
   */
  read(initial: boolean): void {
    const { i32, g, self, peers } = this.parts;
    this.membership = Atomics.load(i32, MEMBERSHIP);
    let acked = false;
    for (let p = 0; p < g.endpoints; p++) {
      const w = endpointWord(g, p);
      const epoch = Atomics.load(i32, w + EPOCH);
      const stateWord = Atomics.load(i32, w + STATE);
      const up = stateWord === STATE_UP;
      const state = peers[p]!;
      if (initial) {
        state.epoch = epoch;
        state.up = up;
        state.gone = stateWord === STATE_GONE;
        Atomics.store(i32, ackWord(g, self, p), epoch);
        continue;
      }
      if (epoch !== state.epoch) {
        const wasUp = state.up;
        state.epoch = epoch;
        state.up = false;
        // Answers it published before it died are answers: take them first
        // (its requests are not run: no one is left to answer to).
        const inc = this.parts.inc[p];
        if (wasUp && inc !== undefined) inc.drain();
        this.forget(p);
        Atomics.store(i32, ackWord(g, self, p), epoch);
        acked = true;
      }
      if (stateWord === STATE_GONE && !state.gone) {
        // Its new thread could not start: what waited for it rejects.
        state.gone = true;
        this.forget(p);
      }
      if (!state.up && up) {
        this.parts.out[p]?.ring.reset();
        this.parts.inc[p]?.restart();
        state.up = true;
      }
    }
    if (acked) this.parts.sender.wake(this.parts.shards);
  }

  /**
   * Had call `id`'s shard taken its record when its thread died? The
   * receiver stores its count of records taken in the ring's TAKEN word
   * before it acts on each (incoming.ts); a record numbered at or past
   * that count (still in the ring, or in the overflow) was never taken, so
   * its task never started. Read after the death, before the ring is
   * emptied (the main thread waits for this endpoint's ACK), so nothing
   * moves it.
   */
  startedOn(id: number): boolean {
    const { calls, out } = this.parts;
    return ((calls.recordOf(id) - out[calls.peerOf(id)]!.taken()) | 0) < 0;
  }

  /**
   * `peer` went down: every call pending on it rejects, saying whether it
   * never started or may have run; what was kept for it or from it is
   * dropped.
   */
  private forget(peer: number): void {
    const { calls, out, inc, receiver, links } = this.parts;
    const outgoing = out[peer];
    calls.rejectPending(peer, (id) => {
      const task = outgoing!.taskName(calls.taskIdOf(id));
      return this.startedOn(id)
        ? new ShardError(peer, `shard ${peer}: ${describeTask(task)} was cut off: the shard's thread died after taking it; it may have run`, { code: "ERR_SHARDHEAP_CALL_MAY_HAVE_RUN" })
        : new ShardError(peer, `shard ${peer}: ${describeTask(task)} never started: the shard's thread died before taking it`, { code: "ERR_SHARDHEAP_CALL_NOT_STARTED" });
    });
    outgoing?.reset();
    inc[peer]?.reset();
    receiver.drop(peer);
    links.drop(peer);
  }
}
