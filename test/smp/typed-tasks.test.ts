/**
 * Typed tasks at run time: smp.tasks() and currentShard.tasks()
 * are submitTo and invokeOnAll under other names, on real shards: results,
 * shard order, errors, unknown names, checks at the call, the same object
 * every time, not a thenable, after stop(). What the types refuse is
 * test/typed-tasks-compile.test.ts's.
 */
import { describe, expect, it } from "vitest";
import { ShardError, type ShardContext, type Tasks } from "../../dist/index.js";
import { startSmp } from "../helpers.js";

const MODULE = new URL("../fixtures/typed-tasks.mjs", import.meta.url);

/** test/fixtures/typed-tasks.mjs, as its types would say (the fixture is JavaScript). */
interface KvTasks {
  put(entry: { key: string; value: string }, shard: ShardContext): number | Promise<number>;
  get(key: string, shard: ShardContext): Promise<string | null>;
  count(): number;
  total(_: undefined, shard: ShardContext): Promise<number>;
  same(_: undefined, shard: ShardContext): boolean;
  fail(message: string): never;
  notATask: number;
}

describe("smp.tasks()", () => {
  it("calls the module's exports on a shard and on every shard, as submitTo and invokeOnAll do", async () => {
    const smp = await startSmp({ shards: 3, module: MODULE });
    const kv = smp.tasks<KvTasks>();
    const keys = Array.from({ length: 30 }, (_, i) => `key-${i}`);
    // Any shard takes a put; the key lands on its owner, whichever shard was asked.
    const owners = await Promise.all(keys.map((key, i) => kv.put(i % 3, { key, value: key.toUpperCase() })));
    expect(new Set(owners).size).toBe(3);
    for (const [i, key] of keys.entries()) {
      expect(await kv.get((i + 1) % 3, key)).toBe(key.toUpperCase());
      expect(await kv.get(i % 3, key)).toBe(await smp.submitTo(i % 3, "get", key));
    }
    expect(await kv.get(0, "missing")).toBeNull();
    const counts = await kv.count.onAll();
    expect(counts).toEqual(await smp.invokeOnAll("count"));
    expect(counts.reduce((a, b) => a + b, 0)).toBe(30);
    expect(counts.map((_, shard) => owners.filter((o) => o === shard).length)).toEqual(counts);
    expect(await kv.total(2)).toBe(30); // onAll from inside a shard
    expect(await kv.total.onAll()).toEqual([30, 30, 30]);
  });

  it("is one object, with one function per name, and no thenable: await gives it back", async () => {
    const smp = await startSmp({ shards: 2, module: MODULE });
    const kv = smp.tasks<KvTasks>();
    expect(smp.tasks()).toBe(kv);
    expect(kv.put).toBe(kv.put);
    expect(await Promise.resolve(kv)).toBe(kv);
    expect((kv as unknown as Record<string, unknown>)["then"]).toBeUndefined();
    expect((kv as unknown as Record<symbol, unknown>)[Symbol.toPrimitive]).toBeUndefined();
    expect(await kv.same.onAll()).toEqual([true, true]); // in a shard too: one object, from the top level on
  });

  it("rejects as submitTo rejects: the task's error, an unknown name, an export that is no function, a bad shard, after stop", async () => {
    const smp = await startSmp({ shards: 2, module: MODULE });
    const kv = smp.tasks<KvTasks>();
    await expect(kv.fail(1, "no such thing")).rejects.toMatchObject({ name: "RangeError", message: "no such thing", shard: 1 });
    await expect(kv.fail.onAll("every shard")).rejects.toBeInstanceOf(RangeError);
    const untyped = smp.tasks<Record<string, (arg?: unknown) => unknown>>();
    const unknownName = await untyped["gett"]!(0).catch((e: unknown) => e);
    expect(unknownName).toEqual(await smp.submitTo(0, "gett").catch((e: unknown) => e));
    expect(String(unknownName)).toMatch(/"gett"/);
    await expect(untyped["notATask"]!(1)).rejects.toThrow(/"notATask"/);
    await expect(kv.count(2)).rejects.toThrow(RangeError); // shards are 0 and 1: before anything is sent
    await expect(kv.count(0.5)).rejects.toThrow(/shard must be an integer from 0 to 1, got 0.5/);
    await smp.stop();
    await expect(kv.count(0)).rejects.toBeInstanceOf(ShardError);
    await expect(kv.count.onAll()).rejects.toThrow(/has stopped/);
  });

  it("types: a module's task exports, their argument and result; other exports left out", () => {
    // Compile-time only: a wrong use here would fail `tsc -p tsconfig.test.json`.
    type Kv = Tasks<KvTasks>;
    const names: Array<keyof Kv> = ["put", "get", "count", "total", "same", "fail"];
    // @ts-expect-error notATask is a number, no task
    const notATask: keyof Kv = "notATask";
    expect(names.length + notATask.length).toBe(14);
  });
});
