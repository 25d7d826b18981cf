/**
 * What every part of a SharedMap object shares (shared-map.ts has the
 * design and the memory-ordering argument): its fields, the views and
 * steps it works through, how a reference names a descriptor (checked),
 * which shard this thread writes with, the errors it gives, and the heap
 * objects it makes (tables, descriptor chunks). The parts build on it in
 * a line: reclamation.ts (freeing what no reference holds), reader.ts
 * (lookups and references), writer.ts (changes, segment by segment),
 * repair.ts (the segment locks, and a dead holder's change finished),
 * shared-map.ts (making, attaching, books, destroy).
 */
import { HeapOwnershipError, SharedMapError } from "../../errors.js";
import { describeOwner, ownerToken, THIS_THREAD } from "../ownership.js";
import { ownerShardOf } from "../pointers.js";
import type { SharedHeap } from "../shared-heap.js";
import type { ShardAllocator } from "../shard-allocator.js";
import { descriptorAddress, mapAtomics, type MapAtomics } from "./atomics.js";
import { KeyScratch, badKey } from "./keys.js";
import * as L from "./layout.js";

// Hot-path constants as module-local values (shard-allocator.ts: V8 folds
// these to constants; imported bindings cost a load and a hole check).
const { HAZARD_REF, ID_MASK, STATE_MASK, FREE, RETIRED, W_REFS, W_STATE, W_ID, W_HASH, M_DIRECTORY } = L;
const W_DIRECTORY = M_DIRECTORY >>> 2;
/** A reference of either kind: below 2^30 with an id. */
export const REF_MASK = 0x3fffffff;

/** The key being looked up or written, this thread's (keys.ts). */
export const scratch = new KeyScratch();

export class MapCore {
  /** The number to post to other threads: SharedMap.attach(heap, handle) there. */
  readonly handle: number;
  /** The home shard: its memory holds the map's header and reader records (its first tables and descriptors too). */
  readonly shard: number;
  readonly heap: SharedHeap;
  protected readonly i32: Int32Array;
  protected readonly u8: Uint8Array;
  protected readonly hdr: number;
  protected readonly hdrWord: number;
  protected readonly seed: number;
  protected readonly segmentMask: number;
  protected readonly atomics: MapAtomics;
  protected readonly probe: (hdr: number, hash: number, hazard: number) => number;
  protected readonly probeNext: (hdr: number, hash: number) => number;
  /** The count drops this object makes (but the probe's own, inside it) go through here: test/memory/shared-map/shared-map-unlink-order.test.ts wraps it to see the map at each. */
  protected readonly releaseStep: (d: number) => number;
  /**
   * Every atomic store, compareExchange, pair unlink and step pair a change makes
   * goes through these fields: test/memory/shared-map/shared-map-writer-death.test.ts wraps
   * them to stop a writer dead before any one of them.
   */
  protected readonly store: (address: number, value: number) => void;
  protected readonly compareExchange: (address: number, expected: number, replacement: number) => number;
  protected readonly unlinkEntry: (d: number, expected: number, drop: number) => number;
  /** Two stores in one call: d's state, then its count 1 (a reservation made). */
  protected readonly reserveSteps: (d: number, state: number) => void;
  /** Two stores in one call: d's state LINKED, then the slot that names it. */
  protected readonly linkSteps: (d: number, state: number, slot: number, word: number) => void;
  /** A replacer's token stored in its record, then the segment's lock loaded (its word returned). */
  protected readonly announce: (record: number, token: number, lock: number) => number;
  /** d's state LINKED, then compareExchange of the slot from `seen` to d's word (what it held returned). */
  protected readonly swapSteps: (d: number, state: number, slot: number, seen: number, word: number) => number;
  /** The first writer record (of `count` from the replacing word at `at`) replacing in seg: its replacing word's address, or 0. */
  protected readonly findReplacer: (at: number, count: number, seg: number) => number;
  /** Bytes of the map's own objects (structureBytes), -1 until first asked. */
  protected ownBytes = -1;
  /** Byte address of this object's first hazard slot (0 until it claims a reader record, or when none was left). */
  protected hazards = 0;
  /** Which of its hazard slots are free, a bit each. */
  protected freeHazards = 0;
  /** Whether this object still has to try for a reader record. */
  protected unclaimed = true;
  /** "destroyed" or "closed" once it is; undefined while usable. */
  protected ended: string | undefined = undefined;
  /** The allocator this object writes with (the shard this thread owns), undefined until its first change. */
  protected alloc: ShardAllocator | undefined = undefined;
  /** Byte address of that shard's writer record in the header. */
  protected writerRecord = 0;

