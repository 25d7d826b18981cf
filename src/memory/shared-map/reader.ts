/**
 * The readers' side of a SharedMap, on any thread, without a lock
 * (shared-map.ts, "The protocol", R1-R4): lookups that return a
 * reference, the accessors that read an entry through one, retain and
 * release, and the reader record whose hazard slots protect what this
 * object holds.
 */
import { SharedMapError } from "../../errors.js";
import { THIS_THREAD } from "../ownership.js";
import { liveObjectRegion, objectSizeIn } from "../pointers.js";
import { INVALID_HELD, NO_TABLE } from "./atomics.js";
import { REF_MASK, scratch } from "./core.js";
import { badKey } from "./keys.js";
import * as L from "./layout.js";
import { MapReclamation } from "./reclamation.js";

// Hot-path constants as module-local values (shard-allocator.ts: V8 folds
// these to constants; imported bindings cost a load and a hole check).
const { HAZARD_REF, ID_MASK, STATE_MASK, GENERATION_MASK, W_HASH, W_KEY_LENGTH, W_PAYLOAD, W_STATE, W_ID, W_VALUE_LENGTH } = L;
/** Every hazard slot of a record free. */
const ALL_HAZARDS = (1 << L.HAZARDS_PER_READER) - 1;
const utf8 = new TextDecoder();

export class MapReader extends MapReclamation {
  /** Entries in the map (from any thread: a figure of a moment). */
  get size(): number {
    let n = 0;
    for (let s = 0, seg = this.hdr + L.SEGMENTS; s <= this.segmentMask; s++, seg += L.SEGMENT_BYTES) n += this.i32[(seg + L.SG_COUNT) >>> 2]!;
    return n;
  }

  // ------------------------------------------------------------- readers

  /**
   * A reference to `key`'s entry (a string is its UTF-8 bytes), or 0 when
   * the map has none; from any thread, without a lock. The entry is not
   * freed, and its payload not changed, until the reference is released:
   * read it through valuePointer / valueLength (or value, a view), then
   * release(ref) on this same SharedMap object, once (retain gives one to
   * release elsewhere). Allocates nothing.
   */
  acquire(key: string | Uint8Array): number {
    if (this.ended !== undefined) throw this.gone("acquire");
    let hash: number;
    if (typeof key === "string") hash = scratch.ofString(key, this.seed);
    else if (key instanceof Uint8Array) hash = scratch.ofBytes(key, 0, key.length, this.seed);
    else throw badKey(key);
    return this.find(hash);
  }

  /** acquire of the key `bytes[start..end)` (a key inside a bigger buffer, such as a request's), without a view. */
  acquireBytes(bytes: Uint8Array, start: number, end: number): number {
    if (this.ended !== undefined) throw this.gone("acquireBytes");
    if (!(bytes instanceof Uint8Array)) throw badKey(bytes);
    if (!(Number.isInteger(start) && Number.isInteger(end) && start >= 0 && start <= end && end <= bytes.length)) {
      throw new RangeError(`SharedMap.acquireBytes: start and end must be integers with 0 <= start <= end <= ${bytes.length}, got ${start} and ${end}`);
    }
    return this.find(scratch.ofBytes(bytes, start, end, this.seed));
  }

  /**
   * The probe (atomics.ts: R1-R3), protected by a free hazard
   * slot of this object when it has one, else by a count; then the key
   * compare (R4).
   */
  protected find(hash: number): number {
    let free = this.freeHazards;
    if (free === 0 && this.unclaimed) free = this.claimRecord();
    const slot = 31 - Math.clz32(free & -free); // the lowest free one (-1 when none)
    const hazard = free === 0 ? 0 : this.hazards + 4 * slot;
    const i32 = this.i32;
    const hdr = this.hdr;
    const k = scratch;
    let d = this.probe(hdr, hash, hazard);
    for (;;) {
      if ((d & 31) === 0 && d !== 0) {
        const w = d >>> 2;
        if (i32[w + W_HASH] === hash && i32[w + W_KEY_LENGTH] === k.length && k.equalsAt(i32, i32[w + W_PAYLOAD]! >>> 2)) {
          if (hazard === 0) return ((i32[w + W_STATE]! << 21) & GENERATION_MASK) | i32[w + W_ID]!;
          this.freeHazards = free & ~(1 << slot);
          return HAZARD_REF | (slot << 24) | i32[w + W_ID]!;
        }
        if (hazard !== 0) this.store(hazard, 0);
        else this.dropCount(d);
        d = this.probeNext(hdr, hash);
      } else {
        if (d === 0) return 0;
        d = this.findSlow(d, hash);
      }
    }
  }

