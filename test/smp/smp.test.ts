/**
 * Shards on real worker threads (Smp): cross-shard frees between shards,
 * the contended case, failure paths. Sizes and times are bounded for CI.
 */
import { describe, expect, it } from "vitest";
import { InvalidPointerError, InvalidValueError, OutOfMemoryError, ShardError, SharedHeap, Smp, serveAdmin } from "../../dist/index.js";
import { relative } from "node:path";
import { fileURLToPath } from "node:url";
import { TASKS, startSmp, waitFor } from "../helpers.js";

type Obj = { ptr: number; size: number };

describe("Smp", () => {
  it("runs tasks on the shard that owns them, with currentShard set", async () => {
    const smp = await startSmp({ shards: 3 });
    const who = await Promise.all([0, 1, 2].map((s) => smp.submitTo<{ id: number; same: boolean }>(s, "whoAmI")));
    expect(who.map((w) => w.id)).toEqual([0, 1, 2]);
    expect(who.every((w) => w.same)).toBe(true);
    expect(await smp.submitTo(1, "timerFires", 20)).toBe("fired");
  });

  it("cross-shard frees: patterns intact, nothing handed out twice, counters balance, memory back after stop", async () => {
    // heap.check() below runs while the shards are up: no idle trim may run
    // under it (a check during a trim reads half-moved lists; seen in CI).
    const smp = await startSmp({ shards: 3, idleTrimMs: 0 });
    const initial = [0, 1, 2].map((s) => smp.stats(s).freeMemory);
    const rounds = 4;
    const sent = [0, 0, 0];
    for (let round = 0; round < rounds; round++) {
      const batches = await Promise.all([0, 1, 2].map((s) => smp.submitTo<Obj[]>(s, "allocPatterned", { count: 1500, seed: round * 3 + s })));
      const all = batches.flat().map((o) => o.ptr);
      expect(new Set(all).size, "a pointer handed out twice while live").toBe(all.length);
      // Each shard's objects go to the next shard, which verifies and frees them.
      const bad = await Promise.all(batches.map((objs, s) => smp.submitTo<number>((s + 1) % 3, "verifyAndFree", objs)));
      expect(bad).toEqual([0, 0, 0]);
      batches.forEach((objs, s) => (sent[(s + 1) % 3]! += objs.length));
    }
    // The doorbell brings every remote free back without anyone asking.
    await waitFor(() => [0, 1, 2].every((s) => smp.stats(s).liveObjects === 0), "every remote free drained");
    for (let s = 0; s < 3; s++) {
      const st = smp.stats(s);
      expect(st.crossShardFrees).toBe(sent[s]);
      expect(st.mallocs - st.frees).toBe(st.liveObjects);
      expect(st.mallocs).toBe(rounds * 1500);
    }
    expect(smp.heap.check()).toEqual([]);
    await smp.stop();
    for (let s = 0; s < 3; s++) {
      smp.heap.shard(s).trim();
      expect(smp.stats(s).freeMemory).toBe(initial[s]);
    }
    expect(smp.heap.check()).toEqual([]);
  });

  it("contended: every other shard frees into shard 0 at once", async () => {
    const smp = await startSmp({ shards: 4, memoryPerShard: "64MiB" });
    const perShard = 100_000;
    // Shard 0 allocates 300k objects; shards 1..3 free a third each, concurrently.
    const chunks: number[][] = [];
    for (let i = 0; i < 3; i++) chunks.push(await smp.submitTo<number[]>(0, "allocMany", { count: perShard, size: 48 }));
    const all = chunks.flat();
    expect(new Set(all).size).toBe(all.length);
    const freed = await Promise.all([1, 2, 3].map((s, i) => smp.submitTo<number>(s, "freeAll", chunks[i])));
    expect(freed).toEqual([perShard, perShard, perShard]);
    await waitFor(() => smp.stats(0).liveObjects === 0, "shard 0 drained every remote free");
    expect(smp.stats(0).frees).toBe(3 * perShard);
    expect([1, 2, 3].map((s) => smp.stats(s).crossShardFrees)).toEqual([perShard, perShard, perShard]);
    await smp.stop();
    expect(smp.heap.check()).toEqual([]);
  });

  it("stop() drains frees that are still in flight", async () => {
    const smp = await startSmp({ shards: 2 });
    const ptrs = await smp.submitTo<number[]>(0, "allocMany", { count: 2000, size: 100 });
    await smp.submitTo(1, "freeAll", ptrs);
    await smp.stop();
    expect(smp.stats(0).liveObjects).toBe(0);
    expect(smp.heap.check()).toEqual([]);
    await expect(smp.submitTo(0, "whoAmI")).rejects.toThrow(/has stopped/);
    await smp.stop(); // idempotent
  });

  it("a remote free reaches an idle owner through the doorbell well under 100 ms", async () => {
    const smp = await startSmp({ shards: 2 });
    const [ptr] = await smp.submitTo<number[]>(0, "allocMany", { count: 1, size: 64 });
    const t0 = performance.now();
    await smp.submitTo(1, "freeAll", [ptr]);
    // Measured at ~15 us (bench/cross-shard.ts); the bound here is generous
    // because CI machines are loaded, and no one drains but the doorbell.
    await waitFor(() => smp.stats(0).liveObjects === 0, "the remote free", 2000);
    expect(performance.now() - t0).toBeLessThan(2000);
  });
});

