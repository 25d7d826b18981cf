/**
 * bench/memcached-items.ts: the floor of the memcached bench's items
 * target (limit_maxbytes over one item's allocation), where the target
 * lies against it, and where an item's bytes go, from `stats` figures as
 * the servers give them (no server run here: the bench runs them).
 */
import { describe, expect, it } from "vitest";
import { floorNote, itemsFloor, memcachedItemText, reportFloors, shardSum, shardheapItemText } from "../../bench/memcached-items.js";
import { KEY_BYTES, VALUE_BYTES } from "../../bench/memcached-loads.js";
import type { Roster, Server, Stats } from "../../bench/memcached-roster.js";
import type { BenchRecord } from "../../bench/report.js";
import { itemSize } from "../../src/apps/memcached/store/item.js";
import { keyArea } from "../../src/memory/shared-map/layout.js";
import { classOf, classSize } from "../../src/memory/size-classes.js";

const MIB = 1024 * 1024;
const LIMIT = 256 * MIB;
/** The bench's item as shardheap stores it: its bytes, and its allocation in the heap's size classes. */
const ITEM = itemSize(KEY_BYTES, 0, VALUE_BYTES);
const ALLOCATION = classSize[classOf[(keyArea(KEY_BYTES) + ITEM + 7) >>> 3]!]!;
/** memcached 1.6's item of the same key and value (48 B header, the key's NUL, CAS, \r\n) and its slab class's chunk. */
const MEMCACHED_ITEM = 48 + KEY_BYTES + 1 + 8 + VALUE_BYTES + 2;
const MEMCACHED_CHUNK = 1184;

function server(name: string, final?: Stats, finalSlabs?: Stats): Server {
  return { name, missing: undefined, slabs: true, start: () => Promise.reject(new Error("not run")), rounds: new Map(), written: 0, limit: 0, full: true, final, finalSlabs };
}

/** A roster of the five servers reportFloors looks at, with the `stats` they gave (the others without figures). */
function roster(parts: Partial<Record<keyof Roster, Server>>): Roster {
  const none = (name: string): Server => server(name);
  return {
    m1: none("memcached -t 1"),
    m2: none("memcached -t 2"),
    s1: none("shardheap --smp 1"),
    s2: none("shardheap --smp 2"),
    sp: none("shardheap --smp 2 --heapprof=2097152"),
    c1: none("node:cluster 1 process"),
    c2: none("node:cluster 2 processes"),
    fl: none("floor"),
    fo: none("floor, one cache"),
    ...parts,
  };
}

function records(servers: Roster, bound: number): BenchRecord[] {
  const out: BenchRecord[] = [];
  const ctx = { timing: {}, json: true, progress: () => {}, record: (r: BenchRecord) => void out.push(r) };
  reportFloors(ctx, servers, bound, (s) => s.final);
  return out;
}

