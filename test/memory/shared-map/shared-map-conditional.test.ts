/**
 * SharedMap's conditional publishes (publishIf, exchangeIf) between real
 * threads (test/fixtures/map-conditional-worker.mjs): writers that each own
 * a shard make read-modify-writes of the same keys at once, started
 * together from a spin barrier, and no write is lost: every increment of
 * N threads x M increments is in the final counts, every key added by all
 * of them at once is added by exactly one (the same loops with a plain
 * publish lost 44-62% of 36,000 increments and added all 4,000 keys three
 * times).
 * Afterwards the map's check() is [], the heap's check() is [] and every
 * shard holds what it held before the map.
 */
import { describe, expect, it } from "vitest";
import { SharedHeap, SharedMap, SharedMapError, type SharedMapStats } from "../../../src/index.js";
import { expectNoFailures, raceThreads } from "./racing-threads.js";

const workerUrl = new URL("../../fixtures/map-conditional-worker.mjs", import.meta.url);

interface Report {
  index: number;
  done: number;
  retries: number;
  added: number[];
  mine: number[];
  final: number[];
  failures: string[];
  live: number;
  stats?: SharedMapStats;
  error?: string;
}

async function race(o: { scenario: "incr" | "add"; writers: number; keys: number; ops: number }): Promise<Report[]> {
  const heap = SharedHeap.create({ shards: o.writers, shardBytes: 8 << 20 });
  const ctl = new SharedArrayBuffer(4 * 16);
  const reports = await raceThreads<Report>(
    workerUrl,
    Array.from({ length: o.writers }, (_, index) => ({ heap: heap.memory, ctl, index, workers: o.writers, scenario: o.scenario, keys: o.keys, ops: o.ops, shard: index })),
  );
  expectNoFailures(reports, (r) => `writer ${r.index}`);
  expect(reports[0]!.stats, "the map's books at the end").toMatchObject({ held: 0, retired: 0, unlinkedHeld: 0, reserved: 0 });
  for (const r of reports) expect(r.live, `writer ${r.index}: its shard holds what it held before the map`).toBe(0);
  expect(heap.check()).toEqual([]);
  return reports;
}

describe("SharedMap: conditional publishes from several threads at once", () => {
  it("N threads x M read-modify-write increments of the same keys: the counts end at exactly what was added", async () => {
    const writers = 3;
    const ops = 12_000;
    const reports = await race({ scenario: "incr", writers, keys: 2, ops });
    const added = [0, 1].map((k) => reports.reduce((n, r) => n + r.mine[k]!, 0));
    expect(added[0]! + added[1]!).toBe(writers * ops);
    expect(reports[0]!.final).toEqual(added);
    expect(reports.reduce((n, r) => n + r.retries, 0), "the writers met: some publishIf found another write first").toBeGreaterThan(0);
  });

  it("every thread adding the same keys (publishIf over no entry): each key added exactly once", async () => {
    const ops = 4000;
    const reports = await race({ scenario: "add", writers: 3, keys: 0, ops });
    const winners = new Array<number>(ops).fill(-1);
    for (const r of reports) {
      for (const i of r.added) {
        expect(winners[i], `key ${i} added twice`).toBe(-1);
        winners[i] = r.index;
      }
    }
    expect(winners.filter((w) => w < 0)).toEqual([]);
    // The stored value names the writer whose publishIf answered true.
    expect(reports[0]!.final).toEqual(winners);
    expect(reports.reduce((n, r) => n + r.retries, 0)).toBe(2 * ops);
  });
});

describe("SharedMap: publishIf and exchangeIf on one thread", () => {
  it("publish only over the entry read, or only where no entry is; otherwise nothing changes and the reservation stays the caller's", () => {
    const heap = SharedHeap.create({ shards: 1, shardBytes: "2MiB" });
    const map = SharedMap.create(heap, { shard: 0 });
    const bytes = (ref: number) => Buffer.from(map.value(ref)).toString();
    const reserve = (key: string, text: string) => {
      const ref = map.reserve(key, text.length);
      Buffer.from(heap.buffer, map.valuePointer(ref), text.length).write(text);
      return ref;
    };
    const a = reserve("k", "a");
    expect(map.publishIf(a, 0)).toBe(true);
    const b = reserve("k", "b");
    expect(map.publishIf(b, 0), "the key has an entry now").toBe(false);
    expect(map.getString("k")).toBe("a");
    const held = map.acquire("k");
    const old = map.exchangeIf(b, held);
    map.release(held);
    expect(bytes(old), "exchangeIf hands back the entry it replaced").toBe("a");
    map.release(old);
    expect(map.getString("k")).toBe("b");
    const stale = map.acquire("k");
    const c = reserve("k", "c");
    map.set("k", "d"); // another write since `stale` was read
    expect(map.exchangeIf(c, stale)).toBe(-1);
    expect(map.publishIf(c, stale)).toBe(false);
    expect(bytes(stale)).toBe("b");
    map.release(stale);
    expect(map.getString("k")).toBe("d");
    expect(map.delete("k")).toBe(true);
    expect(map.publishIf(c, 0)).toBe(true);
    expect(map.getString("k")).toBe("c");
    expect(() => map.publishIf(c, 0), "published already").toThrow(SharedMapError);
    const x = reserve("x", "x");
    expect(() => map.publishIf(x, 12345), "not a held reference").toThrow(SharedMapError);
    expect(map.stats().reserved).toBe(1);
    map.release(x);
    expect(map.stats()).toMatchObject({ entries: 1, held: 0, reserved: 0 });
    expect(map.check()).toEqual([]);
    map.destroy();
    expect(heap.check()).toEqual([]);
  });

  it("prepare makes a writer's descriptors at once, in its shard", () => {
    const heap = SharedHeap.create({ shards: 1, shardBytes: "4MiB" });
    const map = SharedMap.create(heap, { shard: 0, capacity: 4096, descriptors: 64 });
    const before = map.stats();
    expect(before.descriptors).toBeLessThan(1000);
    const made = map.prepare(3000);
    expect(made).toBeGreaterThanOrEqual(3000);
    const after = map.stats();
    expect(after.descriptors - before.descriptors).toBe(made);
    expect(after.freeDescriptors - before.freeDescriptors).toBe(made);
    // Entries now take descriptors made already: no new chunk.
    for (let i = 0; i < 3000; i++) map.set(`k${i}`, "v");
    expect(map.stats().structureObjects).toBe(after.structureObjects);
    expect(map.check()).toEqual([]);
    expect(() => map.prepare(-1)).toThrow(/SharedMap.prepare: entries/);
    map.destroy();
    expect(heap.check()).toEqual([]);
  });
});
