/**
 * A shard's staging area: one page span of the shard's heap, taken when
 * the shard is configured, from which the connections cut the staging
 * copies of values bound for other shards' keys (remote.ts), as a ring:
 * copies are cut at the head in the order they are made and the space
 * comes back from the tail once the owners have answered for them (in any
 * order: a copy answered early waits for the older ones).
 *
 * Why not malloc: staging copies are freed within a round trip while the
 * items around them stay, so in the items' own pool spans they leave holes
 * that later items fill out of LRU order; eviction, which goes in LRU
 * order, then frees whole pages late. Measured (8 MiB shards, 200,000
 * items of 100 B, one connection on shard 0, then a 900 KB set on each
 * shard): shard 0 evicted 16,878 items for its first 900 KB item with
 * staging copies from malloc, 5,626 (the bytes' minimum, 160 B each) with
 * them kept out of its pools, like shard 1 which stages nothing.
 *
 * A copy that does not fit (the ring full, or larger than it) is the
 * caller's to allocate elsewhere (allocate returns 0).
 */
import type { ShardAllocator } from "../../memory/shard-allocator.js";

/** The area's size: this share of the shard's memory, at most MAX_BYTES. */
const SHARE = 1 / 32;
const MAX_BYTES = 256 << 10;
/** Copies are cut 8-aligned (the item header is read as 32-bit words). */
const ALIGN = 8;

interface Copy {
  /** Offset in the area. */
  start: number;
  end: number;
  released: boolean;
}

/** Bytes of the staging area of a shard whose object pages hold `totalMemory` bytes (at most; 0 when it had no room). */
export function stagingBytesFor(totalMemory: number): number {
  const wanted = Math.min(MAX_BYTES, Math.floor(totalMemory * SHARE));
  return wanted >= 4096 ? Math.ceil(wanted / 4096) * 4096 : 0;
}

export class StagingArea {
  /** Where the area starts in the heap (0: the shard had no room for one). */
  private readonly base: number;
  /** Its bytes (0: none). */
  readonly capacity: number;
  /** Next offset to cut from. */
  private head = 0;
  /** Live copies (and released ones not yet reached by the tail), oldest first, from `first`. */
  private readonly copies: Copy[] = [];
  private first = 0;
  private readonly byPointer = new Map<number, Copy>();

  constructor(memory: ShardAllocator) {
    const wanted = Math.min(MAX_BYTES, Math.floor(memory.stats().totalMemory * SHARE));
    let base = 0;
    try {
      base = wanted >= 4096 ? memory.malloc(wanted) : 0;
    } catch {
      base = 0;
    }
    this.base = base;
    this.capacity = base === 0 ? 0 : memory.objectSize(base);
  }

  /** A copy of `size` bytes (8-aligned), or 0 when the ring has no room for it now. */
  allocate(size: number): number {
    const n = Math.ceil(size / ALIGN) * ALIGN;
    if (n > this.capacity || n === 0) return 0;
    let at: number;
    if (this.first === this.copies.length) {
      at = 0; // empty: start over
    } else {
      // Live copies span [tail, head), or, wrapped, [tail, end) and [0, head); head == tail: full.
      const tail = this.copies[this.first]!.start;
      if (this.head > tail) {
        if (this.head + n <= this.capacity) at = this.head;
        else if (n <= tail) at = 0; // wrap, leaving the end's gap until the tail passes it
        else return 0;
      } else if (this.head + n <= tail) {
        at = this.head;
      } else {
        return 0;
      }
    }
    const copy: Copy = { start: at, end: at + n, released: false };
    this.copies.push(copy);
    this.head = copy.end;
    const ptr = this.base + at;
    this.byPointer.set(ptr, copy);
    return ptr;
  }

  /** Give back a copy this area cut; false for any other pointer (the caller frees it). */
  release(ptr: number): boolean {
    const copy = this.byPointer.get(ptr);
    if (copy === undefined) return false;
    this.byPointer.delete(ptr);
    copy.released = true;
    const copies = this.copies;
    while (this.first < copies.length && copies[this.first]!.released) this.first++;
    if (this.first === copies.length) {
      copies.length = 0;
      this.first = 0;
    } else if (this.first > 1024 && this.first * 2 > copies.length) {
      copies.splice(0, this.first);
      this.first = 0;
    }
    return true;
  }

  /** Copies not yet given back. */
  get live(): number {
    return this.byPointer.size;
  }
}
