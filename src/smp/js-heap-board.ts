/**
 * The JS heap board: one small SharedArrayBuffer where each shard's thread
 * posts its V8 heap figures (process.memoryUsage() of its own isolate:
 * heap used and total, external memory, array buffers) and where Smp keeps
 * the JS heap profiler rate it asked each shard for. Readers (the admin
 * server's history and /metrics, smp.jsHeapStats) read it from any thread
 * without asking the shard, as they read the heap's buffer: a busy or
 * stuck shard answers with its last posted figures (`t` says when).
 *
 * Layout, per shard s of `regions`:
 *   Int32 word SEQ + s        a seqlock (odd while the shard writes)
 *   Int32 word RATE + s       the JS heap sampling interval asked for, in
 *                             bytes (0 off); a replacement thread applies
 *                             it as it starts, as the region keeps the
 *                             shared heap's rate
 *   Float64 FIGURES + s * N   t (ms since the epoch; 0: never posted),
 *                             used, total, external, arrayBuffers
 * The seqlock keeps a reader from mixing two postings' figures: it reads
 * the word, the figures, the word again, and retries when the word was odd
 * or moved (Linux's seqlock.h).
 *
 * Cost: a shard posts every POST_INTERVAL_MS, unref'd; process.memoryUsage()
 * took 7-15 us on Node 20 (it reads the resident set too): 0.003% of a
 * thread at 500 ms.
 */

/** How often a shard posts its figures, in ms. */
export const POST_INTERVAL_MS = 500;

/** One shard's V8 heap, as last posted (bytes; `t` in ms since the epoch). */
export interface JsHeapStats {
  /** When the shard posted these figures, ms since the epoch. */
  t: number;
  /** V8 heap in use (heapUsed) and reserved (heapTotal). */
  used: number;
  total: number;
  /** Memory of C++ objects bound to the thread's JS objects (external), array buffers' among it (arrayBuffers). */
  external: number;
  arrayBuffers: number;
  /** The JS heap profiler's mean sampling interval in bytes; 0 off. */
  sampleRate: number;
}

const FIELDS = 5;
const MAX_READ_TRIES = 64;

export class JsHeapBoard {
  readonly buffer: SharedArrayBuffer;
  private readonly words: Int32Array;
  private readonly figures: Float64Array;

  /** A new board for `regions` shards, or the board in `buffer` (another thread's). */
  constructor(
    readonly regions: number,
    buffer?: SharedArrayBuffer,
  ) {
    const wordBytes = Math.ceil((regions * 2 * 4) / 8) * 8;
    this.buffer = buffer ?? new SharedArrayBuffer(wordBytes + regions * FIELDS * 8);
    this.words = new Int32Array(this.buffer, 0, regions * 2);
    this.figures = new Float64Array(this.buffer, wordBytes, regions * FIELDS);
  }

  /** The sampling interval asked for `shard` (0 off). */
  rate(shard: number): number {
    return Atomics.load(this.words, this.regions + shard);
  }

  setRate(shard: number, rate: number): void {
    Atomics.store(this.words, this.regions + shard, rate);
  }

  /** Post `shard`'s figures (its own thread only: one writer per shard). */
  post(shard: number, m: Pick<NodeJS.MemoryUsage, "heapUsed" | "heapTotal" | "external" | "arrayBuffers">, t = Date.now()): void {
    const at = shard * FIELDS;
    Atomics.add(this.words, shard, 1);
    this.figures[at] = t;
    this.figures[at + 1] = m.heapUsed;
    this.figures[at + 2] = m.heapTotal;
    this.figures[at + 3] = m.external;
    this.figures[at + 4] = m.arrayBuffers;
    Atomics.add(this.words, shard, 1);
  }

  /** `shard`'s figures as last posted; undefined before its first posting (or while its writer stays mid-post). */
  read(shard: number): JsHeapStats | undefined {
    const at = shard * FIELDS;
    for (let i = 0; i < MAX_READ_TRIES; i++) {
      const before = Atomics.load(this.words, shard);
      if (before & 1) continue;
      const t = this.figures[at]!;
      const used = this.figures[at + 1]!;
      const total = this.figures[at + 2]!;
      const external = this.figures[at + 3]!;
      const arrayBuffers = this.figures[at + 4]!;
      if (Atomics.load(this.words, shard) !== before) continue;
      return t === 0 ? undefined : { t, used, total, external, arrayBuffers, sampleRate: this.rate(shard) };
    }
    return undefined;
  }
}

/** This thread's figures posted now and every POST_INTERVAL_MS; the returned function stops it. */
export function postJsHeapFigures(board: JsHeapBoard, shard: number): () => void {
  const postNow = (): void => board.post(shard, process.memoryUsage());
  postNow();
  // unref: the postings never keep a thread alive.
  const timer = setInterval(postNow, POST_INTERVAL_MS).unref();
  return () => clearInterval(timer);
}
