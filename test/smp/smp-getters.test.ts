/**
 * A value is read once, as structuredClone reads it:
 * each getter in a call's argument or a task's result runs exactly as many
 * times as structuredClone runs it, whatever path the value takes through
 * the encoder (wire-codec.ts: the plain encoding, the fallback to V8's
 * serializer for a Map, a Date, a class instance or an object met twice,
 * a value larger than the ring's room, the side path for shared memory
 * and for a 100 KB string), and a getter that itself calls submitTo sends
 * its call once. On real threads (Smp). Every Smp is stopped.
 */
import { afterEach, describe, expect, it } from "vitest";
import { Smp } from "../../dist/index.js";
// @ts-expect-error a plain .mjs fixture, shared with the shards
import { cloneReads, KINDS, makeValue } from "../fixtures/getter-values.mjs";

type Counter = { n: number };
const make = makeValue as (kind: string, counter: Counter, onGet?: () => void) => unknown;
const reads = cloneReads as (kind: string) => number;
const kinds = KINDS as string[];

const tasks = new URL("../fixtures/getter-tasks.mjs", import.meta.url);
let running: Smp[] = [];
afterEach(async () => {
  await Promise.all(running.map((s) => s.stop({ timeoutMs: 2000 })));
  running = [];
});

async function start(extra: Partial<Parameters<typeof Smp.start>[0]> = {}): Promise<Smp> {
  const smp = await Smp.start({ shards: 2, memoryPerShard: "2MiB", module: tasks, ...extra });
  running.push(smp);
  return smp;
}

/** What arrives must be what structuredClone makes of the value, identity included. */
function expectDelivered(kind: string, back: unknown): void {
  expect(back, kind).toEqual(structuredClone(make(kind, { n: 0 })));
  const b = back as Record<string, unknown>;
  if (kind === "repeated") expect(b.a, kind).toBe(b.b);
  if (kind === "cycle") expect(b.self, kind).toBe(b);
  if (kind.startsWith("shared")) expect((b.view as Uint8Array).buffer, kind).toBeInstanceOf(SharedArrayBuffer);
}

describe("getters run once per call", () => {
  it("an argument, on every path: as many getter runs as structuredClone makes", async () => {
    const smp = await start();
    for (const kind of kinds) {
      const counter = { n: 0 };
      const back = await smp.submitTo(0, "echo", make(kind, counter));
      expect(counter.n, kind).toBe(reads(kind));
      expectDelivered(kind, back);
    }
  });

  it("a value larger than the ring's room (a 4 KiB ring, a burst of 1.5 KB values): each getter once", async () => {
    const smp = await start({ queueBytes: 4096 });
    const counters = Array.from({ length: 12 }, () => ({ n: 0 }));
    const backs = await Promise.all(counters.map((c) => smp.submitTo(0, "echo", make("room", c))));
    expect(counters.map((c) => c.n)).toEqual(counters.map(() => reads("room")));
    for (const back of backs) expectDelivered("room", back);
  });

  it("a task's result, on every path: as many getter runs as structuredClone makes", async () => {
    const smp = await start();
    for (const kind of kinds) {
      const back = await smp.submitTo(1, "getterResult", { kind });
      const { reads: made, expected } = await smp.submitTo<{ reads: number; expected: number }>(1, "resultReads", kind);
      expect(made, kind).toBe(expected);
      expectDelivered(kind, back);
    }
  });

  it("a getter that calls submitTo sends its call once, to the same shard or another, from the main thread and from a shard", async () => {
    const smp = await start();
    for (const kind of [...kinds, "room"]) {
      for (const target of [0, 1]) {
        const label = `${kind}, argument to shard 0, the getter calling shard ${target}`;
        const counter = { n: 0 };
        const back = await smp.submitTo(0, "echo", make(kind, counter, () => void smp.submitTo(target, "bump")));
        expectDelivered(kind, back);
        // The bumps were sent before the echo (from inside its argument's reading): they have run.
        expect(await smp.submitTo(target, "bumped"), label).toBe(reads(kind));
        expect(counter.n, label).toBe(reads(kind));
      }
      for (const nestedTo of [0, 1]) {
        const label = `${kind}, result of shard 1, the getter calling shard ${nestedTo}`;
        const back = await smp.submitTo(1, "getterResult", { kind, nestedTo });
        expectDelivered(kind, back);
        const { reads: made, expected } = await smp.submitTo<{ reads: number; expected: number }>(1, "resultReads", kind);
        expect(made, label).toBe(expected);
        // Shard 1 sent them before its answer; asked from shard 1 too, the count comes after them (one sender, one order).
        const bumps = await smp.submitTo<number>(1, "bumpedOn", nestedTo);
        expect(bumps, label).toBe(expected);
      }
    }
  });
});
