/**
 * A segment's lock, and what a writer does when the lock's holder died
 * (shared-map.ts, "A writer that dies"). The lock word holds the owner
 * token (ownership.ts) of the thread that holds it; taking it is one
 * compareExchange from 0, giving it back one store of 0. A writer that
 * finds it held spins, then sleeps a few microseconds at a time (on two
 * cores the holder may be waiting for the CPU the waiter spins on), and
 * now and then asks whether the holder is still alive: a thread that owns
 * no shard of the heap any more cannot be inside a change (every change
 * is made by a shard's owner, and a runtime gives a shard to another
 * thread only once its owner stopped or died: ownership.ts adoptShard).
 * Then the waiter takes the lock over with a compareExchange from the
 * dead holder's token (one waiter wins) and repairs the segment from what
 * the dead holder left: the intent it wrote before its first visible
 * store, and the table as it stands. Each step of a repair can be done
 * twice (a repairer that dies is repaired after in turn).
 *
 * Also here, because a change and a repair both use it: the backward
 * shift that takes a slot out of a table (Knuth's Algorithm R).
 */
import { ownsAShard, THIS_THREAD } from "../ownership.js";
import { descriptorAddress } from "./atomics.js";
import { slotAddress } from "./core.js";
import * as L from "./layout.js";
import { MapReader } from "./reader.js";

const { LINKED, STATE_MASK, W_HASH } = L;
const SG_LOCK = L.SG_LOCK;
// waitForReplacers' constants as module-local values (V8 folds these; an imported binding costs a load and a hole check).
const { SEGMENTS, SEGMENT_BYTES, WR_REPLACING } = L;
const WRITER_BYTES = L.WRITER_BYTES;
/** Failed looks at a held lock before the waiter starts sleeping between them. */
const SPINS = 64;
/** Sleeps between two asks whether the holder is alive. */
const LIVENESS_EVERY = 16;

export class MapSegments extends MapReader {
  /** Take segment seg's lock (repairing the segment first if its holder died). */
  protected lock(seg: number): void {
    const tookOver = this.compareExchange(seg + SG_LOCK, 0, THIS_THREAD) !== 0 && this.lockSlow(seg);
    this.waitForReplacers(seg);
    if (tookOver) this.repair(seg);
  }

  protected unlock(seg: number): void {
    this.store(seg + SG_LOCK, 0);
  }

  /** The lock taken after a wait; whether it was taken over from a dead holder (the segment then needs a repair). */
  private lockSlow(seg: number): boolean {
    const word = (seg + SG_LOCK) >>> 2;
    for (let tries = 1; ; tries++) {
      const holder = this.atomics.load(seg + SG_LOCK);
      if (holder === 0) {
        if (this.compareExchange(seg + SG_LOCK, 0, THIS_THREAD) === 0) return false;
        continue;
      }
      if (holder === THIS_THREAD) throw new Error(`SharedMap: segment ${seg} is locked by this thread already (a change made from inside another)`);
      if (tries <= SPINS) continue;
      if ((tries - SPINS) % LIVENESS_EVERY === 0 && !this.alive(holder)) {
        if (this.compareExchange(seg + SG_LOCK, holder, THIS_THREAD) === holder) return true;
        continue;
      }
      Atomics.wait(this.i32, word, holder, 0.05);
    }
  }

  /**
   * The other half of replaceUnlocked's handshake (writer.ts): a replacer
   * stores its token in its record, then loads the lock; the lock's new
   * holder has stored the lock, then loads every record here. In the one
   * order of those four atomics, either the replacer sees the lock (and
   * takes it instead) or this sees the replacer, and waits until its
   * replace is done: no slot of the segment is moved, copied or emptied
   * under a replace made without the lock. A replacer that died mid-way
   * is repaired from its record (repairReplacer).
   */
  private waitForReplacers(seg: number): void {
    let shards = this.heap.shards;
    let at = this.hdr + SEGMENTS + (this.segmentMask + 1) * SEGMENT_BYTES + WR_REPLACING;
    for (let r = this.findReplacer(at, shards, seg); r !== 0; r = this.findReplacer(at, shards, seg)) {
      this.waitForReplacer(r, seg);
      shards -= (r - at) / WRITER_BYTES + 1;
      at = r + WRITER_BYTES;
    }
  }

