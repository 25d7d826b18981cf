/**
 * Freeing what no reference holds (shared-map.ts, "Freeing"), and the
 * descriptor lists, per writer: every descriptor belongs to the writer
 * whose shard's memory holds its chunk, and always goes back to that
 * writer's record. The thread that takes an entry's count to 0 retires
 * it: the descriptor's writer puts it on its own retired list; any other
 * thread frees it at once when no hazard slot names it (its payload by a
 * cross-shard free, the descriptor pushed onto its writer's returned
 * stack), else pushes it onto its writer's retired stack. A writer's
 * reclaim frees its retired entries in batches, after one look at every
 * hazard slot. A writer takes descriptors from its free list, then its
 * returned stack, then what a reclaim frees, then a new chunk.
 *
 * Death: every change to a writer's own lists is one store that takes a
 * descriptor off (or puts it on) a list, so a writer cut off between two
 * steps leaves the lists whole and at most the descriptor it held then
 * off every list: lost, and named so by check().
 */
import { SharedMapError } from "../../errors.js";
import { ownerToken, THIS_THREAD } from "../ownership.js";
import { ownerShardOf } from "../pointers.js";
import type { ShardAllocator } from "../shard-allocator.js";
import { descriptorAddress } from "./atomics.js";
import { MapCore, newChunk } from "./core.js";
import * as L from "./layout.js";

// Hot-path constants as module-local values (shard-allocator.ts: V8 folds
// these to constants; imported bindings cost a load and a hole check).
const { STATE_MASK, FREE, UNLINKED, RETIRED, W_KEY_LENGTH, W_PAYLOAD, W_STATE, W_ID, W_NEXT, W_VALUE_LENGTH, W_REFS } = L;
const WR_FREE = L.WR_FREE >>> 2;
const WR_RETIRED_LIST = L.WR_RETIRED_LIST >>> 2;
const WR_RETIRED_COUNT = L.WR_RETIRED_COUNT >>> 2;
const WR_RETIRED_BYTES = L.WR_RETIRED_BYTES >>> 2;

/** The hazard slots' ids of one reclaim, sorted (this thread's; grows as needed). */
let held = new Int32Array(64);

export class MapReclamation extends MapCore {
  /**
   * A free descriptor of this object's writer (writer() called first):
   * its free list, else its returned stack, else what a reclaim frees,
   * else a new chunk.
   */
  protected takeDescriptor(a: ShardAllocator): number {
    const i32 = this.i32;
    const rw = this.writerRecord >>> 2;
    const id = i32[rw + WR_FREE]!;
    if (id === 0) return this.takeDescriptorSlow(a);
    const d = descriptorAddress(i32, this.hdr, id);
    i32[rw + WR_FREE] = i32[(d >>> 2) + W_NEXT]!;
    return d;
  }

  private takeDescriptorSlow(a: ShardAllocator): number {
    const rec = this.writerRecord;
    const d = this.pop(rec + L.WR_RETURNED);
    if (d !== 0) return d;
    const rw = rec >>> 2;
    if ((this.i32[rw + WR_RETIRED_LIST] !== 0 || this.atomics.load(rec + L.WR_RETIRED_STACK) !== 0) && this.reclaimWith(a, rec) > 0) return this.takeDescriptor(a);
    return this.newDescriptors(a);
  }

  /** A new chunk of this writer's descriptors (claimChunk), all but the first (returned) on its free list, which was empty. */
  private newDescriptors(a: ShardAllocator): number {
    const i32 = this.i32;
    const e = this.claimChunk(a);
    const d = descriptorAddress(i32, this.hdr, Math.max(1, L.chunkFirstId(e))); // id 0 is never handed out: a slot of 0 is empty
    i32[(this.writerRecord >>> 2) + WR_FREE] = i32[(d >>> 2) + W_NEXT]!;
    return d;
  }

  /**
   * Make descriptors for `entries` entries of this object's writer now
   * (writer() called first): chunks claimed and put on its free list, in
   * front of what it holds there. Returns how many it made.
   */
  protected addDescriptors(a: ShardAllocator, entries: number): number {
    const i32 = this.i32;
    const rw = this.writerRecord >>> 2;
    let made = 0;
    while (made < entries) {
      const e = this.claimChunk(a);
      const first = Math.max(1, L.chunkFirstId(e));
      const last = L.chunkFirstId(e) + L.chunkSize(e) - 1;
      // The chunk's last descriptor links to the list, then one store puts the chunk in front of it.
      i32[(descriptorAddress(i32, this.hdr, last) >>> 2) + W_NEXT] = i32[rw + WR_FREE]!;
      i32[rw + WR_FREE] = first;
      made += last - first + 1;
    }
    return made;
  }

