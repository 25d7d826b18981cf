/**
 * Smp's lifecycle on real worker threads: stop()
 * while tasks allocate lets them finish and leaves a consistent heap; a
 * shard that will not finish is terminated after the stop timeout and
 * named; a module that never finishes loading fails start() after the load
 * timeout with every thread ended; nothing starts threads after stop().
 * Every wait is bounded; every Smp is stopped.
 */
import { BroadcastChannel } from "node:worker_threads";
import { afterEach, describe, expect, it } from "vitest";
import { ShardError, Smp } from "../../dist/index.js";
import { TASKS, startSmp, waitFor } from "../helpers.js";

let channels: BroadcastChannel[] = [];
afterEach(() => {
  for (const c of channels) c.close();
  channels = [];
});

/** A BroadcastChannel the heartbeat fixture posts to, and the messages seen on it. */
function listen(): { name: string; seen: Array<{ loaded?: number; alive?: number }> } {
  const name = `shardheap-test-${process.pid}-${Math.random().toString(36).slice(2)}`;
  const channel = new BroadcastChannel(name);
  channels.push(channel);
  const seen: Array<{ loaded?: number; alive?: number }> = [];
  channel.onmessage = (m) => seen.push((m as { data: { loaded?: number; alive?: number } }).data);
  return { name, seen };
}

const heartbeat = (channel: string, hang = false) => new URL(`../fixtures/heartbeat.mjs?channel=${channel}${hang ? "&hang=1" : ""}`, import.meta.url);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

type Counts = { mallocs: number; localFrees: number; remoteFrees: number };

describe("stop() while tasks allocate", () => {
  it("lets every running task finish, then the heap is consistent and the counters balance, profiler exact and sampled", async () => {
    const shards = 2;
    const slots = 16;
    for (let run = 0; run < 10; run++) {
      const heapprof = run % 2 === 0 ? true : 2048;
      const smp = await startSmp({ shards, memoryPerShard: "32MiB", module: TASKS, heapprof });
      const initialFree = [0, 1].map((s) => smp.stats(s).freeMemory);
      const mailbox = new SharedArrayBuffer(4 * (2 + shards * slots));
      const words = new Uint32Array(mailbox);
      const barrier = new Int32Array(mailbox, 0, 2);
      const churns = [0, 1].map((s) => smp.submitTo<Counts>(s, "churn", { mailbox, slots, steps: 2000, seed: run }));
      // Spin barrier: both tasks are inside, then they start and stop() is
      // called together with them (at a different point each run).
      await waitFor(() => Atomics.load(barrier, 0) === shards, "both churn tasks started");
      Atomics.store(barrier, 1, 1);
      Atomics.notify(barrier, 1);
      if (run % 3 === 1) await new Promise((r) => setImmediate(r));
      if (run % 3 === 2) await sleep(run);
      const stopped = smp.stop();
      await expect(smp.submitTo(0, "whoAmI")).rejects.toThrow(/stopping/);
      const counts = await Promise.all(churns); // they finished: resolved, not cut off
      await stopped;

      const label = `run ${run} (heapprof ${String(heapprof)})`;
      expect(smp.heap.check(), label).toEqual([]);
      expect(Array.from(words.subarray(2)).every((w) => w === 0), `${label}: every handed-over pointer was freed`).toBe(true);
      let remote = 0;
      for (let s = 0; s < shards; s++) {
        const st = smp.stats(s);
        expect(st.mallocs, label).toBe(counts[s]!.mallocs);
        expect(st.mallocs - st.frees, label).toBe(st.liveObjects);
        expect(st.liveObjects, label).toBe(0);
        remote += st.crossShardFrees;
      }
      expect(remote, label).toBe(counts.reduce((n, c) => n + c.remoteFrees, 0));
      expect(remote, `${label}: the run exercised cross-shard frees`).toBeGreaterThan(0);
      const profile = smp.heapProfile();
      expect(profile.sites.length, `${label}: the profiler recorded`).toBeGreaterThan(0);
      expect(Math.abs(profile.totalCount), `${label}: every profiled object's tag was undone`).toBeLessThan(1e-6);
      expect(Math.abs(profile.totalSize), label).toBeLessThan(1e-6);
      for (let s = 0; s < shards; s++) {
        smp.heap.shard(s).trim();
        expect(smp.stats(s).freeMemory, `${label}: shard ${s} memory back`).toBe(initialFree[s]);
      }
    }
  });

  it("a call made before stop() completes with its value", async () => {
    const smp = await startSmp({ shards: 1, memoryPerShard: "1MiB", module: TASKS });
    const pending = smp.submitTo(0, "timerFires", 150);
    await smp.stop();
    await expect(pending).resolves.toBe("fired");
  });

  it("a shard that does not finish within the stop timeout is terminated and named", async () => {
    const smp = await startSmp({ shards: 3, memoryPerShard: "1MiB", module: TASKS, stopTimeoutMs: 60_000 });
    const errors: ShardError[] = [];
    smp.on("error", (e) => errors.push(e));
    const never = smp.submitTo(0, "hang");
    const busy = smp.submitTo(1, "busy", 20_000); // synchronous: the thread cannot answer at all
    never.catch(() => undefined);
    busy.catch(() => undefined);
    await sleep(50);
    await smp.stop({ timeoutMs: 300 }); // overrides stopTimeoutMs
    await expect(never).rejects.toThrow(ShardError);
    await expect(busy).rejects.toThrow(ShardError);
    expect(errors.map((e) => e.shard).sort()).toEqual([0, 1]);
    for (const e of errors) expect(e.message).toMatch(new RegExp(`^shard ${e.shard} did not finish its 1 running call\\(s\\) within stop\\(\\)'s 300 ms timeout: terminating it`));
    expect(smp.heap.check()).toEqual([]);
  });

  it("stop timeouts are validated", async () => {
    await expect(Smp.start({ shards: 1, memoryPerShard: "1MiB", stopTimeoutMs: -1 })).rejects.toThrow(/options.stopTimeoutMs/);
    await expect(Smp.start({ shards: 1, memoryPerShard: "1MiB", loadTimeoutMs: 1.5 })).rejects.toThrow(/options.loadTimeoutMs/);
    const smp = await startSmp({ shards: 1, memoryPerShard: "1MiB" });
    await expect(smp.stop({ timeoutMs: Number.NaN })).rejects.toThrow(/stop: timeoutMs/);
    await smp.stop();
  });
});