  protected constructor(heap: SharedHeap, handle: number) {
    this.heap = heap;
    this.handle = handle;
    this.hdr = handle;
    this.hdrWord = handle >>> 2;
    this.i32 = new Int32Array(heap.buffer);
    this.u8 = new Uint8Array(heap.buffer);
    this.shard = this.i32[this.hdrWord + (L.M_SHARD >>> 2)]!;
    this.seed = this.i32[this.hdrWord + (L.M_SEED >>> 2)]!;
    this.segmentMask = this.i32[this.hdrWord + (L.M_SEGMENT_MASK >>> 2)]!;
    this.atomics = mapAtomics(heap.buffer, heap.memory);
    this.probe = this.atomics.probe;
    this.probeNext = this.atomics.probeNext;
    this.releaseStep = this.atomics.release;
    this.store = this.atomics.store;
    this.compareExchange = this.atomics.compareExchange;
    this.unlinkEntry = this.atomics.unlinkEntry;
    this.reserveSteps = this.atomics.reserveSteps;
    this.linkSteps = this.atomics.linkSteps;
    this.announce = this.atomics.announce;
    this.swapSteps = this.atomics.swapSteps;
    this.findReplacer = this.atomics.findReplacer;
  }

  /**
   * The allocator this thread writes with: the shard it owns (the home
   * shard if it owns that one, else the lowest it owns), found at the
   * first change and kept. HeapOwnershipError when it owns none: a write
   * allocates, and only a shard's owner allocates in it.
   */
  protected writer(op: string): ShardAllocator {
    if (this.ended !== undefined) throw this.gone(op);
    const a = this.alloc;
    if (a !== undefined) return a;
    return this.findWriter(op);
  }

  private findWriter(op: string): ShardAllocator {
    const regions = this.heap.regions;
    let shard = ownerToken(regions[this.shard]!) === THIS_THREAD ? this.shard : -1;
    for (let s = 0; shard < 0 && s < regions.length; s++) if (ownerToken(regions[s]!) === THIS_THREAD) shard = s;
    if (shard < 0) {
      throw new HeapOwnershipError(
        `SharedMap.${op} from ${describeOwner(THIS_THREAD)}, which owns no shard of this heap: a change allocates the entry in the writer's own shard. ` +
          "Make it on a thread that owns a shard (with Smp, submitTo one); acquire, release and reading the entries work from any thread.",
        this.shard,
      );
    }
    const a = this.heap.shard(shard);
    this.alloc = a;
    this.writerRecord = this.hdr + L.writerOffset(this.segmentMask + 1, shard);
    return a;
  }

  protected checkLive(op: string): void {
    if (this.ended !== undefined) throw this.gone(op);
  }

  protected gone(op: string): SharedMapError {
    return new SharedMapError("ERR_SHARDHEAP_MAP_HANDLE", `SharedMap.${op}: ${this.ended === "closed" ? "this SharedMap object was closed" : `the map (handle ${this.handle}) was destroyed`}`);
  }

  /** Read `key` into the scratch; its hash. */
  protected readKey(key: string | Uint8Array): number {
    if (typeof key === "string") return scratch.ofString(key, this.seed);
    if (key instanceof Uint8Array) return scratch.ofBytes(key, 0, key.length, this.seed);
    throw badKey(key);
  }

  /** Byte address of the segment `hash` picks. */
  protected segmentOf(hash: number): number {
    return this.hdr + L.SEGMENTS + L.segmentIndex(hash, this.segmentMask) * L.SEGMENT_BYTES;
  }

  /** The segment holding descriptor d's key. */
  protected segmentOfEntry(d: number): number {
    return this.segmentOf(this.i32[(d >>> 2) + W_HASH]!);
  }

  /** Byte address of the writer record of the shard whose memory holds d (its writer's). */
  protected recordOf(d: number): number {
    return this.hdr + L.writerOffset(this.segmentMask + 1, ownerShardOf(this.heap, d));
  }

