/**
 * The main thread's own shard (Smp.start({ mainShard: true })),
 * on real worker threads: the main thread allocates in its region, shards
 * read and free its objects (cross-shard frees its doorbell drains), the
 * counters balance, stop() leaves exactly what was left live, ownership
 * holds, profiling reaches it, and a program using it exits as before.
 */
import { execFile } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { HeapOwnershipError, InvalidValueError, ShardError, Smp, readHeapImage } from "../../dist/index.js";
import { fillSmpOptions } from "../../src/smp/options.js";
import { TASKS, siteNamed, startSmp, tempDir, waitFor } from "../helpers.js";

const run = promisify(execFile);

type Obj = { ptr: number; size: number };

/** `count` objects in the main thread's region, each filled with its pattern ((ptr >>> 3) + k). */
function allocPatterned(smp: Smp, count: number): Obj[] {
  return Array.from({ length: count }, (_, i) => {
    const size = 8 + ((i * 104729) % 700);
    const ptr = smp.memory.malloc(size);
    const bytes = smp.heap.objectBytes(ptr, size);
    for (let k = 0; k < size; k++) bytes[k] = (((ptr >>> 3) & 255) + k) & 255;
    return { ptr, size };
  });
}

describe("the main thread's shard", () => {
  it("the main thread allocates; shards read its objects and free them; its doorbell drains them without another malloc", async () => {
    // No idle trim: heap.check() runs while the shards are up.
    const smp = await startSmp({ shards: 2, mainShard: true, module: TASKS, idleTrimMs: 0 });
    expect(smp.shards).toBe(2);
    expect(smp.mainShard).toBe(2);
    expect(smp.heap.shards).toBe(3);
    expect(smp.memory.id).toBe(2);
    expect(smp.memory).toBe(smp.memory);
    expect(smp.stats(2).totalMemory).toBe(smp.stats(0).totalMemory); // the same size as the others
    const objects = allocPatterned(smp, 400);
    expect(objects.every((o) => smp.heap.ownerOf(o.ptr) === 2)).toBe(true);
    expect(await Promise.all([0, 1].map((s) => smp.submitTo(s, "verify", objects)))).toEqual([0, 0]);
    const ptrs = objects.map((o) => o.ptr);
    // Half through heap.free on shard 0, half through shard 1's allocator: both are pushes onto the main region's inbox.
    await Promise.all([
      smp.submitTo(0, "freeVia", { ptrs: ptrs.slice(0, 200), via: "heap" }),
      smp.submitTo(1, "freeVia", { ptrs: ptrs.slice(200), via: "memory" }),
    ]);
    // Nothing on this thread allocates from here on: only the doorbell can drain the inbox.
    await waitFor(() => smp.stats(2).liveObjects === 0, "the main region's inbox drained by its doorbell", 10_000);
    const main = smp.stats(2);
    expect(main).toMatchObject({ mallocs: 400, frees: 400, liveObjects: 0, crossShardFrees: 0, failedAllocations: 0 });
    expect(smp.stats(0).crossShardFrees + smp.stats(1).crossShardFrees).toBe(400);
    expect(smp.stats().mallocs).toBe(smp.stats().frees + smp.stats().liveObjects);
    expect(smp.heap.check()).toEqual([]);
  });

  it("stop() drains the main region last: it then holds exactly what was left live, and stays this thread's", async () => {
    const smp = await startSmp({ shards: 2, mainShard: true, module: TASKS });
    const ptrs = allocPatterned(smp, 300).map((o) => o.ptr);
    const kept = ptrs.slice(0, 17);
    // Freed by the shards right before stop: some still in the inbox, or in a shard's outbox, when stop begins.
    const freeing = Promise.all([smp.submitTo(0, "freeVia", { ptrs: ptrs.slice(17, 160), via: "memory" }), smp.submitTo(1, "freeVia", { ptrs: ptrs.slice(160), via: "heap" })]);
    await smp.stop();
    await freeing;
    expect(smp.stats(2)).toMatchObject({ mallocs: 300, frees: 283, liveObjects: 17 });
    expect(smp.stats(0).liveObjects + smp.stats(1).liveObjects).toBe(0);
    expect(smp.heap.check()).toEqual([]);
    // Still the main thread's allocator after stop.
    for (const p of kept) smp.memory.free(p);
    const p = smp.memory.malloc(64);
    smp.memory.free(p);
    expect(smp.stats(2).liveObjects).toBe(0);
    expect(smp.heap.check()).toEqual([]);
  });

  it("the main thread's frees of a shard's objects are cross-shard frees, counted in its region", async () => {
    const smp = await startSmp({ shards: 2, mainShard: true, module: TASKS });
    const ptrs = await smp.submitTo<number[]>(0, "allocMany", { count: 100, size: 48 });
    for (const p of ptrs.slice(0, 50)) smp.heap.free(p);
    for (const p of ptrs.slice(50)) smp.memory.free(p);
    expect(smp.stats(2).crossShardFrees).toBe(100);
    await waitFor(() => smp.stats(0).liveObjects === 0, "shard 0 drained the main thread's frees");
    expect(smp.stats(0)).toMatchObject({ mallocs: 100, frees: 100 });
  });

  it("a shard reads the main region but cannot allocate in it or drain it: HeapOwnershipError, nothing changed", async () => {
    const smp = await startSmp({ shards: 1, mainShard: true, module: TASKS });
    const [obj] = allocPatterned(smp, 1);
    const before = smp.stats(1);
    const refused = smp.submitTo(0, "mallocIn", { id: 1, size: 8 });
    await expect(refused).rejects.toBeInstanceOf(HeapOwnershipError);
    await expect(refused).rejects.toThrow(/shard 1 .*belongs to the main thread/);
    await expect(smp.submitTo(0, "drainIn", 1)).rejects.toBeInstanceOf(HeapOwnershipError);
    expect(smp.stats(1)).toEqual(before);
    expect(await smp.submitTo(0, "verify", [obj])).toBe(0);
    smp.memory.free(obj!.ptr);
  });

  it("without mainShard: smp.memory throws a ShardError saying how to get one; the heap has the workers' regions only", async () => {
    const smp = await startSmp({ shards: 1 });
    expect(smp.mainShard).toBeUndefined();
    expect(smp.heap.shards).toBe(1);
    let thrown: unknown;
    try {
      void smp.memory;
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toBeInstanceOf(ShardError);
    expect(thrown).toMatchObject({ code: "ERR_SHARDHEAP_NO_MAIN_SHARD", shard: 1 });
    expect((thrown as Error).message).toContain("Smp.start({ mainShard: true })");
  });

  it("no task runs on the main thread: submitTo(shards) is a RangeError that says so; invokeOnAll runs on the workers", async () => {
    const smp = await startSmp({ shards: 2, mainShard: true, module: TASKS });
    await expect(smp.submitTo(2, "sampleRate")).rejects.toThrow(RangeError);
    await expect(smp.submitTo(2, "sampleRate")).rejects.toThrow("submitTo(2, \"sampleRate\"): shard must be an integer from 0 to 1, got 2 (2 is the main thread, which runs no tasks)");
    expect(await smp.invokeOnAll("sampleRate")).toEqual([0, 0]);
    await expect(smp.freeOrphans(2)).rejects.toThrow(RangeError);
  });

  it("profiling: the heapprof option, setHeapProfiling for its id and for all, merged profiles and heap images include it", async () => {
    const smp = await startSmp({ shards: 1, mainShard: true, module: TASKS, heapprof: true });
    expect(smp.memory.heapProfilingSampleRate()).toBe(1);
    function allocateOnMain(): number[] {
      const out: number[] = [];
      for (let i = 0; i < 10; i++) out.push(smp.memory.malloc(256));
      return out;
    }
    const ptrs = allocateOnMain();
    expect(siteNamed(smp.heapProfile(1), "allocateOnMain")).toMatchObject({ count: 10, size: 10 * smp.memory.objectSize(ptrs[0]!) });
    expect(siteNamed(smp.heapProfile(), "allocateOnMain")).toMatchObject({ count: 10 });
    expect(smp.heapProfile(0).sites.some((s) => s.frames[0]?.functionName === "allocateOnMain")).toBe(false);
    await smp.setHeapProfiling(1, 0);
    expect(smp.memory.heapProfilingSampleRate()).toBe(0);
    expect(await smp.submitTo(0, "sampleRate")).toBe(1);
    await smp.setHeapProfiling("all", "4KiB");
    expect(smp.memory.heapProfilingSampleRate()).toBe(4096);
    expect(await smp.submitTo(0, "sampleRate")).toBe(4096);
    expect(smp.heapProfile().sampleRate).toBe(4096);
    await expect(smp.setHeapProfiling(2, 1)).rejects.toThrow('setHeapProfiling: shard must be "all" or an integer from 0 to 1 (1: the main thread\'s), got 2');
    // A heap image holds the region: `shardheap report --shard 1` reads it offline.
    const image = join(tempDir("shardheap-main-image-"), "heap.img");
    await smp.saveImage(image);
    const saved = await readHeapImage(image);
    expect(saved.shards).toBe(2);
    expect(siteNamed(saved.heapProfile(1), "allocateOnMain")).toMatchObject({ count: 10 });
    expect(saved.stats(1)).toMatchObject({ mallocs: 10, liveObjects: 10 });
    for (const p of ptrs) smp.memory.free(p);
    expect(smp.heapProfile(1).totalCount).toBe(0);
    await smp.stop();
    await expect(smp.setHeapProfiling(1, 1)).rejects.toBeInstanceOf(ShardError);
  });

  it("options: mainShard must be a boolean; its region counts against the shard limit and the 4 GiB", async () => {
    await expect(Smp.start({ mainShard: "yes" as unknown as boolean })).rejects.toThrow(InvalidValueError);
    await expect(Smp.start({ mainShard: "yes" as unknown as boolean })).rejects.toMatchObject({ field: "options.mainShard", message: 'options.mainShard must be true or false, got "yes"' });
    expect(fillSmpOptions({ shards: 1 }).mainShard).toBe(false);
    expect(fillSmpOptions({ shards: 1, mainShard: true }).mainShard).toBe(true);
    expect(fillSmpOptions({ shards: 1024, memoryPerShard: "128KiB" }).shards).toBe(1024);
    expect(() => fillSmpOptions({ shards: 1024, memoryPerShard: "128KiB", mainShard: true })).toThrow(/options\.shards .*1023/);
    expect(fillSmpOptions({ shards: 2, memoryPerShard: "1536MiB" }).shards).toBe(2);
    expect(() => fillSmpOptions({ shards: 2, memoryPerShard: "1536MiB", mainShard: true })).toThrow(/one more region for mainShard.* 3 x /);
  });

  it("a program that uses its main shard exits promptly, whether it stops its Smp or forgets to", async () => {
    const dir = tempDir("shardheap-main-shard-");
    const index = new URL("../../dist/index.js", import.meta.url).href;
    for (const stop of [true, false]) {
      const file = join(dir, `main-${stop ? "stops" : "forgets"}.mjs`);
      writeFileSync(
        file,
        [
          `import { Smp } from ${JSON.stringify(index)};`,
          `const smp = await Smp.start({ shards: 2, memoryPerShard: "1MiB", mainShard: true, module: ${JSON.stringify(TASKS.href)} });`,
          `const ptrs = [smp.memory.malloc(64), smp.memory.malloc(64)];`,
          `await smp.submitTo(0, "freeVia", { ptrs, via: "memory" });`,
          `while (smp.stats(2).liveObjects !== 0) await new Promise((r) => setTimeout(r, 1));`,
          stop ? `await smp.stop();` : ``,
          `console.log("done");`,
        ].join("\n"),
      );
      const t0 = performance.now();
      const { stdout } = await run(process.execPath, [file], { timeout: 30_000 });
      expect(stdout.trim()).toBe("done");
      expect(performance.now() - t0, stop ? "stops" : "forgets to stop").toBeLessThan(20_000);
    }
  });
});
