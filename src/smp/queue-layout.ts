/**
 * The messaging buffer: where shards (and the main thread) leave each other
 * messages, after Seastar's smp_message_queue. It is a SharedArrayBuffer of
 * its own, apart from the heap's (a heap image never carries messages, and
 * the heap's layout does not change for them), sized once at Smp.start.
 *
 * Endpoints: shards 0 .. shards-1, and the main thread as endpoint `shards`
 * (E = shards + 1 in all). One single-producer/single-consumer ring per
 * ordered pair (from, to) carries everything `from` says to `to`: its
 * requests and its replies to `to`'s requests (Seastar keeps two queues a
 * pair, requests and completions, because a completion there is a pointer
 * back to the caller's own work item; here a reply is a message like any
 * other, so one FIFO a direction suffices and keeps replies behind the
 * requests they may have caused).
 *
 * Layout, in 32-bit words unless said otherwise:
 *
 *   global line (64 B)     MEMBERSHIP: bumped by the main thread each time
 *                          an endpoint goes down or comes back up, so an
 *                          endpoint notices with one load a loop turn
 *   endpoint e (64 B each) BELL       doorbell counter: Atomics.waitAsync on
 *                                     it while asleep; a sender that finds
 *                                     SLEEPING set adds 1 and notifies
 *                          SLEEPING   1 while e is (about to be) asleep;
 *                                     the waker clears it (compareExchange
 *                                     1 -> 0, so only one sender notifies)
 *                          EPOCH      incarnation of e's thread (main bumps
 *                                     it when a shard's worker dies)
 *                          STATE      UP, DOWN (its thread died; a new
 *                                     one is on the way) or GONE (the new
 *                                     one could not start)
 *   acks (E x E words)     ACK[y*E + x] = the EPOCH of x that y has seen go
 *                          down (it forgot every call to and from x)
 *   ring headers           per ordered pair, two cache lines:
 *     producer line        TAIL  bytes written, mod 2^32 (published with
 *                                Atomics.store after a batch)
 *                          NEED_SPACE  1 when the producer holds overflow:
 *                                the consumer wakes it after making room
 *     consumer line        HEAD  bytes consumed, mod 2^32
 *                          TAKEN records the consumer has taken, mod 2^32,
 *                                stored before it acts on each one: what a
 *                                sender reads, once the consumer's thread
 *                                has died, to tell a call that never
 *                                started from one that may have run
 *   ring data              per ordered pair, `ringBytes` (a power of two)
 *
 * Invariants: 0 <= TAIL - HEAD <= ringBytes (unsigned 32-bit difference);
 * only the producer writes TAIL and the bytes in [TAIL, HEAD + ringBytes);
 * only the consumer writes HEAD. The producer and consumer counters sit on
 * separate 64-byte lines so the two threads never write the same line in
 * the common case (Seastar's alignas(cache_line_size) blocks).
 */
import { InvalidValueError } from "../errors.js";

export const LINE = 64;
const LINE_WORDS = LINE / 4;

// Global line.
export const MEMBERSHIP = 0;

// Endpoint block words (relative to endpointWord(e)).
export const BELL = 0;
export const SLEEPING = 1;
export const EPOCH = 2;
export const STATE = 3;
export const STATE_DOWN = 0;
export const STATE_UP = 1;
export const STATE_GONE = 2;

// Ring header words (relative to ringWord(from, to)).
export const TAIL = 0;
export const NEED_SPACE = 1;
export const HEAD = LINE_WORDS;
export const TAKEN = LINE_WORDS + 1;
const RING_HEADER_BYTES = 2 * LINE;

/** Smallest ring: a request with a small argument must fit several times. */
export const MIN_RING_BYTES = 128;
/** Largest ring a pair may get. */
export const MAX_RING_BYTES = 1 << 26;
/** The default ring: 64 KiB a pair, less when there are many endpoints (see defaultRingBytes). */
export const DEFAULT_RING_BYTES = 64 * 1024;
/** What the default sizes aim to keep the whole buffer under. */
const DEFAULT_BUDGET_BYTES = 64 * 1024 * 1024;