  protected table(seg: number): number {
    return this.i32[(seg + L.SG_TABLE) >>> 2]! >>> 0;
  }

  protected mask(T: number): number {
    return this.i32[(T + L.T_MASK) >>> 2]!;
  }

  protected slotDescriptor(T: number, i: number): number {
    return descriptorAddress(this.i32, this.hdr, this.i32[slotAddress(T, i) >>> 2]! >>> 8);
  }

  // ---------------------------------------------------------- references

  /**
   * The descriptor address a reference names, checked: a hazard reference
   * whose slot on this object still holds its id, or a counted one whose
   * generation is its descriptor's, in use. SharedMapError
   * (ERR_SHARDHEAP_MAP_REFERENCE) otherwise.
   */
  protected descriptorOf(ref: number, op: string): number {
    if (this.ended !== undefined) throw this.gone(op);
    const id = ref & ID_MASK;
    if ((ref & REF_MASK) === ref && id !== 0) {
      // layout.ts descriptorAt, inline (the accessors' hot path).
      const g = 31 - Math.clz32((id >>> 8) + 1);
      const o = id - ((256 << g) - 256);
      const chunk = this.i32[this.hdrWord + W_DIRECTORY + ((g << 2) | (o >>> (6 + g)))]! >>> 0;
      if (chunk !== 0) {
        const d = chunk + ((o & ((64 << g) - 1)) << 5);
        if ((ref & HAZARD_REF) !== 0) {
          const slot = (ref >>> 24) & 31;
          if (slot < L.HAZARDS_PER_READER && (this.freeHazards & (1 << slot)) === 0 && this.hazards !== 0 && this.i32[(this.hazards >>> 2) + slot] === id) return d;
        } else {
          const state = this.i32[(d >>> 2) + W_STATE]!;
          const kind = state & STATE_MASK;
          if (L.refGeneration(state) === (ref & L.GENERATION_MASK) && kind !== FREE && (kind !== RETIRED || this.i32[(d >>> 2) + W_REFS]! > 0)) return d;
        }
      }
    }
    throw this.notHeld(ref, op);
  }

  protected notHeld(ref: unknown, op: string): SharedMapError {
    if (this.ended !== undefined) return this.gone(op);
    return new SharedMapError("ERR_SHARDHEAP_MAP_REFERENCE", `SharedMap.${op}(${String(ref)}): not a reference to an entry of this map that is held`);
  }

  /** A counted reference to d as it is now (its generation and id). */
  protected countedRef(d: number): number {
    return L.refGeneration(this.i32[(d >>> 2) + W_STATE]!) | this.i32[(d >>> 2) + W_ID]!;
  }
}

export function slotAddress(T: number, i: number): number {
  return T + L.TABLE_HEADER_BYTES + 4 * i;
}

export function zeroed(heap: SharedHeap, ptr: number, bytes: number): number {
  new Uint8Array(heap.buffer, ptr, bytes).fill(0);
  return ptr;
}

/** An empty table of `capacity` slots. */
export function newTable(heap: SharedHeap, a: ShardAllocator, capacity: number): number {
  const bytes = L.TABLE_HEADER_BYTES + 4 * capacity;
  const T = zeroed(heap, a.allocateAligned(64, bytes), bytes);
  new Int32Array(heap.buffer)[(T + L.T_MASK) >>> 2] = capacity - 1;
  return T;
}

/** Directory entry e's chunk of descriptors, each FREE with its id written, linked in id order through D_NEXT (the last one's link 0). */
export function newChunk(heap: SharedHeap, a: ShardAllocator, e: number): number {
  const first = L.chunkFirstId(e);
  const count = L.chunkSize(e);
  const bytes = count * L.DESCRIPTOR_BYTES;
  const chunk = zeroed(heap, a.allocateAligned(64, bytes), bytes);
  const i32 = new Int32Array(heap.buffer);
  for (let j = 0; j < count; j++) {
    const w = (chunk + j * L.DESCRIPTOR_BYTES) >>> 2;
    i32[w + W_ID] = first + j;
    if (j + 1 < count) i32[w + L.W_NEXT] = first + j + 1;
  }
  return chunk;
}