  /** Wait until the replacer whose token is at byte address `at` is done in seg, or repair it if it died. */
  private waitForReplacer(at: number, seg: number): void {
    const i32 = this.i32;
    for (let tries = 1; ; tries++) {
      const token = Atomics.load(i32, at >>> 2);
      if (token === 0 || i32[(at + L.WR_REPLACING_SEGMENT - L.WR_REPLACING) >>> 2] !== seg) return;
      if (token === THIS_THREAD) throw new Error(`SharedMap: segment ${seg} is being replaced in by this thread already (a change made from inside another)`);
      if (tries <= SPINS) continue;
      if ((tries - SPINS) % LIVENESS_EVERY === 0 && !this.alive(token)) return this.repairReplacer(at - L.WR_REPLACING, seg);
      Atomics.wait(i32, at >>> 2, token, 0.05);
    }
  }

  /**
   * Finish or undo the replace a dead thread was making without the lock
   * (this thread holds the segment's lock, so no other repair and no
   * change runs beside it): the entry it linked stays if a slot names it,
   * else its reservation is dropped; the entry it replaced is unlinked if
   * no slot names it any more (the state recorded guards against a
   * descriptor reused since); then its record says it is done.
   */
  private repairReplacer(rec: number, seg: number): void {
    const i32 = this.i32;
    const rw = rec >>> 2;
    Atomics.add(i32, (this.hdr + L.M_REPAIRS) >>> 2, 1);
    this.finishIntent(this.table(seg), i32[rw + (L.WR_LINKING >>> 2)]!, i32[rw + (L.WR_LINKING_STATE >>> 2)]!, i32[rw + (L.WR_UNLINKING >>> 2)]!, i32[rw + (L.WR_UNLINKING_STATE >>> 2)]!);
    this.store(rec + L.WR_REPLACING, 0); // its other words are read only while this one is set
  }

  /**
   * A writer's own record still says it is replacing: the thread that owned
   * this shard before died there, and this one took the shard over. Its
   * replace is repaired (under that segment's lock) before the record is
   * used again.
   */
  protected repairOwnRecord(): void {
    const rec = this.writerRecord;
    const seg = this.i32[(rec + L.WR_REPLACING_SEGMENT) >>> 2]!;
    this.lock(seg); // waits for it: a dead token, so repairReplacer runs
    this.unlock(seg);
  }

  /** Whether the thread whose owner token is `token` owns a shard of the heap (so may be inside a change). */
  private alive(token: number): boolean {
    return ownsAShard(this.heap.regions, token);
  }

  /**
   * Make segment seg whole again after its lock's holder died mid-change
   * (this thread holds the lock now). In order, each step safe to repeat:
   *  1. a resize whose table was not published yet: that table is freed
   *     (and the current one taken off the old-tables list, if the dead
   *     writer had put it there already);
   *  2. a backward shift cut short leaves one entry in two slots: the
   *     older copy (the one farther from the entry's home) is taken out
   *     by the rest of the shift, the move count bumped first;
   *  3. the entry being linked: in the table, it is linked; else it never
   *     was, and its reservation (or its link) is dropped;
   *  4. the entry being taken out: still in the table, it stays; else it
   *     is unlinked (its state and the index's reference in one step);
   *  5. the entry count is the slots in use, and the intent is cleared.
   */
  protected repair(seg: number): void {
    const i32 = this.i32;
    const sw = seg >>> 2;
    Atomics.add(i32, (this.hdr + L.M_REPAIRS) >>> 2, 1);
    const growing = i32[sw + (L.SG_GROWING >>> 2)]! >>> 0;
    if (growing !== 0) {
      const T = this.table(seg);
      if (T !== growing) {
        if (i32[sw + (L.SG_OLD_TABLES >>> 2)]! >>> 0 === T) i32[sw + (L.SG_OLD_TABLES >>> 2)] = i32[(T + L.T_NEXT_OLD) >>> 2]!;
        this.heap.free(growing);
      }
      i32[sw + (L.SG_GROWING >>> 2)] = 0;
    }
    const T = this.table(seg);
    this.removeDuplicate(seg, T);
    this.finishIntent(T, i32[sw + (L.SG_LINKING >>> 2)]!, i32[sw + (L.SG_LINKING_STATE >>> 2)]!, i32[sw + (L.SG_UNLINKING >>> 2)]!, i32[sw + (L.SG_UNLINKING_STATE >>> 2)]!);
    let used = 0;
    for (let i = 0, mask = this.mask(T); i <= mask; i++) if (i32[slotAddress(T, i) >>> 2] !== 0) used++;
    i32[sw + (L.SG_COUNT >>> 2)] = used;
    this.clearIntent(seg);
  }

