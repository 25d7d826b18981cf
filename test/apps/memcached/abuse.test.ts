/**
 * Bad clients never take down a shard or the server, and never leave
 * memory behind: random bytes, huge lengths, half a value and then gone,
 * a client that never reads what it asked for, and 10,000 connections
 * opened and dropped. After each, the server still answers, the heap
 * checks clean, and (once idle) each shard's memory is back to the start.
 */
import { randomBytes } from "node:crypto";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { MAX_HELD_BYTES, MAX_UNSENT_BYTES, type Holding } from "../../../dist/apps/memcached/network/backpressure.js";
import { startMemcached, type MemcachedServer } from "../../../dist/apps/memcached/server.js";
import { totals } from "../../../dist/apps/memcached/stats/stats.js";
import { waitFor } from "../../helpers.js";
import { RawClient } from "./client.js";
import { shardMemory, waitForMemoryBack, type ShardMemory } from "./shard-memory.js";

let server: MemcachedServer;
let baseline: ShardMemory[];
/** What the shards' threads reported failing (a shard that died, a task that threw outside a request). */
const shardErrors: string[] = [];

beforeAll(async () => {
  server = await startMemcached({ shards: 2, memoryPerShard: "16MiB", port: 0 });
  server.smp.on("error", (e) => shardErrors.push(`shard ${e.shard}: ${e.message}`));
  baseline = await Promise.all([0, 1].map((s) => shardMemory(server, s)));
});
afterAll(async () => {
  await server?.close();
});

/**
 * Every client a test opens, closed after it whatever happened: a test that
 * fails halfway must not leave its connections open for the next test's
 * healthy(), which then (rightly) waits for them in vain ("waited 10000 ms
 * for the other connections to close" in the 10,000 connections test, after
 * a failed never-read test had left its two clients open).
 */
const opened: RawClient[] = [];
async function open(timeoutMs?: number): Promise<RawClient> {
  const c = await RawClient.open(server.port, "127.0.0.1", timeoutMs);
  opened.push(c);
  return c;
}
afterEach(() => {
  for (const c of opened.splice(0)) c.close();
});


/** No shard died, the server answers, holds no item and no connection but ours, the heap is sound, and every shard's memory is back. */
async function healthy(): Promise<void> {
  expect(shardErrors).toEqual([]);
  // Each shard's thread still runs its tasks (the listening sockets and stores live there).
  for (const s of [0, 1]) expect(await server.smp.submitTo<{ connections: number }>(s, "census")).toHaveProperty("connections");
  const c = await RawClient.open(server.port);
  try {
    expect(await c.request("set probe 0 0 2\r\nok\r\nget probe\r\ndelete probe\r\n", "DELETED\r\n")).toBe("STORED\r\nVALUE probe 0 2\r\nok\r\nEND\r\nDELETED\r\n");
    expect(await c.request("flush_all\r\n")).toBe("OK\r\n");
    await waitFor(() => totals(server.config).curr_connections === 1, "the other connections to close", 10_000);
  } finally {
    c.close();
  }
  await waitFor(() => totals(server.config).curr_connections === 0, "the probe connection to close", 10_000);
  expect(server.smp.heap.check()).toEqual([]);
  for (const s of [0, 1]) {
    await waitForMemoryBack(server, s, baseline[s]!);
  }
}

