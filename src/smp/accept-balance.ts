/**
 * Connections spread evenly over shards that listen on one socket
 * (ShardContext.listen: shard-listen.ts; Node 20 has no reusePort). Every
 * shard's event loop polls the socket and whichever accepts first serves
 * the connection; left alone, the shard that wakes first takes a burst:
 * 41 connections opened together landed 1/40, 40/1, 11/30 and 2/39 on
 * two shards. A connection cannot move to another
 * thread afterwards (Node passes sockets only between processes), so the
 * spread is decided before the accept: a shard holding more live
 * connections than some other listening shard stops polling the
 * descriptor (AcceptSwitch.pause: libuv keeps the socket, this loop stops
 * watching it) and the others take the next connections; it polls again
 * once no listening shard holds fewer. libuv accepts one connection per
 * poll event (libuv >= 1.45: Node 20.3 on; before, a loop that wakes
 * accepts every connection waiting, so a burst lands unevenly there), and
 * a shard decides in the connection's own callback, before its loop can
 * poll again, so no shard takes two while another holds fewer: the counts
 * stay within one of each other while connections arrive (measured: 41 at
 * once land 20/21).
 *
 * Shared state: one 64-byte line per shard of Int32 slots, written only by
 * that shard (WAKE and BELL: by anyone, with Atomics):
 *   LIVE       its live connections
 *   LISTENING  1 while it listens (only listening shards are compared)
 *   PAUSABLE   1 while it listens and can pause (its AcceptSwitch works)
 *   PAUSED     1 while it has stopped polling
 *   WAKE       1 while a ring of its bell is on its way
 *   BELL       its doorbell (smp/doorbell.ts): rung, it rebalances
 * A shard whose count changes stores it, reads every count, sets its own
 * state, and rings the bell of each paused shard that no longer holds
 * more than another. Nobody is left paused for ever: a shard that pauses
 * stores PAUSED = 1 and only then reads the counts again (and unpauses if
 * it is no longer above another). Every access is an Atomics operation,
 * so they are sequentially consistent: if that second read missed another
 * shard's new count, that shard's store came later, and so did its read
 * of PAUSED, which then sees 1 and rings. Without the second read: shard
 * X reads Y at 5 and decides to pause; X's thread is preempted before it
 * stores PAUSED; Y takes two connections (6, 7), pauses above X, and reads
 * X's PAUSED still 0; then X pauses, and both wait for ever. (The test of
 * real threads in bursts does not catch that: it needs the preemption.)

 * Only a pause that must end is rung for, not one that should begin: a
 * shard left open after connections closed on another pauses by itself at
 * its next accept, one connection over (what closing connections does to
 * the counts is the clients' to decide anyway). So closes cost no ring,
 * and a burst of opens about one per connection.
 *
 * Cost, measured (41 connections opened together, answered once and
 * closed, 60 times, server CPU from /proc, --smp 2, 2-core VM at load
 * average 3 to 6): without balancing (whoever wakes first accepts) 333 to
 * 455 us per connection, median 386; rung with a submitTo call (a task
 * and its answer: two wake-ups) for every change of state either way, 600
 * to 630; as here, 411 to 577, median 529. What the balance adds is about
 * one wake-up per connection opened in a burst, the ring, and the paused
 * loop's one wake-up for the connection that next arrives (libuv takes a
 * stopped descriptor out of its epoll set only when an event comes for
 * it); none while connections stay open.
 */

import { watchDoorbell, type DoorbellWatch } from "./doorbell.js";

/** Switches a shard's listening handle between polling and not (listen-socket.ts acceptSwitch). */
export interface AcceptSwitch {
  pause(): void;
  resume(): void;
}

/** Int32 slots per shard: one 64-byte line each (its own shard writes it). */
const STRIDE = 16;
const LIVE = 0;
const LISTENING = 1;
const PAUSABLE = 2;
const PAUSED = 3;
const WAKE = 4;
const BELL = 5;

/** Int32 words of one block of `shards` lines. */
export const acceptWords = (shards: number): number => shards * STRIDE;

/** The shared block for `shards` shards (all zero: nobody listening yet). */
export function createAcceptBuffer(shards: number): SharedArrayBuffer {
  return new SharedArrayBuffer(acceptWords(shards) * 4);
}

/** What `shard`'s line says now (for tests and diagnostics); `byteOffset`: where the block starts in `buffer`. */
export function acceptState(
  buffer: SharedArrayBuffer,
  shard: number,
  byteOffset = 0,
): { live: number; listening: boolean; pausable: boolean; paused: boolean; ringing: boolean; rings: number } {
  const w = new Int32Array(buffer, byteOffset + shard * STRIDE * 4, STRIDE);
  const flag = (slot: number): boolean => Atomics.load(w, slot) === 1;
  return { live: Atomics.load(w, LIVE), listening: flag(LISTENING), pausable: flag(PAUSABLE), paused: flag(PAUSED), ringing: flag(WAKE), rings: Atomics.load(w, BELL) };
}

