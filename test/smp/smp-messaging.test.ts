/**
 * Shards that talk to each other, on real worker threads:
 * currentShard.submitTo / invokeOnAll between shards and to themselves,
 * the main thread on the same transport; order per sender; backpressure
 * through a tiny queue; values (Map, Date, typed arrays, shared memory,
 * payloads of many MiB); errors across every hop; a shard that dies; calls
 * after stop(); an all-to-all storm. Every wait is bounded; every Smp is
 * stopped.
 */
import { afterEach, describe, expect, it } from "vitest";
import { InvalidPointerError, ShardError, Smp } from "../../dist/index.js";

const tasks = new URL("../fixtures/messaging-tasks.mjs", import.meta.url);
let running: Smp[] = [];
afterEach(async () => {
  await Promise.all(running.map((s) => s.stop({ timeoutMs: 2000 })));
  running = [];
});

async function start(shards: number, extra: Partial<Parameters<typeof Smp.start>[0]> = {}): Promise<Smp> {
  const smp = await Smp.start({ shards, memoryPerShard: "4MiB", module: tasks, ...extra });
  running.push(smp);
  return smp;
}

async function waitFor<T>(probe: () => Promise<T> | T, done: (v: T) => boolean, what: string, timeoutMs = 10_000): Promise<T> {
  const t0 = performance.now();
  for (;;) {
    const v = await probe();
    if (done(v)) return v;
    if (performance.now() - t0 > timeoutMs) throw new Error(`${what}: not within ${timeoutMs} ms (last: ${JSON.stringify(v)})`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe("shard to shard", () => {
  it("any shard calls any shard, itself included; invokeOnAll from a shard; currentShard.shards", async () => {
    const smp = await start(3);
    for (let from = 0; from < 3; from++) {
      for (let to = 0; to < 3; to++) {
        expect(await smp.submitTo(from, "relay", { target: to, task: "whoAmI" })).toEqual({ id: to, shards: 3, same: true });
      }
    }
    const all = await smp.submitTo<Array<{ id: number }>>(1, "invokeAll", { task: "whoAmI" });
    expect(all.map((w) => w.id)).toEqual([0, 1, 2]);
    expect(await smp.invokeOnAll("echo", { n: 1 })).toEqual([{ n: 1 }, { n: 1 }, { n: 1 }]);
  });

  it("calls from one sender to one shard start in the order made (main and shards)", async () => {
    const smp = await start(3);
    const count = 20_000;
    // Main thread -> shard 2.
    const fromMain = await Promise.all(Array.from({ length: count }, (_, seq) => smp.submitTo<number>(2, "record", { from: "main", seq })));
    expect(fromMain.every((v, i) => v === i)).toBe(true);
    // Shards 0 and 1 -> shard 2, at the same time, and shard 2 to itself.
    const sent = await Promise.all([0, 1, 2].map((s) => smp.submitTo<boolean>(s, "sendInOrder", { target: 2, count, tag: `s${s}` })));
    expect(sent).toEqual([true, true, true]);
    for (const tag of ["main", "s0", "s1", "s2"]) {
      expect(await smp.submitTo(2, "recorded", tag), tag).toEqual({ count, inOrder: true });
    }
  });

  it("errors cross every hop with their class: shard -> shard -> main", async () => {
    const smp = await start(2);
    const e = await smp.submitTo(0, "relay", { target: 1, task: "badFree", arg: 12345 }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(InvalidPointerError);
    expect((e as InvalidPointerError).pointer).toBe(12345);
    expect((e as Error).stack).toMatch(/at <shard 1>[\s\S]*at <shard 0>/);
    // As the middle shard sees it.
    expect(await smp.submitTo(0, "relayCatch", { target: 1, task: "badFree", arg: 8 })).toMatchObject({ name: "InvalidPointerError", isInvalidPointer: true });
    // Unknown shard: RangeError at the call; unknown task: rejects naming it.
    expect(await smp.submitTo(0, "relayCatch", { target: 7, task: "echo" })).toMatchObject({ name: "RangeError", isRangeError: true });
    expect(await smp.submitTo(0, "relayCatch", { target: 1, task: "noSuchTask" })).toMatchObject({
      name: "TypeError",
      message: 'shard 1: the module exports no function named "noSuchTask"',
    });
    await expect(smp.submitTo(2, "echo")).rejects.toThrow(RangeError);
    await expect(smp.submitTo(-1, "echo")).rejects.toThrow(RangeError);
    await expect(smp.submitTo(0, "noSuchTask")).rejects.toThrow(/exports no function named "noSuchTask"/);
  });
});

describe("values", () => {
  it("Map, Date, typed arrays, bigint and nested data arrive intact between shards", async () => {
    const smp = await start(2);
    const value = {
      n: -0,
      nan: Number.NaN,
      big: 2n ** 70n,
      when: new Date(1234),
      map: new Map<unknown, unknown>([[1, { a: [1, 2] }], ["k", new Set([1])]]),
      bytes: new Float64Array([1.5, -2]),
      part: new Uint16Array(new ArrayBuffer(16), 4, 2),
      text: "\ud800 lone surrogate, é, 中",
      holes: [1, , 3],
      proto: JSON.parse('{"__proto__": {"x": 1}}') as unknown,
    };
    const back = await smp.submitTo<typeof value>(0, "relay", { target: 1, task: "echo", arg: value });
    expect(back).toEqual(value);
    expect(Object.is(back.n, -0)).toBe(true);
    expect(back.part.byteOffset).toBe(4);
    expect(back.part.buffer.byteLength).toBe(16);
    expect(1 in back.holes).toBe(false);
    expect(Object.getPrototypeOf(back.proto)).toBe(Object.prototype);
    expect(Object.keys(back.proto as object)).toEqual(["__proto__"]);
    const shared = { a: { x: 1 } } as { a: { x: number }; b?: unknown };
    shared.b = shared.a;
    const s2 = await smp.submitTo<typeof shared>(1, "echo", shared);
    expect(s2.b).toBe(s2.a);
  });

  it("shared memory stays shared from shard to shard", async () => {
    const smp = await start(2);
    const { ptr, view } = await smp.submitTo<{ ptr: number; view: Uint8Array }>(0, "viewOf", { size: 64 });
    // Shard 0's view goes to shard 1 and is written there.
    expect(await smp.submitTo(0, "relay", { target: 1, task: "writeThrough", arg: { view, index: 5, value: 77 } })).toBe(true);
    expect(smp.heap.bytes(ptr, 64)[5]).toBe(77);
    await smp.submitTo(0, "free", ptr);
  });

  it("payloads of many MiB go by the side path, in order with small calls", async () => {
    const smp = await start(2, { memoryPerShard: "2MiB" });
    expect(await smp.submitTo(0, "bigRelay", { target: 1, mib: 8 })).toEqual({ bigOk: true, textOk: true, order: { count: 3, inOrder: true } });
    const big = new Uint8Array(6 * 1024 * 1024).fill(3);
    const back = await smp.submitTo<Uint8Array>(1, "echo", big);
    expect(back.length).toBe(big.length);
    expect(back.every((b) => b === 3)).toBe(true);
  });

  it("a value that cannot be cloned is refused at the call, from a shard too", async () => {
    const smp = await start(2);
    await expect(smp.submitTo(0, "echo", { f: () => 1 })).rejects.toThrow(/^submitTo\(0, "echo"\): arg cannot be sent to another thread/);
    expect(await smp.submitTo(0, "relayCatch", { target: 1, task: "echo", arg: new Map([[1, 1]]) })).toEqual({ ok: new Map([[1, 1]]) });
  });
});

describe("backpressure", () => {
  it("a 512-byte queue (~25 calls) and a million calls: the overflow waits on the sender's side, in order, nothing dropped", async () => {
    const smp = await start(2, { queueBytes: 512, maxPendingCalls: 1_000_000 });
    const count = 1_000_000;
    const calls: Array<Promise<number>> = new Array(count);
    for (let seq = 0; seq < count; seq++) calls[seq] = smp.submitTo<number>(1, "recordSeq", seq);
    const back = await Promise.all(calls);
    let wrong = 0;
    for (let i = 0; i < count; i++) if (back[i] !== i) wrong++;
    expect(wrong).toBe(0);
    expect(await smp.submitTo(1, "recorded", "seq")).toEqual({ count, inOrder: true });
    // Shard to shard through the same tiny queues, 1000 calls in flight.
    expect(await smp.submitTo(0, "flood", { target: 1, count: 50_000, inFlight: 1000 })).toBe(50_000);
  }, 120_000);
});

describe("the flood bound: maxPendingCalls", () => {
  const FULL = "ERR_SHARDHEAP_QUEUE_FULL";
  it("a flood past the bound against a busy shard: the first calls are taken, the rest reject at once, unsent; nothing taken is lost; the shard recovers", async () => {
    const bound = 1000;
    const smp = await start(2, { maxPendingCalls: bound, queueBytes: 4096 });
    // Shard 1 busy (asked by shard 0, so it is not one of this thread's calls to shard 1).
    const busy = smp.submitTo(0, "relay", { target: 1, task: "spin", arg: 300 });
    const flood = 5000;
    const calls = Array.from({ length: flood }, (_, seq) => smp.submitTo<number>(1, "recordSeq", seq));
    // Nothing settles while this loop runs: exactly `bound` calls were pending at its end, the rest refused.
    const outcomes = await Promise.allSettled(calls);
    expect(outcomes.slice(0, bound).every((o, seq) => o.status === "fulfilled" && o.value === seq)).toBe(true);
    const refused = outcomes.slice(bound);
    for (const o of refused) {
      expect(o.status).toBe("rejected");
      const e = (o as PromiseRejectedResult).reason as ShardError;
      expect(e).toBeInstanceOf(ShardError);
      expect(e.code).toBe(FULL);
      expect(e.shard).toBe(1);
    }
    expect(((refused[0] as PromiseRejectedResult).reason as Error).message).toBe(
      `submitTo(1, "recordSeq"): ${bound} calls to shard 1 are pending from this thread already (maxPendingCalls); this one was not sent: wait for some to settle, or raise maxPendingCalls`,
    );
    await busy;
    // The refused calls never ran; the taken ones ran once each, in order.
    expect(await smp.submitTo(1, "recorded", "seq")).toEqual({ count: bound, inOrder: true });
    // The bound counts what is pending, so the shard takes a full burst again.
    expect(await Promise.all(Array.from({ length: bound }, (_, seq) => smp.submitTo<number>(1, "recordSeq", seq)))).toHaveLength(bound);
    expect(await smp.submitTo(1, "recorded", "seq")).toEqual({ count: bound, inOrder: true });

    // From a shard: the same bound, per pair of threads.
    const fromShard = await smp.submitTo<string[]>(0, "floodOutcomes", { target: 1, count: 3000 });
    expect(fromShard.slice(0, bound).every((o) => o === "ok")).toBe(true);
    expect(fromShard.slice(bound).every((o) => o === FULL)).toBe(true);
    expect(await smp.submitTo(1, "recorded", "seq")).toEqual({ count: bound, inOrder: true });

    // invokeOnAll is all or none: one shard at its bound refuses it for every shard.
    const hold = smp.submitTo(0, "relay", { target: 1, task: "spin", arg: 200 });
    const filling = Array.from({ length: bound }, (_, seq) => smp.submitTo(1, "recordSeq", seq));
    const all = await smp.invokeOnAll("record", { from: "all", seq: 0 }).catch((e: unknown) => e);
    expect(all).toBeInstanceOf(ShardError);
    expect((all as ShardError).code).toBe(FULL);
    expect((all as Error).message).toMatch(/^invokeOnAll\("record"\): 1000 calls to shard 1 are pending/);
    await Promise.all([hold, ...filling]);
    expect(await smp.submitTo(0, "recorded", "all")).toEqual({ count: 0, inOrder: true });
    expect(await smp.submitTo(1, "recorded", "seq")).toEqual({ count: bound, inOrder: true });
  }, 60_000);

  it("the bound is a whole number from 1, or Infinity", async () => {
    for (const bad of [0, -1, 1.5, Number.NaN]) {
      await expect(Smp.start({ shards: 1, memoryPerShard: "1MiB", maxPendingCalls: bad })).rejects.toThrow(/^options.maxPendingCalls must be a whole number from 1/);
    }
    const smp = await start(1, { maxPendingCalls: Infinity });
    expect(smp.options.maxPendingCalls).toBe(Infinity);
    expect((await start(1)).options.maxPendingCalls).toBe(2 ** 18);
  });
});

describe("a shard that dies", () => {
  it("every call pending on it rejects with ShardError, from the main thread and from shards; the others keep working; it comes back", async () => {
    const smp = await start(3);
    const errors: ShardError[] = [];
    smp.on("error", (e) => errors.push(e));
    const fromMain = [smp.submitTo(1, "hang"), smp.submitTo(1, "hang")];
    for (const p of fromMain) p.catch(() => undefined);
    expect(await smp.submitTo(0, "callHanging", { target: 1, count: 3 })).toBe(3);
    expect(await smp.submitTo(2, "callHanging", { target: 1, count: 2 })).toBe(2);
    await smp.submitTo(1, "crash");
    for (const p of fromMain) {
      const e = await p.catch((x: unknown) => x);
      expect(e).toBeInstanceOf(ShardError);
      expect((e as ShardError).shard).toBe(1);
      expect((e as Error).message).toMatch(/shard 1: task "hang" was cut off: the shard's thread died/);
    }
    for (const [s, n] of [[0, 3], [2, 2]] as const) {
      const outcomes = await waitFor(() => smp.submitTo<string[]>(s, "outcomesSoFar"), (o) => o.length === n, `shard ${s}'s calls settled`);
      for (const o of outcomes) expect(o).toMatch(/^ShardError: shard 1: task "hang" was cut off/);
    }
    expect(await smp.submitTo(0, "relay", { target: 2, task: "echo", arg: "alive" })).toBe("alive");
    await waitFor(() => errors.length, (n) => n > 0, "the 'error' event");
    expect(errors[0]!.shard).toBe(1);
    // piscina starts a fresh thread; calls made meanwhile, from a shard or
    // from here, wait for it (once every endpoint has let go of the old one).
    expect(await smp.submitTo(0, "relayCatch", { target: 1, task: "whoAmI" })).toEqual({ ok: { id: 1, shards: 3, same: true } });
    expect(await smp.submitTo(1, "echo", 5)).toBe(5);
  });
});

describe("after stop()", () => {
  it("every call rejects", async () => {
    const smp = await start(2);
    await smp.stop();
    await expect(smp.submitTo(0, "echo", 1)).rejects.toThrow(ShardError);
    await expect(smp.submitTo(1, "relay", { target: 0, task: "echo" })).rejects.toThrow(/the runtime has stopped/);
    await expect(smp.invokeOnAll("echo")).rejects.toThrow(ShardError);
  });
});

describe("storm", () => {
  it("4 shards each call every other with random payloads, 200k calls in all: every answer checked, nothing left pending", async () => {
    const smp = await start(4, { memoryPerShard: "2MiB" });
    const results = await smp.invokeOnAll<{ calls: number; bad: number }>("storm", { calls: 50_000, seed: 11 });
    expect(results.reduce((n, r) => n + r.calls, 0)).toBe(200_000);
    expect(results.map((r) => r.bad)).toEqual([0, 0, 0, 0]);
    // Nothing pending anywhere: stop() finds no running call to wait for.
    const errors: ShardError[] = [];
    smp.on("error", (e) => errors.push(e));
    await smp.stop({ timeoutMs: 5000 });
    expect(errors).toEqual([]);
    expect(smp.heap.check()).toEqual([]);
  }, 120_000);
});
