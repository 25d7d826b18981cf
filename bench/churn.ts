/**
 * "churn": a live set of L objects with random sizes (16..1024 B); each
 * step replaces a random one: free it, allocate a new object of a random
 * size, write one byte into it. All randomness is precomputed from a seeded
 * PRNG (sizes and indices in typed arrays, cycled), so the timed loops
 * allocate nothing but what the candidate allocates.
 *
 * Candidates, each with its own live set, timed in the same run:
 *   shardheap   one shard of a SharedHeap (512 MiB, room for 100k objects)
 *   thi.ng      @thi.ng/malloc MemPool; its free walks the used list and its
 *               malloc / compaction walk the free list, so its cost grows
 *               with L: the timing helper sizes its rounds by time, so it
 *               runs few steps at large L and the suite stays short
 *   uint8array  `new Uint8Array(size)`, live set in a JS array (GC frees)
 *   floor       no allocator: only the two random object touches a step
 *               must make (the freed object and the new one) in a working
 *               set of L objects packed SPACING bytes apart in one
 *               ArrayBuffer, plus the same harness work (reading the
 *               precomputed arrays, updating the live-set table)
 * "own cost" = candidate ns/step - floor ns/step (paired by round, see
 * ownCost): what the allocator adds over the memory traffic any allocator
 * would cause.
 *
 * Targets: shardheap's own cost at L = 100k within 1.5x its own
 * cost at L = 1k; at L = 10k shardheap >= 1000x faster than thi.ng; at
 * L = 100k shardheap >= 20x faster than new Uint8Array.
 */
import { MemPool } from "@thi.ng/malloc";
import { SharedHeap, type ShardAllocator } from "../src/index.js";
import { compare, type BenchContext, type BenchModule, type BenchRecord } from "./report.js";
import { collectGarbage, measure, median, mulberry32, type Candidate, type Measurement } from "./timing.js";

const LIVE_SET_SIZES = [1_000, 10_000, 100_000];
const MIN_SIZE = 16;
const MAX_SIZE = 1024;
/** Floor objects' spacing: the mean request (520 B) plus an 8-byte header. */
const SPACING = 528;
/** Precomputed steps, cycled (a power of two). */
const STEPS = 1 << 20;
const SEED = 0x5eed_c0de;
const SHARD_BYTES = 512 * 1024 * 1024;

const OWN_COST_GROWTH_MAX = 1.5;
const VS_THING_L = 10_000;
const VS_THING_MAX_RATIO = 1 / 1000;
const VS_UINT8ARRAY_L = 100_000;
const VS_UINT8ARRAY_MAX_RATIO = 1 / 20;

export interface Workload {
  readonly L: number;
  /** Sizes of the initial live set. */
  readonly initialSizes: Uint16Array;
  /** Per step: the size of the new object. */
  readonly sizes: Uint16Array;
  /** Per step: which live object is replaced. */
  readonly victims: Int32Array;
  /** Per step: where the floor's "new object" is (a second random object). */
  readonly others: Int32Array;
}

export function makeWorkload(L: number): Workload {
  const rnd = mulberry32(SEED ^ L);
  const size = (): number => MIN_SIZE + Math.floor(rnd() * (MAX_SIZE - MIN_SIZE + 1));
  const initialSizes = Uint16Array.from({ length: L }, size);
  const sizes = new Uint16Array(STEPS);
  const victims = new Int32Array(STEPS);
  const others = new Int32Array(STEPS);
  for (let s = 0; s < STEPS; s++) {
    sizes[s] = size();
    victims[s] = Math.floor(rnd() * L);
    others[s] = Math.floor(rnd() * L);
  }
  return { L, initialSizes, sizes, victims, others };
}

const MASK = STEPS - 1;

/**
 * Candidate.prepare for the allocators: malloc/free pairs of the workload's
 * sizes from a call site other than the timed loop (the live set is left
 * as it was). Short enough for thi.ng at L = 100k: its pair is O(1) there.
 */
function warmPairs(w: Workload, malloc: (size: number) => number, free: (ptr: number) => void): void {
  for (let s = 0; s < WARM_PAIRS; s++) free(malloc(w.sizes[s]!));
}
const WARM_PAIRS = 20_000;

/** Options of shardheapCandidate (bench/profiler.ts makes heaps in several profiling modes). */
export interface ShardheapChurnOptions {
  /** Candidate name (default "shardheap"). */
  readonly name?: string;
  /** Shard size (default 512 MiB). */
  readonly shardBytes?: number;
  /** Called on the fresh shard before the live set is filled (e.g. to turn on profiling). */
  readonly setup?: (shard: ShardAllocator) => void;
  /**
   * The SharedHeap class to make the heap with (default this tree's):
   * bench/profiler.ts passes an earlier build's, through a second instance
   * of this module, to time the code before a change in the same run.
   */
  readonly SharedHeap?: Pick<typeof SharedHeap, "create">;
}

