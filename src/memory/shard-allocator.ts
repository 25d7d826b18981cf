/**
 * ShardAllocator: one shard's malloc / free (Seastar's cpu_pages front end).
 *
 * Only the thread that owns a shard changes its allocator state (an
 * allocator made for another thread only reads, see `owned`); frees of
 * other shards' objects go to their owners' inboxes (cross-shard.ts). The
 * fast paths read top to bottom in malloc() and free(): they touch the pool
 * record (one cache line, counters included), the page's class byte, one
 * live/pending word pair, and the object's first word (free only stores to
 * it), and allocate nothing. free() makes one atomic, its claim
 * (cross-shard.ts, "Claims"): that is what makes two racing frees of one
 * object end with exactly one success; malloc makes one more when it hands
 * out an object this shard freed, clearing that claim. The atomics are
 * WebAssembly's where the heap allows (atomics.ts). Measured (bench/, this
 * machine, a quiet moment): a malloc/free pair 13 ns without claims, 33 ns
 * with them, @thi.ng/malloc 19 ns. Every miss goes to a separately named
 * slow path:
 *
 *   malloc -> mallocSmallSlow (drain inbox, refill pool, reclaim)  small
 *          -> mallocLarge     (page span, reclaim)                  > 16 KiB
 *   free   -> freeSlow        (validation errors, sized free, free(0),
 *                              large objects, other shards' objects)
 *
 * Fast-path contract (what lets it skip checks): a pointer inside this
 * region, 8-aligned, whose live bit is set, is the start of a live object
 * of this shard; the claim then tells whether no other free got there
 * first; and the class map of its page tells whether it is a small object
 * (and of which class) or a page span.
 */
import { InvalidPointerError } from "../errors.js";
import { AllocatorControls } from "./allocator-controls.js";
import { claimLive } from "./cross-shard.js";
import type { ApiEntry } from "./hooks.js";
import * as layout from "./layout.js";
import { checkAlignment, checkSize, liveObjectRegion, objectSizeIn } from "./pointers.js";
import * as sizeClasses from "./size-classes.js";
import { bytesOf, STORED_HEADER_BYTES, writeStoredHeader } from "./stored-values.js";

// V8 reads an imported binding through a module cell, with a hole check, on
// every use; a module-local const folds to a constant in optimized code.
// Measured on the 64-byte malloc/free pair: 14.5 ns with imported bindings,
// 10.6 ns with these local ones. Keep hot-path constants and tables local.
const {
  HEAP_HEADER_BYTES,
  PAGE_SHIFT,
  PAGE_SIZE,
  POOL_STRIDE,
  P_CLAIMED_HEAD,
  P_FREE_COUNT,
  P_FREE_HEAD,
  P_FREES_HI,
  P_FREES_LO,
  P_MALLOCS_HI,
  P_MALLOCS_LO,
  P_MAX_FREE,
} = layout;
const {
  CLASS_COUNT,
  SAMPLED_POOL_BASE,
  MAX_SMALL_SIZE,
  classAlignment,
  classOf,
  classSize,
} = sizeClasses;

export class ShardAllocator extends AllocatorControls {
  /**
   * Allocate `size` bytes (8-aligned; malloc(0) gives a unique 8-byte
   * object). Throws OutOfMemoryError when the shard is exhausted even after
   * draining its inbox and returning cached spans; TypeError / RangeError
   * for a size that is not a non-negative safe integer; HeapOwnershipError
   * on a thread that does not own the shard.
   */
  malloc(size: number): number {
    if ((size >>> 0) === size && size <= MAX_SMALL_SIZE) {
      const cls = classOf[(size + 7) >>> 3]!;
      if ((this.sampleCountdown -= classSize[cls]!) <= 0) return this.mallocSampled(cls);
      const pool = this.pools + cls * POOL_STRIDE;
      // One view for the whole fast path (links are stored through Int32 and
      // read back with >>> 0): a second typed-array view cost ~0.8 ns a pair.
      const i32 = this.i32;
      // What this shard freed last first (LIFO: still in cache), then the
      // clean list; a claimed object's pending bit is this shard's to clear.
      let list = pool + P_CLAIMED_HEAD;
      let obj = i32[list]! >>> 0;
      if (obj === 0) {
        list = pool + P_FREE_HEAD;
        obj = i32[list]! >>> 0;
        if (obj === 0) return this.mallocSmallSlow(cls);
      }
      const rel = obj - this.dataStart;
      const w = this.bitmap + ((rel >>> 8) << 1);
      const bit = 1 << ((rel >>> 3) & 31);
      // Before this path's stores: an atomic waits for earlier stores to drain.
      if (list !== pool + P_FREE_HEAD) this.atomicAnd((w + 1) << 2, ~bit);
      i32[list] = i32[obj >>> 2]!;
      i32[pool + P_FREE_COUNT]--;
      if (++i32[pool + P_MALLOCS_LO]! === 0) i32[pool + P_MALLOCS_HI]++;
      i32[w] |= bit;
      return obj;
    }
    return this.mallocNotSmall(size);
  }

