/**
 * Debug pointers: the quarantine that makes a use after free loud.
 *
 * The bug it catches: a pointer kept after its object was freed. Without
 * this mode the freed memory is handed out again at once (a pool's claimed
 * list is LIFO, so the next malloc of that class gets the same address),
 * and the stale pointer silently reads, writes or frees the new owner's
 * object: every check the accessors make passes, since the address is a
 * live object again. This mode (SharedHeap.create / Smp.start
 * `debugPointers`, or SHARDHEAP_DEBUG_POINTERS=1; the heap header's
 * HEAP_FLAG_DEBUG_POINTERS, so every thread follows it) does what
 * AddressSanitizer's quarantine does:
 *
 *   - a freed object is counted as freed at once (frees, liveObjects, the
 *     profiler), its live bit cleared, but its claim (pending bit) kept,
 *     and instead of its pool's lists it joins this shard's quarantine, a
 *     FIFO chain in the shard header (layout.ts S_QUARANTINE_*), with its
 *     bytes after the link word filled with POISON;
 *   - so every checked use of the stale pointer (free, realloc,
 *     objectSize, objectBytes, readString, the stored* readers, a remote
 *     free, from any thread) throws InvalidPointerError saying it is a use
 *     after free, while the address is not handed out again; and a read
 *     through a raw view (heap.bytes, or a view taken before the free)
 *     sees 0xdf bytes, not plausible data;
 *   - the oldest objects leave once the quarantine holds more than its
 *     budget (a quarter of the shard's object pages), or all of them when
 *     an allocation would otherwise fail (reclaim), so the mode never makes
 *     an allocation fail that would succeed without it. Each leaving object
 *     is checked for writes after its free: a byte that is no longer
 *     POISON is counted (S_QUARANTINE_WRITTEN) and warned about, and
 *     heap.check() reports every held object written to.
 *
 * Cost: nothing when off (the mode is a field read by free's slow path
 * only; with it on, every free takes that slow path, as with orphans), and
 * when on, a fill of the object at its free and a scan when it leaves.
 * Detection lasts while the object is held: a pointer used after its
 * object left the quarantine and was reused is not caught (as in ASan).
 */
import { PAGE_SIZE, S_QUARANTINE_BYTES, S_QUARANTINE_HEAD, S_QUARANTINE_OBJECTS, S_QUARANTINE_TAIL } from "./layout.js";
import { objectSizeIn } from "./pointers.js";
import type { ShardRegion } from "./region.js";

/** The byte a held object is filled with (after its 4-byte link). */
export const POISON = 0xdf;
const POISON_WORD = POISON * 0x01010101;
/** The least a quarantine holds before its oldest objects leave, whatever the shard's size. */
const MIN_BUDGET_BYTES = 16 * PAGE_SIZE;

/** Bytes of freed objects a shard holds back before the oldest leave: a quarter of its object pages, at least 64 KiB. */
export function quarantineBudget(r: ShardRegion): number {
  return Math.max(MIN_BUDGET_BYTES, Math.floor(r.dataBytes / 4));
}

/** Bytes the quarantine of `r` holds now. */
export function quarantinedBytes(r: ShardRegion): number {
  return r.u32[r.hdr + S_QUARANTINE_BYTES]!;
}

/**
 * Hold retired object `ptr` (counted freed, live bit clear, claim kept) of
 * `size` usable bytes: poison it and link it as the newest. Owner only.
 */
export function holdInQuarantine(r: ShardRegion, ptr: number, size: number): void {
  const u32 = r.u32;
  r.u8.fill(POISON, ptr + 4, ptr + size);
  u32[ptr >>> 2] = 0;
  const tail = u32[r.hdr + S_QUARANTINE_TAIL]!;
  if (tail === 0) u32[r.hdr + S_QUARANTINE_HEAD] = ptr;
  else u32[tail >>> 2] = ptr;
  u32[r.hdr + S_QUARANTINE_TAIL] = ptr;
  u32[r.hdr + S_QUARANTINE_OBJECTS]++;
  u32[r.hdr + S_QUARANTINE_BYTES] += size;
}

/** Unlink the oldest held object and return it (0 when none is held). Owner only. */
export function takeOldest(r: ShardRegion): number {
  const u32 = r.u32;
  const ptr = u32[r.hdr + S_QUARANTINE_HEAD]!;
  if (ptr === 0) return 0;
  const next = u32[ptr >>> 2]!;
  u32[r.hdr + S_QUARANTINE_HEAD] = next;
  if (next === 0) u32[r.hdr + S_QUARANTINE_TAIL] = 0;
  u32[r.hdr + S_QUARANTINE_OBJECTS]--;
  u32[r.hdr + S_QUARANTINE_BYTES] -= objectSizeIn(r, ptr);
  return ptr;
}

/**
 * The offset of the first byte of held object `ptr` (`size` usable bytes)
 * that is no longer POISON, past its link: a write after its free; -1 when
 * none. Word by word, then the byte within the word.
 */
export function firstWrittenByte(r: ShardRegion, ptr: number, size: number): number {
  const u32 = r.u32;
  for (let w = (ptr >>> 2) + 1, end = (ptr + size) >>> 2; w < end; w++) {
    if (u32[w] !== POISON_WORD >>> 0) {
      for (let b = w << 2; ; b++) if (r.u8[b] !== POISON) return b - ptr;
    }
  }
  return -1;
}

/**
 * Visit the objects the quarantine of `r` holds, oldest first, for a
 * reader (heap.check()): a link that leaves the region, is misaligned, or
 * a chain longer than its count says calls `corrupt` and ends the walk.
 */
export function forEachQuarantined(r: ShardRegion, visit: (ptr: number) => void, corrupt: (ptr: number) => void): number {
  const most = r.u32[r.hdr + S_QUARANTINE_OBJECTS]!;
  let n = 0;
  for (let p = r.u32[r.hdr + S_QUARANTINE_HEAD]!; p !== 0; p = r.u32[p >>> 2]!) {
    if (!r.contains(p) || p % 8 !== 0 || ++n > most) {
      corrupt(p);
      return n;
    }
    visit(p);
  }
  return n;
}