/** A churn candidate on one shard of its own SharedHeap; `step` is how many steps it has run. */
export type ShardheapChurnCandidate = Candidate & {
  readonly heap: SharedHeap;
  readonly shard: ShardAllocator;
  /** The live set's objects, by index (victims name them): what a candidate with a loop of its own churns (bench/profiler-floor.ts). */
  readonly live: Int32Array;
  readonly step: number;
  verify(): void;
};

// Each candidate below has its own copy of the step loop on purpose: one
// shared loop calling through a function would be polymorphic across
// candidates and V8 would stop inlining malloc/free into it, measuring the
// call instead of the allocator.
export function shardheapCandidate(w: Workload, o: ShardheapChurnOptions = {}): ShardheapChurnCandidate {
  const { L, sizes, victims } = w;
  const heap = (o.SharedHeap ?? SharedHeap).create({ shards: 1, shardBytes: o.shardBytes ?? SHARD_BYTES });
  const a = heap.shard(0);
  o.setup?.(a);
  const u8 = new Uint8Array(heap.buffer);
  const live = new Int32Array(L);
  for (let i = 0; i < L; i++) {
    const p = a.malloc(w.initialSizes[i]!);
    u8[p] = 1;
    live[i] = p;
  }
  let step = 0;
  return {
    name: o.name ?? "shardheap",
    heap,
    shard: a,
    live,
    get step() {
      return step;
    },
    prepare: () => warmPairs(w, (size) => a.malloc(size), (p) => a.free(p)),
    run(n) {
      let acc = 0;
      let s = step;
      for (const end = s + n; s < end; s++) {
        const j = s & MASK;
        const i = victims[j]!;
        a.free(live[i]!);
        const p = a.malloc(sizes[j]!);
        u8[p] = 1;
        live[i] = p;
        acc ^= p;
      }
      step = s;
      return acc;
    },
    verify() {
      const live = a.stats().liveObjects;
      if (live !== L) throw new Error(`churn: shardheap has ${live} live objects, expected ${L}`);
      const errors = heap.check();
      if (errors.length > 0) throw new Error(`churn: heap check failed: ${errors.slice(0, 5).join("; ")}`);
    },
  };
}

function thingCandidate(w: Workload): Candidate {
  const { L, sizes, victims } = w;
  const pool = new MemPool({ size: Math.max(16 << 20, L * 2048) });
  const u8 = new Uint8Array(pool.buf);
  const live = new Int32Array(L);
  for (let i = 0; i < L; i++) {
    const p = pool.malloc(w.initialSizes[i]!);
    if (p === 0) throw new Error("churn: thi.ng MemPool is out of memory while filling");
    u8[p] = 1;
    live[i] = p;
  }
  let step = 0;
  return {
    name: "thi.ng",
    prepare: () =>
      warmPairs(
        w,
        (size) => pool.malloc(size),
        (p) => pool.free(p),
      ),
    run(n) {
      let acc = 0;
      let s = step;
      for (const end = s + n; s < end; s++) {
        const j = s & MASK;
        const i = victims[j]!;
        pool.free(live[i]!);
        const p = pool.malloc(sizes[j]!);
        if (p === 0) throw new Error("churn: thi.ng MemPool is out of memory");
        u8[p] = 1;
        live[i] = p;
        acc ^= p;
      }
      step = s;
      return acc;
    },
  };
}

function uint8ArrayCandidate(w: Workload): Candidate {
  const { L, sizes, victims } = w;
  const live: Uint8Array[] = [];
  for (let i = 0; i < L; i++) {
    const b = new Uint8Array(w.initialSizes[i]!);
    b[0] = 1;
    live.push(b);
  }
  let step = 0;
  return {
    name: "uint8array",
    run(n) {
      let acc = 0;
      let s = step;
      for (const end = s + n; s < end; s++) {
        const j = s & MASK;
        const b = new Uint8Array(sizes[j]!);
        b[0] = 1;
        live[victims[j]!] = b;
        acc ^= b.length;
      }
      step = s;
      return acc;
    },
  };
}

function floorCandidate(w: Workload): Candidate {
  const { L, sizes, victims, others } = w;
  const mem = new Uint8Array(new ArrayBuffer(L * SPACING));
  const live = new Int32Array(L);
  for (let i = 0; i < L; i++) {
    live[i] = i * SPACING;
    mem[i * SPACING] = 1;
  }
  let step = 0;
  return {
    name: "floor",
    run(n) {
      let acc = 0;
      let s = step;
      for (const end = s + n; s < end; s++) {
        const j = s & MASK;
        const i = victims[j]!;
        const old = live[i]!;
        mem[old] ^= 1; // the freed object (a free writes its link there)
        const p = others[j]! * SPACING;
        mem[p] = 1; // the new object
        live[i] = p;
        acc ^= p + sizes[j]!;
      }
      step = s;
      return acc;
    },
  };
}

