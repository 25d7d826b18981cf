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
 *     bytes after its two link words filled with POISON;
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
 *     is checked for writes after its free: a byte that is no longer what
 *     the quarantine put there is counted (S_QUARANTINE_WRITTEN) and warned
 *     about, and heap.check() reports every held object written to.
 *
 * The chain's own words. A held object's word 0 is its link (the next
 * newer held object, 0 for the newest) and word 1 that link XOR
 * LINK_CHECK; every object has both (the smallest is 8 bytes,
 * MIN_OBJECT_SIZE). A stale pointer writes there as easily as anywhere:
 * when the link was the only word, a live object's address written into it
 * had that object handed out a second time, other values made a later
 * free fault outside the memory (a WebAssembly RuntimeError), and a 0 cut
 * the chain, leaking every object after it. So:
 *   - a pair that disagrees is a write after free, reported like any other
 *     wherever it is found (the oldest leaving; the newest, whose link is
 *     about to be overwritten when the next object joins; a rebuild), and
 *     its link is never followed. An object found written before it leaves
 *     is poisoned again and stays held: the next write to it is a new one;
 *   - even an agreeing link is followed only to a held object: in this
 *     region, 8-aligned, live bit clear, claim kept. In a debug heap that
 *     is exactly a held object, because an object leaving the quarantine
 *     gives its claim up at once (ShardAllocator.releaseOldest), so no
 *     link can lead to a live object or to one on a pool's lists;
 *   - a link that cannot be followed (or a chain that ends before its
 *     count) rebuilds the chain from the bitmap: every held object is
 *     found by its bits, none is lost, and the links that still agree
 *     keep their order (one damaged object keeps the chain's order
 *     exactly). Cost: one pass over the shard's bitmap, only after a write
 *     was found. The one state it cannot tell from a held object is the
 *     instant inside a remote free that fails (cross-shard.ts claimLive
 *     sets a pending bit, sees the object is not live, clears the bit): a
 *     rebuild reading the bitmap in those few instructions, while another
 *     thread frees a pointer whose object has left the quarantine, would
 *     take that free object for a held one.
 *
 * Cost: nothing when off (the mode is a field read by free's slow path
 * only; with it on, every free takes that slow path, as with orphans), and
 * when on, a fill of the object at its free and a scan when it leaves.
 * The check word and the link's validation cost nothing measurable: the
 * debug-pointers pair (bench/alloc-pair.ts) took 147-154 ns before them
 * and 147-151 ns after, in the same minutes; interleaved in one process,
 * the two were within 1 ns of each other (148 ns at best).
 * Detection lasts while the object is held: a pointer used after its
 * object left the quarantine and was reused is not caught (as in ASan).
 */
import {
  BITMAP_WORDS_PER_PAGE,
  PAGE_LARGE,
  PAGE_POOL,
  PAGE_SIZE,
  PM_HEAD,
  PM_SPAN_PAGES,
  PM_STATE,
  S_QUARANTINE_BYTES,
  S_QUARANTINE_HEAD,
  S_QUARANTINE_OBJECTS,
  S_QUARANTINE_TAIL,
  S_QUARANTINE_WRITTEN,
} from "./layout.js";
import { objectSizeIn } from "./pointers.js";
import type { ShardRegion } from "./region.js";
import { objectsPerSpan, poolStride } from "./size-classes.js";

/** The byte a held object is filled with (after its two link words). */
export const POISON = 0xdf;
const POISON_WORD = (POISON * 0x01010101) >>> 0;
/**
 * Word 1 of a held object is its link XOR this. No byte of it is 0 or
 * POISON, so neither a zeroed nor a poisoned pair of words agrees.
 */
export const LINK_CHECK = 0x6b2c5a39;
/** Bytes of a held object the chain uses: its link and check words. */
const LINK_BYTES = 8;
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
  r.u8.fill(POISON, ptr + LINK_BYTES, ptr + size);
  setLink(u32, ptr, 0);
  const tail = u32[r.hdr + S_QUARANTINE_TAIL]!;
  if (tail === 0) u32[r.hdr + S_QUARANTINE_HEAD] = ptr;
  else {
    // The newest's link words are about to change: a write to them is found now or never.
    if (u32[tail >>> 2] !== 0 || u32[(tail >>> 2) + 1] !== LINK_CHECK) foundWritten(r, tail);
    setLink(u32, tail, ptr);
  }
  u32[r.hdr + S_QUARANTINE_TAIL] = ptr;
  u32[r.hdr + S_QUARANTINE_OBJECTS]++;
  u32[r.hdr + S_QUARANTINE_BYTES] += size;
}

/**
 * Unlink the oldest held object and return it (0 when none is held),
 * checked for writes after its free (reported). Its link is followed only
 * when its words agree and it names a held object; otherwise the rest of
 * the chain is rebuilt from the bitmap. Owner only.
 */