  /** The probe's rarer verdicts: the map is gone, or a last count to give back (INVALID_HELD) before probing again. */
  protected findSlow(verdict: number, hash: number): number {
    if (verdict === NO_TABLE) throw this.gone("acquire");
    this.dropCount(verdict ^ INVALID_HELD);
    return this.probe(this.hdr, hash, 0);
  }

  /**
   * Another reference to the entry `ref` holds, a counted one: released by
   * release() on any thread (post the number), independently of `ref`.
   */
  retain(ref: number): number {
    const d = this.descriptorOf(ref, "retain");
    if ((this.i32[(d >>> 2) + W_STATE]! & STATE_MASK) === L.RESERVED) {
      throw new SharedMapError("ERR_SHARDHEAP_MAP_REFERENCE", `SharedMap.retain(${ref}): a reservation has one reference, its writer's: publish it first`);
    }
    this.atomics.retain(d);
    return L.refGeneration(this.i32[(d >>> 2) + W_STATE]!) | (ref & ID_MASK);
  }

  /**
   * Give a reference back: a hazard reference on the object that took it,
   * a counted one on any thread. An entry out of the map is freed once its
   * last reference goes (by this thread, a cross-shard free when it is not
   * the owner's, or by the owner's next reclaim). A reference released
   * twice is refused (SharedMapError, ERR_SHARDHEAP_MAP_REFERENCE) when
   * the map can tell: a hazard slot that no longer holds it, a count that
   * is gone, or a release that would free an entry still in the map.
   */
  release(ref: number): void {
    if ((ref & (HAZARD_REF | ~REF_MASK)) === HAZARD_REF) {
      const slot = (ref >>> 24) & 31;
      const hazard = this.hazards + 4 * slot;
      if (slot < L.HAZARDS_PER_READER && (this.freeHazards & (1 << slot)) === 0 && this.hazards !== 0 && this.i32[hazard >>> 2] === (ref & ID_MASK)) {
        this.store(hazard, 0);
        this.freeHazards |= 1 << slot;
        return;
      }
      throw this.notHeld(ref, "release");
    }
    const d = this.descriptorOf(ref, "release");
    if ((this.i32[(d >>> 2) + W_STATE]! & STATE_MASK) === L.RESERVED) this.giveUpReservation(ref, d);
    const r = this.releaseStep(d);
    if (r > 0) return;
    if (r === 0) return this.countGone(d);
    throw r === -2
      ? new SharedMapError("ERR_SHARDHEAP_MAP_REFERENCE", `SharedMap.release(${ref}): the entry's only reference left is the map's own (it is still in the map): this reference was released already`)
      : this.notHeld(ref, "release");
  }

  /** Whether `key` has an entry now (acquire and release). */
  has(key: string | Uint8Array): boolean {
    const ref = this.acquire(key);
    if (ref === 0) return false;
    this.release(ref);
    return true;
  }

  /** A copy of `key`'s value, or undefined (allocates: for the hot path, acquire and read in place). */
  get(key: string | Uint8Array): Uint8Array | undefined {
    const ref = this.acquire(key);
    if (ref === 0) return undefined;
    try {
      return this.value(ref).slice();
    } finally {
      this.release(ref);
    }
  }

  /** `key`'s value read as UTF-8 text, or undefined. */
  getString(key: string | Uint8Array): string | undefined {
    const ref = this.acquire(key);
    if (ref === 0) return undefined;
    try {
      return utf8.decode(this.value(ref));
    } finally {
      this.release(ref);
    }
  }