describe("shardheap memcached under bad input", () => {
  it("random bytes on many connections", async () => {
    const clients = await Promise.all(Array.from({ length: 16 }, () => open()));
    for (const [i, c] of clients.entries()) {
      // Not the binary magic first (that is refused at once); then anything, in pieces.
      c.send(Buffer.from([0x61 + (i % 20)]));
      for (let n = 0; n < 20; n++) c.send(randomBytes(1 + ((n * 997 + i * 131) % 3000)));
    }
    await new Promise((r) => setTimeout(r, 300));
    for (const c of clients) c.close();
    await healthy();
  });

  it("storage commands with lengths that are lies, and data that stops halfway", async () => {
    const lies = [
      "set a 0 0 1000000\r\nonly this", // half a value, then gone
      "set b 0 0 2000000000\r\n", // longer than any item: skipped as it comes
      `set c 0 0 500000\r\n${"x".repeat(250_000)}`,
      "append d 0 0 100000\r\nabc",
      "cas e 0 0 100 5\r\n",
      "get f g h", // an unfinished line
      `get ${"k ".repeat(50_000)}`, // a long multi-get never finished
    ];
    for (const text of lies) {
      const c = await open();
      c.send(text);
      await new Promise((r) => setTimeout(r, 30));
      c.close();
    }
    // The same keys still work for an honest client.
    const c = await open();
    try {
      expect(await c.request("set a 0 0 1\r\n1\r\nget a b c\r\n", "END\r\n")).toBe("STORED\r\nVALUE a 0 1\r\n1\r\nEND\r\n");
    } finally {
      c.close();
    }
    await healthy();
  });

  it("big values (a page span reserved on the connection's shard): cut off after the command line, halfway, half-closed, pipelined", async () => {
    const keys = ["far0", "far1"];
    const value = "w".repeat(100_000);
    for (let round = 0; round < 4; round++) {
      for (const key of keys) {
        // Gone right after the command line, its item reserved and never filled: the client's close, or the
        // server's own (closeConnections on every shard, as at its stop).
        const early = await open();
        early.send(`set ${key} 0 0 ${value.length}\r\n`);
        await new Promise((r) => setTimeout(r, 10));
        if (round % 2 === 0) early.close();
        else await Promise.all([0, 1].map((s) => server.smp.submitTo(s, "closeConnections")));
        early.close();
        // Gone halfway through the value.
        const half = await open();
        half.send(`set ${key} 0 0 ${value.length}\r\n${value.slice(0, 50_000)}`);
        await new Promise((r) => setTimeout(r, 5 * round));
        half.close();
        // Half-closed after a set and a get: both answered, then the close.
        const ender = await open();
        ender.send(`set ${key} 3 0 ${value.length}\r\n${value}\r\nget ${key}\r\n`);
        ender.socket.end();
        expect(await ender.untilClosed()).toBe(`STORED\r\nVALUE ${key} 3 ${value.length}\r\n${value}\r\nEND\r\n`);
        // Pipelined around it: nothing after the set overtakes it, nothing before it sees it.
        const piped = await open();
        try {
          const answer = await piped.request(
            `delete ${key}\r\nget ${key}\r\nset ${key} 5 0 ${value.length}\r\n${value}\r\nget ${key}\r\nappend ${key} 0 0 1\r\n!\r\ndelete ${key}\r\nget ${key}\r\n`,
            (t) => t.endsWith("STORED\r\nDELETED\r\nEND\r\n"),
          );
          expect(answer).toBe(`DELETED\r\nEND\r\nSTORED\r\nVALUE ${key} 5 ${value.length}\r\n${value}\r\nEND\r\nSTORED\r\nDELETED\r\nEND\r\n`);
        } finally {
          piped.close();
        }
      }
    }
    await healthy();
  });

  it("meta commands, valid and not, pipelined on both shards' keys and cut off anywhere: no reference or item left behind", async () => {
    // A deterministic mix: every flag, tokens good and bad, keys plain and base64, ms lengths true and false.
    const flags = ["v", "k", "s", "t", "c", "f", "h", "l", "u", "q", "O1", "T30", "T-1", "N30", "R60", "E9", "C1", "I", "x", "MA", "MP", "ME", "MR", "MD", "J5", "D3", "Fx", "T", "!", "b"];
    let seed = 7;
    const next = (n: number): number => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % n;
    const line = (lies: boolean): string => {
      const key = next(4) === 0 ? Buffer.from(`mk${next(8)}`).toString("base64") : `mk${next(8)}`;
      const picked = Array.from({ length: next(6) }, () => flags[next(flags.length)]!);
      const cmd = ["mg", "mg", "mg", "ms", "ms", "ms", "md", "ma", "me", "mn"][next(10)]!;
      if (cmd === "mg") return `mg ${key} v ${picked.join(" ")}\r\n`;
      if (cmd !== "ms") return `${cmd} ${key} ${picked.join(" ")}\r\n`;
      const length = next(5) * 40;
      // Now and then a length that lies (longer than the data sent: the next lines are taken as data), in the rounds cut off.
      return `ms ${key} ${lies && next(8) === 0 ? length + 7 : length} ${picked.join(" ")}\r\n${"m".repeat(length)}\r\n`;
    };
    // The keys exist at first, so the reads hit (and hold references to items while their answers go out).
    const seeds = Array.from({ length: 8 }, (_, i) => `ms mk${i} 3 T0\r\nabc\r\nms ${Buffer.from(`mk${i}`).toString("base64")} 3 b\r\nabc\r\n`).join("");
    let hits = 0;
    for (let round = 0; round < 12; round++) {
      const whole = round % 3 === 0;
      const script = seeds + Array.from({ length: 300 }, () => line(!whole)).join("");
      const c = await open();
      const cut = whole ? script.length : seeds.length + next(script.length - seeds.length);
      c.send(script.slice(0, cut));
      if (whole) {
        // All of it, then the end marker: answered in order, whatever was refused.
        const answers = await c.request("mn\r\nversion\r\n", /VERSION [^\r\n]*\r\n$/, 20_000);
        expect(answers).toMatch(/MN\r\nVERSION /);
        hits += answers.split("\r\nVA ").length - 1;
      } else {
        await new Promise((r) => setTimeout(r, 5 * (round % 4)));
      }
      c.close();
    }
    expect(hits).toBeGreaterThan(10);
    await healthy();
  });

  it("a client that asks and never reads: the server stops reading it within its bounds, and lets go of everything when it leaves", async () => {
    const writer = await open();
    const value = "v".repeat(100_000);
    const answer = `VALUE fat 0 ${value.length}\r\n${value}\r\nEND\r\n`;
    expect(await writer.request(`set fat 0 0 ${value.length}\r\n${value}\r\n`)).toBe("STORED\r\n");
    const readBefore = totals(server.config).bytes_read;
    const hog = await open();
    try {
      hog.socket.pause();
      const gets = Buffer.from("get fat\r\n".repeat(20_000)); // 400,000 gets in all: 3.6 MB asked, 40 GB of answers
      for (let i = 0; i < 20; i++) hog.send(gets);
      // The server stops reading it once its answers not yet written pass their bound (and goes on while the kernel's
      // socket buffers take them): wait for it stopped twice alike, or (without the bound) for far more than it allows.
      const census = async (): Promise<Holding[]> => (await Promise.all([0, 1].map((s) => server.smp.submitTo<{ holding: Holding }>(s, "census")))).map((s) => s.holding);
      const state = (held: Holding[]): string => held.map((h) => `${h.stopped} ${h.unsentBytes}`).join(" ");
      const t0 = performance.now();
      let last = "";
      let held = await census();
      while (!held.some((h) => h.peakUnsentBytes > 4 * MAX_UNSENT_BYTES) && !(held.some((h) => h.stopped === 1) && state(held) === last)) {
        if (performance.now() - t0 > 20_000) throw new Error("waited 20 s for the server to stop reading the client that never reads");
        last = state(held);
        await new Promise((r) => setTimeout(r, 20));
        held = await census();
      }
      expect(Math.max(...held.map((h) => h.peakUnsentBytes))).toBeLessThanOrEqual(MAX_UNSENT_BYTES + answer.length);
      // It read only part of what the hog sent (what its reader may hold, and a read more).
      expect(totals(server.config).bytes_read - readBefore).toBeLessThan(MAX_HELD_BYTES + (128 << 10));
      // The server still serves others meanwhile.
      expect(await writer.request("get fat\r\n", "END\r\n")).toBe(answer);
    } finally {
      hog.close();
      writer.close();
    }
    await healthy();
  });

  it("10,000 connections opened and dropped", async () => {
    const before = totals(server.config).total_connections;
    for (let wave = 0; wave < 20; wave++) {
      const opened = await Promise.all(Array.from({ length: 500 }, () => open(30_000)));
      opened.forEach((c, i) => {
        if (i % 3 === 0) c.send("get x\r\n");
        if (i % 3 === 1) c.send("set y 0 0 10\r\nabc");
        c.close();
      });
    }
    await waitFor(() => totals(server.config).total_connections - before >= 10_000, "every connection to be accepted", 30_000);
    await healthy();
  });
});
