/**
 * "pair": one malloc(64) immediately followed by its free, the allocator's
 * fast path and nothing else. Candidate: a shardheap shard; baseline:
 * @thi.ng/malloc's MemPool, the common ArrayBuffer malloc for JS.
 * Target (issue): shardheap takes at most 0.8x the baseline's time.
 */
import { MemPool } from "@thi.ng/malloc";
import { SharedHeap } from "../src/index.js";
import { compare, type BenchModule } from "./report.js";
import { measure, type Candidate } from "./timing.js";

const SIZE = 64;
const TARGET_RATIO = 0.8;

/** Candidate.prepare: malloc/free pairs from a call site other than the timed loop. */
function warmPairs(malloc: (size: number) => number, free: (ptr: number) => void): void {
  for (let i = 0; i < WARM_PAIRS; i++) free(malloc(SIZE));
}
const WARM_PAIRS = 1_000_000;

export const allocPair: BenchModule = {
  name: "pair",
  title: `malloc(${SIZE}) + free pair: shardheap vs @thi.ng/malloc MemPool`,
  run(ctx) {
    const heap = SharedHeap.create({ shards: 1, shardBytes: 16 * 1024 * 1024 });
    const shard = heap.shard(0);
    const pool = new MemPool({ size: 16 * 1024 * 1024 });

    const candidates: Candidate[] = [
      {
        name: "shardheap",
        prepare: () => warmPairs((size) => shard.malloc(size), (p) => shard.free(p)),
        run(n) {
          let acc = 0;
          for (let i = 0; i < n; i++) {
            const p = shard.malloc(SIZE);
            shard.free(p);
            acc ^= p;
          }
          return acc;
        },
      },
      {
        name: "thi.ng",
        prepare: () => warmPairs((size) => pool.malloc(size), (p) => pool.free(p)),
        run(n) {
          let acc = 0;
          for (let i = 0; i < n; i++) {
            const p = pool.malloc(SIZE);
            pool.free(p);
            acc ^= p;
          }
          return acc;
        },
      },
    ];
    ctx.progress(`pair: timing ${candidates.map((c) => c.name).join(", ")}`);
    const [sh, th] = measure(candidates, ctx.timing);
    for (const m of [sh!, th!]) {
      ctx.record({
        bench: "pair",
        candidate: m.name,
        nsPerOp: m.nsPerOp,
        minNsPerOp: m.minNsPerOp,
        maxNsPerOp: m.maxNsPerOp,
        opsPerRound: m.opsPerRound,
        rounds: m.samples.length,
        ...(m === sh
          ? compare(m.nsPerOp, th!.name, th!.nsPerOp, TARGET_RATIO, `ratio <= ${TARGET_RATIO}`)
          : {}),
      });
    }
    const errors = heap.check();
    if (errors.length > 0) throw new Error(`pair: heap check failed after the run: ${errors.join("; ")}`);
  },
};
