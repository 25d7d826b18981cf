/**
 * A dead shard's memory comes back (orphans.ts, Smp's 'replaced' event and
 * freeOrphans): its new thread knows what the dead one left allocated,
 * frees it on request but for what other shards still use, and never
 * frees what was freed meanwhile and handed out again.
 */
import { describe, expect, it } from "vitest";
import { InvalidPointerError, type ShardReplacement, type Smp } from "../../dist/index.js";
import { startSmp, waitFor } from "../helpers.js";

const TASKS = new URL("../fixtures/orphan-tasks.mjs", import.meta.url);

/** Shard 1 hoards 50 objects of 200 B (the 224-byte class) and hands 10 to shard 0, then dies; resolves with the 'replaced' event. */
async function killShardOne(smp: Smp): Promise<{ replacement: ShardReplacement; handed: number[] }> {
  const handed = await smp.submitTo<number[]>(1, "hoard", { count: 50, handed: 10, size: 200 });
  await smp.submitTo(0, "hold", handed);
  smp.on("error", () => undefined);
  // Not events.once: it would reject on the 'error' event the death fires.
  const replaced = new Promise<ShardReplacement>((resolve) => smp.once("replaced", resolve));
  await expect(smp.submitTo(1, "crash")).rejects.toThrow(/shard 1/);
  const replacement = await withTimeout(replaced, 20_000, "the 'replaced' event");
  return { replacement, handed };
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([p, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`waited ${ms} ms for ${what}`)), ms)))]).finally(() => clearTimeout(timer));
}

describe("a dead shard's memory", () => {
  it("is counted when the new thread takes over, and freed but for what another shard still holds", { timeout: 60_000 }, async () => {
    const smp = await startSmp({ shards: 2, module: TASKS });
    const { replacement, handed } = await killShardOne(smp);
    expect(replacement).toEqual({ shard: 1, orphans: { objects: 60, bytes: 60 * 224 }, freed: false });
    expect(smp.stats(1).liveObjects, "the dead thread's objects are still allocated").toBe(60);
    expect(await smp.submitTo(1, "hoardIntact"), "the new thread starts with fresh module state").toEqual({ objects: 0, bad: 0 });
    // Shard 0 still uses the 10 it was handed: ask it, and keep them.
    const keep = await smp.submitTo<number[]>(0, "heldPointers");
    expect(keep).toEqual(handed);
    expect(await smp.freeOrphans(1, { keep })).toEqual({ objects: 50, bytes: 50 * 224, kept: 10 });
    expect(smp.stats(1).liveObjects).toBe(10);
    expect(await smp.freeOrphans(1), "nothing is left to free twice").toEqual({ objects: 0, bytes: 0, kept: 0 });
    // The kept ones are ordinary objects now: shard 0 frees them.
    expect(await smp.submitTo(0, "freeHeld", { count: 10 })).toEqual(Array(10).fill("freed"));
    await smp.stop();
    expect(smp.stats(1).liveObjects).toBe(0);
    expect(smp.stats().liveObjects).toBe(0);
    expect(smp.heap.check()).toEqual([]);
  });

  it("orphans freed meanwhile, their memory handed out again, are never freed by freeOrphans", { timeout: 60_000 }, async () => {
    const smp = await startSmp({ shards: 2, module: TASKS });
    const { handed } = await killShardOne(smp);
    // Shard 0 frees 3 of the 10 (they reach shard 1's inbox; its new thread
    // drains them), and hands 2 back to shard 1, which frees them itself ...
    expect(await smp.submitTo(0, "freeHeld", { count: 3 })).toEqual(Array(3).fill("freed"));
    const back = (await smp.submitTo<number[]>(0, "heldPointers")).slice(0, 2);
    await smp.submitTo(0, "hold", (await smp.submitTo<number[]>(0, "heldPointers")).slice(2));
    expect(await smp.submitTo(1, "freeThese", back)).toBe(2);
    await waitFor(() => smp.stats(1).liveObjects === 55, "shard 1 drained the 3 remote frees");
    // ... and the new thread allocates over them (its pool hands out what it freed last first):
    // 200 objects of the same size, hoarded.
    const reused = await smp.submitTo<number[]>(1, "hoard", { count: 200, handed: 0, size: 200, report: true });
    expect(reused.filter((p) => handed.slice(0, 5).includes(p)).length, "the freed orphans' memory holds new objects").toBeGreaterThan(0);
    // The 5 shard 0 still holds are kept; the 5 it freed are no orphans any more, whatever lives there now.
    const keep = await smp.submitTo<number[]>(0, "heldPointers");
    expect(keep).toEqual(handed.slice(5));
    expect(await smp.freeOrphans(1, { keep })).toEqual({ objects: 50, bytes: 50 * 224, kept: 5 });
    expect(await smp.submitTo(1, "hoardIntact")).toEqual({ objects: 200, bad: 0 });
    expect(smp.stats(1).liveObjects).toBe(205);
    expect(smp.heap.check()).toEqual([]);
  });

  it("with orphans: \"free\" the new thread frees them before its first call; a stale pointer's free is refused, never harmful", { timeout: 60_000 }, async () => {
    const smp = await startSmp({ shards: 2, module: TASKS, orphans: "free" });
    const { replacement } = await killShardOne(smp);
    expect(replacement).toEqual({ shard: 1, orphans: { objects: 60, bytes: 60 * 224 }, freed: true });
    expect(await smp.submitTo(1, "liveObjects")).toBe(0);
    expect(await smp.submitTo(0, "freeHeld", { count: 10 })).toEqual(Array(10).fill(InvalidPointerError.name));
    expect(smp.heap.check()).toEqual([]);
  });

  it("kept with nobody listening, they are not kept silently: a process warning says how to free them", { timeout: 60_000 }, async () => {
    const smp = await startSmp({ shards: 2, module: TASKS });
    await smp.submitTo<number[]>(1, "hoard", { count: 7, handed: 0, size: 64 });
    smp.on("error", () => undefined);
    const warned = new Promise<Error>((resolve) => {
      const listener = (w: Error & { code?: string }): void => {
        if (w.code !== "SHARDHEAP_ORPHANS") return;
        process.off("warning", listener);
        resolve(w);
      };
      process.on("warning", listener);
    });
    await expect(smp.submitTo(1, "crash")).rejects.toThrow(/shard 1/);
    const warning = await withTimeout(warned, 20_000, "the warning");
    expect(warning.message).toBe('shard 1 runs on a new thread; its dead thread left 7 objects (448B) allocated: smp.freeOrphans(1, { keep }) frees them, or Smp.start({ orphans: "free" }) at every replacement');
    expect(await smp.freeOrphans(1)).toEqual({ objects: 7, bytes: 448, kept: 0 });
  });

  it("bad arguments are refused before anything is freed", async () => {
    const smp = await startSmp({ shards: 2, module: TASKS });
    await expect(smp.freeOrphans(2)).rejects.toThrow(RangeError);
    await expect(smp.freeOrphans(0, { keep: ["8"] as unknown as number[] })).rejects.toThrow(TypeError);
    await expect(smp.freeOrphans(0, { keep: 5 as unknown as number[] })).rejects.toThrow(TypeError);
    await expect(Promise.resolve().then(() => startSmp({ shards: 1, orphans: "drop" as "free" }))).rejects.toThrow(/options.orphans must be "keep" or "free"/);
    expect(await smp.freeOrphans(0)).toEqual({ objects: 0, bytes: 0, kept: 0 });
  });
});
