/**
 * The tools the cases of check-messages.test.ts corrupt a heap with: word
 * indices, never the allocator's own code paths; and what a case is.
 */
import type { SharedHeap } from "../../../src/index.js";
import {
  PAGE_POOL,
  PM_FREELIST,
  PM_HEAD,
  PM_NEXT,
  PM_PREV,
  PM_SPAN_PAGES,
  PM_STATE,
  PM_USED,
  P_CAPACITY,
  P_PAGES_IN_USE,
  P_SPAN_FREE,
  P_SPAN_LIST,
} from "../../../src/memory/layout.js";
import { allocatePageSpan, spanListOf } from "../../../src/memory/page-spans.js";
import type { ShardRegion } from "../../../src/memory/region.js";
import { classOf, objectsPerSpan, poolStride } from "../../../src/memory/size-classes.js";
import { poolRecord } from "../../../src/memory/small-pool.js";

export const MiB = 1 << 20;
export const C64 = classOf[64 >>> 3]!;
export const C1280 = classOf[1280 >>> 3]!;
export const C16384 = classOf[16384 >>> 3]!;
export const SITE_NONE = 0xffffff; // a tag naming site 0xfffffe, never recorded

export const metaIndex = (r: ShardRegion, page: number, field: number): number => r.pageMeta(page) + field;
export const setLive = (r: ShardRegion, ptr: number): void => void (r.i32[r.liveWord(ptr)] |= r.liveBit(ptr));
export const clearLive = (r: ShardRegion, ptr: number): void => void (r.i32[r.liveWord(ptr)] &= ~r.liveBit(ptr));
export const setPending = (r: ShardRegion, ptr: number): void => void (r.i32[r.pendingWord(ptr)] |= r.liveBit(ptr));
export const clearPending = (r: ShardRegion, ptr: number): void => void (r.i32[r.pendingWord(ptr)] &= ~r.liveBit(ptr));
const link = (r: ShardRegion, obj: number): number => r.u32[obj >>> 2]!;
/** The objects of a list linked through their first words, from `head`. */
export function listFrom(r: ShardRegion, head: number): number[] {
  const objects: number[] = [];
  for (let obj = head; obj !== 0; obj = link(r, obj)) objects.push(obj);
  return objects;
}
export const poolSlot = (r: ShardRegion, cls: number, slot: number): number => poolRecord(r, cls) + slot;
/** The free-span list that holds a fresh region's one free span (all its pages). */
export const freshListOfAll = (r: ShardRegion): number => spanListOf(r.dataPages);

/**
 * Make pages [head, head + pages) of `r` a pool span of `cls` that is
 * consistent with an otherwise empty pool: every object on the span's own
 * freelist, the pool's record counting the span. Pages come from the page
 * allocator (allocatePageSpan), so the free lists stay right.
 */
export function forgePoolSpan(r: ShardRegion, cls: number, pages: number, classByte = cls + 1): number {
  const head = allocatePageSpan(r, pages, false);
  for (let p = head; p < head + pages; p++) {
    r.i32[metaIndex(r, p, PM_STATE)] = PAGE_POOL;
    r.i32[metaIndex(r, p, PM_HEAD)] = head;
    r.u8[r.classMap + p] = classByte;
  }
  const perSpan = objectsPerSpan(cls, pages);
  const start = r.pageAddress(head);
  const size = poolStride[cls]!;
  for (let k = 0; k < perSpan; k++) r.u32[(start + k * size) >>> 2] = k + 1 < perSpan ? start + (k + 1) * size : 0;
  r.i32[metaIndex(r, head, PM_SPAN_PAGES)] = pages;
  r.u32[metaIndex(r, head, PM_FREELIST)] = start;
  r.i32[metaIndex(r, head, PM_USED)] = 0;
  r.i32[metaIndex(r, head, PM_NEXT)] = -1;
  r.i32[metaIndex(r, head, PM_PREV)] = -1;
  if (classByte === cls + 1) {
    r.i32[poolSlot(r, cls, P_SPAN_LIST)] = head;
    r.i32[poolSlot(r, cls, P_CAPACITY)] = perSpan;
    r.i32[poolSlot(r, cls, P_SPAN_FREE)] = perSpan;
    r.i32[poolSlot(r, cls, P_PAGES_IN_USE)] = pages;
  }
  return head;
}

export interface Case {
  /** The message shape, as enumerated from the source. */
  readonly shape: string;
  /** What is corrupted (and what else the expected list holds, and why). */
  readonly what: string;
  readonly shards?: number;
  /** Made with debug pointers (the quarantine's messages). */
  readonly debugPointers?: boolean;
  /**
   * Bring the heap to the state to corrupt, with the allocator (check() is
   * then [], asserted), and return the corruption: it writes words and
   * returns the exact list check() must give.
   */
  readonly arrange: (heap: SharedHeap) => () => string[];
}

export const stuck = (ptr: number): string => `shard 0: object ${ptr} is pending a cross-shard free but no inbox or outbox holds it (its free was lost)`;
