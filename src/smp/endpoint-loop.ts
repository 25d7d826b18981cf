/**
 * When an endpoint (endpoint.ts) turns and when it sleeps. A turn is one
 * setImmediate in which the endpoint does its work (TurnWork: endpoint.ts
 * notices peer deaths, moves overflow, drains every ring, publishes); the
 * loop takes another turn while there is work, and with nothing to do it
 * polls a while for answers to its own calls (the poll window), then
 * sleeps: it sets SLEEPING, checks once more for work (so a record
 * published just before is not missed: both sides use sequentially
 * consistent atomics, the Dekker pattern), and waits on its BELL word with
 * Atomics.waitAsync, which keeps the event loop free for timers and
 * sockets. A sender that publishes to a sleeping endpoint rings its bell
 * (wakeEndpoint, called by outgoing.ts and by Smp after a death); the
 * loop then turns again. It tells the task host when the endpoint gets
 * work and when it goes to sleep (busy/idle: the idle trimmer's clock).
 */
import { BELL, endpointWord, SLEEPING, type QueueGeometry } from "./queue-layout.js";

/**
 * How long an endpoint that waits for answers to its own calls keeps
 * polling with nothing to do before it sleeps (ms); one with no call out
 * sleeps at once. A sleeping receiver costs its sender a futex wake and
 * itself an event-loop wake-up. The window adapts (nextPollWindow),
 * between MIN_ANSWER_POLL_MS and this: when an answer wakes the endpoint
 * soon after it went to sleep (within ANSWER_POLL_MS), polling longer
 * would have caught it, so the window doubles (at least to 1.5x that
 * wait); when the wake comes later (slow tasks, a flood the callee is
 * still working through), polling only took a core from the callee, so it
 * halves.
 *
 * 50 us, about what one wake-up costs in CPU on these VMs (two threads
 * ping-ponging through Atomics.wait: 75 us of CPU a round trip, two
 * wake-ups, on a quiet machine; 18 us under load), so a poll that misses
 * costs about what the sleep it replaced would have (spin, then block).
 * Against Seastar's 200 us idle poll, as a hop's CPU on both shards'
 * threads (bench/messaging-hops.ts: requests arriving on sockets, each
 * hopping to the other shard and back, as a server's): on a quiet machine
 * (load 0.3-0.5) 115 us a hop instead of 166-205 at 2k hops/s, 67-76
 * instead of 82-84 at 10k, the same at 40k (26-28), 8-9 instead of 12-14
 * in bursts of 16; under load (5-10, paired rounds) 0.64-0.99x. At 200 us
 * two shards calling each other at once each polled for the other, and on
 * 2 cores a poller takes the core its callee needs. The price: calls one
 * after another between idle shards, 38 us of CPU a hop instead of 28-32
 * on the quiet machine (0.82-0.90x under load); bench/messaging.ts's
 * sequential calls stayed at 24-25 us. The other windows and policies
 * measured, and why they lost: docs/decisions.md.
 */
export const ANSWER_POLL_MS = 0.05;
export const MIN_ANSWER_POLL_MS = 0.0125;

/** The poll window after an endpoint that slept with calls out, polling for `window` ms, was woken with work after `waited` ms. */
export function nextPollWindow(window: number, waited: number): number {
  return waited < ANSWER_POLL_MS ? Math.min(ANSWER_POLL_MS, Math.max(window * 2, waited * 1.5)) : Math.max(MIN_ANSWER_POLL_MS, window / 2);
}

/** What the loop asks of its endpoint. */
export interface TurnWork {
  /** Do one turn's work; the number of records handled or moved (0: there was nothing to do). */
  turn(): number;
  /** Anything to do? Asked after SLEEPING is set, before the endpoint waits. */
  hasWork(): boolean;
  /** Calls out, waiting for answers (while there are, the loop polls before it sleeps). */
  pendingCalls(): number;
}

/** Told when the endpoint has work (a turn) and when it has gone to sleep; the calls come in pairs, busy first. */
export interface BusyListener {
  busy(): void;
  idle(): void;
}

export class EndpointLoop {
  /** Int32 indexes of this endpoint's BELL and SLEEPING words. */
  private readonly bell: number;
  private readonly sleeping: number;
  private scheduled = false;
  /** SLEEPING is set and a turn will come only from the bell. */
  private asleep = false;
  /** An Atomics.waitAsync is outstanding. */
  private waiting = false;
  /** listener.idle() was the last of busy()/idle() reported. */
  private idleReported = true;
  /** performance.now() of the last turn that found work. */
  private lastWork = 0;
  /** How long to poll for answers now (ms; see ANSWER_POLL_MS). */
  private pollWindow = ANSWER_POLL_MS;
  /** performance.now() when this endpoint last went to sleep with calls out, or -1. */
  private sleptAt = -1;
  private isStopped = false;

  constructor(
    private readonly i32: Int32Array,
    g: QueueGeometry,
    self: number,
    private readonly work: TurnWork,
    private readonly listener: BusyListener | undefined,
  ) {
    this.bell = endpointWord(g, self) + BELL;
    this.sleeping = endpointWord(g, self) + SLEEPING;
  }

  /** stop() was called: no more turns. */
  get stopped(): boolean {
    return this.isStopped;
  }

  /** The poll window now (ms). */
  get window(): number {
    return this.pollWindow;
  }

  /** Take a turn soon (unless one is coming, or the loop stopped). */
  scheduleTurn(): void {
    if (this.scheduled || this.isStopped) return;
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

  /** No more turns; a wait on the bell ends (the thread is about to end). */
  stop(): void {
    this.isStopped = true;
    if (this.waiting) {
      Atomics.add(this.i32, this.bell, 1);
      Atomics.notify(this.i32, this.bell);
    }
  }

  /** One turn: the endpoint's work, then another turn, a poll, or sleep. */
  private readonly turn = (): void => {
    this.scheduled = false;
    if (this.isStopped) return;
    if (this.asleep) {
      this.asleep = false;
      Atomics.store(this.i32, this.sleeping, 0);
    }
    if (this.idleReported) {
      this.idleReported = false;
      this.listener?.busy();
    }
    const work = this.work.turn();
    if (work > 0) {
      this.lastWork = performance.now();
      if (this.sleptAt >= 0) {
        this.pollWindow = nextPollWindow(this.pollWindow, this.lastWork - this.sleptAt);
        this.sleptAt = -1;
      }
      this.scheduleTurn();
    } else if (this.work.pendingCalls() > 0 && performance.now() - this.lastWork < this.pollWindow) {
      this.scheduleTurn();
    } else {
      this.sleptAt = this.work.pendingCalls() > 0 ? performance.now() : -1;
      this.sleep();
    }
  };

  /** Nothing to do: say so, look once more, then wait on the bell. */
  private sleep(): void {
    const seen = Atomics.load(this.i32, this.bell);
    Atomics.store(this.i32, this.sleeping, 1);
    this.asleep = true;
    if (this.work.hasWork()) {
      this.scheduleTurn();
      return;
    }
    if (!this.idleReported) {
      this.idleReported = true;
      this.listener?.idle();
    }
    if (this.waiting) return; // the outstanding wait still watches the bell at `seen`
    const wait = Atomics.waitAsync(this.i32, this.bell, seen);
    if (!wait.async) {
      this.scheduleTurn();
      return;
    }
    this.waiting = true;
    void wait.value.then(this.wokenByBell);
  }

  /** The wait on the bell ended: a sender rang it, or stop() did. */
  private readonly wokenByBell = (): void => {
    this.waiting = false;
    if (this.isStopped) return;
    if (this.asleep) this.scheduleTurn();
  };
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
