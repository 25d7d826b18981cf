/**
 * Orphans: the objects a shard's earlier owner left allocated when its
 * thread died, tracked by the thread that takes the shard over until they
 * are freed or let go (shard-allocator.ts, freeOrphans).
 *
 * Why: an Smp shard whose thread dies is replaced by a new thread with
 * fresh module state. Whatever the old thread allocated stays live: the
 * objects it still held in its own (now lost) state are leaked for good,
 * those it had handed to other shards are still in use there, and nothing
 * in the heap tells the two apart (50 of 50 objects were still live after
 * stop(), with no way to get them back). The new owner knows one thing for
 * sure: every object live when it adopts the shard is an orphan, since
 * only a shard's owner allocates in its region. So it keeps one bit per
 * orphan (a copy of the live bits at adoption: one Int32 per 256 bytes of
 * pages, 1 MiB for a 64 MiB shard, only after a death), clears the bit of
 * each orphan that is freed meanwhile, by anyone (every free of one of its
 * objects ends in the owner's releaseClaimed), and on request frees every
 * orphan still marked but those the caller keeps.
 *
 * The rule for pointers others hold: an orphan another shard still uses
 * must be kept (listed in `keep`); after freeOrphans every other pointer
 * into the dead thread's objects is invalid, as after any free. An object
 * some thread is freeing at that moment (its pending bit set) is left to
 * that free.
 */
import { BITMAP_WORDS_PER_PAGE } from "./layout.js";
import type { ShardRegion } from "./region.js";

/** Counts of objects and their usable bytes. */
export interface ObjectCount {
  objects: number;
  bytes: number;
}

/**
 * The live bits of `r` now, one Int32 per 256 bytes of pages (bit k of
 * word w: the granule at dataStart + (w * 32 + k) * 8), or null when
 * nothing is live.
 */
export function snapshotLiveBits(r: ShardRegion): Int32Array | null {
  const words = r.dataPages * (BITMAP_WORDS_PER_PAGE >>> 1);
  let bits: Int32Array | null = null;
  for (let w = 0; w < words; w++) {
    const live = r.i32[r.bitmap + (w << 1)]!;
    if (live === 0) continue;
    bits ??= new Int32Array(words);
    bits[w] = live;
  }
  return bits;
}

/** Call `visit` with each object whose bit is set in `bits` (a snapshot of `r`'s live bits). */
export function forEachMarked(r: ShardRegion, bits: Int32Array, visit: (ptr: number) => void): void {
  for (let w = 0; w < bits.length; w++) {
    let word = bits[w]!;
    while (word !== 0) {
      const k = 31 - Math.clz32(word);
      word &= ~(1 << k);
      visit(r.dataStart + (w * 32 + k) * 8);
    }
  }
}

/** Clear `ptr`'s bit in `bits`. */
export function clearMark(r: ShardRegion, bits: Int32Array, ptr: number): void {
  const rel = ptr - r.dataStart;
  bits[rel >>> 8] &= ~(1 << ((rel >>> 3) & 31));
}

/** Whether `ptr`'s bit is set in `bits`. */
export function isMarked(r: ShardRegion, bits: Int32Array, ptr: number): boolean {
  const rel = ptr - r.dataStart;
  return (bits[rel >>> 8]! & (1 << ((rel >>> 3) & 31))) !== 0;
}

/** freeOrphans' `keep` as a set of pointers; TypeError for anything but an iterable of numbers. */
export function keptPointers(keep: Iterable<number>): Set<number> {
  const kept = new Set<number>();
  if (keep === null || typeof (keep as { [Symbol.iterator]?: unknown })[Symbol.iterator] !== "function") {
    throw new TypeError("freeOrphans: keep must be an iterable of pointers (numbers)");
  }
  for (const p of keep) {
    if (typeof p !== "number") throw new TypeError(`freeOrphans: keep must hold pointers (numbers), got ${typeof p}`);
    kept.add(p);
  }
  return kept;
}
