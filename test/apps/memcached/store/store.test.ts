/**
 * The store commands on their own (store.ts): set, add, replace, append,
 * prepend, cas, incr, decr, touch, delete, gat and ms's answer, on one
 * shard's heap, the value written into a reservation as a connection
 * writes it: what they answer, what they count, and what happens
 * when making room for the new item evicts the old one it needs. The
 * meta protocol's own operations: test/apps/memcached/store/meta-store.test.ts; over
 * the wire: test/apps/memcached/protocol.test.ts.
 */
import { describe, expect, it } from "vitest";
import { MODE_ADD, MODE_APPEND, MODE_CAS, MODE_PREPEND, MODE_REPLACE, MODE_SET } from "../../../../dist/apps/memcached/protocol/protocol.js";
import { R_DELETED, R_EXISTS, R_NON_NUMERIC, R_NOT_FOUND, R_NOT_STORED, R_STORED, R_TOUCHED } from "../../../../dist/apps/memcached/store/store.js";
import { NOW, cleanStore as clean, storeFixture as setup, type StoreFixture } from "../store-fixture.js";

describe("the store commands", () => {
  it("set, add, replace, append, prepend and cas answer as memcached's, staged or reserved, and count", () => {
    const s = setup();
    expect(s.staged(MODE_SET, "k", "one", { flags: 7, exptime: NOW + 50 })).toBe(R_STORED);
    expect(s.reserved(MODE_ADD, "k", "two")).toBe(R_NOT_STORED);
    // A failed add refreshes the item, as memcached's.
    expect(s.views.referenced(s.item("k"))).toBe(true);
    expect(s.staged(MODE_ADD, "new", "x")).toBe(R_STORED);
    expect(s.staged(MODE_REPLACE, "missing", "x")).toBe(R_NOT_STORED);
    expect(s.reserved(MODE_APPEND, "missing", "x")).toBe(R_NOT_STORED);
    expect(s.staged(MODE_APPEND, "k", "+a")).toBe(R_STORED);
    expect(s.reserved(MODE_PREPEND, "k", "p+")).toBe(R_STORED);
    // append and prepend keep the flags and exptime, as memcached's.
    expect(s.read("k")!.slice(0, 3)).toEqual(["p+one+a", 7, NOW + 50]);
    const cas = s.read("k")![3];
    expect(s.staged(MODE_CAS, "k", "c", { cas: String(cas + 1) })).toBe(R_EXISTS);
    expect(s.reserved(MODE_CAS, "k", "c", String(cas))).toBe(R_STORED);
    expect(s.staged(MODE_CAS, "missing", "c", { cas: "1" })).toBe(R_NOT_FOUND);
    expect(s.read("k")![0]).toBe("c");
    expect(s.read("k")![3]).not.toBe(cas);
    expect(s.reserved(MODE_REPLACE, "k", "r")).toBe(R_STORED);
    expect(s.read("k")).toEqual(["r", 0, 0, expect.any(Number)]);
    expect([s.stat("cmd_set"), s.stat("cas_hits"), s.stat("cas_badval"), s.stat("cas_misses"), s.stat("curr_items"), s.stat("total_items")]).toEqual([11, 1, 1, 1, 2, 6]);
    clean(s);
  });

  it("incr and decr read the value as strtoull does: wrap at 2^64, stop at 0, keep the length with spaces; refuse what is not a number", () => {
    const s = setup();
    s.staged(MODE_SET, "n", "18446744073709551615");
    expect(s.store.arith("n", true, "2", NOW)).toBe("1");
    expect(s.read("n")![0]).toBe("1                   ");
    s.staged(MODE_SET, "m", " 100 apples");
    expect(s.store.arith("m", false, "7", NOW)).toBe("93");
    expect(s.read("m")![0]).toBe("93         ");
    expect(s.store.arith("m", false, "1000", NOW)).toBe("0");
    s.staged(MODE_SET, "word", "ten");
    expect(s.store.arith("word", true, "1", NOW)).toBe(R_NON_NUMERIC);
    s.staged(MODE_SET, "neg", "-5");
    expect(s.store.arith("neg", true, "1", NOW)).toBe(R_NON_NUMERIC);
    expect(s.store.arith("missing", true, "1", NOW)).toBe(R_NOT_FOUND);
    expect([s.stat("incr_hits"), s.stat("incr_misses"), s.stat("decr_hits"), s.stat("decr_misses")]).toEqual([1, 1, 2, 0]);
    clean(s);
  });

  it("touch, gat, delete and forget: the exptime they set, what they count, and an expired item is gone", () => {
    const s = setup();
    s.staged(MODE_SET, "t", "v", { exptime: NOW + 10 });
    expect(s.store.touch("t", NOW + 100, NOW)).toBe(R_TOUCHED);
    expect(s.read("t")![2]).toBe(NOW + 100);
    const ref = s.store.get("t", NOW, NOW + 200);
    expect(ref).not.toBe(0);
    s.store.map.release(ref);
    expect(s.read("t")![2]).toBe(NOW + 200);
    // Past its time: a miss everywhere, unlinked (reclaimed), counted as memcached counts it.
    expect(s.store.get("t", NOW + 300, NOW + 400)).toBe(0);
    expect(s.read("t")).toBeUndefined();
    expect(s.store.touch("t", NOW, NOW)).toBe(R_NOT_FOUND);
    expect([s.stat("touch_hits"), s.stat("touch_misses"), s.stat("get_hits"), s.stat("get_misses"), s.stat("get_expired"), s.stat("reclaimed")]).toEqual([2, 2, 1, 1, 1, 1]);
    s.staged(MODE_SET, "d", "v");
    expect(s.store.delete("d", NOW)).toBe(R_DELETED);
    expect(s.store.delete("d", NOW)).toBe(R_NOT_FOUND);
    s.staged(MODE_SET, "f", "v");
    s.store.forget("f");
    expect(s.read("f")).toBeUndefined();
    expect([s.stat("delete_hits"), s.stat("delete_misses"), s.stat("curr_items")]).toEqual([1, 1, 0]);
    clean(s);
  });

  it("ms's answer is the linked item's cas and length, read from the item; nothing left behind by one store for the next", () => {
    const s = setup();
    const meta = { casIn: 4242, invalidate: false, vivify: false };
    expect(s.metaStored(MODE_SET, "a", "hello", meta)).toEqual({ result: R_STORED, cas: 4242, length: 5 });
    // A refused store in between answers for itself: no cas or length of the one before.
    expect(s.metaStored(MODE_ADD, "a", "x", { ...meta, casIn: -1 })).toEqual({ result: R_NOT_STORED, cas: 0, length: 0 });
    const c = setup({ casEnabled: false });
    expect(c.metaStored(MODE_SET, "a", "hey", meta)).toEqual({ result: R_STORED, cas: 0, length: 3 });
    clean(s);
    clean(c);
  });

  it("a replace, cas, append or stale cas whose old item is evicted to make room for the new one is not stored, and leaves nothing behind", () => {
    const value = "v".repeat(2000);
    // A full cache whose oldest item is k1; a 12 KiB item for it, reserved first, evicts it.
    const full = (): StoreFixture => {
      const s = setup({ shardBytes: "1MiB" });
      for (let n = 0; s.stat("evictions") === 0; n++) expect(s.staged(MODE_SET, `k${n}`, value)).toBe(R_STORED);
      expect(s.read("k0")).toBeUndefined();
      return s;
    };
    const big = "b".repeat(12 << 10);
    const stale = { casIn: -1, invalidate: true, vivify: false };
    const cases: Array<[string, (s: StoreFixture) => number, number]> = [
      ["replace", (s) => s.reserved(MODE_REPLACE, "k1", big), R_NOT_STORED], // the reservation, made first, evicted k1: nothing to replace
      ["cas", (s) => s.staged(MODE_CAS, "k1", big, { cas: String(s.read("k1")![3]) }), R_NOT_FOUND],
      ["append", (s) => s.reserved(MODE_APPEND, "k1", big), R_NOT_STORED],
      // ms I with a lower cas: stored as stale, unless its old item went while its room was made.
      ["stale cas", (s) => s.staged(MODE_CAS, "k1", big, { cas: "1", meta: stale }), R_NOT_FOUND],
    ];
    for (const [name, command, answer] of cases) {
      const s = full();
      expect(s.read("k1"), name).toBeDefined();
      expect(command(s), name).toBe(answer);
      expect(s.read("k1"), name).toBeUndefined();
      clean(s);
    }
  });
});
