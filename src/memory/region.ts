/**
 * ShardRegion: typed-array views of one shard's region and slot accessors.
 *
 * This is the read side every other file shares: the allocator (which
 * extends it and is the only writer), the checker, statistics, diagnostics,
 * and any thread reading another shard's state. Views are made once per
 * heap and shared by all regions; indices are precomputed here so the hot
 * paths do no address arithmetic beyond an add and a shift.
 */
import { FreeSpanIndex } from "./free-span-index.js";
import { heapAtomics, type HeapAtomics, type WasmMemory } from "./atomics.js";
import {
  C_BASE,
  HEAP_FLAG_DEBUG_POINTERS,
  H_FLAGS,
  H_VERSION,
  PK_BASE,
  PM_STRIDE,
  PAGE_SHIFT,
  PAGE_SIZE,
  S_FREE_PAGES,
  S_INBOX,
  S_DOORBELL,
  S_OUTBOX,
  S_POOLS,
  S_SPAN_LISTS,
  GRANULE_SHIFT,
  regionLayout,
} from "./layout.js";

/** The views of a whole heap buffer, and its atomics, made once. */
export class HeapViews {
  readonly u8: Uint8Array;
  readonly i32: Int32Array;
  readonly u32: Uint32Array;
  readonly f64: Float64Array;
  /** The same bytes as a Buffer: UTF-8 written and read in place (Buffer.write, toString), no copy. */
  readonly buf: Buffer;
  readonly atomics: HeapAtomics;
  constructor(
    readonly buffer: SharedArrayBuffer,
    memory: WasmMemory | undefined,
  ) {
    this.u8 = new Uint8Array(buffer);
    this.i32 = new Int32Array(buffer);
    this.u32 = new Uint32Array(buffer);
    this.f64 = new Float64Array(buffer);
    this.buf = Buffer.from(buffer);
    this.atomics = heapAtomics(buffer, memory);
  }
}

export class ShardRegion {
  readonly id: number;
  /** Read-modify-writes on the buffer's words, by byte address (atomics.ts). */
  readonly atomics: HeapAtomics;
  /** atomics.or and atomics.and, held directly so the hot paths load one field fewer. */
  readonly atomicOr: (address: number, bits: number) => number;
  readonly atomicAnd: (address: number, bits: number) => number;
  readonly u8: Uint8Array;
  readonly i32: Int32Array;
  readonly u32: Uint32Array;
  readonly f64: Float64Array;
  /** Byte offset of the region. */
  readonly base: number;
  /** Int32 index of the shard header. */
  readonly hdr: number;
  /** Int32 index of page 0's metadata. */
  readonly meta: number;
  /** Byte offset of the class map (one byte per page). */
  readonly classMap: number;
  /** Int32 index of the bitmap's first live word (its pending word follows it). */
  readonly bitmap: number;
  /** Float64 index of the first counter. */
  readonly counters: number;
  /** Int32 index of pool record 0. */
  readonly pools: number;
  /** Int32 index of the inbox head and of the doorbell. */
  readonly inbox: number;
  readonly doorbell: number;
  /** Int32 index of outbox slot 0 (one per destination shard, cross-shard.ts). */
  readonly outboxSlots: number;
  /** Int32 index of free-span list 0's head. */
  readonly spanLists: number;
  /** Byte offset of data page 0 and the number of data pages. */
  readonly dataStart: number;
  readonly dataPages: number;
  readonly dataBytes: number;
  /** The heap was made with debug pointers (quarantine.ts): freed objects are poisoned and held back from reuse. */
  readonly debugPointers: boolean;
  /** The heap's format (its header's H_VERSION): the layout follows it. */
  readonly version: number;
  /** Float64 index of the shard's peak slots (PK_*). */
  readonly peak: number;
  /** Byte offsets in the buffer of the peak records and of the timeline (0: a heap made before peaks has neither), and the timeline's entries. */
  readonly peaksOffset: number;
  readonly timelineOffset: number;
  readonly timelineEntries: number;
  /** The free spans by address, built on this thread's first page allocation (free-span-index.ts, page-spans.ts). */
  freeIndex: FreeSpanIndex | undefined = undefined;

  constructor(views: HeapViews, id: number, shardBytes: number, profilerSites: number) {
    this.version = views.i32[H_VERSION]!;
    const layout = regionLayout(id, shardBytes, profilerSites, this.version);
    this.id = id;
    this.u8 = views.u8;
    this.i32 = views.i32;
    this.u32 = views.u32;
    this.f64 = views.f64;
    this.atomics = views.atomics;
    this.atomicOr = views.atomics.or;
    this.atomicAnd = views.atomics.and;
    this.base = layout.base;
    this.hdr = layout.base >>> 2;
    this.meta = (layout.base + layout.metaOffset) >>> 2;
    this.classMap = layout.base + layout.classMapOffset;
    this.bitmap = (layout.base + layout.bitmapOffset) >>> 2;
    this.counters = layout.base / 8 + C_BASE;
    this.pools = this.hdr + S_POOLS;
    this.inbox = this.hdr + S_INBOX;
    this.doorbell = this.hdr + S_DOORBELL;
    this.outboxSlots = this.hdr + S_OUTBOX;
    this.spanLists = this.hdr + S_SPAN_LISTS;
    this.dataStart = layout.base + layout.dataOffset;
    this.dataPages = layout.dataPages;
    this.dataBytes = layout.dataPages * PAGE_SIZE;
    this.debugPointers = (views.i32[H_FLAGS]! & HEAP_FLAG_DEBUG_POINTERS) !== 0;
    this.peak = layout.base / 8 + PK_BASE;
    this.peaksOffset = layout.peaksOffset === 0 ? 0 : layout.base + layout.peaksOffset;
    this.timelineOffset = layout.timelineOffset === 0 ? 0 : layout.base + layout.timelineOffset;
    this.timelineEntries = layout.timelineEntries;
  }

  /** Int32 index of page `p`'s metadata record. */
  pageMeta(p: number): number {
    return this.meta + p * PM_STRIDE;
  }

  pageAddress(p: number): number {
    return this.dataStart + p * PAGE_SIZE;
  }

  pageOf(ptr: number): number {
    return (ptr - this.dataStart) >>> PAGE_SHIFT;
  }

  contains(ptr: number): boolean {
    return ptr >= this.dataStart && ptr < this.dataStart + this.dataBytes;
  }

  /** Int32 index of the live word covering `ptr`. */
  liveWord(ptr: number): number {
    return this.bitmap + (((ptr - this.dataStart) >>> 8) << 1);
  }

  /** Int32 index of the pending word covering `ptr`. */
  pendingWord(ptr: number): number {
    return this.liveWord(ptr) + 1;
  }

  liveBit(ptr: number): number {
    return 1 << (((ptr - this.dataStart) >>> GRANULE_SHIFT) & 31);
  }

  isLive(ptr: number): boolean {
    return (this.i32[this.liveWord(ptr)]! & this.liveBit(ptr)) !== 0;
  }

  isPendingFree(ptr: number): boolean {
    return (Atomics.load(this.i32, this.pendingWord(ptr)) & this.liveBit(ptr)) !== 0;
  }

  /** Size class of the pool span holding page `p`, or -1 for a page that is not in a pool. */
  poolOfPage(p: number): number {
    return this.u8[this.classMap + p]! - 1;
  }

  freePages(): number {
    return this.i32[this.hdr + S_FREE_PAGES]!;
  }

  counter(c: number): number {
    return this.f64[this.counters + c]!;
  }

  headerSlot(slot: number): number {
    return this.i32[this.hdr + slot]!;
  }
}
