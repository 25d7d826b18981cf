/**
 * Shards that die while calls go to them, on real
 * worker threads killed two ways: process.exit() inside a task, and
 * Worker.terminate() from outside. Every wait is bounded; every Smp is
 * stopped.
 *   3. a call by the side path (shared memory, a 100 KB string) made while
 *      the dead shard's new thread is on its way settles, and so does
 *      every later call; stop() has nothing left waiting;
 *   5. delivery is at most once: of thousands of calls in flight when the
 *      shard dies, each task logging its run in shared memory, every call
 *      rejected as never started did not run, every one that ran was
 *      answered or rejected as may-have-run, nothing ran twice, and
 *      retrying the never-started ones runs each exactly once.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { Piscina } from "piscina";
import { ShardError, Smp } from "../../dist/index.js";
import { waitFor } from "../helpers.js";

const tasks = new URL("../fixtures/death-tasks.mjs", import.meta.url);
let running: Smp[] = [];
afterEach(async () => {
  await Promise.all(running.map((s) => s.stop({ timeoutMs: 2000 })));
  running = [];
});

type Kill = "process.exit" | "terminate";

async function start(shards: number, extra: Partial<Parameters<typeof Smp.start>[0]> = {}): Promise<{ smp: Smp; errors: ShardError[] }> {
  const smp = await Smp.start({ shards, memoryPerShard: "2MiB", module: tasks, ...extra });
  running.push(smp);
  const errors: ShardError[] = [];
  smp.on("error", (e) => errors.push(e));
  return { smp, errors };
}

/** Settles with `p`'s outcome, or rejects naming `what` after `ms`. */
function within<T>(p: Promise<T>, ms: number, what: string): Promise<PromiseSettledResult<T>> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: did not settle within ${ms} ms`)), ms);
  });
  const settled = p.then(
    (value): PromiseSettledResult<T> => ({ status: "fulfilled", value }),
    (reason: unknown): PromiseSettledResult<T> => ({ status: "rejected", reason }),
  );
  return Promise.race([settled, late]).finally(() => clearTimeout(timer));
}

/** The worker thread running `shard` (piscina's one thread of that shard's pool). */
function threadOf(smp: Smp, shard: number): { terminate(): Promise<number> } {
  const pools = (smp as unknown as { pools: Piscina[] }).pools;
  const thread = pools[shard]!.threads[0];
  if (thread === undefined) throw new Error(`shard ${shard} has no thread`);
  return thread;
}

/** End `shard`'s thread and resolve once Smp has announced it ('error'). */
async function kill(smp: Smp, errors: ShardError[], shard: number, how: Kill): Promise<void> {
  const before = errors.length;
  if (how === "process.exit") await smp.submitTo(shard, "exitSoon");
  else await threadOf(smp, shard).terminate();
  await waitFor(() => errors.slice(before).some((e) => e.shard === shard), `the 'error' event for shard ${shard}`, 15_000);
}

const immediate = (): Promise<void> => new Promise((r) => setImmediate(r));
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe("a side-path call right after a death", () => {
  for (const how of ["process.exit", "terminate"] as const) {
    it(`${how}: shared memory, a 100 KB string and invokeOnAll of shared memory, from the main thread and from a shard, all settle; so does everything after; stop() finds nothing pending`, async () => {
      const { smp, errors } = await start(2, { stopTimeoutMs: 60_000 });
      const view = new Uint8Array(new SharedArrayBuffer(64));
      const text = "x".repeat(100_000);
      const sends: Array<{ what: string; send: () => Promise<unknown>; expected: unknown }> = [
        { what: "submitTo(1) of shared memory", send: () => smp.submitTo(1, "describe", view), expected: { view: 64, shared: true } },
        { what: "submitTo(1) of a 100 KB string", send: () => smp.submitTo(1, "describe", text), expected: { string: 100_000 } },
        {
          what: "invokeOnAll of shared memory",
          send: () => smp.invokeOnAll("describe", view),
          expected: [{ view: 64, shared: true }, { view: 64, shared: true }],
        },
        {
          what: "shard 0 -> shard 1 of shared memory",
          send: () => smp.submitTo(0, "relay", { target: 1, task: "describe", arg: view }),
          expected: { view: 64, shared: true },
        },
        {
          what: "shard 0 -> shard 1 of a 100 KB string",
          send: () => smp.submitTo(0, "relay", { target: 1, task: "describe", arg: text }),
          expected: { string: 100_000 },
        },
      ];
      // Right after the death is announced (this thread has forgotten the
      // old thread, the new one is not up), and a little later.
      for (const pause of [immediate, () => sleep(30)]) {
        for (const { what, send, expected } of sends) {
          const label = `${how}, ${what}, after ${pause === immediate ? "an immediate" : "30 ms"}`;
          const before = await smp.submitTo<number>(1, "incarnation");
          await kill(smp, errors, 1, how);
          await pause();
          const outcome = await within(send(), 20_000, label);
          // Made after the death was seen, it waits for the new thread and runs there.
          expect(outcome, label).toEqual({ status: "fulfilled", value: expected });
          const plain = await within(smp.submitTo<number>(1, "incarnation"), 20_000, `${label}: a plain call after it`);
          expect(plain.status, label).toBe("fulfilled");
          expect((plain as PromiseFulfilledResult<number>).value, `${label}: the new thread answers`).not.toBe(before);
          expect(await smp.submitTo(0, "echo", 7), label).toBe(7);
        }
      }
      const deaths = errors.length;
      await smp.stop({ timeoutMs: 5000 });
      // A call left waiting would make stop() report shard 1 after its timeout.
      expect(errors.slice(deaths)).toEqual([]);
      expect(smp.heap.check()).toEqual([]);
    }, 180_000);
  }
});

const NOT_STARTED = "ERR_SHARDHEAP_CALL_NOT_STARTED";
const MAY_HAVE_RUN = "ERR_SHARDHEAP_CALL_MAY_HAVE_RUN";

describe("a death mid-stream: at most once, and the code says whether a call started", () => {
  for (const how of ["process.exit", "terminate"] as const) {
    it(`${how} among 10,000 calls in flight, from the main thread and from another shard`, async () => {
      const { smp, errors } = await start(2, { stopTimeoutMs: 60_000 });
      const fromMain = 6000;
      const fromShard = 4000;
      const us = 20; // each task keeps shard 1 busy this long, so the stream is still flowing when it dies
      const log = new SharedArrayBuffer(4 * (fromMain + fromShard));
      const runs = new Int32Array(log);
      await smp.invokeOnAll("setLog", log);
      const deaths = errors.length;
      // Shard 0's calls to shard 1 (indices fromMain..), all in flight at once ...
      const shardOutcomes = smp.submitTo<string[]>(0, "markAll", { target: 1, task: "markSlowly", from: fromMain, count: fromShard, us });
      // ... and the main thread's; with process.exit, call 1500 ends the thread from inside its task.
      const exitAt = how === "process.exit" ? 1500 : -1;
      const calls = Array.from({ length: fromMain }, (_, i) => (i === exitAt ? smp.submitTo(1, "markThenExit", i) : smp.submitTo(1, "markSlowly", { i, us })));
      if (how === "terminate") {
        let ran = 0;
        await waitFor(() => (ran = runs.reduce((n, r) => n + r, 0)) > (fromMain + fromShard) / 4, "a quarter of the calls run", 30_000);
        await threadOf(smp, 1).terminate();
      }
      const settled = await within(Promise.allSettled(calls), 30_000, "the main thread's calls");
      const mainOutcomes = (settled as PromiseFulfilledResult<PromiseSettledResult<unknown>[]>).value.map((o) =>
        o.status === "fulfilled" ? "ok" : String((o.reason as ShardError).code),
      );
      const fromShard0 = await within(shardOutcomes, 30_000, "shard 0's calls");
      expect(fromShard0.status).toBe("fulfilled");
      const outcomes = [...mainOutcomes, ...(fromShard0 as PromiseFulfilledResult<string[]>).value];
      await waitFor(() => errors.length > deaths, "the 'error' event", 15_000);

      const tally = { ok: 0, [NOT_STARTED]: 0, [MAY_HAVE_RUN]: 0 } as Record<string, number>;
      const wrong: string[] = [];
      outcomes.forEach((outcome, i) => {
        tally[outcome] = (tally[outcome] ?? 0) + 1;
        const ran = Atomics.load(runs, i);
        if (ran > 1) wrong.push(`call ${i} ran ${ran} times`);
        if (outcome === "ok" && ran !== 1) wrong.push(`call ${i} resolved but ran ${ran} times`);
        if (outcome === NOT_STARTED && ran !== 0) wrong.push(`call ${i} was rejected as never started but ran`);
        if (outcome !== "ok" && outcome !== NOT_STARTED && outcome !== MAY_HAVE_RUN) wrong.push(`call ${i}: ${outcome}`);
      });
      expect(wrong.slice(0, 10), JSON.stringify(tally)).toEqual([]);
      // Not vacuous: the death cut the stream in the middle.
      expect(tally.ok, JSON.stringify(tally)).toBeGreaterThan(0);
      expect(tally[NOT_STARTED], JSON.stringify(tally)).toBeGreaterThan(0);
      if (how === "process.exit") expect(outcomes[exitAt]).toBe(MAY_HAVE_RUN); // it ran, and its answer never left

      // Retrying what never started runs each of them once, on the new thread.
      await smp.submitTo(1, "setLog", log);
      const retried = outcomes.flatMap((o, i) => (o === NOT_STARTED ? [i] : []));
      expect(await Promise.all(retried.map((i) => smp.submitTo(1, "mark", i)))).toEqual(retried);
      for (const i of retried) expect(Atomics.load(runs, i), `call ${i} retried`).toBe(1);
      expect(runs.every((r) => r <= 1)).toBe(true);
      const deathsNow = errors.length;
      await smp.stop({ timeoutMs: 5000 });
      expect(errors.slice(deathsNow)).toEqual([]);
      expect(smp.heap.check()).toEqual([]);
    }, 120_000);
  }
});
