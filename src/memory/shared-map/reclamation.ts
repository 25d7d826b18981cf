/**
 * Freeing what no reference holds (shared-map.ts, "Freeing"): the thread
 * that takes an entry's count to 0 retires it; a reader thread frees it at
 * once when no hazard slot names it, else hands it to the owner; the
 * owner's reclaim frees its retired entries in batches, after one look at
 * every hazard slot. And the descriptor lists: the owner's free list, the
 * stacks other threads push onto, a new chunk when they are empty.
 */
import { SharedMapError } from "../../errors.js";
import { ownerToken, THIS_THREAD } from "../ownership.js";
import type { ShardAllocator } from "../shard-allocator.js";
import { descriptorAddress } from "./atomics.js";
import { MapCore, newChunk } from "./core.js";
import * as L from "./layout.js";

// Hot-path constants as module-local values (shard-allocator.ts: V8 folds
// these to constants; imported bindings cost a load and a hole check).
const { GENERATION_MASK, STATE_MASK, FREE, UNLINKED, RETIRED, W_KEY_LENGTH, W_PAYLOAD, W_STATE, W_ID, W_NEXT, W_VALUE_LENGTH } = L;
const W_DIRECTORY = L.M_DIRECTORY >>> 2;

export class MapReclamation extends MapCore {
  /** A free descriptor: the owner's list, else what other threads handed back, else what a reclaim frees, else a new one. */
  protected takeDescriptor(a: ShardAllocator): number {
    const i32 = this.i32;
    const hw = this.hdrWord;
    let id = i32[hw + (L.M_FREE >>> 2)]!;
    if (id === 0 && i32[hw + (L.M_RETURNED >>> 2)] !== 0) id = this.atomics.exchange(this.hdr + L.M_RETURNED, 0);
    if (id === 0 && (i32[hw + (L.M_RETIRED_LIST >>> 2)] !== 0 || i32[hw + (L.M_RETIRED_STACK >>> 2)] !== 0) && this.reclaimWith(a) > 0) {
      id = i32[hw + (L.M_FREE >>> 2)]!;
    }
    if (id !== 0) {
      const d = descriptorAddress(i32, this.hdr, id);
      i32[hw + (L.M_FREE >>> 2)] = i32[(d >>> 2) + W_NEXT]!;
      return d;
    }
    id = i32[hw + (L.M_NEXT_ID >>> 2)]!;
    if (id > L.MAX_ID) throw new SharedMapError("ERR_SHARDHEAP_MAP_FULL", `SharedMap: all ${L.MAX_ID} entry descriptors are in use (entries, reservations and entries still referenced)`);
    const k = L.chunkOf(id);
    if (i32[hw + W_DIRECTORY + k] === 0) {
      // Written before any of its ids can reach a slot (whose store publishes it).
      const chunk = newChunk(this.heap, a, k);
      if (this.ownBytes >= 0) this.ownBytes += a.objectSize(chunk);
      this.store(this.hdr + L.M_DIRECTORY + 4 * k, chunk);
    }
    i32[hw + (L.M_NEXT_ID >>> 2)] = id + 1;
    return descriptorAddress(i32, this.hdr, id);
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
      if (this.atomics.compareExchange(d + L.D_STATE, state, (state & GENERATION_MASK) | FREE) === state) this.freeEntry(d);
      return;
    }
    if (kind !== UNLINKED) return;
    if (this.atomics.compareExchange(d + L.D_STATE, state, (state & GENERATION_MASK) | RETIRED) !== state) return;
    if (ownerToken(this.heap.regions[this.shard]!) === THIS_THREAD) return this.retireHere(d);
    // Another thread: free it now unless a hazard slot names it or a
    // retain raised its count meanwhile (both read after the retiring
    // compareExchange); else hand it to the owner's reclaim.
    const records = i32[this.hdrWord + (L.M_READERS >>> 2)]!;
    const high = this.atomics.load(this.hdr + L.M_READER_HIGH);
    if (this.atomics.findHazard(records, high, i32[w + W_ID]!) === 0 && this.atomics.load(d + L.D_REFS) === 0) {
      this.store(d + L.D_STATE, (state & GENERATION_MASK) | FREE);
      return this.freeEntry(d);
    }
    this.push(L.M_RETIRED_STACK, d);
  }

  /** The owner retires d: onto its retired list, and a reclaim once enough is there. */
  protected retireHere(d: number): void {
    const i32 = this.i32;
    const w = d >>> 2;
    const hw = this.hdrWord;
    i32[w + W_NEXT] = i32[hw + (L.M_RETIRED_LIST >>> 2)]!;
    i32[hw + (L.M_RETIRED_LIST >>> 2)] = i32[w + W_ID]!;
    const count = ++i32[hw + (L.M_RETIRED_COUNT >>> 2)]!;
    const bytes = (i32[hw + (L.M_RETIRED_BYTES >>> 2)]! += L.keyArea(i32[w + W_KEY_LENGTH]!) + (i32[w + W_VALUE_LENGTH]! >>> 0));
    if (count >= L.RECLAIM_COUNT || bytes >= L.RECLAIM_BYTES) this.reclaimWith(this.heap.shard(this.shard));
  }

  /**
   * The owner's reclaim: what other threads retired joins the retired
   * list; every hazard slot is read once; then each retired entry whose
   * count is 0 (read after the hazards: a retain is made while a hazard is
   * held) and which no hazard names is freed.
   */
  protected reclaimWith(a: ShardAllocator): number {
    const i32 = this.i32;
    const hw = this.hdrWord;
    const list = hw + (L.M_RETIRED_LIST >>> 2);
    if (i32[hw + (L.M_RETIRED_STACK >>> 2)] !== 0) {
      for (let id = this.atomics.exchange(this.hdr + L.M_RETIRED_STACK, 0); id !== 0; ) {
        const w = descriptorAddress(i32, this.hdr, id) >>> 2;
        const next = i32[w + W_NEXT]!;
        i32[w + W_NEXT] = i32[list]!;
        i32[list] = id;
        i32[hw + (L.M_RETIRED_COUNT >>> 2)]++;
        i32[hw + (L.M_RETIRED_BYTES >>> 2)] += L.keyArea(i32[w + W_KEY_LENGTH]!) + (i32[w + W_VALUE_LENGTH]! >>> 0);
        id = next;
      }
    }
    if (i32[list] === 0) return 0;
    const held = this.hazardIds();
    let freed = 0;
    let count = 0;
    let bytes = 0;
    let keep = 0;
    for (let id = i32[list]!; id !== 0; ) {
      const d = descriptorAddress(i32, this.hdr, id);
      const w = d >>> 2;
      const next = i32[w + W_NEXT]!;
      if (held.has(id) || this.atomics.load(d + L.D_REFS) !== 0) {
        i32[w + W_NEXT] = keep;
        keep = id;
        count++;
        bytes += L.keyArea(i32[w + W_KEY_LENGTH]!) + (i32[w + W_VALUE_LENGTH]! >>> 0);
      } else {
        this.store(d + L.D_STATE, (i32[w + W_STATE]! & GENERATION_MASK) | FREE);
        a.free(i32[w + W_PAYLOAD]! >>> 0);
        i32[w + W_NEXT] = i32[hw + (L.M_FREE >>> 2)]!;
        i32[hw + (L.M_FREE >>> 2)] = id;
        freed++;
      }
      id = next;
    }
    i32[list] = keep;
    i32[hw + (L.M_RETIRED_COUNT >>> 2)] = count;
    i32[hw + (L.M_RETIRED_BYTES >>> 2)] = bytes;
    return freed;
  }

  /** Every id a hazard slot holds now (atomic loads, after whatever retired what is to be freed). */
  protected hazardIds(): Set<number> {
    const held = new Set<number>();
    const records = this.i32[this.hdrWord + (L.M_READERS >>> 2)]! >>> 0;
    const high = this.atomics.load(this.hdr + L.M_READER_HIGH);
    for (let r = 0; r < high; r++) {
      for (let j = 0; j < L.HAZARDS_PER_READER; j++) {
        const id = this.atomics.load(records + r * L.READER_BYTES + L.R_HAZARDS + 4 * j);
        if (id !== 0) held.add(id);
      }
    }
    return held;
  }

  /**
   * An entry nobody holds any more (its state FREE already), freed by this
   * thread: its payload (a cross-shard free on another thread's), then
   * its descriptor handed back: onto the owner's free list on the owner's
   * thread, else onto the returned stack.
   */
  protected freeEntry(d: number): void {
    const i32 = this.i32;
    const w = d >>> 2;
    this.heap.free(i32[w + W_PAYLOAD]! >>> 0);
    if (ownerToken(this.heap.regions[this.shard]!) !== THIS_THREAD) return this.push(L.M_RETURNED, d);
    i32[w + W_NEXT] = i32[this.hdrWord + (L.M_FREE >>> 2)]!;
    i32[this.hdrWord + (L.M_FREE >>> 2)] = i32[w + W_ID]!;
  }

  /** Push d onto one of the header's lock-free stacks (M_RETURNED, M_RETIRED_STACK): the owner takes them whole. */
  protected push(stack: number, d: number): void {
    const i32 = this.i32;
    const w = d >>> 2;
    const id = i32[w + W_ID]!;
    const head = this.hdr + stack;
    let seen = this.atomics.load(head);
    for (;;) {
      i32[w + W_NEXT] = seen;
      const was = this.atomics.compareExchange(head, seen, id);
      if (was === seen) return;
      seen = was;
    }
  }

  /** release() of a reservation: the writer gives it up, on the owner's thread (the reservation count is the owner's). */
  protected giveUpReservation(ref: number): void {
    this.owner("release");
    if (this.i32[this.hdrWord + (L.M_RESERVED >>> 2)]! <= 0) throw this.notHeld(ref, "release");
    this.addHeader(L.M_RESERVED, -1);
  }

  /** Give back a count the probe took (a key that did not match, or an invalid hold). */
  protected dropCount(d: number): void {
    if (this.releaseStep(d) === 0) this.countGone(d >>> 0);
  }
}