  /**
   * Free the object at `ptr`: locally, or by handing it to its owner when
   * another shard owns it. free(0) does nothing. `size`, when given, must
   * not exceed the object's size (a check, as sized delete). Anything that
   * is not a live object, or an object another free has already claimed
   * (from any thread, however the two interleave): InvalidPointerError,
   * heap unchanged.
   */
  free(ptr: number, size?: number): void {
    if (typeof ptr === "number" && size === undefined) {
      const rel = ptr - this.dataStart;
      if ((rel >>> 0) === rel && rel < this.localBytes && (rel & 7) === 0) {
        const i32 = this.i32;
        const w = this.bitmap + ((rel >>> 8) << 1);
        const bit = 1 << ((rel >>> 3) & 31);
        const live = i32[w]!;
        // Loads nothing from the object (layout.ts).
        if ((live & bit) !== 0) {
          const pool1 = this.u8[this.classMap + (rel >>> PAGE_SHIFT)]!;
          // An ordinary pool (1..CLASS_COUNT); 0 (a page span) and the
          // sampled pools, whose objects carry a site tag, take the slow
          // path. The claim (cross-shard.ts): clear before means no other
          // free got there first; set means one did, and the slow path
          // throws. The bit stays set while the object sits on the
          // claimed list (small-pool.ts settleClaims clears it).
          if ((pool1 - 1) >>> 0 < CLASS_COUNT && (this.atomicOr((w + 1) << 2, bit) & bit) === 0) {
            i32[w] = live ^ bit; // the owner is the live word's only writer: `live` is current
            const pool = this.pools + (pool1 - 1) * POOL_STRIDE;
            i32[ptr >>> 2] = i32[pool + P_CLAIMED_HEAD]!;
            i32[pool + P_CLAIMED_HEAD] = ptr;
            const cached = ++i32[pool + P_FREE_COUNT]!;
            if (++i32[pool + P_FREES_LO]! === 0) i32[pool + P_FREES_HI]++;
            if (cached > i32[pool + P_MAX_FREE]!) this.trimAfterFree(pool1 - 1);
            return;
          }
        }
      } else if (this.freeForeignFast(ptr)) {
        return;
      }
    }
    this.freeSlow(ptr, size);
  }

  /**
   * A new object holding `text` as UTF-8 and its length (stored-values.ts):
   * one call instead of Buffer.byteLength, malloc and writeString, and one
   * number to hand over. Read it back from any thread with
   * heap.storedString(ptr); free it with free(ptr). TypeError for a
   * `text` that is not a string; OutOfMemoryError as malloc.
   */
  mallocString(text: string): number {
    if (typeof text !== "string") throw new TypeError(`mallocString: text must be a string, got ${typeof text}`);
    const length = Buffer.byteLength(text, "utf8");
    const ptr = this.mallocFor(ShardAllocator.prototype.mallocString, STORED_HEADER_BYTES + length);
    writeStoredHeader(this.u32, ptr, length);
    this.buf.write(text, ptr + STORED_HEADER_BYTES, length, "utf8");
    return ptr;
  }

  /**
   * A new object holding a copy of `bytes` (a Uint8Array, Buffer, any
   * ArrayBuffer view, an ArrayBuffer or a SharedArrayBuffer) and its
   * length. Read it back with heap.storedBytes(ptr) (a copy) or
   * heap.storedView(ptr) (in place); free it with free(ptr).
   */
  mallocBytes(bytes: ArrayBufferView | ArrayBuffer | SharedArrayBuffer): number {
    const src = bytesOf(bytes, "mallocBytes");
    const ptr = this.mallocFor(ShardAllocator.prototype.mallocBytes, STORED_HEADER_BYTES + src.byteLength);
    writeStoredHeader(this.u32, ptr, src.byteLength);
    this.u8.set(src, ptr + STORED_HEADER_BYTES);
    return ptr;
  }