  /**
   * Steps 3 and 4 of a repair, for a segment's intent or a replacer's
   * record: the entry being linked (id, its reserved state) is kept if in
   * T, else its reservation or link is dropped; the one being taken out is
   * unlinked if no slot of T names it.
   */
  private finishIntent(T: number, linking: number, linkingState: number, unlinking: number, unlinkingState: number): void {
    if (linking !== 0 && !this.inTable(T, linking)) {
      const d = descriptorAddress(this.i32, this.hdr, linking);
      let r = this.unlinkEntry(d, linkingState, 1);
      if (r < 0) r = this.unlinkEntry(d, (linkingState & ~STATE_MASK) | LINKED, 1);
      if (r === 0) this.countGone(d);
    }
    if (unlinking !== 0 && !this.inTable(T, unlinking)) {
      const d = descriptorAddress(this.i32, this.hdr, unlinking);
      if (this.unlinkEntry(d, unlinkingState, 1) === 0) this.countGone(d);
    }
  }

  protected clearIntent(seg: number): void {
    const sw = seg >>> 2;
    this.i32[sw + (L.SG_LINKING >>> 2)] = 0;
    this.i32[sw + (L.SG_LINKING_STATE >>> 2)] = 0;
    this.i32[sw + (L.SG_UNLINKING >>> 2)] = 0;
    this.i32[sw + (L.SG_UNLINKING_STATE >>> 2)] = 0;
  }

  /** Step 2 of a repair: an entry in two slots loses the copy farther from its home. */
  private removeDuplicate(seg: number, T: number): void {
    const i32 = this.i32;
    const mask = this.mask(T);
    const first = new Map<number, number>();
    for (let i = 0; i <= mask; i++) {
      const id = i32[slotAddress(T, i) >>> 2]! >>> 8;
      if (id === 0) continue;
      const j = first.get(id);
      if (j === undefined) {
        first.set(id, i);
        continue;
      }
      const home = i32[(descriptorAddress(i32, this.hdr, id) >>> 2) + W_HASH]! & mask;
      this.removeAt(seg, T, ((i - home) & mask) > ((j - home) & mask) ? i : j, true);
      return; // a shift moves one entry at a time: one copy at most
    }
  }

  /** Whether a slot of T on id's probe path names it. */
  private inTable(T: number, id: number): boolean {
    const i32 = this.i32;
    const mask = this.mask(T);
    for (let i = i32[(descriptorAddress(i32, this.hdr, id) >>> 2) + W_HASH]! & mask, n = 0; n <= mask; i = (i + 1) & mask, n++) {
      const s = i32[slotAddress(T, i) >>> 2]!;
      if (s === 0) return false;
      if (s >>> 8 === id) return true;
    }
    return false;
  }

  /**
   * Empty slot i by Knuth's backward shift (Algorithm R): later entries of
   * its cluster whose path runs through the hole move into it, one store
   * each. Each store after the first removes the older copy of the entry
   * the previous store copied, so SG_MOVES is bumped before it: a reader
   * that passed the hole before the copy sees the bump (shared-map.ts).
   * `copy`: slot i holds the older copy of a moved entry itself (a repair),
   * so the first store is bumped for too.
   */
  protected removeAt(seg: number, T: number, i: number, copy: boolean): void {
    const i32 = this.i32;
    const mask = this.mask(T);
    let hole = i;
    let moved = copy;
    for (let j = (i + 1) & mask; ; j = (j + 1) & mask) {
      const s = i32[slotAddress(T, j) >>> 2]!;
      if (s === 0) break;
      const home = i32[(descriptorAddress(i32, this.hdr, s >>> 8) >>> 2) + W_HASH]! & mask;
      if (((j - home) & mask) < ((j - hole) & mask)) continue; // its path does not run through the hole
      if (moved) this.bumpMoves(seg);
      this.store(slotAddress(T, hole), s);
      moved = true;
      hole = j;
    }
    if (moved) this.bumpMoves(seg);
    this.store(slotAddress(T, hole), 0);
  }

  private bumpMoves(seg: number): void {
    this.store(seg + L.SG_MOVES, this.i32[(seg + L.SG_MOVES) >>> 2]! + 1);
  }
}
