/**
 * A SharedMap writer that dies mid-change (shared-map.ts, "A writer that
 * dies"): a worker that owns shard 1 makes one change and ends its thread
 * (process.exit: no finally block runs) just before its n-th atomic step,
 * for every n the change has (test/fixtures/map-death-worker.mjs); the
 * main thread then adopts shard 1, as a runtime does for a dead shard, and
 * changes the map in the same segment. That change must not wait forever
 * on the dead writer's lock: it breaks it and repairs the segment (a
 * backward shift cut short, an entry half linked or half unlinked, a
 * resize not published). Afterwards the map's check() names at most the
 * documented loss (sentences saying "lost": the dead writer's reservation
 * or the descriptor it held), every other key reads as before, the
 * changed key reads as before or after the change (never torn, never of
 * another key), and the heap's check() is [].
 */
import { once } from "node:events";
import { Worker } from "node:worker_threads";
import { describe, expect, it } from "vitest";
import { SharedHeap, SharedMap } from "../../../src/index.js";
import * as L from "../../../src/memory/shared-map/layout.js";
import { clusterKeys as cluster } from "./cluster-keys.js";

const workerUrl = new URL("../../fixtures/map-death-worker.mjs", import.meta.url);
const TRIAL_TIMEOUT_MS = 10_000;

type Op = "insert" | "replace" | "exchange" | "delete" | "take" | "unlink" | "clear" | "grow";

interface Trial {
  /** Whether the worker died (else it finished, after `steps` steps). */
  died: boolean;
  steps: number;
  /** The dead worker held the segment's lock, or was replacing without it (its record says so). */
  locked: boolean;
  problems: string[];
}

async function trial(op: Op, die: number): Promise<Trial> {
  const heap = SharedHeap.create({ shards: 2, shardBytes: 1 << 20 });
  heap.shard(0);
  // One segment of 64 slots (32 entries): a cluster of 12 keys from slot 0, so a delete near its start shifts the rest.
  const map = SharedMap.create(heap, { shard: 0, capacity: 16, segments: 1 });
  const keys = cluster(map, 64, 12, "c");
  const others = op === "grow" ? Array.from({ length: 20 }, (_, i) => `o${i}`) : ["o0", "o1", "o2"];
  for (const k of [...keys, ...others]) map.set(k, `value of ${k}`);
  const target = keys[1]!;
  const fresh = cluster(map, 64, 13, "c")[12]!; // a new key at the end of the cluster
  const worker = new Worker(workerUrl, { workerData: { heap: heap.memory, handle: map.handle, op, die, key: target, other: fresh } });
  let steps = -1;
  worker.on("message", (m: { steps: number }) => (steps = m.steps));
  const timer = setTimeout(() => void worker.terminate(), TRIAL_TIMEOUT_MS);
  await once(worker, "exit");
  clearTimeout(timer);
  const died = steps < 0;
  const seg = map.handle + L.SEGMENTS;
  const lockWord = Atomics.load(new Int32Array(heap.buffer), (seg + L.SG_LOCK) >>> 2);
  const replacing = Atomics.load(new Int32Array(heap.buffer), (map.handle + L.writerOffset(1, 1) + L.WR_REPLACING) >>> 2);
  heap.adoptShard(1); // as Smp does for a dead shard: the dead thread's token owns nothing now

  // The next change of the segment: breaks a dead holder's lock and repairs.
  map.set("after", "the next change");
  expect(map.getString("after")).toBe("the next change");
  const problems = map.check();
  for (const k of [...keys, ...others]) {
    const v = map.getString(k);
    if (k === target && ["replace", "exchange"].includes(op)) expect([`value of ${k}`, "new"], `${op} step ${die}: ${k}`).toContain(v);
    else if (k === target && ["delete", "take", "unlink"].includes(op)) expect([`value of ${k}`, undefined], `${op} step ${die}: ${k}`).toContain(v);
    else if (op === "clear") expect([`value of ${k}`, undefined], `${op} step ${die}: ${k}`).toContain(v);
    else expect(v, `${op} step ${die}: ${k}`).toBe(`value of ${k}`);
  }
  if (["insert", "grow"].includes(op)) expect([undefined, "new"], `${op} step ${die}: the new key`).toContain(map.getString(fresh));
  if (!died) expect(problems, `${op}: the change finished`).toEqual([]);
  map.destroy({ force: true }); // a dead writer's reservation, if it left one
  heap.shard(1).drainCrossShardFrees();
  heap.shard(0).drainCrossShardFrees();
  expect(heap.check(), `${op} step ${die}`).toEqual([]);
  await worker.terminate();
  return { died, steps, locked: lockWord !== 0 || replacing !== 0, problems };
}

describe("SharedMap: a writer that dies before any one of its atomic steps", () => {
  for (const op of ["insert", "replace", "exchange", "delete", "take", "unlink", "clear", "grow"] as const) {
    it(`${op}: the next writer goes on, the segment repaired, at most the documented loss`, async () => {
      let locked = 0;
      let repaired = 0;
      let n = 0;
      for (; n < 200; n++) {
        const t = await trial(op, n);
        if (!t.died) break;
        for (const p of t.problems) expect(p, `${op}, dead before step ${n}`).toMatch(/: lost /);
        expect(t.problems.length, `${op}, dead before step ${n}: ${t.problems.join("; ")}`).toBeLessThanOrEqual(2);
        if (t.locked) locked++;
        if (t.problems.length === 0 && t.locked) repaired++;
      }
      expect(n, `${op} ended within 200 steps`).toBeLessThan(200);
      expect(n, `${op} took steps to die before`).toBeGreaterThan(2);
      expect(locked, `${op}: in some trials the writer died holding the segment's lock`).toBeGreaterThan(0);
      expect(repaired, `${op}: some of those left nothing lost once repaired`).toBeGreaterThan(0);
    }, 120_000); // clear dies at ~45 points, a worker each: 15 s idle, 56 s seen at load 13 on two cores
  }
});
