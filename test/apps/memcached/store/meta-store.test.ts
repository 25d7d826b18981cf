/**
 * The store's meta operations on their own (store.ts metaGet, metaDelete,
 * metaArith, store with E / I / N), on one shard's heap with a clock the
 * test sets: what h, l, t, W, X and Z report, what a win marks, which
 * cas values the items get, and that nothing is left behind. Over the
 * wire: test/apps/memcached/protocol.test.ts.
 */
import { describe, expect, it } from "vitest";
import { MODE_ADD, MODE_APPEND, MODE_CAS, MODE_SET, type StoreMode } from "../../../../dist/apps/memcached/protocol/protocol.js";
import { STAT } from "../../../../dist/apps/memcached/stats/stats.js";
import { MG_CREATED, MG_FETCHED, MG_STALE, MG_TOKEN_SENT, MG_WON, R_DELETED, R_NON_NUMERIC, R_EXISTS, R_NOT_FOUND, R_NOT_STORED, R_STORED, type ItemStore, type MetaStore } from "../../../../dist/apps/memcached/store/store.js";
import { NOW, cleanStore, storeFixture } from "../store-fixture.js";

/** The fixture, with a set as a connection makes it, and metaGet's and metaArith's answers as text. */
function setup() {
  const f = storeFixture();
  const set = (key: string, value: string, exptime = 0, now = NOW, meta?: MetaStore, mode: StoreMode = MODE_SET, cas = ""): number => f.staged(mode, key, value, { exptime, now, meta, cas });
  /** metaGet: "ref bits idle exptime". */
  const metaGet = (...a: Parameters<ItemStore["metaGet"]>): string => {
    const g = f.store.metaGet(...a);
    return `${g.ref} ${g.bits} ${g.idle} ${g.exptime}`;
  };
  /** metaArith: its R_* number, or "R_STORED cas exptime before value created(1/0)". */
  const metaArith = (...a: Parameters<ItemStore["metaArith"]>): string | number => {
    const r = f.store.metaArith(...a);
    return typeof r === "number" ? r : `${R_STORED} ${r.cas} ${r.exptime} ${r.before} ${r.value} ${r.created ? 1 : 0}`;
  };
  return { ...f, set, metaGet, metaArith };
}

/** metaGet's answer, the reference released. */
function mg(s: ReturnType<typeof setup>, key: string, now: number, o: { touchTo?: number; vivifyTo?: number; recacheBefore?: number; casIn?: number; noBump?: boolean } = {}): { hit: boolean; bits: number; idle: number; exptime: number; cas: number; value: string } {
  const [ref, bits, idle, exptime] = s.metaGet(key, now, o.touchTo ?? -1, o.vivifyTo ?? -1, o.recacheBefore ?? -1, o.casIn ?? -1, o.noBump ?? false, false).split(" ").map(Number) as [number, number, number, number];
  if (ref === 0) return { hit: false, bits, idle, exptime, cas: 0, value: "" };
  const ptr = s.store.map.valuePointer(ref);
  const out = { hit: true, bits, idle, exptime, cas: s.views.cas(ptr), value: s.views.value(ptr).toString("latin1") };
  s.store.map.release(ref);
  return out;
}

const clean = cleanStore;