export function takeOldest(r: ShardRegion): number {
  const u32 = r.u32;
  const hdr = r.hdr;
  const ptr = u32[hdr + S_QUARANTINE_HEAD]!;
  if (ptr === 0) return 0;
  // The link is judged by this one read of it (a stale pointer on another thread may write it meanwhile).
  const next = u32[ptr >>> 2]!;
  const agrees = ((next ^ LINK_CHECK) >>> 0) === u32[(ptr >>> 2) + 1];
  const left = u32[hdr + S_QUARANTINE_OBJECTS]! - 1;
  const size = objectSizeIn(r, ptr);
  const written = firstWrittenByte(r, ptr, size);
  if (written >= 0) reportWrite(r, ptr, size, written);
  if (agrees && (next === 0 ? left === 0 && u32[hdr + S_QUARANTINE_TAIL] === ptr : next !== ptr && isHeldObject(r, next))) {
    u32[hdr + S_QUARANTINE_HEAD] = next;
    if (next === 0) u32[hdr + S_QUARANTINE_TAIL] = 0;
    u32[hdr + S_QUARANTINE_OBJECTS] = left;
    u32[hdr + S_QUARANTINE_BYTES] -= size;
  } else {
    rebuildChain(r, ptr);
  }
  return ptr;
}

/**
 * Whether `ptr` is an object the quarantine may hold: in `r`'s pages,
 * 8-aligned, freed (live bit clear) with its claim kept (pending bit set).
 */
export function isHeldObject(r: ShardRegion, ptr: number): boolean {
  const rel = ptr - r.dataStart;
  if (!((rel >>> 0) === rel && rel < r.dataBytes && (rel & 7) === 0)) return false;
  const w = r.bitmap + ((rel >>> 8) << 1);
  const bit = 1 << ((rel >>> 3) & 31);
  return (r.i32[w]! & bit) === 0 && (r.i32[w + 1]! & bit) !== 0;
}

/**
 * The offset of the first byte of held object `ptr` (`size` usable bytes)
 * that is not what the quarantine put there: a write after its free; -1
 * when none. Link words that disagree name the word that does not fit the
 * link the other vouches for (a held object, or 0); then the poison, word
 * by word, then the byte within the word.
 */
export function firstWrittenByte(r: ShardRegion, ptr: number, size: number): number {
  const u32 = r.u32;
  const w = ptr >>> 2;
  const link = u32[w]!;
  const check = u32[w + 1]!;
  if (((link ^ LINK_CHECK) >>> 0) !== check) {
    const vouched = (check ^ LINK_CHECK) >>> 0;
    if (vouched === 0 || isHeldObject(r, vouched)) return firstDifferentByte(link, vouched);
    return 4 + firstDifferentByte(check, (link ^ LINK_CHECK) >>> 0);
  }
  for (let i = w + 2, end = (ptr + size) >>> 2; i < end; i++) {
    if (u32[i] !== POISON_WORD) {
      for (let b = i << 2; ; b++) if (r.u8[b] !== POISON) return b - ptr;
    }
  }
  return -1;
}

/**
 * Visit the objects the quarantine of `r` holds, oldest first, for a
 * reader (heap.check()): a link that leaves the region, is misaligned, or
 * a chain longer than its count says calls `corrupt` and ends the walk; a
 * link whose words disagree (a write after free: `visit` finds it) is not
 * followed, and the held objects after it are visited as their bits find
 * them.
 */
export function forEachQuarantined(r: ShardRegion, visit: (ptr: number) => void, corrupt: (ptr: number) => void): void {
  const most = r.u32[r.hdr + S_QUARANTINE_OBJECTS]!;
  const seen = new Set<number>();
  let n = 0;
  for (let p = r.u32[r.hdr + S_QUARANTINE_HEAD]!; p !== 0; p = r.u32[p >>> 2]!) {
    if (!r.contains(p) || p % 8 !== 0 || ++n > most) return corrupt(p);
    seen.add(p);
    visit(p);
    if (!linkAgrees(r.u32, p)) {
      forEachHeldObject(r, (q) => {
        if (!seen.has(q)) visit(q);
      });
      return;
    }
  }
}

/** Store `next` as `ptr`'s link, with its check word. */
function setLink(u32: Uint32Array, ptr: number, next: number): void {
  u32[ptr >>> 2] = next;
  u32[(ptr >>> 2) + 1] = next ^ LINK_CHECK;
}

function linkAgrees(u32: Uint32Array, ptr: number): boolean {
  return ((u32[ptr >>> 2]! ^ LINK_CHECK) >>> 0) === u32[(ptr >>> 2) + 1];
}

