/**
 * What every part of a SharedMap object shares (shared-map.ts has the
 * design and the memory-ordering argument): its fields, the views and
 * steps it works through, how a reference names a descriptor (checked),
 * the errors it gives, and the heap objects it makes (tables, descriptor
 * chunks). The parts build on it in a line: reclamation.ts (freeing what
 * no reference holds), reader.ts (lookups and references), writer.ts
 * (changes), shared-map.ts (making, attaching, books, destroy).
 */
import { HeapOwnershipError, SharedMapError } from "../../errors.js";
import { describeOwner, ownerToken, THIS_THREAD } from "../ownership.js";
import type { SharedHeap } from "../shared-heap.js";
import type { ShardAllocator } from "../shard-allocator.js";
import { descriptorAddress, mapAtomics, type MapAtomics } from "./atomics.js";
import { KeyScratch, badKey } from "./keys.js";
import * as L from "./layout.js";

// Hot-path constants as module-local values (shard-allocator.ts: V8 folds
// these to constants; imported bindings cost a load and a hole check).
const { GENERATION_MASK, HAZARD_REF, ID_MASK, STATE_MASK, FREE, RETIRED, W_REFS, W_STATE, W_ID } = L;
const W_DIRECTORY = L.M_DIRECTORY >>> 2;
/** A reference of either kind: below 2^30 with an id. */
export const REF_MASK = 0x3fffffff;

/** The key being looked up or written, this thread's (keys.ts). */
export const scratch = new KeyScratch();

export class MapCore {
  /** The number to post to other threads: SharedMap.attach(heap, handle) there. */
  readonly handle: number;
  /** The shard whose memory holds the map, and whose thread alone changes it. */
  readonly shard: number;
  readonly heap: SharedHeap;
  protected readonly i32: Int32Array;
  protected readonly u8: Uint8Array;
  protected readonly hdr: number;
  protected readonly hdrWord: number;
  protected readonly seed: number;
  protected readonly atomics: MapAtomics;
  protected readonly probe: (hdr: number, hash: number, hazard: number) => number;
  protected readonly probeNext: (hdr: number, hash: number) => number;
  /** The count drops this object makes (but the probe's own, inside it) go through here: test/shared-map-unlink-order.test.ts wraps it to see the map at each. */
  protected readonly releaseStep: (d: number) => number;
  protected readonly store: (address: number, value: number) => void;
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

  protected constructor(heap: SharedHeap, handle: number) {
    this.heap = heap;
    this.handle = handle;
    this.hdr = handle;
    this.hdrWord = handle >>> 2;
    this.i32 = new Int32Array(heap.buffer);
    this.u8 = new Uint8Array(heap.buffer);
    this.shard = this.i32[this.hdrWord + (L.M_SHARD >>> 2)]!;
    this.seed = this.i32[this.hdrWord + (L.M_SEED >>> 2)]!;
    this.atomics = mapAtomics(heap.buffer, heap.memory);
    this.probe = this.atomics.probe;
    this.probeNext = this.atomics.probeNext;
    this.releaseStep = this.atomics.release;
    this.store = this.atomics.store;
  }

  protected owner(op: string): ShardAllocator {
    this.checkLive(op);
    return ownedAllocator(this.heap, this.shard, op);
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

  /** The stored key at byte address `at` into the scratch (its length already set). */
  protected loadKey(at: number): void {
    const n = (scratch.length + 3) >>> 2;
    if (scratch.words.length < n + 2) scratch.ofBytes(this.u8, at, at + scratch.length, this.seed);
    else for (let j = 0; j < n; j++) scratch.words[j] = this.i32[(at >>> 2) + j]!;
  }

  protected table(): number {
    return this.i32[this.hdrWord + (L.M_TABLE >>> 2)]! >>> 0;
  }

  protected mask(T: number): number {
    return this.i32[(T + L.T_MASK) >>> 2]!;
  }

  protected slotDescriptor(T: number, i: number): number {
    return descriptorAddress(this.i32, this.hdr, this.i32[slotAddress(T, i) >>> 2]! >>> 8);
  }

  /** The owner's probe for the key in the scratch: its slot, or ~(the empty slot that ends its path). */

  protected addHeader(slot: number, delta: number): void {
    this.i32[this.hdrWord + (slot >>> 2)] += delta;
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
      const k = 31 - Math.clz32((id >>> 6) + 1);
      const chunk = this.i32[this.hdrWord + W_DIRECTORY + k]! >>> 0;
      if (chunk !== 0) {
        const d = chunk + ((id - ((64 << k) - 64)) << 5);
        if ((ref & HAZARD_REF) !== 0) {
          const slot = (ref >>> 24) & 31;
          if (slot < L.HAZARDS_PER_READER && (this.freeHazards & (1 << slot)) === 0 && this.hazards !== 0 && this.i32[(this.hazards >>> 2) + slot] === id) return d;
        } else {
          const state = this.i32[(d >>> 2) + W_STATE]!;
          if ((state & GENERATION_MASK) === (ref & GENERATION_MASK) && (state & STATE_MASK) !== FREE && (state & STATE_MASK) !== RETIRED) return d;
          if ((state & STATE_MASK) === RETIRED && this.i32[(d >>> 2) + W_REFS]! > 0 && (state & GENERATION_MASK) === (ref & GENERATION_MASK)) return d;
        }
      }
    }
    throw this.notHeld(ref, op);
  }

  protected notHeld(ref: unknown, op: string): SharedMapError {
    if (this.ended !== undefined) return this.gone(op);
    return new SharedMapError("ERR_SHARDHEAP_MAP_REFERENCE", `SharedMap.${op}(${String(ref)}): not a reference to an entry of this map that is held`);
  }

}

export function slotAddress(T: number, i: number): number {
  return T + L.TABLE_HEADER_BYTES + 4 * i;
}

/** The allocator of `shard` if this thread owns it; HeapOwnershipError naming the map and the owner otherwise. */
export function ownedAllocator(heap: SharedHeap, shard: number, op: string): ShardAllocator {
  // heap.shard takes a shard no thread owns, as a malloc there would.
  const a = heap.shard(shard);
  if (a.owned) return a;
  throw new HeapOwnershipError(
    `SharedMap.${op} on a map of shard ${shard} from ${describeOwner(THIS_THREAD)}: the shard belongs to ${describeOwner(ownerToken(heap.regions[shard]!))}. ` +
      "A map changes only on the thread that owns its shard: ask that thread to make the change (with Smp, submitTo the shard); " +
      "acquire, release and reading the entries work from any thread.",
    shard,
  );
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

/** Chunk k of descriptors, each FREE with its id written. */
export function newChunk(heap: SharedHeap, a: ShardAllocator, k: number): number {
  const first = L.chunkFirstId(k);
  const count = Math.min(L.chunkSize(k), L.MAX_ID + 1 - first);
  const bytes = count * L.DESCRIPTOR_BYTES;
  const chunk = zeroed(heap, a.allocateAligned(64, bytes), bytes);
  const i32 = new Int32Array(heap.buffer);
  for (let j = 0; j < count; j++) i32[((chunk + j * L.DESCRIPTOR_BYTES) >>> 2) + W_ID] = first + j;
  return chunk;
}
