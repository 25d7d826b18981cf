/**
 * Connections spread evenly over the shards of `shardheap memcached` on
 * one port, on real sockets. On Node 20 ("sharedFd": every shard polls
 * one listening socket, through ShardContext.listen) the shards take
 * turns by their counts of live connections (smp/accept-balance.ts);
 * before, 41 connections opened together landed 1/40, 40/1, 11/30 and
 * 2/39 on two shards. The counts are read from the shards' statistics
 * rows (curr_connections), which each shard updates as it accepts and
 * closes.
 */
import { spawn, spawnSync } from "node:child_process";
import { createServer, type AddressInfo } from "node:net";
import { Worker } from "node:worker_threads";
import { afterEach, describe, expect, it } from "vitest";
import { AcceptBalance, acceptState, createAcceptBuffer, type AcceptSwitch } from "../../../dist/smp/accept-balance.js";
import { listenMode } from "../../../dist/apps/memcached/network/listener.js";
import { startMemcached, type MemcachedServer } from "../../../dist/apps/memcached/server.js";
import { shardCounters, STAT } from "../../../dist/apps/memcached/stats/stats.js";
import { waitFor } from "../../helpers.js";
import { installed, RawClient } from "./client.js";

/** What a test opened, closed after it (clients first). */
const opened = { servers: [] as MemcachedServer[], clients: [] as RawClient[] };
afterEach(async () => {
  for (const c of opened.clients.splice(0)) c.close();
  await Promise.all(opened.servers.splice(0).map((s) => s.close()));
});

const sharedFd = listenMode() === "sharedFd";

async function start(shards: number): Promise<MemcachedServer> {
  const s = await startMemcached({ shards, memoryPerShard: "4MiB", port: 0 });
  opened.servers.push(s);
  return s;
}

/** Each shard's live connections, from its statistics row. */
const counts = (s: MemcachedServer): number[] => Array.from({ length: s.shards }, (_, i) => shardCounters(s.config.statsBuffer, i)[STAT.curr_connections]!);
const spread = (c: number[]): number => Math.max(...c) - Math.min(...c);
const sum = (c: number[]): number => c.reduce((a, b) => a + b, 0);

/** `n` connections opened at once, each answered once (so each has been accepted and is served). */
async function openTogether(server: MemcachedServer, n: number): Promise<RawClient[]> {
  const list = await Promise.all(Array.from({ length: n }, () => RawClient.open(server.port)));
  opened.clients.push(...list);
  const answers = await Promise.all(list.map((c) => c.request("version\r\n")));
  for (const a of answers) expect(a).toMatch(/^VERSION /);
  return list;
}

async function closeAll(server: MemcachedServer, list: RawClient[]): Promise<void> {
  const before = sum(counts(server));
  for (const c of list) c.close();
  opened.clients = opened.clients.filter((c) => !list.includes(c));
  await waitFor(() => sum(counts(server)) === before - list.length, `${list.length} connections closed on the server`);
}

