/**
 * Two frees of one object, from real threads started together on a spin
 * barrier: exactly one succeeds, the other throws InvalidPointerError,
 * whatever the interleaving (cross-shard.ts, "Claims"). Each case runs
 * thousands of races and then checks the heap: check() is [], the counters
 * balance, and the owner's memory is back where it started.
 */
import { once } from "node:events";
import { Worker } from "node:worker_threads";
import { afterEach, describe, expect, it } from "vitest";
import { SharedHeap, type MemoryStats } from "../src/index.js";

const workerUrl = new URL("./fixtures/race-worker.mjs", import.meta.url);
let running: Worker[] = [];
afterEach(async () => {
  await Promise.all(running.map((w) => w.terminate()));
  running = [];
});

interface RaceOptions {
  /** The shards of the workers that free the owner's (shard 0's) objects remotely. */
  remotes: number[];
  /** What the owner does to each object: free it, realloc it (a move), or nothing. */
  op: "free" | "realloc" | "none";
  rounds: number;
  perRound: number;
  sizes: number[];
  batch?: boolean;
  profile?: number;
  reverse?: boolean;
  /**
   * How the threads attach: with the heap's buffer (their atomics are
   * Atomics), its WebAssembly.Memory (WebAssembly atomics), or the owner
   * one way and the others the other (both kinds on the same words).
   */
  attach?: "buffer" | "memory" | "mixed";
}

interface WorkerReport {
  ok: boolean;
  error?: string;
  failures?: number;
  races?: number;
  stats?: MemoryStats;
}

async function race(o: RaceOptions): Promise<{ heap: SharedHeap; owner: WorkerReport }> {
  const shards = 1 + o.remotes.length;
  const heap = SharedHeap.create({ shards, shardBytes: 8 << 20 });
  const start = heap.stats(0);
  const workers = 1 + o.remotes.length;
  const ctl = new SharedArrayBuffer(4 * (8 + o.perRound * (1 + workers)));
  const roles = [{ role: "owner", shard: 0 }, ...o.remotes.map((shard) => ({ role: "remote", shard }))];
  const threads = roles.map(
    ({ role, shard }, index) =>
      new Worker(workerUrl, {
        workerData: {
          heap: attachWith(heap, o.attach ?? "mixed", index), ctl, role, shard, index, workers,
          rounds: o.rounds, perRound: o.perRound, op: o.op, sizes: o.sizes,
          batch: o.batch ?? false, profile: o.profile ?? 0, reverse: o.reverse ?? false,
        },
      }),
  );
  running.push(...threads);
  const reports = await withTimeout(
    Promise.all(threads.map(async (t) => ((await once(t, "message")) as [WorkerReport])[0])),
    RACE_TIMEOUT_MS,
    "the racing threads did not finish (a lost or doubled object can hang them)",
  );
  for (const r of reports) expect(r.error ?? "", "a worker failed").toBe("");
  await Promise.all(threads.map((t) => t.terminate()));
  // Every thread is gone: this one takes shard 0 over to trim what it caches.
  expect(heap.check()).toEqual([]);
  const end = reports[0]!.stats!;
  expect(end.liveObjects, "nothing left allocated").toBe(0);
  expect(end.mallocs - end.frees).toBe(0);
  heap.adoptShard(0).trim();
  expect(heap.stats(0).freeMemory, "memory back to the start").toBe(start.freeMemory);
  expect(heap.check()).toEqual([]);
  return { heap, owner: reports[0]! };
}

function attachWith(heap: SharedHeap, how: "buffer" | "memory" | "mixed", index: number): unknown {
  expect(heap.memory, "SharedHeap.create makes a WebAssembly memory here").toBeDefined();
  const memory = how === "memory" || (how === "mixed" && index === 0);
  return memory ? heap.memory : heap.buffer;
}

/** The old protocol hung about one run in five; a correct one finishes each case in a few seconds. */
const RACE_TIMEOUT_MS = 40_000;

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} within ${ms} ms`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

const SIZES = [64, 48, 1024, 64, 20000, 64, 8, 4096];

describe("two frees of one object, from threads started together", () => {
  it("the owner's free and a remote free: exactly one succeeds, thousands of times", async () => {
    const { owner } = await race({ remotes: [1], op: "free", rounds: 1500, perRound: 8, sizes: SIZES });
    expect(owner.races).toBe(12000);
    expect(owner.failures, "objects with no success or two").toBe(0);
  });

  it("the same with the remote side batching its frees, and meeting from the other end", async () => {
    const { owner } = await race({ remotes: [1], op: "free", rounds: 1500, perRound: 8, sizes: SIZES, batch: true, reverse: true, attach: "memory" });
    expect(owner.races).toBe(12000);
    expect(owner.failures).toBe(0);
  });

  it("the same with the profiler recording every allocation (tagged objects, page-span tags)", async () => {
    const { owner, heap } = await race({ remotes: [1], op: "free", rounds: 300, perRound: 8, sizes: SIZES, profile: 1 });
    expect(owner.failures).toBe(0);
    const profile = heap.heapProfile(0);
    expect(profile.totalCount).toBe(0);
    expect(profile.totalSize).toBe(0);
  });

  it("two remote frees of one object: exactly one succeeds", async () => {
    // Three threads on two cores: longer rounds, fewer barriers.
    const { owner } = await race({ remotes: [1, 2], op: "none", rounds: 250, perRound: 32, sizes: SIZES, reverse: true, attach: "buffer" });
    expect(owner.races).toBe(8000);
    expect(owner.failures).toBe(0);
  });

  it("realloc and a remote free: exactly one succeeds, and a failed realloc leaves nothing allocated", async () => {
    const { owner } = await race({ remotes: [1], op: "realloc", rounds: 1500, perRound: 8, sizes: SIZES });
    expect(owner.races).toBe(12000);
    expect(owner.failures).toBe(0);
  });
});
