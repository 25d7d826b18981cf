/**
 * The owner's unlink order (src/memory/shared-map/shared-map.ts, "The protocol":
 * store(slot) away from the descriptor, then state UNLINKED, then release
 * the index's reference), checked at the instant it matters, on one
 * thread, every run.
 *
 * Done the other way round (the reference dropped while a slot still
 * names the entry), the entry can be retired, and a reclaim can free it
 * and recycle its descriptor, while a reader can still reach it through
 * the slot and validate it (R3 sees the slot unchanged). Afterwards the
 * map looks exactly as it does when the order is right, so a check after
 * the call cannot tell, and a race test only sees it when a reader lands
 * in those few instructions (the delete race caught a clear() done that
 * way in 3 runs of 6). So this test watches the drop itself: the owner's
 * object's count release step (its own field, shared-map/atomics.ts's
 * release) is wrapped, and at every drop, before it happens, no slot of
 * the current table may name the descriptor unless it is still LINKED,
 * and the map's own check() must be [] (it says "slot i names descriptor
 * d, which is not linked" when the order is wrong). Then, with a reader
 * holding the entry (a hazard reference, a counted one, or none), the
 * entry stays whole until released and is freed exactly once after.
 */
import { describe, expect, it } from "vitest";
import { SharedMap } from "../../../src/index.js";
import { descriptorAddress } from "../../../src/memory/shared-map/atomics.js";
import * as L from "../../../src/memory/shared-map/layout.js";
import { newHeap } from "../../helpers.js";

interface Drop {
  /** "index": the map's own reference, dropped with the state set UNLINKED in one step (unlinkEntry); "count": a counted reference. */
  kind: "index" | "count";
  id: number;
  state: number;
  /** Slots of the current table naming the descriptor, just before the drop. */
  named: number[];
  /** map.check() just before the drop, less what a change in progress shows (its segment locked, the entry it unlinks linked and in no slot). */
  problems: string[];
  /** The count the drop left. */
  after: number;
}

/** The slots of `map`'s current table whose descriptor id is `id`. */
function slotsNaming(map: SharedMap, id: number): number[] {
  const i32 = new Int32Array(map.heap.buffer);
  const T = i32[(map.handle + L.SEGMENTS + L.SG_TABLE) >>> 2]! >>> 0; // segment 0: the maps here have one
  const mask = i32[(T + L.T_MASK) >>> 2]!;
  const named: number[] = [];
  for (let i = 0; i <= mask; i++) if (i32[((T + L.TABLE_HEADER_BYTES) >>> 2) + i]! >>> 8 === id) named.push(i);
  return named;
}

/**
 * Wrap the steps that drop references of `map` (test hooks on private
 * fields): the count release step and the pair step that unlinks an entry
 * and drops the map's own reference (unlinkEntry); every drop is recorded,
 * with the map as it was just before.
 */
function watchDrops(map: SharedMap): Drop[] {
  const steps = map as unknown as { releaseStep: (d: number) => number; unlinkEntry: (d: number, expected: number, drop: number) => number };
  const release = steps.releaseStep;
  const unlinkEntry = steps.unlinkEntry;
  expect(typeof release, "SharedMap's release step, a field this test wraps, is gone: move the hook").toBe("function");
  expect(typeof unlinkEntry, "SharedMap's unlink step, a field this test wraps, is gone: move the hook").toBe("function");
  const i32 = new Int32Array(map.heap.buffer);
  const drops: Drop[] = [];
  const before = (d: number): Omit<Drop, "kind" | "after"> => {
    const id = i32[(d + L.D_ID) >>> 2]!;
    const inProgress = new RegExp(`segment \\d+ is locked by|descriptor ${id} is linked but in no slot`);
    return { id, state: i32[(d + L.D_STATE) >>> 2]! & L.STATE_MASK, named: slotsNaming(map, id), problems: map.check().filter((p) => !inProgress.test(p)) };
  };
  steps.releaseStep = (d: number): number => {
    const seen = before(d);
    const after = release(d);
    drops.push({ kind: "count", ...seen, after });
    return after;
  };
  steps.unlinkEntry = (d: number, expected: number, drop: number): number => {
    const seen = before(d);
    const after = unlinkEntry(d, expected, drop);
    if (drop === 1) drops.push({ kind: "index", ...seen, after });
    return after;
  };
  return drops;
}

const valueOf = (k: number): Uint8Array => Uint8Array.from({ length: 40 + (k % 9) * 8 }, (_, i) => (k * 31 + i * 7) & 255);

type Holder = "hazard" | "counted" | "none";
type Op = "delete" | "unlink" | "clear" | "set" | "publish";

/**
 * A map of 40 entries; the target is an entry with another one in the slot
 * after it (so a delete or unlink moves that one back into the hole). A
 * reader (another SharedMap object) holds the target as `holder` says; the
 * owner does `op`, which takes the target out of the map.
 */
