/**
 * The heap profiler's sampling decision (Seastar's maybe_sample, after
 * tcmalloc, jemalloc and Go): Poisson by bytes. The allocator counts bytes
 * down from an exponentially distributed interval with mean `rate`; the
 * allocation that crosses zero is sampled and a new interval drawn. An
 * object of s bytes is then sampled with probability 1 - exp(-s/rate), so
 * counting it 1 / (1 - exp(-s/rate)) times makes every estimate unbiased
 * (Go's pprof weighting; not the average-size shortcut). Rate 1 samples
 * every allocation with weight exactly 1; rate 0 never samples.
 */

/**
 * The largest sample rate, in bytes: the rate lives in an Int32 header slot
 * (layout.ts S_PROF_RATE), so 2^31 - 1. Checked at every
 * edge that takes a rate (smp/options.ts heapprofRate) so a bad rate is
 * refused where it was given, not inside a shard's worker.
 */
export const MAX_SAMPLE_RATE = 0x7fffffff;

/** The weight of one sampled object of `size` bytes at `rate`. */
export function sampleWeight(size: number, rate: number): number {
  return rate <= 1 ? 1 : 1 / (1 - Math.exp(-size / rate));
}

export class Sampler {
  private state: number;
  private rateBytes = 0;

  constructor(seed: number) {
    this.state = seed >>> 0 || 0x9e3779b9;
  }

  get rate(): number {
    return this.rateBytes;
  }

  set rate(bytes: number) {
    this.rateBytes = bytes;
  }

  /** Restart the generator (tests use a fixed seed for reproducible samples). */
  seed(seed: number): void {
    this.state = seed >>> 0 || 0x9e3779b9;
  }

  /** Bytes until the next sample: Infinity when off, 0 when every allocation is sampled. */
  nextInterval(): number {
    const rate = this.rateBytes;
    if (rate === 0) return Infinity;
    if (rate === 1) return 0;
    // xorshift32: cheap, and good enough to draw exponential intervals.
    let x = this.state;
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    this.state = x >>> 0;
    const u = (this.state + 1) / 4294967297; // in (0, 1)
    return -Math.log(u) * rate;
  }
}