/** The first byte (little-endian) in which words `a` and `b` differ; they do. */
function firstDifferentByte(a: number, b: number): number {
  const x = a ^ b;
  return (31 - Math.clz32(x & -x)) >>> 3;
}

/** Count a write after free to held object `ptr`, and warn about it. Owner only. */
function reportWrite(r: ShardRegion, ptr: number, size: number, at: number): void {
  r.i32[r.hdr + S_QUARANTINE_WRITTEN]++;
  process.emitWarning(
    `shard ${r.id}: object ${ptr} (${size} bytes) was written after it was freed, at byte ${at} (debug pointers found it in the quarantine)`,
    { code: "SHARDHEAP_WRITE_AFTER_FREE" },
  );
}

/** Held object `ptr`, staying held, was written: report it, then poison it again (its link words are the caller's to set). */
function foundWritten(r: ShardRegion, ptr: number): void {
  const size = objectSizeIn(r, ptr);
  reportWrite(r, ptr, size, Math.max(0, firstWrittenByte(r, ptr, size)));
  r.u8.fill(POISON, ptr + LINK_BYTES, ptr + size);
}

/**
 * Visit every object of `r` whose live bit is clear and whose claim is
 * kept, in address order: in a debug heap, every held object. Bits that
 * do not sit at an object's start are passed over (check.ts reports them).
 */
function forEachHeldObject(r: ShardRegion, visit: (ptr: number) => void): void {
  const words = r.dataPages * BITMAP_WORDS_PER_PAGE;
  for (let w = 0; w < words; w += 2) {
    let bits = r.i32[r.bitmap + w + 1]! & ~r.i32[r.bitmap + w]!;
    while (bits !== 0) {
      const k = 31 - Math.clz32(bits & -bits);
      bits &= bits - 1;
      const ptr = r.dataStart + ((w >>> 1) * 32 + k) * 8;
      if (isObjectStart(r, ptr)) visit(ptr);
    }
  }
}

/** Whether `ptr` (in `r`'s pages) starts a page-span object or an object of a pool span. */
function isObjectStart(r: ShardRegion, ptr: number): boolean {
  const page = r.pageOf(ptr);
  const state = r.i32[r.pageMeta(page) + PM_STATE];
  if (state === PAGE_LARGE) return ptr === r.pageAddress(page);
  const pool = r.poolOfPage(page);
  if (state !== PAGE_POOL || pool < 0) return false;
  const head = r.i32[r.pageMeta(page) + PM_HEAD]!;
  const offset = ptr - r.pageAddress(head);
  const stride = poolStride[pool]!;
  return offset % stride === 0 && offset / stride < objectsPerSpan(pool, r.i32[r.pageMeta(head) + PM_SPAN_PAGES]!);
}

/**
 * The chain cannot be followed past `taken` (the oldest, leaving now):
 * rebuild it from every other held object, as the bitmap finds them. Runs
 * of links that still agree keep their order, each run starting from an
 * object no agreeing link names, runs in address order; objects written
 * meanwhile are reported first. Rare: only after a write after free.
 */
function rebuildChain(r: ShardRegion, taken: number): void {
  const u32 = r.u32;
  const held: number[] = [];
  forEachHeldObject(r, (p) => {
    if (p !== taken) held.push(p);
  });
  const members = new Set(held);
  const next = new Map<number, number>();
  const named = new Set<number>();
  for (const p of held) {
    const q = u32[p >>> 2]!;
    if (((q ^ LINK_CHECK) >>> 0) !== u32[(p >>> 2) + 1]) {
      foundWritten(r, p);
      continue;
    }
    if (q !== p && members.has(q) && !named.has(q)) {
      next.set(p, q);
      named.add(q);
    }
  }
  const order: number[] = [];
  const placed = new Set<number>();
  const run = (from: number): void => {
    for (let p: number | undefined = from; p !== undefined && !placed.has(p); p = next.get(p)) {
      placed.add(p);
      order.push(p);
    }
  };
  for (const p of held) if (!named.has(p)) run(p);
  for (const p of held) run(p); // what only a forged cycle of agreeing links leaves
  let bytes = 0;
  let prev = 0;
  for (const p of order) {
    if (prev === 0) u32[r.hdr + S_QUARANTINE_HEAD] = p;
    else setLink(u32, prev, p);
    bytes += objectSizeIn(r, p);
    prev = p;
  }
  if (prev === 0) u32[r.hdr + S_QUARANTINE_HEAD] = 0;
  else setLink(u32, prev, 0);
  u32[r.hdr + S_QUARANTINE_TAIL] = prev;
  u32[r.hdr + S_QUARANTINE_OBJECTS] = order.length;
  u32[r.hdr + S_QUARANTINE_BYTES] = bytes;
}
