/**
 * The timing helper every benchmark uses.
 *
 * Method (simple and robust rather than clever):
 *   0. Call the candidate's prepare() hook, if any (see Candidate).
 *   1. Warm up each candidate in doubling batches until it has run for
 *      `warmupMs` (the JIT settles, pools and free lists reach a working
 *      state); the largest batch gives a first ns/op estimate.
 *   2. From that estimate pick each candidate's ops per round so a round
 *      takes about `roundMs` (clamped to [minOps, maxOps]).
 *   3. Take `rounds` timed rounds per candidate, interleaved: round r runs
 *      every candidate once, in forward order on even r and reversed on odd
 *      r, so slow drift (thermal, frequency, the heap growing) and "who
 *      goes first" effects land on all candidates alike.
 *   4. Report the median ns/op of each candidate's rounds (plus min and
 *      max, so the reader sees the spread).
 * Before each timed round a full GC runs when the process has --expose-gc,
 * so garbage one candidate made (new Uint8Array...) is not collected on
 * another candidate's clock; a candidate's own GC work inside its round is
 * part of its cost.
 */

/** One thing to time. `run(n)` performs n operations and returns a checksum. */
export interface Candidate {
  readonly name: string;
  run(n: number): number;
  /**
   * Called once before warm-up: exercise the code run(n) calls from another
   * call site, so its type feedback is complete before run() itself gets
   * optimized. Without it, whether V8 inlines the callees into run() can
   * depend on a race with the concurrent compiler (@thi.ng/malloc's pair
   * loop came out at 12 or 18 ns/op from one process to the next).
   */
  prepare?(): void;
  /** Per-candidate overrides (e.g. a very slow baseline). */
  readonly timing?: Partial<TimingOptions>;
}

export interface TimingOptions {
  /** Timed rounds per candidate; the median is reported. */
  rounds: number;
  /** Target duration of one timed round, ms. */
  roundMs: number;
  /** Warm-up time per candidate, ms. */
  warmupMs: number;
  /** Bounds on operations per round. */
  minOps: number;
  maxOps: number;
}

export const DEFAULT_TIMING: TimingOptions = {
  rounds: 7,
  roundMs: 100,
  warmupMs: 300,
  minOps: 1,
  maxOps: 50_000_000,
};

export interface Measurement {
  readonly name: string;
  /** Median over rounds, ns per operation. */
  readonly nsPerOp: number;
  readonly minNsPerOp: number;
  readonly maxNsPerOp: number;
  /** ns/op of each timed round, in the order taken. */
  readonly samples: readonly number[];
  /** Operations per timed round. */
  readonly opsPerRound: number;
  /** Operations performed in warm-up. */
  readonly warmupOps: number;
}

/** Written by every round so the work cannot be optimized away. */
let sink = 0;
/** The accumulated checksum (exposed so nothing is dead code). */
export function checksum(): number {
  return sink;
}

const gc: (() => void) | undefined = (globalThis as { gc?: () => void }).gc;

/** True when the process runs with --expose-gc. */
export function hasGc(): boolean {
  return gc !== undefined;
}

/** A full GC when exposed; otherwise nothing. */
export function collectGarbage(): void {
  if (gc) gc();
}

function now(): bigint {
  return process.hrtime.bigint();
}

/** Time one call of run(n), in ns. */
function timeRun(c: Candidate, n: number): number {
  const t0 = now();
  const r = c.run(n);
  const t1 = now();
  sink = (sink + (r | 0)) | 0;
  return Number(t1 - t0);
}

export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >>> 1;
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

interface Plan {
  c: Candidate;
  o: TimingOptions;
  ops: number;
  warmupOps: number;
  samples: number[];
}

/**
 * Warm up, calibrate and time `candidates` as described at the top of this
 * file. Returns one Measurement per candidate, in the order given.
 */
export function measure(candidates: readonly Candidate[], options: Partial<TimingOptions> = {}): Measurement[] {
  const plans: Plan[] = candidates.map((c) => {
    const o = { ...DEFAULT_TIMING, ...options, ...c.timing };
    c.prepare?.();
    // Warm up in doubling batches; the largest batch estimates ns/op.
    collectGarbage();
    let n = Math.max(1, o.minOps);
    let spent = 0;
    let warmupOps = 0;
    let perOp = 0; // from the largest batch so far
    let largest = 0;
    for (;;) {
      const ns = timeRun(c, n);
      warmupOps += n;
      spent += ns;
      if (n >= largest) {
        largest = n;
        perOp = ns / n;
      }
      const remaining = o.warmupMs * 1e6 - spent;
      if (remaining <= 0 || n >= o.maxOps) break;
      // Double, but never past what the remaining warm-up time fits.
      const fits = Math.floor(remaining / Math.max(ns / n, 0.01));
      n = Math.max(1, Math.min(o.maxOps, n * 2, fits));
    }
    const ops = Math.min(o.maxOps, Math.max(o.minOps, Math.round((o.roundMs * 1e6) / Math.max(perOp, 0.01))));
    return { c, o, ops, warmupOps, samples: [] };
  });
  const rounds = Math.max(...plans.map((p) => p.o.rounds));
  for (let r = 0; r < rounds; r++) {
    const order = r % 2 === 0 ? plans : [...plans].reverse();
    for (const p of order) {
      if (p.samples.length >= p.o.rounds) continue;
      collectGarbage();
      p.samples.push(timeRun(p.c, p.ops) / p.ops);
    }
  }
  return plans.map((p) => ({
    name: p.c.name,
    nsPerOp: median(p.samples),
    minNsPerOp: Math.min(...p.samples),
    maxNsPerOp: Math.max(...p.samples),
    samples: p.samples,
    opsPerRound: p.ops,
    warmupOps: p.warmupOps,
  }));
}

/** A small seeded PRNG (mulberry32): deterministic workloads across runs and candidates. */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