export interface QueueGeometry {
  /** Shards plus the main thread. */
  readonly endpoints: number;
  readonly ringBytes: number;
  readonly totalBytes: number;
}

/**
 * The default ring size for `endpoints`: 64 KiB per ordered pair (a few
 * thousand small calls in flight before the sender keeps overflow), less
 * when E^2 rings would pass 64 MiB, never under 256 B. Pages of rings no
 * one uses are never touched, so the OS does not back them.
 */
export function defaultRingBytes(endpoints: number): number {
  let bytes = DEFAULT_RING_BYTES;
  while (bytes > 256 && bytes * endpoints * endpoints > DEFAULT_BUDGET_BYTES) bytes >>>= 1;
  return bytes;
}

/** Check a ring size from the options: a power of two within bounds. */
export function checkRingBytes(bytes: number, what: string): number {
  if (!Number.isSafeInteger(bytes) || bytes < MIN_RING_BYTES || bytes > MAX_RING_BYTES || (bytes & (bytes - 1)) !== 0) {
    throw new InvalidValueError(what, `${what} must be a power of two from ${MIN_RING_BYTES} to ${MAX_RING_BYTES} bytes, got ${String(bytes)}`);
  }
  return bytes;
}

export function queueGeometry(endpoints: number, ringBytes: number): QueueGeometry {
  const totalBytes = dataOffset(endpoints) + endpoints * endpoints * ringBytes;
  return { endpoints, ringBytes, totalBytes };
}

function endpointsOffset(): number {
  return LINE;
}
function acksOffset(endpoints: number): number {
  return endpointsOffset() + endpoints * LINE;
}
function ringHeadersOffset(endpoints: number): number {
  return roundUp(acksOffset(endpoints) + endpoints * endpoints * 4, LINE);
}
function dataOffset(endpoints: number): number {
  return ringHeadersOffset(endpoints) + endpoints * endpoints * RING_HEADER_BYTES;
}

/** Int32 index of endpoint e's block. */
export function endpointWord(g: QueueGeometry, e: number): number {
  return (endpointsOffset() + e * LINE) >>> 2;
}

/** Int32 index of ACK[seer][seen]. */
export function ackWord(g: QueueGeometry, seer: number, seen: number): number {
  return (acksOffset(g.endpoints) >>> 2) + seer * g.endpoints + seen;
}

/** Int32 index of the header of the ring from -> to. */
export function ringWord(g: QueueGeometry, from: number, to: number): number {
  return (ringHeadersOffset(g.endpoints) + (from * g.endpoints + to) * RING_HEADER_BYTES) >>> 2;
}

/** Byte offset of the data of the ring from -> to. */
export function ringData(g: QueueGeometry, from: number, to: number): number {
  return dataOffset(g.endpoints) + (from * g.endpoints + to) * g.ringBytes;
}

/** A fresh messaging buffer: every endpoint UP at epoch 0, every ring empty. */
export function createQueueBuffer(g: QueueGeometry): SharedArrayBuffer {
  const buffer = new SharedArrayBuffer(g.totalBytes);
  const i32 = new Int32Array(buffer);
  for (let e = 0; e < g.endpoints; e++) i32[endpointWord(g, e) + STATE] = STATE_UP;
  return buffer;
}

/** Empty both rings between `e` and every endpoint (main thread only, while nobody uses them: see Smp's revival). */
export function resetRingsOf(g: QueueGeometry, i32: Int32Array, e: number): void {
  for (let other = 0; other < g.endpoints; other++) {
    for (const w of [ringWord(g, e, other), ringWord(g, other, e)]) {
      Atomics.store(i32, w + TAIL, 0);
      Atomics.store(i32, w + NEED_SPACE, 0);
      Atomics.store(i32, w + HEAD, 0);
      Atomics.store(i32, w + TAKEN, 0);
    }
  }
  Atomics.store(i32, endpointWord(g, e) + SLEEPING, 0);
}

function roundUp(n: number, to: number): number {
  return Math.ceil(n / to) * to;
}