  /** Byte address (in heap.buffer) of the value of the entry `ref` holds; 8-aligned. */
  valuePointer(ref: number): number {
    const d = this.descriptorOf(ref, "valuePointer") >>> 2;
    return (this.i32[d + W_PAYLOAD]! >>> 0) + L.keyArea(this.i32[d + W_KEY_LENGTH]!);
  }

  /** Bytes of that value. */
  valueLength(ref: number): number {
    return this.i32[(this.descriptorOf(ref, "valueLength") >>> 2) + W_VALUE_LENGTH]! >>> 0;
  }

  /** A view of the value, no copy (a new Uint8Array each call); valid while the reference is held. */
  value(ref: number): Uint8Array {
    const d = this.descriptorOf(ref, "value") >>> 2;
    const start = (this.i32[d + W_PAYLOAD]! >>> 0) + L.keyArea(this.i32[d + W_KEY_LENGTH]!);
    return new Uint8Array(this.heap.buffer, start, this.i32[d + W_VALUE_LENGTH]! >>> 0);
  }

  /** A view of the key's bytes (its UTF-8, for a string key). */
  key(ref: number): Uint8Array {
    const d = this.descriptorOf(ref, "key") >>> 2;
    return new Uint8Array(this.heap.buffer, this.i32[d + W_PAYLOAD]! >>> 0, this.i32[d + W_KEY_LENGTH]!);
  }

  /**
   * Heap bytes the entry `ref` holds: its object's size as the allocator
   * gave it (key area, value and the size class's rounding), what a memory
   * budget over the entries counts (memcached's store, store.ts).
   */
  entryBytes(ref: number): number {
    const payload = this.i32[(this.descriptorOf(ref, "entryBytes") >>> 2) + W_PAYLOAD]! >>> 0;
    return objectSizeIn(liveObjectRegion(this.heap, payload, "SharedMap.entryBytes"), payload);
  }

  /** Bytes of the key. */
  keyLength(ref: number): number {
    return this.i32[(this.descriptorOf(ref, "keyLength") >>> 2) + W_KEY_LENGTH]!;
  }

  /**
   * This object is done with the map: its reader record goes back for
   * another object to claim. Refused (ERR_SHARDHEAP_MAP_IN_USE) while it
   * holds hazard references. The object cannot be used afterwards.
   */
  close(): void {
    if (this.ended !== undefined) return;
    if (this.hazards !== 0) {
      if (this.freeHazards !== ALL_HAZARDS) {
        throw new SharedMapError("ERR_SHARDHEAP_MAP_IN_USE", `SharedMap.close: this object holds ${L.HAZARDS_PER_READER - popCount(this.freeHazards)} references; release them first`);
      }
      this.store(this.hazards - L.R_HAZARDS + L.R_CLAIM, 0);
      this.hazards = 0;
      this.freeHazards = 0;
    }
    this.ended = "closed";
  }

  /** Claim a reader record for this object's hazard slots; its free-slot bits (0: none was left, counted references only). */
  protected claimRecord(): number {
    this.unclaimed = false;
    const records = this.i32[this.hdrWord + (L.M_READERS >>> 2)]! >>> 0;
    const count = this.i32[this.hdrWord + (L.M_READER_RECORDS >>> 2)]!;
    for (let r = 0; r < count; r++) {
      const record = records + r * L.READER_BYTES;
      if (this.i32[(record + L.R_CLAIM) >>> 2] !== 0 || this.atomics.compareExchange(record + L.R_CLAIM, 0, THIS_THREAD) !== 0) continue;
      // Raise the high mark before any hazard is stored here (a reclaim reads the mark, then the slots).
      const highAddress = this.hdr + L.M_READER_HIGH;
      for (let high = this.atomics.load(highAddress); high < r + 1; ) {
        const seen = this.atomics.compareExchange(highAddress, high, r + 1);
        if (seen === high) break;
        high = seen;
      }
      this.hazards = record + L.R_HAZARDS;
      this.freeHazards = ALL_HAZARDS;
      return ALL_HAZARDS;
    }
    return 0;
  }
}

function popCount(bits: number): number {
  let n = 0;
  for (; bits !== 0; bits &= bits - 1) n++;
  return n;
}
