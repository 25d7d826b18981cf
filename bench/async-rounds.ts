/**
 * Interleaved rounds for benchmarks whose operations are asynchronous
 * (calls between threads: bench/messaging.ts, bench/messaging-hops.ts),
 * where timing.ts's synchronous run(n) does not apply. Every candidate
 * runs WARMUP_ROUNDS rounds, then `rounds` timed ones, interleaved: round
 * r runs every candidate once, forward on even r and reversed on odd r,
 * so drift and load from the rest of the machine land on all alike.
 */
import type { BenchContext } from "./report.js";
import { DEFAULT_TIMING } from "./timing.js";

const WARMUP_ROUNDS = 2;

export interface AsyncCandidate<S> {
  readonly name: string;
  readonly metric: string;
  /** One round; what it measured. */
  round(): Promise<S>;
}

export interface RoundResults<S> {
  readonly rounds: number;
  /** The timed rounds' samples of the candidate named so. */
  get(name: string, metric: string): S[];
}

export async function runRounds<S>(ctx: BenchContext, bench: string, candidates: readonly AsyncCandidate<S>[], note: string): Promise<RoundResults<S>> {
  const rounds = Math.max(3, ctx.timing.rounds ?? DEFAULT_TIMING.rounds);
  ctx.progress(`${bench}: ${candidates.length} candidates, ${WARMUP_ROUNDS} warm-up + ${rounds} rounds each; ${note}`);
  for (let w = 0; w < WARMUP_ROUNDS; w++) for (const c of candidates) await c.round();
  const samples = new Map<AsyncCandidate<S>, S[]>(candidates.map((c) => [c, []]));
  for (let r = 0; r < rounds; r++) {
    for (const c of r % 2 === 0 ? candidates : [...candidates].reverse()) samples.get(c)!.push(await c.round());
  }
  return {
    rounds,
    get(name, metric) {
      const c = candidates.find((x) => x.name === name && x.metric === metric);
      if (c === undefined) throw new Error(`${bench}: no candidate ${name} (${metric})`);
      return samples.get(c)!;
    },
  };
}