  /**
   * Claim the next directory entry for a chunk of this writer's memory:
   * made first, then claimed by compareExchange (a writer that loses the
   * race frees it and tries the next entry, whose size may differ), then
   * recorded in the directory. Returns the entry; its descriptors are on
   * no list yet.
   */
  private claimChunk(a: ShardAllocator): number {
    const next = this.hdr + L.M_NEXT_CHUNK;
    for (let e = this.atomics.load(next); ; ) {
      if (e >= L.CHUNK_COUNT) throw new SharedMapError("ERR_SHARDHEAP_MAP_FULL", `SharedMap: all ${L.MAX_ID} entry descriptors are in use (entries, reservations and entries still referenced)`);
      const chunk = newChunk(this.heap, a, e);
      const seen = this.compareExchange(next, e, e + 1);
      if (seen !== e) {
        a.free(chunk);
        e = seen;
        continue;
      }
      // Recorded before any of its ids can reach a slot (whose store publishes it).
      this.store(this.hdr + L.M_DIRECTORY + 4 * e, chunk);
      if (this.ownBytes >= 0) this.ownBytes += a.objectSize(chunk);
      return e;
    }
  }

  /** Pop one descriptor off one of a writer's stacks (only that writer pops: no ABA); 0 when it is empty. */
  private pop(stack: number): number {
    const i32 = this.i32;
    for (let id = this.atomics.load(stack); id !== 0; ) {
      const d = descriptorAddress(i32, this.hdr, id);
      const seen = this.compareExchange(stack, id, i32[(d >>> 2) + W_NEXT]!);
      if (seen === id) return d;
      id = seen;
    }
    return 0;
  }

  /** Push d onto one of its writer's lock-free stacks (WR_RETURNED, WR_RETIRED_STACK). */
  protected push(stack: number, d: number): void {
    const i32 = this.i32;
    const w = d >>> 2;
    const id = i32[w + W_ID]!;
    let seen = this.atomics.load(stack);
    for (;;) {
      i32[w + W_NEXT] = seen;
      const was = this.compareExchange(stack, seen, id);
      if (was === seen) return;
      seen = was;
    }
  }

  /**
   * This thread took d's count to 0. A reservation given up is freed at
   * once: no slot ever named it, so no reader ever validated it, and a
   * stale reader's hazard on it would only fail its validation (a stale
   * count is no longer there: the count is 0). An entry out of the map is
   * retired, unless a retain from a hazard raised it from 0 since and it
   * was retired then: the compareExchange of its state from UNLINKED makes
   * one thread the retirer of each entry.
   */
  protected countGone(d: number): void {
    const i32 = this.i32;
    const w = d >>> 2;
    const state = i32[w + W_STATE]!;
    const kind = state & STATE_MASK;
    if (kind === L.RESERVED) {
      if (this.compareExchange(d + L.D_STATE, state, (state & ~STATE_MASK) | FREE) === state) this.freeEntry(d);
      return;
    }
    if (kind !== UNLINKED) return;
    if (this.compareExchange(d + L.D_STATE, state, (state & ~STATE_MASK) | RETIRED) !== state) return;
    const shard = ownerShardOf(this.heap, d);
    const rec = this.hdr + L.writerOffset(this.segmentMask + 1, shard);
    if (ownerToken(this.heap.regions[shard]!) === THIS_THREAD) return this.retireHere(d, rec);
    // Another thread's: free it now unless a hazard slot names it or a
    // retain raised its count meanwhile (both read after the retiring
    // compareExchange); else hand it to its writer's reclaim.
    const records = i32[this.hdrWord + (L.M_READERS >>> 2)]!;
    const high = this.atomics.load(this.hdr + L.M_READER_HIGH);
    if (this.atomics.findHazard(records, high, i32[w + W_ID]!) === 0 && this.atomics.load(d + L.D_REFS) === 0) {
      this.store(d + L.D_STATE, (state & ~STATE_MASK) | FREE);
      return this.freeEntry(d);
    }
    this.push(rec + L.WR_RETIRED_STACK, d);
  }

  /** d's writer (this thread) retires it: onto its retired list, and a reclaim once enough is there. */
  private retireHere(d: number, rec: number): void {
    const i32 = this.i32;
    const w = d >>> 2;
    const rw = rec >>> 2;
    i32[w + W_NEXT] = i32[rw + WR_RETIRED_LIST]!;
    i32[rw + WR_RETIRED_LIST] = i32[w + W_ID]!;
    const count = ++i32[rw + WR_RETIRED_COUNT]!;
    const bytes = (i32[rw + WR_RETIRED_BYTES]! += L.keyArea(i32[w + W_KEY_LENGTH]!) + (i32[w + W_VALUE_LENGTH]! >>> 0));
    if (count >= L.RECLAIM_COUNT || bytes >= L.RECLAIM_BYTES) this.reclaimWith(this.heap.shard(ownerShardOf(this.heap, d)), rec);
  }