describe.runIf(sharedFd)("connections over the shards on one shared descriptor (Node < 22.12)", () => {
  it("41 connections opened together land 20/21, run after run; closing some and opening as many again ends within one", async () => {
    const server = await start(2);
    expect(server.listenMode).toBe("sharedFd");
    for (let run = 0; run < 6; run++) {
      const first = await openTogether(server, 41);
      const c = counts(server);
      expect(sum(c), `run ${run}: ${c.join("/")}`).toBe(41);
      expect(spread(c), `run ${run}: ${c.join("/")}`).toBeLessThanOrEqual(1);
      if (run % 2 === 1) {
        // Close the first 15 (wherever they are), open 15 more: the fewer shard takes them first.
        await closeAll(server, first.slice(0, 15));
        await openTogether(server, 15);
        const d = counts(server);
        expect(sum(d)).toBe(41);
        expect(spread(d), `run ${run} after closing 15 and opening 15: ${d.join("/")}`).toBeLessThanOrEqual(1);
      }
      await closeAll(server, opened.clients.slice());
      expect(counts(server)).toEqual([0, 0]);
    }
  });

  it("three shards: 41 together land 13/14/14, every shard listening again once they close", async () => {
    const server = await start(3);
    for (let run = 0; run < 3; run++) {
      await openTogether(server, 41);
      const c = counts(server);
      expect(sum(c)).toBe(41);
      expect(spread(c), `run ${run}: ${c.join("/")}`).toBeLessThanOrEqual(1);
      await closeAll(server, opened.clients.slice());
    }
    // Connections opened one after another (a wait between: each shard's loop idle in between) alternate too.
    for (let i = 0; i < 9; i++) opened.clients.push(await RawClient.open(server.port));
    await waitFor(() => sum(counts(server)) === 9, "9 connections accepted");
    expect(counts(server)).toEqual([3, 3, 3]);
  });

  it.runIf(installed("memcaslap", ["-V"]))("under memcaslap -T 2 -c 16 and -c 128 the counts stay within one", async () => {
    const server = await start(2);
    for (const concurrency of [16, 128]) {
      const child = spawn("memcaslap", ["-s", `127.0.0.1:${server.port}`, "-T", "2", "-c", String(concurrency), "-t", "3s"], { stdio: "ignore" });
      const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
      try {
        await waitFor(() => sum(counts(server)) === concurrency, `memcaslap's ${concurrency} connections`, 10_000);
        // Sampled while the load runs (connections stay open: memcaslap keeps them).
        for (let i = 0; i < 5; i++) {
          const c = counts(server);
          expect(sum(c)).toBe(concurrency);
          expect(spread(c), `-c ${concurrency}: ${c.join("/")}`).toBeLessThanOrEqual(1);
          await new Promise((r) => setTimeout(r, 100));
        }
      } finally {
        child.kill("SIGKILL");
        await exited;
      }
      await waitFor(() => sum(counts(server)) === 0, "memcaslap's connections closed");
    }
  });

  it("servers stopped while their clients hang up: no shard switches its handle on a closed descriptor (the process lives)", () => {
    // When the shards shared one descriptor and stopping answered at once (before a loop had applied a last
    // resume), libuv aborted this process in 5 of 6 runs (of 10 servers with 200 connections each).
    const fixture = new URL("../../fixtures/memcached-stop-race.mjs", import.meta.url);
    const r = spawnSync(process.execPath, [fixture.pathname, "10", "200"], { encoding: "utf8", timeout: 60_000 });
    expect({ status: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr }).toEqual({ status: 0, signal: null, stdout: "stopped 10 servers\n", stderr: "" });
  });

  it("a port in use: startMemcached rejects as net.Server.listen does", async () => {
    const held = createServer();
    await new Promise<void>((resolve) => held.listen(0, "127.0.0.1", resolve));
    try {
      const busy = (held.address() as AddressInfo).port;
      await expect(startMemcached({ shards: 2, memoryPerShard: "4MiB", port: busy })).rejects.toMatchObject({
        code: "EADDRINUSE",
        syscall: "listen",
        address: "127.0.0.1",
        port: busy,
        message: `listen EADDRINUSE: address already in use 127.0.0.1:${busy}`,
      });
    } finally {
      await new Promise((r) => held.close(r));
    }
  });
});

/** A listening handle's switch, as a flag. */
class FakeSwitch implements AcceptSwitch {
  on = true;
  pause(): void {
    this.on = false;
  }
  resume(): void {
    this.on = true;
  }
}

