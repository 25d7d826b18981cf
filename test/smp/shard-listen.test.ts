/**
 * One port from every shard (ShardContext.listen, src/smp/shard-listen.ts)
 * with real shards and real sockets: an HTTP server per shard behind one
 * port, connections spread over the shards that listen (turns at
 * accepting), one shard closing its server while the other keeps serving,
 * port 0 picking one port for all, a shard that dies leaving the turns,
 * and the errors. The shards' servers answer "shard N" (fixtures/
 * listen-tasks.mjs), so which shard served a connection is known.
 */
import { connect, createServer, type AddressInfo, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { Smp } from "../../dist/index.js";

const MODULE = new URL("../fixtures/listen-tasks.mjs", import.meta.url);
const opened = { smps: [] as Smp[], sockets: [] as Socket[] };
afterEach(async () => {
  for (const s of opened.sockets.splice(0)) s.destroy();
  await Promise.all(opened.smps.splice(0).map((s) => s.stop()));
});

async function start(shards = 2): Promise<Smp> {
  const smp = await Smp.start({ shards, memoryPerShard: "4MiB", module: MODULE });
  opened.smps.push(smp);
  return smp;
}

/** A connection to `port` that asked once and was answered (kept open): which shard answered. */
function ask(port: number, timeoutMs = 10_000): Promise<{ socket: Socket; shard: number }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    opened.sockets.push(socket);
    let data = "";
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no answer on port ${port} within ${timeoutMs} ms`));
    }, timeoutMs);
    socket.setEncoding("utf8");
    socket.on("data", (d: string) => {
      data += d;
      const m = /shard (\d+)\n/.exec(data);
      if (m === null) return;
      clearTimeout(timer);
      socket.removeAllListeners("data");
      resolve({ socket, shard: Number(m[1]) });
    });
    socket.once("error", (e) => {
      clearTimeout(timer);
      reject(e);
    });
    socket.write("GET / HTTP/1.1\r\nHost: test\r\n\r\n");
  });
}

/** `n` connections opened together, each answered: the count per shard. */
async function askTogether(port: number, n: number, shards: number): Promise<number[]> {
  const answers = await Promise.all(Array.from({ length: n }, () => ask(port)));
  const counts = Array<number>(shards).fill(0);
  for (const a of answers) counts[a.shard]!++;
  return counts;
}

function closeClients(): void {
  for (const s of opened.sockets.splice(0)) s.destroy();
}

/** Until every shard's server has seen its connections close (each counts its own turns by them). */
async function settled(smp: Smp, name = "main"): Promise<void> {
  const t0 = performance.now();
  while ((await smp.invokeOnAll<number>("connections", name)).some((n) => n > 0)) {
    if (performance.now() - t0 > 5000) throw new Error("connections still open on the server 5 s after the clients closed them");
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Whether `port` on 127.0.0.1 can be bound here now (nobody holds it). */
function bindable(port: number): Promise<boolean> {
  const probe = createServer();
  return new Promise((resolve) => {
    probe.once("error", () => resolve(false));
    probe.listen(port, "127.0.0.1", () => probe.close(() => resolve(true)));
  });
}

const spread = (c: number[]): number => Math.max(...c) - Math.min(...c);

describe("ShardContext.listen: one port from every shard", () => {
  it("two shards behind one port (port 0: one port for both): connections opened together are spread within one, run after run", async () => {
    const smp = await start(2);
    const bound = await smp.invokeOnAll<{ port: number; host: string }>("serve", { options: { port: 0, host: "127.0.0.1" } });
    expect(bound[0]!.port).toBeGreaterThan(0);
    expect(bound).toEqual([
      { port: bound[0]!.port, host: "127.0.0.1" },
      { port: bound[0]!.port, host: "127.0.0.1" },
    ]);
    for (let run = 0; run < 4; run++) {
      const counts = await askTogether(bound[0]!.port, 21, 2);
      expect(counts.reduce((a, b) => a + b), `run ${run}`).toBe(21);
      expect(spread(counts), `run ${run}: ${counts.join("/")}`).toBeLessThanOrEqual(1);
      closeClients();
      await settled(smp);
    }
    expect(smp.heap.check()).toEqual([]);
  });

  it("a shard closing its server leaves the other serving; the port is free once both have closed", async () => {
    const smp = await start(2);
    const [{ port }] = await smp.invokeOnAll<{ port: number }>("serve", { options: { port: 0, host: "127.0.0.1" } });
    expect(spread(await askTogether(port!, 8, 2))).toBe(0);
    closeClients();
    await settled(smp);
    expect(await smp.submitTo(0, "close")).toBe(false);
    // Every new connection goes to shard 1, opened together or one after another.
    expect(await askTogether(port!, 10, 2)).toEqual([0, 10]);
    for (let i = 0; i < 5; i++) expect((await ask(port!)).shard).toBe(1);
    closeClients();
    expect(await bindable(port!)).toBe(false);
    await smp.submitTo(1, "close");
    const t0 = performance.now();
    while (!(await bindable(port!))) {
      if (performance.now() - t0 > 5000) throw new Error(`port ${port} still held 5 s after both shards closed`);
      await new Promise((r) => setTimeout(r, 10));
    }
    // And it can be listened on again, by both.
    await smp.invokeOnAll("serve", { options: { port: port!, host: "127.0.0.1" } });
    expect(spread(await askTogether(port!, 6, 2))).toBe(0);
  });

  it("each shard's second port-0 listen shares a second port; a port asked by number joins the listen that got it; three shards take turns", async () => {
    const smp = await start(3);
    const first = await smp.invokeOnAll<{ port: number }>("serve", { name: "a", options: { port: 0, host: "127.0.0.1" } });
    const second = await smp.invokeOnAll<{ port: number }>("serve", { name: "b", options: { port: 0, host: "127.0.0.1" } });
    expect(new Set(first.map((b) => b.port)).size).toBe(1);
    expect(new Set(second.map((b) => b.port)).size).toBe(1);
    expect(second[0]!.port).not.toBe(first[0]!.port);
    expect(await askTogether(first[0]!.port, 9, 3)).toEqual([3, 3, 3]);
    closeClients();
    await settled(smp, "a");
    expect(await askTogether(second[0]!.port, 9, 3)).toEqual([3, 3, 3]);
    closeClients();
    await settled(smp, "b");
    // Shard 2 closes "a" and listens on its port by number: it joins the same socket.
    await smp.submitTo(2, "close", "a");
    expect(await smp.submitTo(2, "serve", { name: "c", options: { port: first[0]!.port, host: "127.0.0.1" } })).toEqual({ port: first[0]!.port, host: "127.0.0.1" });
    expect(await askTogether(first[0]!.port, 9, 3)).toEqual([3, 3, 3]);
  });

  it("a shard whose thread dies leaves the turns: the other shard takes every new connection", async () => {
    const smp = await start(2);
    const replaced = new Promise<number>((resolve) => smp.once("replaced", (r) => resolve(r.shard)));
    smp.on("error", () => {});
    const [{ port }] = await smp.invokeOnAll<{ port: number }>("serve", { options: { port: 0, host: "127.0.0.1" } });
    expect(await askTogether(port!, 4, 2)).toEqual([2, 2]);
    await smp.submitTo(0, "exitSoon");
    expect(await replaced).toBe(0);
    // Shard 1 holds 2 live connections; had shard 0's line stayed (2, listening), shard 1 would pause at its 3rd.
    for (let i = 0; i < 4; i++) expect((await ask(port!, 5000)).shard).toBe(1);
    expect(await askTogether(port!, 4, 2)).toEqual([0, 4]);
    // The fresh thread of shard 0 listens again and takes its turns.
    closeClients();
    await settled(smp);
    await smp.submitTo(0, "serve", { options: { port: port!, host: "127.0.0.1" } });
    expect(spread(await askTogether(port!, 6, 2))).toBe(0);
  });

  it("errors: a port in use as net.Server.listen says it, bad options, a shard listening twice on a port, no server", async () => {
    const held = createServer();
    await new Promise<void>((resolve) => held.listen(0, "127.0.0.1", resolve));
    try {
      const busy = (held.address() as AddressInfo).port;
      const smp = await start(2);
      const refusal = { name: "Error", code: "EADDRINUSE", message: `listen EADDRINUSE: address already in use 127.0.0.1:${busy}` };
      expect(await smp.invokeOnAll("refused", { options: { port: busy, host: "127.0.0.1" } })).toEqual([refusal, refusal]);
      expect(await smp.submitTo(0, "refused", { options: { port: 70000 } })).toMatchObject({ name: "InvalidValueError", message: "listen: port must be a whole number from 0 to 65535, got 70000" });
      expect(await smp.submitTo(0, "refused", { options: { port: 0, backlog: 0 } })).toMatchObject({ name: "InvalidValueError", message: "listen: backlog must be a positive whole number, got 0" });
      expect(await smp.submitTo(0, "refused", { options: { port: 0, hots: "x" } })).toMatchObject({ name: "InvalidValueError" });
      expect(await smp.submitTo(0, "refused", { options: { port: 0 }, server: "none" })).toMatchObject({ name: "TypeError", message: expect.stringContaining("net.Server") });
      const [{ port }] = await smp.invokeOnAll<{ port: number }>("serve", { options: { port: 0, host: "127.0.0.1" } });
      expect(await smp.submitTo(0, "refused", { options: { port, host: "127.0.0.1" } })).toEqual({
        name: "Error",
        code: null,
        message: `listen: this shard listens on 127.0.0.1 port ${port} already (one server per shard and port)`,
      });
      expect(await smp.submitTo(0, "refused", { options: { port: 0 }, server: "main" })).toMatchObject({ message: "listen: this server is listening already (close it first)" });
      // The refusals changed nothing: both shards still serve the port.
      expect(spread(await askTogether(port!, 6, 2))).toBe(0);
    } finally {
      await new Promise((r) => held.close(r));
    }
  });

  it("the default host is every address: reachable on 127.0.0.1", async () => {
    const smp = await start(2);
    const bound = await smp.invokeOnAll<{ port: number; host: string }>("serve", { options: { port: 0 } });
    expect(bound[1]).toEqual(bound[0]);
    expect(["::", "0.0.0.0"]).toContain(bound[0]!.host);
    expect(spread(await askTogether(bound[0]!.port, 4, 2))).toBe(0);
  });
});