describe("the memcached bench's items floor", () => {
  it("the bench's item asks 1,218 B of the heap and gets a bigger class than memcached's chunk: the floor is below 0.95x memcached's chunks", () => {
    expect(keyArea(KEY_BYTES) + ITEM).toBe(1218);
    expect(ALLOCATION).toBe(1280);
    expect(MEMCACHED_CHUNK / ALLOCATION).toBeLessThan(0.95);
  });

  it("places the target against the floor: above it (a calibration error) when bound x memcached's items exceed limit / allocation, else not", () => {
    const floor = Math.floor(LIMIT / ALLOCATION);
    const memcachedHeld = Math.floor(LIMIT / MEMCACHED_CHUNK);
    const f = itemsFloor({ limit: LIMIT, allocation: ALLOCATION, held: floor - 100, reference: memcachedHeld, bound: 0.95 });
    expect(f.floor).toBe(floor);
    expect(f.heldVsFloor).toBeCloseTo((floor - 100) / floor, 12);
    expect(f.referenceVsFloor).toBeCloseTo(memcachedHeld / floor, 12);
    expect(f.target).toBeCloseTo(0.95 * memcachedHeld, 6);
    expect(f.aboveFloor).toBe(true);
    // A bound the floor can meet: 0.9x memcached's items is below limit / 1,280.
    expect(itemsFloor({ limit: LIMIT, allocation: ALLOCATION, held: floor, reference: memcachedHeld, bound: 0.9 }).aboveFloor).toBe(false);
    // Exactly at the floor is not above it.
    expect(itemsFloor({ limit: 1000, allocation: 10, held: 100, reference: 200, bound: 0.5 }).aboveFloor).toBe(false);
    expect(() => itemsFloor({ limit: LIMIT, allocation: 0, held: 1, reference: 1, bound: 0.95 })).toThrow(RangeError);
  });

  it("says where an item's bytes go, the parts adding up to its allocation (shardheap) or its chunk (memcached)", () => {
    const mine = shardheapItemText(ITEM, ALLOCATION);
    const rest = ITEM - 44 - KEY_BYTES - VALUE_BYTES;
    expect(mine).toContain(`an item is 1,154 B (bytes / curr_items): header 44 B, key 64 B, value 1,024 B, ${rest} B of the rest`);
    expect(mine).toContain(`+ 64 B the map's copy of the key (SharedMap keyArea) = 1,218 B asked; + 62 B rounding to the heap's size class = 1,280 B allocated`);
    const theirs = memcachedItemText(MEMCACHED_ITEM, MEMCACHED_CHUNK);
    expect(theirs).toContain(`an item is 1,147 B (bytes / curr_items): key 64 B, value 1,024 B, 59 B of item header`);
    expect(theirs).toContain("+ 37 B rounding to the slab class = chunk_size 1,184 B");
  });

  it("records, from the servers' stats, each one's item bytes and each shardheap server's items against the floor, with the calibration error when the target lies above it", () => {
    const shards = (held: number[]): Stats =>
      new Map<string, number>([
        ["curr_items", held.reduce((a, n) => a + n, 0)],
        ["bytes", held.reduce((a, n) => a + n, 0) * ITEM],
        ["limit_maxbytes", LIMIT],
        ...held.flatMap((n, s): [string, number][] => [
          [`shard${s}:curr_items`, n],
          [`shard${s}:mem_allocated`, n * ALLOCATION],
        ]),
      ]);
    const memcached = (held: number): [Stats, Stats] => [
      new Map([
        ["curr_items", held],
        ["bytes", held * MEMCACHED_ITEM],
        ["limit_maxbytes", LIMIT],
      ]),
      new Map([
        ["1:chunk_size", 96],
        ["1:used_chunks", 3],
        ["12:chunk_size", MEMCACHED_CHUNK],
        ["12:used_chunks", held],
      ]),
    ];
    const m1Held = 226_000;
    const s1Held = 195_000;
    const out = records(roster({ m1: server("memcached -t 1", ...memcached(m1Held)), s1: server("shardheap --smp 1", shards([s1Held])), s2: server("shardheap --smp 2", shards([100_000, 97_000])) }), 0.95);
    const byName = new Map(out.map((r) => [r.candidate, r]));
    expect(byName.get("memcached -t 1 [item bytes]")).toMatchObject({ value: MEMCACHED_CHUNK, note: memcachedItemText(MEMCACHED_ITEM, MEMCACHED_CHUNK) });
    expect(byName.get("shardheap --smp 1 [item bytes]")).toMatchObject({ value: ALLOCATION, note: shardheapItemText(ITEM, ALLOCATION) });
    expect(byName.get("shardheap --smp 2 [item bytes]")?.value).toBe(ALLOCATION);
    const floor = Math.floor(LIMIT / ALLOCATION);
    const s1 = byName.get("shardheap --smp 1 [items floor]")!;
    expect(s1.metric).toBe("items held / floor");
    expect(s1.value).toBeCloseTo(s1Held / floor, 12);
    expect(s1.note).toMatch(/^calibration error: the target lies above the floor measured in this run: /);
    expect(s1.note).toContain(`floor: ${floor.toLocaleString("en-US")} items of 1,280 B`);
    expect(s1.note).toContain(`memcached -t 1 holds 226,000 = ${(m1Held / floor).toFixed(3)}x the floor (its chunks: 1,184 B)`);
    expect(s1.note).toBe(
      floorNote(itemsFloor({ limit: LIMIT, allocation: ALLOCATION, held: s1Held, reference: m1Held, bound: 0.95 }), {
        name: "shardheap --smp 1",
        reference: "memcached -t 1",
        held: s1Held,
        referenceHeld: m1Held,
        allocation: ALLOCATION,
        limit: LIMIT,
        bound: 0.95,
        chunk: MEMCACHED_CHUNK,
      }),
    );
    // memcached -t 2 gave no figures: --smp 2's floor record says so, as does the profiled server's own absence.
    expect(byName.get("shardheap --smp 2 [items floor]")?.note).toBe("memcached -t 2 has no figures");
    expect(byName.get("shardheap --smp 2 --heapprof=2097152 [items floor]")?.note).toBe("shardheap --smp 2 --heapprof=2097152 has no figures");
    expect(byName.has("memcached -t 2 [item bytes]")).toBe(false);
    // A bound the floor meets: no calibration error.
    const met = records(roster({ m1: server("memcached -t 1", ...memcached(m1Held)), s1: server("shardheap --smp 1", shards([s1Held])) }), 0.9);
    expect(met.find((r) => r.candidate === "shardheap --smp 1 [items floor]")?.note).toMatch(/^the target \(0\.9x memcached -t 1's 226,000 items = 203,400\) lies at or below the floor's /);
  });

  it("sums per-shard stats, and says when a server gives none", () => {
    const st = new Map([
      ["shard0:mem_allocated", 10],
      ["shard1:mem_allocated", 32],
      ["shard10:mem_allocated", 1],
      ["mem_allocated", 1000],
    ]);
    expect(shardSum(st, "mem_allocated")).toBe(43);
    expect(shardSum(st, "freeMemory")).toBeUndefined();
    const noField = new Map([
      ["curr_items", 10],
      ["bytes", 10 * ITEM],
      ["limit_maxbytes", LIMIT],
    ]);
    const out = records(roster({ m1: server("memcached -t 1", noField), s1: server("shardheap --smp 1", noField) }), 0.95);
    expect(out.find((r) => r.candidate === "shardheap --smp 1 [items floor]")?.note).toBe("no shardN:mem_allocated in shardheap --smp 1's stats");
    expect(out.find((r) => r.candidate === "shardheap --smp 1 [item bytes]")?.note).toBe("no shardN:mem_allocated in its stats");
    expect(out.find((r) => r.candidate === "memcached -t 1 [item bytes]")?.note).toBe("no stats slabs chunk_size in its stats");
  });
});