/**
 * `shard`'s line as of a shard that takes no part (left, or died): its
 * count and flags zeroed (the bell, a counter others wait on, is kept).
 * For the block in `words` from word `base`.
 */
export function clearAcceptLine(words: Int32Array, base: number, shard: number): void {
  const line = base + shard * STRIDE;
  for (const slot of [LIVE, LISTENING, PAUSABLE, PAUSED, WAKE]) Atomics.store(words, line + slot, 0);
}

/** Ring every paused shard of the block (it rebalances on its own thread): after a shard left without a word. */
export function ringPaused(words: Int32Array, base: number, shards: number): void {
  for (let s = 0; s < shards; s++) {
    const line = base + s * STRIDE;
    if (Atomics.load(words, line + PAUSED) !== 1) continue;
    Atomics.store(words, line + WAKE, 1);
    Atomics.add(words, line + BELL, 1);
    Atomics.notify(words, line + BELL);
  }
}

/** One shard's side. */
export class AcceptBalance {
  private readonly words: Int32Array;
  private readonly shard: number;
  private readonly shards: number;
  /** The block's first word; this shard's line's. */
  private readonly block: number;
  private readonly base: number;
  private gate: AcceptSwitch | undefined;
  private paused = false;
  private bell: DoorbellWatch | undefined;

  /** The block at `byteOffset` (a multiple of 64: a line per cache line) in `buffer`. */
  constructor(buffer: SharedArrayBuffer, shard: number, shards: number, byteOffset = 0) {
    if (byteOffset % 64 !== 0 || buffer.byteLength < byteOffset + shards * STRIDE * 4) throw new RangeError(`AcceptBalance: the buffer holds fewer than ${shards} shards' lines`);
    this.words = new Int32Array(buffer);
    this.shard = shard;
    this.shards = shards;
    this.block = byteOffset / 4;
    this.base = this.block + shard * STRIDE;
  }

  /** This shard listens now, through `gate` (undefined: it cannot pause, and counts as always open). */
  start(gate: AcceptSwitch | undefined): void {
    this.gate = gate;
    Atomics.store(this.words, this.base + PAUSABLE, gate === undefined ? 0 : 1);
    Atomics.store(this.words, this.base + LISTENING, 1);
    // Watching the bell rebalances once at once.
    if (gate !== undefined) this.bell ??= watchDoorbell(this.words, this.base + BELL, () => (this.rebalance(), 0));
    else this.rebalance();
  }

  /** This shard stopped listening: it takes no part any more. */
  stop(): void {
    this.bell?.stop();
    this.bell = undefined;
    this.gate = undefined;
    this.paused = false;
    Atomics.store(this.words, this.base + LISTENING, 0);
    Atomics.store(this.words, this.base + PAUSABLE, 0);
    Atomics.store(this.words, this.base + PAUSED, 0);
  }

  opened(): void {
    Atomics.add(this.words, this.base + LIVE, 1);
    this.rebalance();
  }

  closed(): void {
    Atomics.sub(this.words, this.base + LIVE, 1);
    this.rebalance();
  }

  /** Set this shard's state from the counts, and ring the paused shards that may accept again. */
  rebalance(): void {
    const w = this.words;
    Atomics.store(w, this.base + WAKE, 0);
    const gate = this.gate;
    if (gate !== undefined) {
      let pause = this.aboveAnother(this.shard);
      if (pause) {
        Atomics.store(w, this.base + PAUSED, 1);
        pause = this.aboveAnother(this.shard); // the second read (see the opening comment)
      }
      if (!pause) Atomics.store(w, this.base + PAUSED, 0);
      if (pause !== this.paused) {
        this.paused = pause;
        if (pause) gate.pause();
        else gate.resume();
      }
    }
    for (let s = 0; s < this.shards; s++) {
      if (s === this.shard) continue;
      const line = this.block + s * STRIDE;
      if (Atomics.load(w, line + PAUSED) !== 1 || this.aboveAnother(s)) continue;
      if (Atomics.compareExchange(w, line + WAKE, 0, 1) !== 0) continue; // rung already, not yet answered
      Atomics.add(w, line + BELL, 1);
      Atomics.notify(w, line + BELL);
    }
  }

  /** True when some other listening shard holds fewer live connections than `shard`. */
  private aboveAnother(shard: number): boolean {
    const w = this.words;
    const mine = Atomics.load(w, this.block + shard * STRIDE + LIVE);
    for (let s = 0; s < this.shards; s++) {
      if (s === shard) continue;
      const line = this.block + s * STRIDE;
      if (Atomics.load(w, line + LISTENING) === 1 && Atomics.load(w, line + LIVE) < mine) return true;
    }
    return false;
  }
}
