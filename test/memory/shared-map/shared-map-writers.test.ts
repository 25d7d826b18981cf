/**
 * SharedMap with a writer on every thread (test/fixtures/map-writers-worker.mjs):
 * writers that each own a shard change one map at once (their entries made
 * in their own shards) while readers on other threads take references to
 * its entries, all started together from a spin barrier. Every value read
 * is checked whole when acquired and again when released, so a torn read,
 * a value of another key or a read of an entry freed (and reused) under a
 * reference fails the run; writers replace the same keys (a reader never
 * misses one, nor sees one writer's older write after its newer one),
 * delete, take, exchange, unlink and clear random keys, and insert keys
 * of their own from a tiny map (every segment's table grows under the
 * others). Afterwards the map's check() is [], every reference and
 * descriptor is accounted for, the heap's check() is [] and every shard's
 * memory is back where it started.
 */
import { describe, expect, it } from "vitest";
import { SharedHeap, type SharedMapStats } from "../../../src/index.js";
import { expectNoFailures, raceThreads } from "./racing-threads.js";

const workerUrl = new URL("../../fixtures/map-writers-worker.mjs", import.meta.url);

interface Report {
  role: string;
  index: number;
  reads: number;
  hits: number;
  misses: number;
  writes: number;
  replaced: number;
  removed: number;
  clears: number;
  failures: string[];
  error?: string;
  stats?: SharedMapStats;
  live: number;
}

interface RaceOptions {
  scenario: "replace" | "churn" | "grow";
  writers: number;
  keys: number;
  ops: number;
  /** Per reader: its own shard (-1 none). */
  readers: number[];
}

async function race(o: RaceOptions): Promise<{ writers: Report[]; readers: Report[] }> {
  const shards = Math.max(o.writers, 1 + Math.max(-1, ...o.readers));
  const heap = SharedHeap.create({ shards, shardBytes: 16 << 20 });
  const start = Array.from({ length: shards }, (_, s) => heap.stats(s));
  const roles = [...Array.from({ length: o.writers }, (_, i) => ({ role: "writer", shard: i })), ...o.readers.map((shard) => ({ role: "reader", shard }))];
  const ctl = new SharedArrayBuffer(4 * (16 + o.writers));
  const reports = await raceThreads<Report>(
    workerUrl,
    roles.map((r, index) => ({ heap: heap.memory, ctl, role: r.role, index, workers: roles.length, writers: o.writers, scenario: o.scenario, keys: o.keys, ops: o.ops, shard: r.shard })),
  );
  expectNoFailures(reports, (r) => `${r.role} ${r.index}`);
  const writers = reports.slice(0, o.writers);
  expect(writers[0]!.stats, "the map's books at the end").toMatchObject({ held: 0, retired: 0, unlinkedHeld: 0, reserved: 0, readers: 0 });
  expect(writers[0]!.stats!.freeDescriptors, "every descriptor back on its writer's lists").toBe(writers[0]!.stats!.descriptors - writers[0]!.stats!.entries);
  for (const r of reports) expect(r.live, `${r.role} ${r.index}: after destroy, its shard holds what it held before the map`).toBe(0);
  expect(heap.check()).toEqual([]);
  for (let s = 0; s < shards; s++) {
    heap.adoptShard(s).trim();
    expect(heap.stats(s).freeMemory, `shard ${s}'s memory back to the start`).toBe(start[s]!.freeMemory);
  }
  return { writers, readers: reports.slice(o.writers) };
}

describe("SharedMap with writers on every thread, started together", () => {
  it("writers replacing the same keys, readers reading them: never a miss, a torn value or a writer's older write after its newer", async () => {
    const { writers, readers } = await race({ scenario: "replace", writers: 3, keys: 64, ops: 20_000, readers: [3, -1] });
    for (const w of writers) expect(w.replaced, `writer ${w.index} replaced entries (other writers' too)`).toBeGreaterThan(10_000);
    for (const r of readers) {
      expect(r.hits, "reads happened during the replaces").toBeGreaterThan(1000);
      expect(r.misses).toBe(0);
    }
  });

  it("writers setting, deleting, taking, exchanging, unlinking and clearing random keys under readers: every value whole and its key's", async () => {
    const { writers, readers } = await race({ scenario: "churn", writers: 3, keys: 48, ops: 20_000, readers: [3, -1] });
    for (const w of writers) expect(w.removed, `writer ${w.index} removed entries`).toBeGreaterThan(1000);
    expect(writers.reduce((n, w) => n + w.clears, 0), "writer 0 cleared the map now and then").toBeGreaterThan(0);
    for (const r of readers) {
      expect(r.hits).toBeGreaterThan(1000);
      expect(r.misses).toBeGreaterThan(0);
    }
  });

  it("writers growing every segment at once from a tiny map: a key inserted before a lookup is found", async () => {
    const { writers, readers } = await race({ scenario: "grow", writers: 3, keys: 0, ops: 6000, readers: [-1] });
    expect(writers[0]!.stats!.oldTables, "the segments' tables were replaced as they grew").toBeGreaterThanOrEqual(16 * 4);
    expect(writers[0]!.stats!.entries).toBe(3 * 6000);
    for (const r of readers) expect(r.hits).toBeGreaterThan(1000);
  });
});
