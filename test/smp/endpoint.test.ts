/**
 * Endpoint (src/smp/endpoint.ts) with its parts, a shard's and the main
 * thread's on one thread over one messaging buffer: Incoming runs the
 * tasks asked for (in order, after the module loaded), publishes TAKEN
 * before a task starts, answers through Outgoing; PeerDeaths rejects the
 * calls of a peer whose incarnation ended, saying which may have run, and
 * acknowledges. A death is made the way Smp makes one (a new EPOCH, STATE
 * DOWN or GONE, MEMBERSHIP moved). Every wait is bounded.
 */
import { MessageChannel } from "node:worker_threads";
import { afterEach, describe, expect, it } from "vitest";
import { ShardError } from "../../src/errors.js";
import { Endpoint } from "../../src/smp/endpoint.js";
import type { TaskFunction, TaskHost } from "../../src/smp/incoming.js";
import { ackWord, createQueueBuffer, endpointWord, EPOCH, MEMBERSHIP, queueGeometry, ringWord, STATE, STATE_DOWN, STATE_GONE, TAKEN } from "../../src/smp/queue-layout.js";
import type { SideLinks } from "../../src/smp/records.js";

const SHARD = 0;
const MAIN = 1;
const g = queueGeometry(2, 4096);

let stops: Array<() => void> = [];
afterEach(() => {
  for (const stop of stops) stop();
  stops = [];
});

function bounded<T>(p: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`timed out: ${what}`)), 5000)));
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

/** Shard 0 with `tasks` (loaded once `ready` settles) and the main thread, on one thread. */
function pair(tasks: Record<string, TaskFunction>, ready: Promise<unknown> = Promise.resolve()) {
  const buffer = createQueueBuffer(g);
  const i32 = new Int32Array(buffer);
  const endpoints: Endpoint[] = [];
  const links = (self: number): SideLinks => ({
    portTo: (peer, peerEpoch) => {
      const { port1, port2 } = new MessageChannel();
      endpoints[peer]!.acceptSidePort(self, Atomics.load(i32, endpointWord(g, self) + EPOCH), peerEpoch, port2);
      return port1;
    },
    drop: () => undefined,
  });
  const host: TaskHost = { lookup: (name) => tasks[name], hasModule: true, context: "ctx", ready, busy: () => undefined, idle: () => undefined };
  endpoints[SHARD] = new Endpoint({ buffer, geometry: g, self: SHARD, shards: 1, links: links(SHARD), host, maxPendingCalls: Infinity });
  endpoints[MAIN] = new Endpoint({ buffer, geometry: g, self: MAIN, shards: 1, links: links(MAIN), maxPendingCalls: Infinity });
  for (const e of endpoints) {
    e.start();
    stops.push(() => e.stop());
  }
  const [shard, main] = endpoints as [Endpoint, Endpoint];
  /** Smp's side of a death: shard 0's incarnation ends (DOWN), or its new thread could not start (GONE). */
  const kill = (state: number): void => {
    if (state === STATE_DOWN) Atomics.add(i32, endpointWord(g, SHARD) + EPOCH, 1);
    Atomics.store(i32, endpointWord(g, SHARD) + STATE, state);
    Atomics.add(i32, MEMBERSHIP, 1);
    main.membershipChanged();
  };
  return { i32, shard, main, kill };
}