describe("Smp errors", () => {
  it("a task's error comes back with its name, message and stack", async () => {
    const smp = await startSmp({ shards: 1 });
    const error = await smp.submitTo(0, "fail", "bad thing").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RangeError);
    expect((error as Error).message).toBe("bad thing");
    expect((error as Error).stack).toMatch(/shard-tasks\.mjs/);
    expect((error as { shard: number }).shard).toBe(0);
  });

  it("shardheap errors keep their class across the thread boundary", async () => {
    const smp = await startSmp({ shards: 2, memoryPerShard: "1MiB", idleTrimMs: 0 }); // check() below, shards up
    const e1 = await smp.submitTo(0, "badFree", 12345).catch((e: unknown) => e);
    expect(e1).toBeInstanceOf(InvalidPointerError);
    const e2 = await smp.submitTo(1, "exhaust").catch((e: unknown) => e);
    expect(e2).toBeInstanceOf(OutOfMemoryError);
    expect((e2 as OutOfMemoryError).report).toMatch(/^Used memory:/m);
    // The heap is still healthy and the shard still works.
    expect(await smp.submitTo<{ id: number }>(1, "whoAmI")).toMatchObject({ id: 1 });
    expect(smp.heap.check()).toEqual([]);
  });

  it("an unknown task is a clear error", async () => {
    const smp = await startSmp({ shards: 1 });
    await expect(smp.submitTo(0, "noSuchTask")).rejects.toThrow(/exports no function named "noSuchTask"/);
  });

  it("a task on an Smp started without a module says that no module was given", async () => {
    const smp = await startSmp({ shards: 1, module: undefined });
    const e = await smp.submitTo(0, "anything").catch((x: unknown) => x);
    expect(e).toBeInstanceOf(TypeError);
    expect((e as Error).message).toBe('shard 0: no task "anything": no module was given to Smp.start (its { module } option names the file whose exported functions are the tasks)');
  });

  it("an option key Smp.start or stop() does not know is refused, naming it and the key it most likely meant", async () => {
    const refusal = async (p: Promise<unknown>): Promise<InvalidValueError> => {
      const e = await p.then(() => undefined, (x: unknown) => x);
      expect(e).toBeInstanceOf(InvalidValueError);
      return e as InvalidValueError;
    };
    const typo = await refusal(Smp.start({ shards: 1, memoryPerShrad: "1MiB" } as Parameters<typeof Smp.start>[0]));
    expect(typo.field).toBe("options.memoryPerShrad");
    expect(typo.message).toBe(
      "options.memoryPerShrad is not an option (did you mean memoryPerShard?); the options are shards, memoryPerShard, heapprof, jsHeapprof, heapprofSites, module, loadTimeoutMs, stopTimeoutMs, idleTrimMs, queueBytes, maxPendingCalls, orphans, execArgv, mainShard, debugPointers, memoryPressure, timelineIntervalMs",
    );
    expect((await refusal(Smp.start({ Shards: 1 } as Parameters<typeof Smp.start>[0]))).message).toMatch(/^options.Shards is not an option \(did you mean shards\?\);/);
    expect((await refusal(Smp.start({ shards: 1, colour: "red" } as Parameters<typeof Smp.start>[0]))).message).toMatch(/^options.colour is not an option; the options are /);
    const smp = await startSmp({ shards: 1, memoryPerShard: "1MiB" });
    const stopTypo = await refusal(smp.stop({ timeout: 10 } as Parameters<Smp["stop"]>[0]));
    expect(stopTypo.message).toBe("stop: options.timeout is not an option (did you mean timeoutMs?); the options are timeoutMs");
    await smp.stop(); // the refused stop() started nothing
  });

  it("so is one that SharedHeap.create, heap.check, smp.freeOrphans or serveAdmin does not know", async () => {
    const refused = (f: () => unknown): InvalidValueError => {
      try {
        f();
      } catch (e) {
        expect(e).toBeInstanceOf(InvalidValueError);
        return e as InvalidValueError;
      }
      throw new Error("not refused");
    };
    expect(refused(() => SharedHeap.create({ shards: 1, shardByte: "1MiB" } as unknown as Parameters<typeof SharedHeap.create>[0])).message).toMatch(
      /^SharedHeap.create: options.shardByte is not an option \(did you mean shardBytes\?\)/,
    );
    const heap = SharedHeap.create({ shards: 1, shardBytes: "1MiB" });
    expect(refused(() => heap.check({ timeout: 5 } as Parameters<SharedHeap["check"]>[0])).message).toMatch(/^check: options.timeout is not an option \(did you mean timeoutMs\?\)/);
    const smp = await startSmp({ shards: 1, memoryPerShard: "1MiB" });
    await expect(smp.freeOrphans(0, { kep: [] } as Parameters<Smp["freeOrphans"]>[1])).rejects.toThrow(/^freeOrphans: options.kep is not an option \(did you mean keep\?\)/);
    await expect(serveAdmin(smp, { prot: 0 } as Parameters<typeof serveAdmin>[1])).rejects.toThrow(/^serveAdmin: options.prot is not an option \(did you mean port\?\)/);
  });

  it("bad arguments are rejected before anything starts", async () => {
    await expect(Smp.start({ shards: 0 })).rejects.toThrow(RangeError);
    await expect(Smp.start({ shards: 1, memoryPerShard: "lots" })).rejects.toThrow(/memoryPerShard/);
    const smp = await startSmp({ shards: 1 });
    await expect(smp.submitTo(5, "whoAmI")).rejects.toThrow(RangeError);
    await expect(smp.submitTo(0, "")).rejects.toThrow(TypeError);
  });

  it("a module given as a relative path is found from the working directory", async () => {
    const path = relative(process.cwd(), fileURLToPath(TASKS)); // test/fixtures/shard-tasks.mjs
    expect(path).not.toMatch(/^(\/|\.\.)/);
    const smp = await startSmp({ shards: 1, module: path });
    expect(await smp.submitTo<{ id: number }>(0, "whoAmI")).toMatchObject({ id: 0 });
    expect(smp.options.module).toBe(TASKS.href);
  });

  it("a syntax error in the module fails start() naming the file, line and column", async () => {
    const module = new URL("../fixtures/syntax-error.mjs", import.meta.url);
    const error = await Smp.start({ shards: 1, memoryPerShard: "1MiB", module }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ShardError);
    const file = fileURLToPath(module).replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    expect((error as ShardError).message).toMatch(new RegExp(`^shard 0 failed to start: ${file}:5:\\d+: Unexpected token '\\*'$`));
    expect(((error as ShardError).cause as Error).stack).toContain("return 1 +* 2;");
  });

  it("start() rejects, naming the shard, when the module fails to load", async () => {
    const error = await Smp.start({ shards: 2, memoryPerShard: "1MiB", module: new URL("../fixtures/throws-at-load.mjs", import.meta.url) }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ShardError);
    expect((error as ShardError).message).toMatch(/shard \d failed to start: .*refuses to load/);
  });

  it("a crash in a task's timer is one 'error' event, with the real message, and the shard comes back", async () => {
    const smp = await startSmp({ shards: 2 });
    const errors: ShardError[] = [];
    smp.on("error", (e) => errors.push(e));
    expect(await smp.submitTo(1, "throwInTimer", "boom in a timer")).toBe("scheduled");
    await waitFor(() => errors.length > 0, "the 'error' event");
    // The replacement thread answers: anything else piscina had to say about
    // the crash was said before (it reports a crash in one call).
    expect(await smp.submitTo<{ id: number }>(1, "whoAmI")).toMatchObject({ id: 1 });
    expect(errors.map((e) => [e.shard, e.message])).toEqual([[1, "shard 1 failed: boom in a timer"]]);
  });

  it("a crashed shard rejects its pending call, fires 'error', and the others keep working", async () => {
    const smp = await startSmp({ shards: 2 });
    const errors: ShardError[] = [];
    smp.on("error", (e) => errors.push(e));
    await expect(smp.submitTo(1, "crash")).rejects.toThrow(ShardError);
    await waitFor(() => errors.length > 0, "the 'error' event");
    expect(await smp.submitTo<{ id: number }>(0, "whoAmI")).toMatchObject({ id: 0 });
    expect(await smp.submitTo<{ id: number }>(1, "whoAmI")).toMatchObject({ id: 1 }); // replaced
    expect(errors.map((e) => [e.shard, e.message])).toEqual([[1, "shard 1 failed: its worker thread exited"]]);
    await smp.stop();
  });
});
