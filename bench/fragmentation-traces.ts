/**
 * Allocation traces for the fragmentation benchmark (fragmentation.ts): a
 * trace is the sequence of mallocs and frees a program made, with sizes,
 * replayed later into allocators of any arena size. Each is generated from
 * a fixed seed, so every run replays the same trace.
 *
 *   stress       the `shardheap stress` workload itself (src/apps/stress/
 *                workload.ts, its default live set: 40% of a 64 MiB shard),
 *                recorded by running its slices against a recorder; the
 *                frees it hands to other shards happen as its slice ends,
 *                when the other shard takes them (submitTo)
 *   size-classes small objects only, of 48 types whose sizes spread over
 *                every size class, plus variable-length strings; which
 *                types are allocated shifts every phase, so memory has to
 *                move from class to class (what strands memory in
 *                segregated pools)
 *   large        mostly 16-512 KiB objects (log-uniform), with small ones
 *                among them (what strands memory between page spans)
 *   trickle      stress --leak: stress's sizes and live set with random
 *                victims, plus a steady trickle of 1 KiB records that never
 *                die (4% of the mallocs) until they outweigh the live set:
 *                the objects that outlive their neighbours and pin the
 *                spans they sit in
 * The synthetic two give each object a lifetime when it is made
 * (lifetimeDriven); stress frees random live objects, as its workload does.
 */
import { runSlice } from "../src/apps/stress/workload.js";
import type { ShardContext } from "../src/smp/current-shard.js";
import { mulberry32 } from "./timing.js";

export interface Trace {
  readonly name: string;
  readonly description: string;
  /** Event k: id >= 0 is malloc(sizes[id]) of object id; a negative value is the free of object ~value. */
  readonly events: Int32Array;
  /** Requested bytes per object id. */
  readonly sizes: Int32Array;
  /** Most bytes live at once (the sum of requested sizes). */
  readonly peakLiveBytes: number;
  readonly mallocs: number;
}

/** Builds a trace as a program runs: malloc() gives each object an id, free() takes it back. */
class TraceRecorder {
  private events: Int32Array = new Int32Array(1 << 16);
  private sizes: Int32Array = new Int32Array(1 << 14);
  private length = 0;
  private objects = 0;
  private live = 0;
  private peak = 0;
  private readonly freed = new Set<number>();

  get mallocCount(): number {
    return this.objects;
  }

  malloc(size: number): number {
    const id = this.objects++;
    if (id === this.sizes.length) this.sizes = grow(this.sizes);
    this.sizes[id] = size;
    this.push(id);
    this.live += size;
    if (this.live > this.peak) this.peak = this.live;
    return id;
  }

  /** Bytes object `id` was allocated with. */
  sizeOf(id: number): number {
    return this.sizes[id]!;
  }

  free(id: number): void {
    if (!(id >= 0 && id < this.objects) || this.freed.has(id)) throw new Error(`trace: free of ${id}, not a live object`);
    this.freed.add(id);
    this.push(~id);
    this.live -= this.sizes[id]!;
  }

  /** Free every object still live, oldest first (the program's exit). */
  freeAll(): void {
    for (let id = 0; id < this.objects; id++) if (!this.freed.has(id)) this.free(id);
  }

  private push(event: number): void {
    if (this.length === this.events.length) this.events = grow(this.events);
    this.events[this.length++] = event;
  }

  finish(name: string, description: string): Trace {
    return {
      name,
      description,
      events: this.events.slice(0, this.length),
      sizes: this.sizes.slice(0, this.objects),
      peakLiveBytes: this.peak,
      mallocs: this.objects,
    };
  }
}

function grow(a: Int32Array): Int32Array {
  const b = new Int32Array(a.length * 2);
  b.set(a);
  return b;
}

const MiB = 1024 * 1024;
const KiB = 1024;

/** The stress driver's defaults (src/apps/stress/run.ts, src/cli.ts). */
export const STRESS_SHARD_BYTES = 64 * MiB;
const STRESS_LIVE_RATIO = 0.4;
const STRESS_CROSS_SHARD = 0.25;
/** Mallocs recorded (whole slices: each runs until it has handed MAX_OUTGOING frees to other shards). */
const STRESS_MALLOCS = 200_000;

/**
 * The stress workload, recorded. Its module keeps the live set between
 * slices, so this runs once per process (the trace is cached).
 */
