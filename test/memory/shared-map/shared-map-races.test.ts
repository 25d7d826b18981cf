/**
 * SharedMap between real threads (test/fixtures/map-race-worker.mjs): the
 * owner of shard 0 changes a map while readers on other threads take
 * references to its entries, each round started together from a spin
 * barrier. Every value read is checked whole when acquired and again when
 * released, so a torn read, a read of an entry freed (and reused) under a
 * reference, a stale generation or a missed key fails the run; and each
 * lookup is checked against the key's state the owner posts (published at
 * generation g, being deleted, deleted) read before and after it, so a hit
 * older than what was published before the lookup began (a lost update),
 * a hit of an entry whose delete had returned, or a miss of a key present
 * throughout the lookup fails it too. The owner deletes, unlinks (by the
 * references reserve gave it), clears, replaces (reserve and publish, or
 * set) and grows the table meanwhile; afterwards
 * the map's own check() is [], every reference and descriptor is
 * accounted for, the heap's check() is [] and shard 0's objects are back
 * where they started. Readers attach both ways (WebAssembly and Atomics),
 * hold up to 20 references (hazard and counted ones) and hand counted ones
 * to each other; some own a shard (their frees of the owner's payloads are
 * cross-shard frees, batched or not), one owns none.
 */
import { describe, expect, it } from "vitest";
import { SharedHeap, type SharedMapStats } from "../../../src/index.js";
import { expectNoFailures, raceThreads } from "./racing-threads.js";

const workerUrl = new URL("../../fixtures/map-race-worker.mjs", import.meta.url);

interface Report {
  role: string;
  index: number;
  reads: number;
  misses: number;
  hits: number;
  counted: number;
  handedOff: number;
  failures: string[];
  error?: string;
  stats?: SharedMapStats;
  live?: number;
  crossShardFrees?: number;
  clears?: number;
  unlinks?: number;
}

interface RaceOptions {
  scenario: "replace" | "delete" | "unlink" | "grow" | "shift" | "storm";
  rounds: number;
  keys: number;
  ops: number;
  /** Per reader: its own shard (-1 none) and how it attaches. */
  readers: Array<{ shard: number; attach: "memory" | "buffer" }>;
}

async function race(o: RaceOptions): Promise<{ owner: Report; readers: Report[] }> {
  const shards = 1 + Math.max(0, ...o.readers.map((r) => r.shard));
  const heap = SharedHeap.create({ shards, shardBytes: 16 << 20 });
  const start = heap.stats(0);
  const workers = 1 + o.readers.length;
  const ctl = new SharedArrayBuffer(4 * (16 + o.readers.length * 4096 + o.keys));
  const roles = [{ role: "owner", shard: 0, attach: "memory" }, ...o.readers.map((r) => ({ role: "reader", ...r }))];
  const reports = await raceThreads<Report>(
    workerUrl,
    roles.map((r, index) => ({
      heap: r.attach === "memory" ? heap.memory : heap.buffer, ctl, role: r.role, index, workers,
      scenario: o.scenario, rounds: o.rounds, keys: o.keys, ops: o.ops, shard: r.role === "owner" ? 0 : r.shard,
    })),
    () => `: ${Atomics.load(new Int32Array(ctl), 2)} of ${o.rounds} rounds done`,
  );
  expectNoFailures(reports, (r) => `${r.role} ${r.index}`);
  const owner = reports[0]!;
  expect(owner.stats, "the map's books at the end").toMatchObject({ held: 0, retired: 0, unlinkedHeld: 0, reserved: 0, readers: 0 });
  expect(owner.live, "after destroy, shard 0 holds what it held before the map").toBe(0);
  expect(heap.check()).toEqual([]);
  heap.adoptShard(0).trim();
  expect(heap.stats(0).freeMemory, "shard 0's memory back to the start").toBe(start.freeMemory);
  expect(heap.stats(0).liveObjects).toBe(start.liveObjects);
  return { owner, readers: reports.slice(1) };
}

