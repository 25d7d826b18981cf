/**
 * The stress workload, run inside every shard (Smp module): allocations
 * from several distinct call paths with a realistic mix of sizes (small
 * objects, buffers, a few large spans), a bounded live set, local frees,
 * and a share of frees handed to other shards (cross-shard frees). Each
 * slice runs for a few milliseconds, then hands the pointers it wants
 * other shards to free straight to them, one submitTo per shard (as
 * Seastar's shards do: the main thread only starts the slices).
 */
import type { ShardContext } from "../../smp/current-shard.js";

export interface SliceArg {
  /** How long to run, in ms. */
  ms: number;
  /** Share of frees handed to other shards, 0..1. */
  crossShard: number;
  /** The live set's bound, in bytes. */
  liveBytes: number;
  /** Bytes per second this shard allocates at allocateLeakedRecord and never frees (stress --leak); 0 none. */
  leakRate?: number;
}

export interface SliceResult {
  ops: number;
  /** This shard's objects handed to other shards to free. */
  handedOver: number;
  liveObjects: number;
  failedAllocations: number;
}

interface Live {
  ptrs: number[];
  sizes: number[];
  bytes: number;
}

const live: Live = { ptrs: [], sizes: [], bytes: 0 };
let seed = 0x2545f491;
function random(): number {
  seed ^= seed << 13;
  seed ^= seed >>> 17;
  seed ^= seed << 5;
  return (seed >>> 0) / 4294967296;
}

function remember(ptr: number, size: number): void {
  live.ptrs.push(ptr);
  live.sizes.push(size);
  live.bytes += size;
}

// Distinct allocation sites, so the profile has something to tell.
function allocateSessionState(shard: ShardContext): void {
  const size = 48 + Math.floor(random() * 464);
  remember(shard.memory.malloc(size), size);
}
function allocateRequestBuffer(shard: ShardContext): void {
  const size = 1024 + Math.floor(random() * 15 * 1024);
  remember(shard.memory.malloc(size), size);
}
function allocateCacheEntry(shard: ShardContext): void {
  const size = 32 * 1024 + Math.floor(random() * 224 * 1024);
  remember(shard.memory.malloc(size), size);
}

// The fourth site, with --leak: records nobody frees, for the dashboard to find.
const LEAK_RECORD_BYTES = 1024;
const leak = { due: 0, lastAt: 0, full: false };
function allocateLeakedRecord(shard: ShardContext): void {
  shard.memory.malloc(LEAK_RECORD_BYTES);
}
/** Leak what the rate owes since the last call (RATE bytes per second of wall time, in whole records). */
function leakWhatIsDue(shard: ShardContext, rate: number): void {
  const now = performance.now();
  if (leak.lastAt > 0 && !leak.full) leak.due += (rate * (now - leak.lastAt)) / 1000;
  leak.lastAt = now;
  for (; leak.due >= LEAK_RECORD_BYTES; leak.due -= LEAK_RECORD_BYTES) {
    try {
      allocateLeakedRecord(shard);
    } catch (e) {
      if ((e as Error).name !== "OutOfMemoryError") throw e;
      leak.full = true; // the leak has filled the shard: stop leaking, keep the workload going
      leak.due = 0;
    }
  }
}

function allocateOne(shard: ShardContext): void {
  const r = random();
  if (r < 0.8) allocateSessionState(shard);
  else if (r < 0.99) allocateRequestBuffer(shard);
  else allocateCacheEntry(shard);
}

/** Remove a random live object; returns its pointer. */
function takeRandom(): number {
  const i = Math.floor(random() * live.ptrs.length);
  const ptr = live.ptrs[i]!;
  live.bytes -= live.sizes[i]!;
  live.ptrs[i] = live.ptrs[live.ptrs.length - 1]!;
  live.sizes[i] = live.sizes[live.sizes.length - 1]!;
  live.ptrs.pop();
  live.sizes.pop();
  return ptr;
}

/** Objects handed to other shards in one slice, at most: they stay allocated until freed there. */
const MAX_OUTGOING = 4096;

export async function runSlice(arg: SliceArg, shard: ShardContext): Promise<SliceResult> {
  seed ^= shard.id * 0x9e3779b1;
  if (arg.leakRate) leakWhatIsDue(shard, arg.leakRate);
  const outgoing: number[] = [];
  const end = performance.now() + arg.ms;
  let ops = 0;
  let failed = 0;
  while (performance.now() < end && outgoing.length < MAX_OUTGOING) {
    for (let k = 0; k < 256; k++) {
      // Fill the live set towards its bound (three allocations for one free),
      // then hover around it: a steady live heap for the profile to show.
      if (live.bytes > arg.liveBytes || (live.ptrs.length > 0 && random() < 0.25)) {
        const ptr = takeRandom();
        if (random() < arg.crossShard) outgoing.push(ptr);
        else shard.memory.free(ptr);
      } else {
        try {
          allocateOne(shard);
        } catch (e) {
          // A full shard is part of a stress run: count it, free something, go on.
          if ((e as Error).name !== "OutOfMemoryError") throw e;
          failed++;
          if (live.ptrs.length > 0) shard.memory.free(takeRandom());
        }
      }
      ops++;
    }
  }
  await handOver(outgoing, shard);
  return { ops, handedOver: outgoing.length, liveObjects: live.ptrs.length, failedAllocations: failed };
}

/**
 * Give `ptrs` to the other shards, round-robin, one call per shard; each
 * frees them there (cross-shard frees back to this shard's inbox).
 * Pointers travel as a Uint32Array (a heap is at most 4 GiB): one copy of
 * the bytes, where an array of numbers is encoded number by number.
 */
async function handOver(ptrs: number[], shard: ShardContext): Promise<void> {
  const others = shard.shards - 1;
  if (ptrs.length === 0 || others === 0) return;
  const counts = new Array<number>(others).fill(0);
  for (let i = 0; i < ptrs.length; i++) counts[i % others]!++;
  const batches = counts.map((n) => new Uint32Array(n));
  const filled = new Array<number>(others).fill(0);
  for (let i = 0; i < ptrs.length; i++) batches[i % others]![filled[i % others]!++] = ptrs[i]!;
  await Promise.all(batches.map((batch, k) => shard.submitTo((shard.id + 1 + k) % shard.shards, "freeHandedOver", batch)));
}

/** Free pointers another shard handed over (its objects: cross-shard frees). */
export function freeHandedOver(ptrs: Uint32Array, shard: ShardContext): number {
  for (const ptr of ptrs) shard.memory.free(ptr);
  return ptrs.length;
}