describe("the store's meta operations", () => {
  it("mg reports h and l as they were before it, and u leaves them", () => {
    const s = setup();
    s.set("k", "v", 0, NOW);
    expect(mg(s, "k", NOW + 5, { noBump: true })).toMatchObject({ hit: true, bits: 0, idle: 5 });
    expect(mg(s, "k", NOW + 7)).toMatchObject({ bits: 0, idle: 7 });
    expect(mg(s, "k", NOW + 10)).toMatchObject({ bits: MG_FETCHED, idle: 3 });
    expect(mg(s, "missing", NOW)).toMatchObject({ hit: false });
    expect([s.counters[STAT.cmd_get], s.counters[STAT.get_hits], s.counters[STAT.get_misses]]).toEqual([4, 3, 1]);
    clean(s);
  });

  it("mg N vivifies a miss with the E cas and wins it once; R wins once when the TTL is below it", () => {
    const s = setup();
    expect(mg(s, "v", NOW, { vivifyTo: NOW + 30, casIn: 9876 })).toMatchObject({ hit: true, bits: MG_WON | MG_CREATED, exptime: NOW + 30, cas: 9876, value: "" });
    expect(mg(s, "v", NOW, { vivifyTo: NOW + 30 })).toMatchObject({ bits: MG_TOKEN_SENT | MG_FETCHED });
    s.set("r", "x", NOW + 10);
    expect(mg(s, "r", NOW, { recacheBefore: NOW + 5 }).bits & MG_WON).toBe(0);
    expect(mg(s, "r", NOW, { recacheBefore: NOW + 30 }).bits & MG_WON).toBe(MG_WON);
    expect(mg(s, "r", NOW, { recacheBefore: NOW + 30 }).bits & (MG_WON | MG_TOKEN_SENT)).toBe(MG_TOKEN_SENT);
    // T on a hit is a touch; on a miss, memcached counts a get miss.
    expect(mg(s, "r", NOW, { touchTo: NOW + 300 })).toMatchObject({ exptime: NOW + 300 });
    expect(mg(s, "gone", NOW, { touchTo: NOW + 300 })).toMatchObject({ hit: false });
    expect([s.counters[STAT.cmd_touch], s.counters[STAT.touch_hits], s.counters[STAT.touch_misses]]).toEqual([1, 1, 0]);
    clean(s);
  });

  it("md I marks the item stale with a new cas (a new entry, the old one left to its readers); its next mg wins, the one after sees Z", () => {
    const s = setup();
    s.set("k", "moo", NOW + 100, NOW, { casIn: 1234, invalidate: false, vivify: false });
    const held = s.store.map.acquire("k");
    const before = s.store.map.valuePointer(held);
    expect(s.store.metaDelete("k", NOW, "1233", -1, -1, true, false, 0)).toBe(R_EXISTS);
    expect(s.store.metaDelete("k", NOW, "1234", 5678, NOW + 30, true, false, 0)).toBe(R_DELETED);
    // What a reader held is untouched: cas, exptime and marks change in the new entry only.
    expect([s.views.cas(before), s.views.exptime(before), s.views.marks(before)]).toEqual([1234, NOW + 100, 0]);
    s.store.map.release(held);
    expect(mg(s, "k", NOW)).toMatchObject({ bits: MG_STALE | MG_WON, cas: 5678, exptime: NOW + 30, value: "moo" });
    expect(mg(s, "k", NOW)).toMatchObject({ bits: MG_STALE | MG_TOKEN_SENT | MG_FETCHED });
    // ms I with a lower cas stores the value, still stale, the TTL and the sent token kept.
    expect(s.set("k", "f", NOW + 90, NOW, { casIn: -1, invalidate: true, vivify: false }, MODE_CAS, "1")).toBe(R_STORED);
    expect(mg(s, "k", NOW)).toMatchObject({ bits: MG_STALE | MG_TOKEN_SENT, exptime: NOW + 30, value: "f" });
    // A higher one that does not match is refused; the right one stores a fresh item.
    expect(s.set("k", "g", 0, NOW, { casIn: -1, invalidate: true, vivify: false }, MODE_CAS, String(2 ** 40))).toBe(R_EXISTS);
    const cas = mg(s, "k", NOW).cas;
    expect(s.set("k", "g", NOW + 90, NOW, { casIn: -1, invalidate: true, vivify: false }, MODE_CAS, String(cas))).toBe(R_STORED);
    expect(mg(s, "k", NOW)).toMatchObject({ bits: 0, value: "g", exptime: NOW + 90 });
    // md x: an empty value in its place, flags and TTL from the command.
    expect(s.store.metaDelete("k", NOW, "", -1, -1, false, true, 7)).toBe(R_DELETED);
    expect(mg(s, "k", NOW)).toMatchObject({ value: "", exptime: 0 });
    expect(s.store.metaDelete("nothing", NOW, "", -1, -1, true, false, 0)).toBe(R_NOT_FOUND);
    clean(s);
  });

  it("ma: N J seeds a miss, C compares, E sets the cas, T the TTL", () => {
    const s = setup();
    expect(s.metaArith("n", NOW, true, "1", "", -1, -1, "0", -1)).toBe(R_NOT_FOUND);
    expect(s.metaArith("n", NOW, true, "1", "", 4321, NOW + 60, "5", -1)).toBe(`${R_STORED} 4321 ${NOW + 60} ${NOW + 60} 5 1`);
    expect(s.metaArith("n", NOW, true, "1", "4320", -1, -1, "0", -1)).toBe(R_EXISTS);
    const [, cas] = String(s.metaArith("n", NOW, true, "1", "4321", -1, -1, "0", NOW + 300)).split(" ");
    expect(Number(cas)).not.toBe(4321);
    expect(s.metaArith("n", NOW, false, "100", "", 8765, -1, "0", NOW + 400)).toBe(`${R_STORED} 8765 ${NOW + 400} ${NOW + 300} 0 0`);
    // An item N made keeps the exptime it was given (the caller's last of T and N): T is for an item found.
    expect(s.metaArith("m", NOW, true, "1", "", -1, NOW + 100, "5", 1)).toBe(`${R_STORED} ${mg(s, "m", NOW, { noBump: true }).cas} ${NOW + 100} ${NOW + 100} 5 1`);
    clean(s);
  });

  it("a CAS of 0 compares nothing, as memcached's: cas and ms C0 fail (EX) even with I, an append goes on, ma C0 incrs; an empty value is not a number before its CAS is compared", () => {
    const s = setup();
    s.set("k", "a", NOW + 100);
    const stale = { casIn: -1, invalidate: true, vivify: false };
    expect(s.set("k", "b", 0, NOW, undefined, MODE_CAS, "0")).toBe(R_EXISTS);
    expect(s.set("k", "b", 0, NOW, stale, MODE_CAS, "0")).toBe(R_EXISTS);
    expect(mg(s, "k", NOW)).toMatchObject({ value: "a", bits: 0 });
    expect(s.set("k", "d", 0, NOW, undefined, MODE_APPEND, "0")).toBe(R_STORED);
    expect(mg(s, "k", NOW).value).toBe("ad");
    s.set("n", "7");
    expect(s.metaArith("n", NOW, true, "1", "0", -1, -1, "0", -1)).toMatch(new RegExp(`^${R_STORED} \\d+ 0 0 8 0$`));
    s.set("e", "");
    expect(s.metaArith("e", NOW, true, "1", "12345", -1, -1, "0", -1)).toBe(R_NON_NUMERIC);
    s.set("x", "q");
    expect(s.metaArith("x", NOW, true, "1", "12345", -1, -1, "0", -1)).toBe(R_EXISTS);
    clean(s);
  });

  it("what memcached changes in place keeps its marks: an incr that fits stays fetched (h), stale and won; a longer result is a new item; a failed add fetches nothing; md I stays fetched", () => {
    const s = setup();
    const fetched = (key: string): boolean => (mg(s, key, NOW, { noBump: true }).bits & MG_FETCHED) !== 0;
    s.set("k", "15");
    mg(s, "k", NOW);
    expect(s.store.arith("k", false, "7", NOW)).toBe("8");
    expect(fetched("k")).toBe(true);
    expect(mg(s, "k", NOW, { noBump: true }).value).toBe("8 ");
    expect(s.store.arith("k", true, "92", NOW)).toBe("100");
    expect(fetched("k")).toBe(false);
    // Stale and won (md I, then the win): an in-place decr keeps both, so the next mg sees Z and X.
    expect(s.store.metaDelete("k", NOW, "", -1, -1, true, false, 0)).toBe(R_DELETED);
    expect(mg(s, "k", NOW).bits & (MG_WON | MG_STALE)).toBe(MG_WON | MG_STALE);
    expect(fetched("k")).toBe(true);
    expect(s.store.arith("k", false, "1", NOW)).toBe("99");
    expect(mg(s, "k", NOW, { noBump: true }).bits).toBe(MG_TOKEN_SENT | MG_STALE | MG_FETCHED);
    s.set("a", "x");
    expect(s.set("a", "y", 0, NOW, undefined, MODE_ADD)).toBe(R_NOT_STORED);
    expect(fetched("a")).toBe(false);
    clean(s);
  });

  it("mg: T applies to an item found, not to one N made; R before T reads the item's own exptime; no win when told (an O too long)", () => {
    const s = setup();
    expect(mg(s, "v", NOW, { vivifyTo: NOW + 100, touchTo: 1 })).toMatchObject({ hit: true, exptime: NOW + 100 });
    s.set("r", "x", NOW + 10);
    const raw = (recacheFirst: boolean, noWin = false): number => {
      const [ref, bits] = s.metaGet("r", NOW, NOW + 100, -1, NOW + 30, -1, true, recacheFirst, noWin).split(" ").map(Number) as [number, number];
      s.store.map.release(ref);
      return bits;
    };
    // R after T reads T's exptime (100 s: no win); R before T the item's own (10 s: a win).
    expect(raw(false) & MG_WON).toBe(0);
    s.set("r", "x", NOW + 10);
    expect(raw(true, true) & MG_WON).toBe(0);
    s.set("r", "x", NOW + 10);
    expect(raw(true) & MG_WON).toBe(MG_WON);
    expect(mg(s, "n", NOW, { vivifyTo: 0 }).bits & MG_WON).toBe(MG_WON);
    const [ref, bits] = s.metaGet("w", NOW, -1, 0, -1, -1, false, false, true).split(" ").map(Number) as [number, number];
    s.store.map.release(ref);
    expect([bits & MG_WON, mg(s, "w", NOW).bits & (MG_WON | MG_TOKEN_SENT)]).toEqual([0, 0]);
    clean(s);
  });

  it("ms append: a compared cas must match; N stores the value on a miss with N's TTL", () => {
    const s = setup();
    const viv = { casIn: -1, invalidate: false, vivify: true };
    expect(s.set("a", "hi", NOW + 30, NOW, undefined, MODE_APPEND)).toBe(R_NOT_STORED);
    expect(s.set("a", "mo", NOW + 30, NOW, viv, MODE_APPEND)).toBe(R_STORED);
    expect(mg(s, "a", NOW, { noBump: true })).toMatchObject({ value: "mo" });
    expect(s.metaStored(MODE_APPEND, "a", "ko", viv, "999")).toEqual({ result: R_EXISTS, cas: 0, length: 0 });
    expect(s.metaStored(MODE_APPEND, "a", "ko", viv)).toEqual({ result: R_STORED, cas: expect.any(Number), length: 4 });
    expect(mg(s, "a", NOW)).toMatchObject({ value: "moko", exptime: NOW + 30 });
    clean(s);
  });
});