const mixedReaders: RaceOptions["readers"] = [
  { shard: 1, attach: "memory" },
  { shard: -1, attach: "buffer" },
];

describe("SharedMap between threads started together", () => {
  it("readers racing the owner's replaces of the same keys: never a torn or stale value, never a miss", async () => {
    const { readers } = await race({ scenario: "replace", rounds: 40, keys: 48, ops: 3000, readers: mixedReaders });
    for (const r of readers) {
      expect(r.hits, "reads happened during the replaces").toBeGreaterThan(2000);
      expect(r.misses).toBe(0);
      expect(r.counted, "references past 15 were counted ones").toBeGreaterThan(0);
      expect(r.handedOff).toBeGreaterThan(0);
    }
  });

  it("readers racing deletes and clears: an entry found is whole and current, and outlives the delete while held", async () => {
    const { owner, readers } = await race({ scenario: "delete", rounds: 40, keys: 64, ops: 3000, readers: [{ shard: 1, attach: "memory" }, { shard: 2, attach: "buffer" }] });
    for (const r of readers) {
      expect(r.hits).toBeGreaterThan(1000);
      expect(r.misses, "some keys were deleted when looked up").toBeGreaterThan(0);
    }
    expect(owner.clears, "the owner cleared the map now and then").toBeGreaterThan(10);
    const sent = readers.reduce((n, r) => n + r.crossShardFrees!, 0);
    expect(sent, "readers freed payloads whose last reference they dropped (cross-shard frees)").toBeGreaterThan(0);
  });

  it("readers racing the owner's unlinks and re-sets: an entry found is whole and current, outlives its unlink while held, is freed once", async () => {
    const { owner, readers } = await race({ scenario: "unlink", rounds: 40, keys: 12, ops: 3000, readers: [{ shard: 1, attach: "memory" }, { shard: -1, attach: "buffer" }] });
    expect(owner.unlinks, "the owner unlinked entries throughout").toBeGreaterThan(20_000);
    for (const r of readers) {
      expect(r.hits).toBeGreaterThan(1000);
      expect(r.misses, "some keys were unlinked when looked up").toBeGreaterThan(0);
    }
    expect(readers[0]!.crossShardFrees, "the reader owning a shard freed payloads whose last reference it dropped").toBeGreaterThan(0);
  });

  it("resizes and backward shifts under readers: a key inserted before a lookup is found, one never inserted is not", async () => {
    const { owner, readers } = await race({ scenario: "grow", rounds: 30, keys: 4000, ops: 400, readers: mixedReaders });
    expect(owner.stats!.oldTables, "the table was replaced as it grew").toBeGreaterThanOrEqual(6);
    for (const r of readers) expect(r.hits).toBeGreaterThan(1000);
  });

  it("long backward shifts under readers: a key that stays in a cluster whose front comes and goes is always found", async () => {
    const { owner, readers } = await race({ scenario: "shift", rounds: 30, keys: 16, ops: 2000, readers: mixedReaders });
    expect(owner.stats!.oldTables, "one table throughout: the keys' one home slot stayed theirs").toBe(0);
    for (const r of readers) {
      expect(r.hits).toBeGreaterThan(1000);
      expect(r.misses, "the front keys were deleted when looked up").toBeGreaterThan(0);
    }
  });

  it("releases from several threads racing the owner's deletes: each entry freed exactly once, every descriptor back", async () => {
    const { readers } = await race({ scenario: "storm", rounds: 60, keys: 64, ops: 0, readers: [{ shard: 1, attach: "memory" }, { shard: -1, attach: "buffer" }, { shard: 2, attach: "memory" }] });
    for (const r of readers) {
      expect(r.handedOff).toBe(60 * 64);
      expect(r.counted, "past 15 held, references were counted").toBe(60 * (64 - 15));
    }
    expect(readers.reduce((n, r) => n + r.crossShardFrees!, 0), "some last references were dropped on reader threads").toBeGreaterThan(0);
  });
});