describe("Endpoint: calls and answers", () => {
  it("runs the task with its argument and the context, and settles the call with its result; errors keep their class", async () => {
    const { main } = pair({ add: (arg, ctx) => ({ sum: (arg as number[]).reduce((a, b) => a + b, 0), ctx }), fail: () => { throw new RangeError("too far"); } });
    expect(await bounded(main.submitTask(SHARD, "add", [1, 2, 3], "submitTo"), "add")).toEqual({ sum: 6, ctx: "ctx" });
    await expect(bounded(main.submitTask(SHARD, "fail", null, "submitTo"), "fail")).rejects.toThrow(RangeError);
    await expect(bounded(main.submitTask(SHARD, "nope", null, "submitTo"), "nope")).rejects.toThrow(/exports no function named "nope"/);
    expect(main.pendingOn(SHARD)).toBe(0);
  });

  it("requests that arrive before the module loads wait, and run in the order sent once it has", async () => {
    const order: number[] = [];
    let loaded!: () => void;
    const { main } = pair({ log: (n) => order.push(n as number) }, new Promise<void>((r) => (loaded = r)));
    const calls = [1, 2, 3, 4].map((n) => main.submitTask(SHARD, "log", n, "submitTo"));
    await new Promise((r) => setTimeout(r, 20));
    expect(order).toEqual([]);
    loaded();
    await bounded(Promise.all(calls), "the deferred calls");
    expect(order).toEqual([1, 2, 3, 4]);
  });

  it("the shard publishes its count of records taken (TAKEN) before the task starts", async () => {
    const { i32, main } = pair({ taken: () => Atomics.load(i32, ringWord(g, MAIN, SHARD) + TAKEN) });
    expect(await bounded(main.submitTask(SHARD, "taken", null, "submitTo"), "1st")).toBe(1);
    expect(await bounded(main.submitTask(SHARD, "taken", null, "submitTo"), "2nd")).toBe(2);
  });

  it("a value holding shared memory arrives shared, by the side path, in order with the others", async () => {
    const shared = new SharedArrayBuffer(4);
    const { main } = pair({ bump: (arg) => Atomics.add(new Int32Array((arg as { s: SharedArrayBuffer }).s), 0, 1) + 1, echo: (arg) => arg });
    const results = await bounded(Promise.all([main.submitTask(SHARD, "echo", 1, "submitTo"), main.submitTask(SHARD, "bump", { s: shared }, "submitTo"), main.submitTask(SHARD, "echo", 3, "submitTo")]), "side path");
    expect(results).toEqual([1, 1, 3]);
    expect(new Int32Array(shared)[0]).toBe(1);
  });
});

describe("Endpoint: a peer dies (PeerDeaths)", () => {
  it("a call its shard had taken may have run, one still in the ring never started; the death is acknowledged", async () => {
    let started!: () => void;
    const taken = new Promise<void>((r) => (started = r));
    const { i32, shard, main, kill } = pair({ hang: () => (started(), new Promise(() => undefined)) });
    const first = main.submitTask(SHARD, "hang", null, "submitTo");
    await bounded(taken, "the first call to start");
    shard.stop(); // the shard's thread takes nothing more
    const second = main.submitTask(SHARD, "hang", null, "submitTo");
    kill(STATE_DOWN);
    await expect(bounded(first, "first")).rejects.toMatchObject({ constructor: ShardError, code: "ERR_SHARDHEAP_CALL_MAY_HAVE_RUN" });
    await expect(bounded(second, "second")).rejects.toMatchObject({ constructor: ShardError, code: "ERR_SHARDHEAP_CALL_NOT_STARTED" });
    expect(Atomics.load(i32, ackWord(g, MAIN, SHARD))).toBe(1);
    expect(main.isUp(SHARD)).toBe(false);
  });

  it("calls made while the shard is down wait for its new thread; when none can start (GONE) they reject, and so do later ones", async () => {
    const { shard, main, kill } = pair({ echo: (a) => a });
    shard.stop();
    kill(STATE_DOWN);
    for (const end = Date.now() + 5000; main.isUp(SHARD); await new Promise((r) => setTimeout(r, 2))) {
      if (Date.now() > end) throw new Error("timed out: the main thread to read the death");
    }
    const waiting = main.submitTask(SHARD, "echo", 1, "submitTo");
    await new Promise((r) => setTimeout(r, 20));
    expect(main.pendingOn(SHARD)).toBe(1);
    kill(STATE_GONE);
    await expect(bounded(waiting, "waiting")).rejects.toMatchObject({ code: "ERR_SHARDHEAP_CALL_NOT_STARTED" });
    await expect(main.submitTask(SHARD, "echo", 2, "submitTo")).rejects.toThrow(/submitTo\(0, "echo"\): shard 0 is gone/);
  });
});