  /**
   * A writer's reclaim (on the thread that owns its shard): what other
   * threads retired joins the retired list; every hazard slot is read
   * once; then each retired entry whose count is 0 (read after the
   * hazards: a retain is made while a hazard is held) and which no hazard
   * names is taken off the list (one store), marked FREE, its payload
   * freed and the descriptor put on the free list.
   */
  protected reclaimWith(a: ShardAllocator, rec: number): number {
    const i32 = this.i32;
    const rw = rec >>> 2;
    for (let d = this.pop(rec + L.WR_RETIRED_STACK); d !== 0; d = this.pop(rec + L.WR_RETIRED_STACK)) {
      const w = d >>> 2;
      i32[w + W_NEXT] = i32[rw + WR_RETIRED_LIST]!;
      i32[rw + WR_RETIRED_LIST] = i32[w + W_ID]!;
    }
    if (i32[rw + WR_RETIRED_LIST] === 0) return 0;
    const n = this.readHazards();
    let freed = 0;
    let count = 0;
    let bytes = 0;
    let link = rw + WR_RETIRED_LIST; // the word that names the current entry: the list head, then the previous entry's link
    for (let id = i32[link]!; id !== 0; id = i32[link]!) {
      const d = descriptorAddress(i32, this.hdr, id);
      const w = d >>> 2;
      if ((n > 0 && isHeld(n, id)) || this.atomics.load(d + L.D_REFS) !== 0) {
        count++;
        bytes += L.keyArea(i32[w + W_KEY_LENGTH]!) + (i32[w + W_VALUE_LENGTH]! >>> 0);
        link = w + W_NEXT;
        continue;
      }
      i32[link] = i32[w + W_NEXT]!;
      this.store(d + L.D_STATE, (i32[w + W_STATE]! & ~STATE_MASK) | FREE);
      a.free(i32[w + W_PAYLOAD]! >>> 0);
      i32[w + W_NEXT] = i32[rw + WR_FREE]!;
      i32[rw + WR_FREE] = id;
      freed++;
    }
    i32[rw + WR_RETIRED_COUNT] = count;
    i32[rw + WR_RETIRED_BYTES] = bytes;
    return freed;
  }

  /** Every id a hazard slot holds now (atomic loads, after whatever retired what is to be freed), sorted into `held`; how many. */
  private readHazards(): number {
    const records = this.i32[this.hdrWord + (L.M_READERS >>> 2)]! >>> 0;
    const high = this.atomics.load(this.hdr + L.M_READER_HIGH);
    if (held.length < high * L.HAZARDS_PER_READER) held = new Int32Array(high * L.HAZARDS_PER_READER);
    let n = 0;
    for (let r = 0; r < high; r++) {
      for (let j = 0; j < L.HAZARDS_PER_READER; j++) {
        const id = this.atomics.load(records + r * L.READER_BYTES + L.R_HAZARDS + 4 * j);
        if (id !== 0) held[n++] = id;
      }
    }
    if (n > 1) held.subarray(0, n).sort();
    return n;
  }

  /**
   * An entry nobody holds any more (its state FREE already), freed by this
   * thread: its payload (a cross-shard free on another thread's), then
   * its descriptor handed back to its writer: onto the free list on that
   * writer's thread, else onto its returned stack.
   */
  protected freeEntry(d: number): void {
    const i32 = this.i32;
    const w = d >>> 2;
    this.heap.free(i32[w + W_PAYLOAD]! >>> 0);
    const shard = ownerShardOf(this.heap, d);
    const rec = this.hdr + L.writerOffset(this.segmentMask + 1, shard);
    if (ownerToken(this.heap.regions[shard]!) !== THIS_THREAD) return this.push(rec + L.WR_RETURNED, d);
    i32[w + W_NEXT] = i32[(rec >>> 2) + WR_FREE]!;
    i32[(rec >>> 2) + WR_FREE] = i32[w + W_ID]!;
  }

  /** release() of a reservation: the writer gives it up, on its own thread (a reservation is its writer's). */
  protected giveUpReservation(ref: number, d: number): void {
    if (this.i32[(d >>> 2) + W_NEXT] !== THIS_THREAD) {
      throw new SharedMapError("ERR_SHARDHEAP_MAP_REFERENCE", `SharedMap.release(${ref}): a reservation is released by the thread that made it`);
    }
  }

  /** Give back a count the probe took (a key that did not match, or an invalid hold). */
  protected dropCount(d: number): void {
    if (this.releaseStep(d) === 0) this.countGone(d >>> 0);
  }

  /** Whether d's count is 0 (so whoever made it so retires it). */
  protected countIsZero(d: number): boolean {
    return this.i32[(d >>> 2) + W_REFS] === 0;
  }
}

/** Whether the sorted `held` (its first n) holds id. */
function isHeld(n: number, id: number): boolean {
  let lo = 0;
  let hi = n - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1;
    const v = held[mid]!;
    if (v === id) return true;
    if (v < id) lo = mid + 1;
    else hi = mid - 1;
  }
  return false;
}