function removeHeld(op: Op, holder: Holder): void {
  const heap = newHeap();
  const map = SharedMap.create(heap, { shard: 0, segments: 1 });
  const ownRefs = new Map<number, number>();
  for (let k = 0; k < 40; k++) {
    const v = valueOf(k);
    const ref = map.reserve(`key:${k}`, v.length);
    new Uint8Array(heap.buffer, map.valuePointer(ref), v.length).set(v);
    map.publish(ref);
    ownRefs.set(k, ref);
  }
  const i32 = new Int32Array(heap.buffer);
  const T = i32[(map.handle + L.SEGMENTS + L.SG_TABLE) >>> 2]! >>> 0;
  const mask = i32[(T + L.T_MASK) >>> 2]!;
  const slot = (i: number): number => i32[((T + L.TABLE_HEADER_BYTES) >>> 2) + (i & mask)]!;
  const k = [...ownRefs.keys()].find((n) => slot(slotsNaming(map, ownRefs.get(n)! & L.ID_MASK)[0]! + 1) !== 0);
  if (k === undefined) throw new Error("no entry with another one after it in its cluster");
  const id = ownRefs.get(k)! & L.ID_MASK;
  const d = descriptorAddress(i32, map.handle, id);
  const payload = i32[(d + L.D_PAYLOAD) >>> 2]! >>> 0;

  const reader = SharedMap.attach(heap, map.handle);
  let ref = 0;
  if (holder !== "none") {
    ref = reader.acquire(`key:${k}`);
    expect(ref & L.HAZARD_REF, "a hazard reference").not.toBe(0);
    if (holder === "counted") {
      const counted = reader.retain(ref);
      reader.release(ref);
      ref = counted;
      expect(ref & L.HAZARD_REF).toBe(0);
    }
  }
  const seen = watchDrops(map);
  const frees = heap.stats(0).frees;

  if (op === "delete") expect(map.delete(`key:${k}`)).toBe(true);
  else if (op === "unlink") expect(map.unlink(ownRefs.get(k)!)).toBe(true);
  else if (op === "clear") expect(map.clear()).toBe(40);
  else if (op === "set") expect(map.set(`key:${k}`, "new")).toBe(true);
  else {
    const fresh = map.reserve(`key:${k}`, 3);
    heap.bytes(map.valuePointer(fresh), 3).set([1, 2, 3]);
    expect(map.publish(fresh)).toBe(true);
  }

  // The index let go of the target once, and then no slot named it.
  const mine = seen.filter((x) => x.id === id);
  expect(mine.length, "the index's reference to the target was dropped once").toBe(1);
  expect(mine[0]).toMatchObject({ kind: "index", state: L.LINKED, named: [], after: holder === "counted" ? 1 : 0 });
  for (const x of seen) {
    expect(x.problems, `the map just before descriptor ${x.id}'s count dropped`).toEqual([]);
    if (x.kind === "index" || x.state !== L.LINKED) expect(x.named, `descriptor ${x.id}'s ${x.kind} reference dropped while slots named it (state ${x.state})`).toEqual([]);
    else expect(x.after, `descriptor ${x.id} is in a slot, its count must keep the index's reference`).toBeGreaterThan(0);
  }
  expect(slotsNaming(map, id)).toEqual([]);
  expect(map.check()).toEqual([]);

  // Held: whole until released, whatever a reclaim does meanwhile; then freed, once.
  map.reclaim();
  const removed = op === "clear" ? 40 : 1;
  if (holder !== "none") {
    expect(heap.shard(0).objectSize(payload), "a held entry is not freed").toBeGreaterThan(0);
    expect(Buffer.from(reader.value(ref)).equals(valueOf(k)), "a held entry's value is as it was").toBe(true);
    expect(map.stats()).toMatchObject({ held: 1 });
    expect(heap.stats(0).frees - frees, "every entry removed but the held one is freed").toBe(removed - 1);
    const live = heap.stats(0).liveObjects;
    reader.release(ref);
    map.reclaim();
    expect(heap.stats(0).liveObjects).toBe(live - 1);
  }
  expect(heap.stats(0).frees - frees, "each entry removed freed once").toBe(removed);
  expect(() => heap.shard(0).objectSize(payload), "the target's payload is freed").toThrow(/not a live object/);
  expect(i32[(d + L.D_STATE) >>> 2]! & L.STATE_MASK).toBe(L.FREE);
  expect(map.stats()).toMatchObject({ held: 0, retired: 0, unlinkedHeld: 0, entries: op === "clear" ? 0 : op === "set" || op === "publish" ? 40 : 39 });
  expect(map.check()).toEqual([]);
  reader.close();
  map.destroy();
}

describe("SharedMap: the index lets go of an entry only once no slot names it", () => {
  for (const op of ["delete", "unlink", "clear", "set", "publish"] as const) {
    for (const holder of ["hazard", "counted", "none"] as const) {
      it(`${op}, the entry held by ${holder === "none" ? "no reader" : `a ${holder} reference`}`, () => removeHeld(op, holder));
    }
  }
});