describe("Smp.start's load timeout and calls after stop", () => {
  it("a module whose top-level await never settles fails start(), naming the shard, and every thread ends", async () => {
    const { name, seen } = listen();
    // Threads start and import the module in ~0.4 s here; the timeout leaves
    // them ample time to begin, so the heartbeat below cannot pass vacuously.
    const error = await Smp.start({ shards: 2, memoryPerShard: "1MiB", module: heartbeat(name, true), loadTimeoutMs: 2500 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ShardError);
    expect((error as ShardError).message).toMatch(/^shard 0 failed to start: its module did not finish loading within 2500 ms \(loadTimeoutMs\) \(nor did shard 1\)$/);
    expect((error as ShardError).shard).toBe(0);
    // The threads were alive while loading ...
    expect(new Set(seen.map((m) => m.alive ?? m.loaded))).toEqual(new Set([0, 1]));
    // ... and are gone now: no heartbeat after the rejection has settled.
    await sleep(100);
    const after = seen.length;
    await sleep(300);
    expect(seen.length).toBe(after);
  });

  it("after stop(), setHeapProfiling, submitTo and invokeOnAll reject and start no thread", async () => {
    const { name, seen } = listen();
    const smp = await startSmp({ shards: 2, memoryPerShard: "1MiB", module: heartbeat(name) });
    await waitFor(() => seen.length === 2, "both shards announced their load");
    expect(await smp.invokeOnAll<number>("whoAmI")).toEqual([0, 1]);
    await smp.stop();
    await expect(smp.setHeapProfiling("all", 1)).rejects.toThrow(ShardError);
    await expect(smp.setHeapProfiling(1, true)).rejects.toThrow(/has stopped/);
    await expect(smp.submitTo(0, "whoAmI")).rejects.toThrow(/submitTo\(0, "whoAmI"\): the runtime has stopped/);
    await expect(smp.invokeOnAll("whoAmI")).rejects.toThrow(ShardError);
    await sleep(300); // a thread started by any of them would have loaded the module by now
    expect(seen.length).toBe(2);
  });
});