let stressTrace: Trace | undefined;
export async function recordStressTrace(): Promise<Trace> {
  if (stressTrace) return stressTrace;
  const rec = new TraceRecorder();
  // Pointers handed to the workload are id + 1 (0 is null).
  // The workload counts its live set in objectSize; the trace's objects are their requested sizes.
  const memory = { malloc: (size: number) => rec.malloc(size) + 1, free: (ptr: number) => rec.free(ptr - 1), objectSize: (ptr: number) => rec.sizeOf(ptr - 1) };
  // The other shard frees what it is handed at once, as freeHandedOver does.
  const submitTo = async (_shard: number, _fn: string, ptrs: Uint32Array): Promise<number> => {
    for (const ptr of ptrs) memory.free(ptr);
    return ptrs.length;
  };
  const shard = { id: 0, shards: 2, memory, submitTo } as unknown as ShardContext;
  const liveBytes = Math.floor(STRESS_SHARD_BYTES * STRESS_LIVE_RATIO);
  // A slice ends by time or when it has MAX_OUTGOING frees for other
  // shards; an endless time budget makes the second the rule (deterministic).
  while (rec.mallocCount < STRESS_MALLOCS) {
    await runSlice({ ms: 1e9, crossShard: STRESS_CROSS_SHARD, liveBytes }, shard);
  }
  rec.freeAll();
  stressTrace = rec.finish("stress", `shardheap stress's workload, live set ${formatMiB(liveBytes)} (40% of 64 MiB), 25% of frees at the slice's end`);
  return stressTrace;
}

/**
 * A program whose objects each live a drawn number of allocations
 * (`lifetime()`, in mallocs): frees happen when their time comes, in order
 * of death. `mallocs` allocations in all; `startPhase(p)` every
 * `perPhase`. Closer to what real programs do than freeing random live
 * objects (most objects die young, some live long, objects made together
 * die together: Johnstone and Wilson's phase behaviour); random victims
 * need far more memory of any allocator (the reference, best fit, needed
 * 1.33x and 1.70x the peak on random-victim versions of these traces).
 */
function lifetimeDriven(
  mallocs: number,
  perPhase: number,
  startPhase: (phase: number) => void,
  size: () => number,
  lifetime: () => number,
): TraceRecorder {
  const rec = new TraceRecorder();
  // A binary heap of (death time, id), as two parallel arrays.
  const when: number[] = [];
  const who: number[] = [];
  const push = (t: number, id: number): void => {
    let i = when.length;
    when.push(t);
    who.push(id);
    while (i > 0) {
      const up = (i - 1) >> 1;
      if (when[up]! <= t) break;
      when[i] = when[up]!;
      who[i] = who[up]!;
      i = up;
    }
    when[i] = t;
    who[i] = id;
  };
  const pop = (): number => {
    const top = who[0]!;
    const t = when.pop()!;
    const id = who.pop()!;
    const n = when.length;
    if (n > 0) {
      let i = 0;
      for (;;) {
        let c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && when[c + 1]! < when[c]!) c++;
        if (when[c]! >= t) break;
        when[i] = when[c]!;
        who[i] = who[c]!;
        i = c;
      }
      when[i] = t;
      who[i] = id;
    }
    return top;
  };
  for (let now = 0; now < mallocs; now++) {
    if (now % perPhase === 0) startPhase(now / perPhase);
    while (when.length > 0 && when[0]! <= now) rec.free(pop());
    push(now + lifetime(), rec.malloc(size()));
  }
  while (when.length > 0) rec.free(pop());
  return rec;
}

/** An exponentially distributed whole number with the given mean (>= 1). */
function exponential(rnd: () => number, mean: number): number {
  return 1 + Math.floor(-Math.log(1 - rnd()) * mean);
}

/** A size drawn log-uniformly from [lo, hi]. */
function logUniform(rnd: () => number, lo: number, hi: number): number {
  return Math.floor(Math.exp(Math.log(lo) + rnd() * (Math.log(hi) - Math.log(lo))));
}

/**
 * Lifetimes of the synthetic traces, in mallocs: most objects die young
 * (a request's temporaries), a third live about a phase, a few outlive
 * several phases.
 */
function programLifetime(rnd: () => number, young: number, phase: number): () => number {
  return () => {
    const u = rnd();
    return u < 0.6 ? exponential(rnd, young) : u < 0.95 ? exponential(rnd, phase / 2) : exponential(rnd, 5 * phase);
  };
}

/**
 * `shifting` false: the 48 types are allocated throughout, each with a
 * lifetime of its own (a temporary, a session's, long-lived data), so each
 * class's share of the live set holds steady. true: 12 types at a time,
 * replaced every 40k mallocs, each object's lifetime drawn from the
 * program's mix: the live set moves from class to class.
 */