export function measurementFields(m: Measurement): Pick<BenchRecord, "nsPerOp" | "minNsPerOp" | "maxNsPerOp" | "opsPerRound" | "rounds"> {
  return {
    nsPerOp: m.nsPerOp,
    minNsPerOp: m.minNsPerOp,
    maxNsPerOp: m.maxNsPerOp,
    opsPerRound: m.opsPerRound,
    rounds: m.samples.length,
  };
}

/**
 * A candidate's own cost: the median over rounds of (its round - the floor's
 * round of the same interleaved pass). Pairing rounds cancels what the
 * machine does to memory-bound loops over a few hundred ms (neighbours
 * sharing the L3, pages being merged or reclaimed), which moves the floor
 * at L = 100k by 2x between runs; a difference of two medians would not.
 */
function ownCost(m: Measurement, floor: Measurement): number {
  const n = Math.min(m.samples.length, floor.samples.length);
  const diffs: number[] = [];
  for (let r = 0; r < n; r++) diffs.push(m.samples[r]! - floor.samples[r]!);
  return median(diffs);
}

/** Measure one live-set size; returns shardheap's own cost (ns/step over the floor). */
function runLiveSet(ctx: BenchContext, L: number): number {
  ctx.progress(`churn L=${L}: building the workload and filling the live sets`);
  const w = makeWorkload(L);
  const sh = shardheapCandidate(w);
  // shardheap next to the floor: rounds run in this order, then reversed,
  // so each shardheap round has a floor round right beside it.
  const candidates: Candidate[] = [thingCandidate(w), uint8ArrayCandidate(w), sh, floorCandidate(w)];
  ctx.progress(`churn L=${L}: timing ${candidates.map((c) => c.name).join(", ")}`);
  const [mTh, mU8, mSh, mFloor] = measure(candidates, ctx.timing) as [Measurement, Measurement, Measurement, Measurement];
  sh.verify();

  const floor = mFloor.nsPerOp;
  ctx.record({ bench: "churn", L, candidate: "floor", ...measurementFields(mFloor) });
  for (const m of [mSh, mTh, mU8]) {
    ctx.record({
      bench: "churn",
      L,
      candidate: m.name,
      ...measurementFields(m),
      ownNsPerOp: ownCost(m, mFloor),
      ...compare(m.nsPerOp, "floor", floor),
    });
  }
  const own = ownCost(mSh, mFloor);
  // shardheap against each allocator baseline; the target applies at one L only.
  const versus = (base: Measurement, targetL: number, maxRatio: number, label: string): void =>
    ctx.record({
      bench: "churn",
      L,
      candidate: "shardheap",
      ...measurementFields(mSh),
      ownNsPerOp: own,
      ...(L === targetL
        ? compare(mSh.nsPerOp, base.name, base.nsPerOp, maxRatio, label)
        : compare(mSh.nsPerOp, base.name, base.nsPerOp)),
    });
  versus(mTh, VS_THING_L, VS_THING_MAX_RATIO, "ratio <= 0.001 (>= 1000x faster)");
  versus(mU8, VS_UINT8ARRAY_L, VS_UINT8ARRAY_MAX_RATIO, "ratio <= 0.05 (>= 20x faster)");
  return own;
}

export const churn: BenchModule = {
  name: "churn",
  title: `replace a random object of a live set of L (random sizes ${MIN_SIZE}..${MAX_SIZE} B) per step`,
  run(ctx) {
    const own = new Map<number, number>();
    for (const L of LIVE_SET_SIZES) {
      own.set(L, runLiveSet(ctx, L));
      collectGarbage(); // release this size's heaps before the next
    }
    const small = LIVE_SET_SIZES[0]!;
    const base = own.get(small)!;
    for (const L of LIVE_SET_SIZES.slice(1)) {
      const o = own.get(L)!;
      const last = L === LIVE_SET_SIZES[LIVE_SET_SIZES.length - 1];
      ctx.record({
        bench: "churn",
        L,
        candidate: "shardheap",
        metric: "ownCost",
        nsPerOp: o,
        ...(last
          ? compare(o, `shardheap ownCost at L=${small}`, base, OWN_COST_GROWTH_MAX, `ratio <= ${OWN_COST_GROWTH_MAX}`)
          : compare(o, `shardheap ownCost at L=${small}`, base)),
      });
    }
  },
};
