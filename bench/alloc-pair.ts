/**
 * "pair": one malloc(64) immediately followed by its free, the allocator's
 * fast path and nothing else.
 *
 * Candidates, all in this run:
 *   - shardheap: a shard of a SharedHeap (exact frees: each free claims the
 *     object with one atomic, and the next malloc of it clears the claim);
 *   - thi.ng: @thi.ng/malloc's MemPool, the common ArrayBuffer malloc for
 *     JS (no thread safety at all): the baseline;
 *   - floor: the bare mechanism of an exact pair, nothing of ours in it: a
 *     LIFO free list in a shared buffer with a live bit, plus the same two
 *     atomics (the heap's own, atomics.ts) on a pending bit;
 *   - debug pointers: the same pair in a heap made with debugPointers
 *     (quarantine.ts: every free poisons its object and holds it back),
 *     what the mode costs against shardheap; informational, no target.
 * Target: shardheap within 1.5x of the baseline in the same run.
 * The ratio to the floor says what the allocator adds to what exactness
 * costs by itself.
 */
import { MemPool } from "@thi.ng/malloc";
import { SharedHeap } from "../src/index.js";
import { allocateHeapMemory, heapAtomics, type HeapAtomics } from "../src/memory/atomics.js";
import { compare, type BenchModule } from "./report.js";
import { measure, type Candidate } from "./timing.js";

const SIZE = 64;
const TARGET_RATIO = 1.5;

/** Candidate.prepare: malloc/free pairs from a call site other than the timed loop. */
function warmPairs(malloc: (size: number) => number, free: (ptr: number) => void): void {
  for (let i = 0; i < WARM_PAIRS; i++) free(malloc(SIZE));
}
const WARM_PAIRS = 1_000_000;

/**
 * The floor: 1024 objects of 64 bytes on a LIFO list (head at word 0),
 * live and pending words (interleaved, as the heap's bitmap) from byte 64,
 * objects from byte 4096. malloc pops, clears the pending bit atomically,
 * sets the live bit; free checks the live bit, claims with an atomic or,
 * clears the live bit, pushes.
 */
class FloorPool {
  private readonly i32: Int32Array;
  private readonly atomics: HeapAtomics;
  constructor() {
    const { buffer, memory } = allocateHeapMemory(4096 + 1024 * SIZE);
    this.i32 = new Int32Array(buffer);
    this.atomics = heapAtomics(buffer, memory);
    for (let k = 0; k < 1024; k++) this.i32[(4096 + k * SIZE) >>> 2] = k === 1023 ? 0 : 4096 + (k + 1) * SIZE;
    this.i32[0] = 4096;
  }
  malloc(): number {
    const i32 = this.i32;
    const p = i32[0]!;
    const w = 16 + (((p - 4096) >>> 8) << 1);
    const bit = 1 << (((p - 4096) >>> 3) & 31);
    this.atomics.and((w + 1) << 2, ~bit);
    i32[0] = i32[p >>> 2]!;
    i32[w] |= bit;
    return p;
  }
  free(p: number): void {
    const i32 = this.i32;
    const w = 16 + (((p - 4096) >>> 8) << 1);
    const bit = 1 << (((p - 4096) >>> 3) & 31);
    if ((i32[w]! & bit) === 0 || (this.atomics.or((w + 1) << 2, bit) & bit) !== 0) throw new Error("floor: not live");
    i32[w] &= ~bit;
    i32[p >>> 2] = i32[0]!;
    i32[0] = p;
  }
}

export const allocPair: BenchModule = {
  name: "pair",
  title: `malloc(${SIZE}) + free pair: shardheap vs @thi.ng/malloc MemPool and the bare exact mechanism`,
  run(ctx) {
    const heap = SharedHeap.create({ shards: 1, shardBytes: 16 * 1024 * 1024, debugPointers: false });
    const shard = heap.shard(0);
    const debugHeap = SharedHeap.create({ shards: 1, shardBytes: 16 * 1024 * 1024, debugPointers: true });
    const debugShard = debugHeap.shard(0);
    const pool = new MemPool({ size: 16 * 1024 * 1024 });
    const floor = new FloorPool();

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
        name: "debug pointers",
        prepare: () => warmPairs((size) => debugShard.malloc(size), (p) => debugShard.free(p)),
        run(n) {
          let acc = 0;
          for (let i = 0; i < n; i++) {
            const p = debugShard.malloc(SIZE);
            debugShard.free(p);
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
      {
        name: "floor",
        prepare: () => warmPairs(() => floor.malloc(), (p) => floor.free(p)),
        run(n) {
          let acc = 0;
          for (let i = 0; i < n; i++) {
            const p = floor.malloc();
            floor.free(p);
            acc ^= p;
          }
          return acc;
        },
      },
    ];
    ctx.progress(`pair: timing ${candidates.map((c) => c.name).join(", ")}`);
    const [sh, dbg, th, fl] = measure(candidates, ctx.timing);
    const record = (m: typeof sh, extra: object): void =>
      ctx.record({
        bench: "pair",
        candidate: m!.name,
        nsPerOp: m!.nsPerOp,
        minNsPerOp: m!.minNsPerOp,
        maxNsPerOp: m!.maxNsPerOp,
        opsPerRound: m!.opsPerRound,
        rounds: m!.samples.length,
        ...extra,
      });
    record(fl, {});
    record(th, compare(th!.nsPerOp, fl!.name, fl!.nsPerOp));
    record(sh, compare(sh!.nsPerOp, fl!.name, fl!.nsPerOp));
    record(sh, compare(sh!.nsPerOp, th!.name, th!.nsPerOp, TARGET_RATIO, `ratio <= ${TARGET_RATIO}`));
    record(dbg, compare(dbg!.nsPerOp, sh!.name, sh!.nsPerOp));
    const errors = [...heap.check(), ...debugHeap.check()];
    if (errors.length > 0) throw new Error(`pair: heap check failed after the run: ${errors.join("; ")}`);
  },
};