  /**
   * Allocate `size` bytes at an address that is a multiple of `align` (a
   * power of two). Small sizes with align <= 4096 come from the first size
   * class whose objects are that aligned; others are page spans cut to
   * alignment.
   */
  allocateAligned(align: number, size: number): number {
    checkAlignment(align, "allocateAligned");
    checkSize(size, "allocateAligned");
    if (size <= MAX_SMALL_SIZE && align <= PAGE_SIZE) {
      let cls = classOf[(size + 7) >>> 3]!;
      while (classAlignment[cls]! < align) cls++;
      return this.mallocFor(ShardAllocator.prototype.allocateAligned, classSize[cls]!);
    }
    return this.mallocLarge(size, align, ShardAllocator.prototype.allocateAligned);
  }

  /**
   * Resize the object at `ptr` to `size` bytes, keeping its contents up to
   * the smaller size. realloc(0, n) is malloc(n). A large object shrinks in
   * place; a small one stays when the new size falls in its class; otherwise
   * the contents move to a new object (of this shard) and the old one is
   * freed. On OutOfMemoryError the old object is untouched and still live;
   * when another free of `ptr` wins a race with this realloc, realloc
   * throws InvalidPointerError and leaves nothing allocated. realloc(ptr, 0)
   * shrinks to a minimum-size object (it does not free).
   */
  realloc(ptr: number, size: number): number {
    checkSize(size, "realloc");
    this.checkOwned("realloc");
    if (ptr === 0) return this.mallocFor(ShardAllocator.prototype.realloc, size);
    const owner = liveObjectRegion(this.geometry, ptr, "realloc");
    const oldSize = objectSizeIn(owner, ptr);
    if (owner.id === this.id) {
      const pool1 = this.poolOfPage(this.pageOf(ptr)) + 1;
      if (pool1 !== 0) {
        // A sampled object's pool is its class's sampled pool: it stays too.
        const cls = pool1 - 1 >= SAMPLED_POOL_BASE ? pool1 - 1 - SAMPLED_POOL_BASE : pool1 - 1;
        if (size <= MAX_SMALL_SIZE && classOf[(size + 7) >>> 3] === cls) return ptr;
      } else if (size > MAX_SMALL_SIZE) {
        const pages = Math.ceil(size / PAGE_SIZE);
        const oldPages = oldSize / PAGE_SIZE;
        if (pages === oldPages) return ptr;
        if (pages < oldPages) {
          this.shrinkLarge(this.pageOf(ptr), pages);
          return ptr;
        }
      }
    }
    // Allocate first (an OutOfMemoryError leaves the old object untouched),
    // then claim the old object like any free; the claim decides a race
    // with another free of it, and the copy is made only once it is ours.
    // The claim re-reads the live bit (claimLive): the allocation may have
    // drained this shard's inbox, freeing `ptr` for a remote free that won,
    // and may even have handed the same address back as `moved` (a page
    // span freed and taken again). Claiming on the earlier look let both
    // calls succeed in 14 of 50,000 races, with the pools' lists corrupt.
    const moved = this.mallocFor(ShardAllocator.prototype.realloc, size);
    if (moved === ptr || !claimLive(owner, ptr)) {
      this.freeUnpublished(moved);
      liveObjectRegion(this.geometry, ptr, "realloc"); // throws why, as it is now
      throw new InvalidPointerError(`realloc(${ptr}): freed by another thread while it was being resized`, ptr);
    }
    this.u8.copyWithin(moved, ptr, ptr + Math.min(oldSize, size));
    if (owner.id === this.id) this.releaseClaimed(ptr);
    else this.sendForeign(owner, ptr);
    return moved;
  }

  /**
   * malloc on behalf of another public method (`entry`): a sample taken
   * inside starts its stack below `entry`, so V8 builds no CallSites for
   * shardheap's frames.
   */
  private mallocFor(entry: ApiEntry, size: number): number {
    this.outerEntry = entry;
    try {
      return this.malloc(size);
    } finally {
      this.outerEntry = undefined;
    }
  }

  /**
   * The remote free's fast path: the same checks as liveObjectRegion, in
   * line, for a pointer of another shard, then the claim. Returns false,
   * having changed nothing, for anything it does not handle (the slow path
   * then throws the precise error). Measured: validation through
   * liveObjectRegion was ~25 of the ~65 ns a remote free cost
   * (bench/cross-shard.ts).
   */
  private freeForeignFast(ptr: number): boolean {
    if (!this.owned) return false;
    const regions = this.geometry.regions;
    const shard = Math.floor((ptr - HEAP_HEADER_BYTES) / this.geometry.shardBytes);
    if (shard === this.id || !(shard >= 0 && shard < regions.length)) return false;
    const owner = regions[shard]!;
    const rel = ptr - owner.dataStart;
    if (!((rel >>> 0) === rel && rel < owner.dataBytes && (rel & 7) === 0)) return false;
    if (!claimLive(owner, ptr)) return false;
    this.sendForeign(owner, ptr);
    return true;
  }
}