export function sizeClassTrace(shifting = false): Trace {
  const rnd = mulberry32(0x51ce_c1a5);
  // Object types: fixed sizes spread log-uniformly over 8 B .. 16 KiB, so every size class holds some.
  const types = Array.from({ length: 48 }, () => logUniform(rnd, 8, 16 * KiB));
  const phase = 40_000;
  const mix = programLifetime(rnd, 500, phase);
  const typeLifetimes = types.map(() => {
    const kind = rnd();
    return kind < 0.5 ? 500 : kind < 0.85 ? phase / 2 : 2 * phase;
  });
  let hot = types.map((_, t) => t);
  let kind = -1;
  const rec = lifetimeDriven(
    10 * phase,
    phase,
    () => {
      if (shifting) hot = Array.from({ length: 12 }, () => Math.floor(rnd() * types.length));
    },
    // One in four a string of any length up to 2 KiB.
    () => {
      if (rnd() < 0.25) {
        kind = -1;
        return 1 + Math.floor(rnd() * 2 * KiB);
      }
      const t = hot[Math.floor(rnd() * hot.length)]!;
      kind = shifting ? -1 : t;
      return types[t]!;
    },
    // A type's objects live its lifetime, one in ten the program's mix.
    () => (kind < 0 || rnd() < 0.1 ? mix() : exponential(rnd, typeLifetimes[kind]!)),
  );
  return shifting
    ? rec.finish("size-classes, shifting", "small objects of 48 types (8 B..16 KiB), 12 at a time, changing every 40k mallocs, and strings up to 2 KiB")
    : rec.finish("size-classes", "small objects of 48 types (8 B..16 KiB), each with its own lifetime, and strings up to 2 KiB");
}

export function largeObjectTrace(): Trace {
  const rnd = mulberry32(0x1a29_e0b5);
  const phase = 6_000;
  const rec = lifetimeDriven(
    10 * phase,
    phase,
    () => {},
    // One in four a small object (64 B..4 KiB).
    () => (rnd() < 0.25 ? 64 + Math.floor(rnd() * 4032) : logUniform(rnd, 16 * KiB, 512 * KiB)),
    programLifetime(rnd, 20, phase / 15),
  );
  return rec.finish("large", "objects of 16-512 KiB (log-uniform), one in four a small one (64 B..4 KiB)");
}

/** The trickle trace's immortal records: stress --leak's size (src/apps/stress/workload.ts). */
const TRICKLE_RECORD_BYTES = 1024;
/** One malloc in this many is an immortal record. */
const TRICKLE_EVERY = 25;
/** Immortal records in all: 19.5 MiB; with the live set, 75% of a 64 MiB shard's 60.6 MiB of pages (the trickle trace's bound). */
const TRICKLE_RECORDS = 20_000;

/**
 * `shardheap stress --leak` as a trace: stress's live set (its default
 * bound, 40% of a 64 MiB shard: 25.6 MiB) of stress's sizes (80% 48-512 B
 * sessions, 19% 1-16 KiB buffers, 1% 32-256 KiB cache entries), filled
 * and then hovering at the bound with random victims, as its workload
 * does, and every 25th malloc a 1 KiB record that lives to the end, until
 * 20,000 of them (19.5 MiB) sit among the rest. What fragments here is
 * what the records pin: the spans they sit in, and the free pages between
 * those spans, which can no longer merge into a run a 256 KiB entry needs.
 */
export function trickleTrace(): Trace {
  const rnd = mulberry32(0x7e1c_41e5);
  const rec = new TraceRecorder();
  const bound = Math.floor(STRESS_SHARD_BYTES * STRESS_LIVE_RATIO);
  const ids: number[] = [];
  let bytes = 0;
  let mallocs = 0;
  while (mallocs < TRICKLE_RECORDS * TRICKLE_EVERY) {
    if (ids.length > 0 && (bytes > bound || rnd() < 0.25)) {
      const i = Math.floor(rnd() * ids.length);
      const id = ids[i]!;
      ids[i] = ids[ids.length - 1]!;
      ids.pop();
      bytes -= rec.sizeOf(id);
      rec.free(id);
      continue;
    }
    if (++mallocs % TRICKLE_EVERY === 0) {
      rec.malloc(TRICKLE_RECORD_BYTES); // never freed (until the final sweep)
      continue;
    }
    const u = rnd();
    const size = u < 0.8 ? 48 + Math.floor(rnd() * 464) : u < 0.99 ? 1024 + Math.floor(rnd() * 15 * KiB) : 32 * KiB + Math.floor(rnd() * 224 * KiB);
    ids.push(rec.malloc(size));
    bytes += size;
  }
  rec.freeAll();
  return rec.finish(
    "trickle",
    `stress's live set (${formatMiB(bound)}, random victims) and every ${TRICKLE_EVERY}th malloc a ${TRICKLE_RECORD_BYTES} B record that never dies (${TRICKLE_RECORDS.toLocaleString("en-US")} of them)`,
  );
}

function formatMiB(bytes: number): string {
  return `${(bytes / MiB).toFixed(1)} MiB`;
}
