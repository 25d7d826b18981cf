/**
 * Pointer and size validation at the API edge: turns anything that is not
 * the start of a live object into a specific InvalidPointerError, and bad
 * sizes into TypeError / RangeError, before the allocator writes a byte.
 * Only the slow paths come here; the fast paths test the same bits inline.
 */
import { InvalidPointerError } from "../errors.js";
import { GRANULE, HEAP_HEADER_BYTES, PAGE_POOL, PAGE_SIZE, PM_HEAD, PM_SPAN_PAGES, PM_STATE } from "./layout.js";
import type { ShardRegion } from "./region.js";
import { classSize, poolStride } from "./size-classes.js";

/** Where a heap's regions are, enough to find a pointer's owner. */
export interface HeapGeometry {
  readonly regions: readonly ShardRegion[];
  readonly shardBytes: number;
  /** Stacks each shard's profiler keeps (its tables, and so its layout, follow from it). */
  readonly profilerSites: number;
}

/** The shard whose region holds byte offset `ptr`, or -1. */
export function ownerShardOf(g: HeapGeometry, ptr: number): number {
  if (!(ptr >= HEAP_HEADER_BYTES)) return -1;
  const shard = Math.floor((ptr - HEAP_HEADER_BYTES) / g.shardBytes);
  return shard < g.regions.length ? shard : -1;
}

/**
 * The region owning the live object starting at `ptr`; throws a
 * TypeError (not a number) or an InvalidPointerError saying why not.
 */
export function liveObjectRegion(g: HeapGeometry, ptr: unknown, op: string): ShardRegion {
  if (typeof ptr !== "number") {
    throw new TypeError(`${op}: a pointer must be a number, got ${typeof ptr}`);
  }
  const fail = (why: string): never => {
    throw new InvalidPointerError(`${op}(${ptr}): ${why}`, ptr);
  };
  if (!Number.isSafeInteger(ptr)) fail("not an integer byte offset");
  const shard = ownerShardOf(g, ptr);
  if (shard < 0) fail("outside the heap's shard regions");
  const r = g.regions[shard]!;
  if (!r.contains(ptr)) fail(`inside shard ${shard}'s allocator metadata, not an object`);
  if (ptr % GRANULE !== 0) fail(`misaligned: objects start at multiples of ${GRANULE}`);
  if (!r.isLive(ptr)) {
    const m = r.pageMeta(r.pageOf(ptr));
    if (r.i32[m + PM_STATE] === PAGE_POOL) {
      const pool = r.poolOfPage(r.pageOf(ptr));
      const stride = poolStride[pool]!;
      const offset = ptr - r.pageAddress(r.i32[m + PM_HEAD]!);
      if (offset % stride !== 0) {
        fail(`interior pointer, ${offset % stride} bytes into a ${classSize[pool]}-byte object`);
      }
    }
    // Debug pointers keep a freed object's claim while it is held back from reuse (quarantine.ts).
    if (r.debugPointers && r.isPendingFree(ptr)) fail("already freed: a use after free (debug pointers hold freed objects back from reuse to catch it)");
    fail("not a live object (already freed, never allocated, or inside a larger object)");
  }
  if (r.isPendingFree(ptr)) fail("already freed (its cross-shard free is pending)");
  return r;
}

/** Usable size of a live object (validated) in region `r`. */
export function objectSizeIn(r: ShardRegion, ptr: number): number {
  const m = r.pageMeta(r.pageOf(ptr));
  const pool1 = r.poolOfPage(r.pageOf(ptr)) + 1;
  return pool1 !== 0 ? classSize[pool1 - 1]! : r.i32[m + PM_SPAN_PAGES]! * PAGE_SIZE;
}

/** A size argument: a non-negative safe integer, or TypeError / RangeError. */
export function checkSize(size: unknown, op: string, what = "size"): number {
  if (typeof size !== "number") {
    throw new TypeError(`${op}: ${what} must be a number, got ${typeof size}`);
  }
  if (!Number.isSafeInteger(size) || size < 0) {
    throw new RangeError(`${op}: ${what} must be a non-negative safe integer, got ${size}`);
  }
  return size;
}

/** An alignment argument: a power of two >= 1. */
export function checkAlignment(align: unknown, op: string): number {
  checkSize(align, op, "alignment");
  const a = align as number;
  if (a < 1 || a > 2 ** 31 || (a & (a - 1)) !== 0) {
    throw new RangeError(`${op}: alignment must be a power of two between 1 and 2^31, got ${a}`);
  }
  return a;
}