describe("AcceptBalance (the turns, on one thread)", () => {
  let running: AcceptBalance[] = [];
  afterEach(() => {
    for (const b of running) b.stop(); // their doorbell waits end
    running = [];
  });

  /** `n` shards' balances on one buffer, each with a switch (or none where `pausable` says so). */
  function shards(n: number, pausable: boolean[] = Array<boolean>(n).fill(true)) {
    const buffer = createAcceptBuffer(n);
    const balances = Array.from({ length: n }, (_, s) => new AcceptBalance(buffer, s, n));
    const switches = balances.map(() => new FakeSwitch());
    balances.forEach((b, s) => b.start(pausable[s] ? switches[s] : undefined));
    running.push(...balances);
    const on = (): boolean[] => switches.map((s) => s.on);
    const state = (s: number) => acceptState(buffer, s);
    return { balances, on, state };
  }
  /** Long enough for a ring to be answered (Atomics.waitAsync resolves on a later turn). */
  const turns = (): Promise<void> => new Promise((r) => setTimeout(r, 20));

  it("a shard above another pauses; the other, catching up, rings it open; a pause that should begin is left to the next accept", async () => {
    const { balances, on, state } = shards(2);
    expect(on()).toEqual([true, true]);
    balances[0]!.opened();
    expect(on()).toEqual([false, true]);
    expect(state(0)).toMatchObject({ live: 1, paused: true, ringing: false });
    balances[1]!.opened(); // 1/1: shard 0 may accept again, and is rung
    expect(state(0)).toMatchObject({ paused: true, ringing: true, rings: 1 });
    await waitFor(() => on()[0]!, "shard 0 open again", 2000);
    expect(state(0)).toMatchObject({ paused: false, ringing: false, rings: 1 });
    balances[1]!.opened(); // 1/2
    expect(on()).toEqual([true, false]);
    balances[0]!.closed(); // 0/2: shard 1 stays paused
    await turns();
    expect(on()).toEqual([true, false]);
    balances[0]!.opened();
    balances[0]!.opened(); // 2/2: shard 1 is rung open
    await waitFor(() => on()[1]!, "shard 1 open again", 2000);
    expect(on()).toEqual([true, true]);
    balances[1]!.closed(); // 2/1: shard 0 should stop taking connections, but nobody rings for that
    await turns();
    expect(on()).toEqual([true, true]);
    expect(state(0)).toMatchObject({ ringing: false, rings: 1 });
    balances[0]!.opened(); // 3/1: it pauses at its own next accept
    expect(on()).toEqual([false, true]);
    expect([0, 1].map(state)).toEqual([
      { live: 3, listening: true, pausable: true, paused: true, ringing: false, rings: 1 },
      { live: 1, listening: true, pausable: true, paused: false, ringing: false, rings: 1 },
    ]);
  });

  it("one ring on its way at a time; a shard that cannot pause is never rung but still counts; one that stopped listening does not", async () => {
    const { balances, on, state } = shards(3, [true, false, true]);
    balances[0]!.opened();
    balances[2]!.opened(); // 1/0/1: both above shard 1 (which cannot pause, and keeps accepting)
    expect(on()).toEqual([false, true, false]);
    balances[1]!.opened(); // 1/1/1: shards 0 and 2 are rung, once each however often it is asked
    balances[1]!.opened();
    balances[1]!.closed(); // 1/1/1 again
    expect([0, 2].map((s) => state(s).rings)).toEqual([1, 1]);
    await waitFor(() => on().every(Boolean), "shards 0 and 2 open again", 2000);
    expect([0, 1, 2].map((s) => state(s).rings)).toEqual([1, 0, 1]);
    balances[1]!.opened(); // 1/2/1: nobody paused, nobody rung
    await turns();
    expect([0, 1, 2].map((s) => state(s).rings)).toEqual([1, 0, 1]);
    balances[1]!.stop(); // shard 1 left: shards 0 and 2 compare only with each other
    expect(state(1)).toMatchObject({ listening: false, live: 2 });
    balances[0]!.opened(); // 2/-/1
    expect(on()).toEqual([false, true, true]);
  });

  it("real threads in bursts of accepts: never all paused while connections wait, and each burst ends within one", async () => {
    const workerUrl = new URL("../../fixtures/accept-turns-worker.mjs", import.meta.url);
    for (const n of [2, 3]) {
      const buffer = createAcceptBuffer(n);
      const ctl = new Int32Array(new SharedArrayBuffer(16));
      const workers = Array.from({ length: n }, (_, shard) => new Worker(workerUrl, { workerData: { buffer, ctl: ctl.buffer, shard, shards: n } }));
      try {
        await waitFor(() => Atomics.load(ctl, 1) === n, `${n} workers started`, 20_000);
        let total = 0;
        for (let burst = 0; burst < 20; burst++) {
          const size = 50 + burst * 7;
          total += size;
          Atomics.store(ctl, 0, size);
          // Taken to the last one: a lost ring would leave every worker paused with some left.
          await waitFor(() => Atomics.load(ctl, 0) === 0, `burst ${burst} of ${size} taken by ${n} workers (left: ${Atomics.load(ctl, 0)})`, 10_000);
          const live = Array.from({ length: n }, (_, s) => acceptState(buffer, s).live);
          expect(sum(live)).toBe(total);
          expect(spread(live), `${n} workers, burst ${burst}: ${live.join("/")}`).toBeLessThanOrEqual(1);
        }
      } finally {
        Atomics.store(ctl, 3, 1);
        await Promise.all(workers.map((w) => w.terminate()));
      }
    }
  });
});
