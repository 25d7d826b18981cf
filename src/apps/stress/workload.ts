/**
 * The stress workload, run inside every shard (Smp module): allocations
 * from several distinct call paths with a realistic mix of sizes (small
 * objects, buffers, a few large spans), a bounded live set, local frees,
 * and a share of frees handed to other shards (cross-shard frees). Each
 * slice runs for a few milliseconds and returns the pointers it wants
 * other shards to free; the driver (run.ts) routes them.
 */
import type { ShardContext } from "../../smp/current-shard.js";

export interface SliceArg {
  /** How long to run, in ms. */
  ms: number;
  /** Share of frees handed to other shards, 0..1. */
  crossShard: number;
  /** Pointers of other shards' objects to free here (cross-shard frees). */
  incoming: number[];
  /** The live set's bound, in bytes. */
  liveBytes: number;
}

export interface SliceResult {
  ops: number;
  /** Pointers of this shard's objects for another shard to free. */
  outgoing: number[];
  freedIncoming: number;
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

function allocateOne(shard: ShardContext): void {
  const r = random();
  if (r < 0.8) allocateSessionState(shard);
  else if (r < 0.99) allocateRequestBuffer(shard);
  else allocateCacheEntry(shard);
}

/**
 * Bytes of this shard's objects handed to other shards to free in this
 * slice: they stay allocated here until the other shard frees them (at the
 * start of its next slice) and this one drains its inbox, so they count
 * against the live set's bound. A slice hands over up to MAX_OUTGOING
 * objects, ~13 MiB of this mix; uncounted, a live set "at 65%" of a 64 MiB
 * shard kept up to 55 MiB allocated, more than a shard of 60.6 MiB of pages
 * can hold once size classes round it up.
 */
let handedOver = 0;
/** Size of the object takeRandom took last. */
let takenBytes = 0;

/** Remove a random live object; returns its pointer. */
function takeRandom(): number {
  const i = Math.floor(random() * live.ptrs.length);
  const ptr = live.ptrs[i]!;
  takenBytes = live.sizes[i]!;
  live.bytes -= takenBytes;
  live.ptrs[i] = live.ptrs[live.ptrs.length - 1]!;
  live.sizes[i] = live.sizes[live.sizes.length - 1]!;
  live.ptrs.pop();
  live.sizes.pop();
  return ptr;
}

/** Objects handed to other shards in one slice, at most: they stay allocated until freed there. */
const MAX_OUTGOING = 4096;

export function runSlice(arg: SliceArg, shard: ShardContext): SliceResult {
  seed ^= shard.id * 0x9e3779b1;
  for (const ptr of arg.incoming) shard.memory.free(ptr);
  const outgoing: number[] = [];
  handedOver = 0;
  const end = performance.now() + arg.ms;
  let ops = 0;
  let failed = 0;
  while (performance.now() < end && outgoing.length < MAX_OUTGOING) {
    for (let k = 0; k < 256; k++) {
      // Fill the live set towards its bound (three allocations for one free),
      // then hover around it: a steady live heap for the profile to show.
      const over = live.bytes + handedOver > arg.liveBytes;
      if (live.ptrs.length > 0 && (over || random() < 0.25)) {
        const ptr = takeRandom();
        if (random() < arg.crossShard) {
          outgoing.push(ptr);
          handedOver += takenBytes;
        } else {
          shard.memory.free(ptr);
        }
      } else if (!over) {
        try {
          allocateOne(shard);
        } catch (e) {
          // A full shard is part of a stress run: count it, free something, go on.
          if ((e as Error).name !== "OutOfMemoryError") throw e;
          failed++;
          if (live.ptrs.length > 0) shard.memory.free(takeRandom());
        }
      } else {
        continue; // everything held is in flight to other shards: nothing to do until they free it
      }
      ops++;
    }
  }
  return { ops, outgoing, freedIncoming: arg.incoming.length, liveObjects: live.ptrs.length, failedAllocations: failed };
}

/** Free what is left, so the run ends with the live set it started with (none). */
export function releaseAll(_arg: unknown, shard: ShardContext): number {
  const n = live.ptrs.length;
  for (const ptr of live.ptrs) shard.memory.free(ptr);
  live.ptrs = [];
  live.sizes = [];
  live.bytes = 0;
  handedOver = 0;
  return n;
}
