/**
 * Shards that die while calls go to them (issue 18 items 3 and 5), on real
 * worker threads killed two ways: process.exit() inside a task, and
 * Worker.terminate() from outside. Every wait is bounded; every Smp is
 * stopped.
 *   3. a call by the side path (shared memory, a 100 KB string) made while
 *      the dead shard's new thread is on its way settles, and so does
 *      every later call; stop() has nothing left waiting;
 */
import { afterEach, describe, expect, it } from "vitest";
import type { Piscina } from "piscina";
import { ShardError, Smp } from "../dist/index.js";
import { waitFor } from "./helpers.js";

const tasks = new URL("./fixtures/death-tasks.mjs", import.meta.url);
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

describe("a side-path call right after a death (item 3)", () => {
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
