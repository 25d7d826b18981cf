/**
 * Clients that ask and never read hold no more of the server than the
 * bounds (backpressure.ts): answers not yet written, by bytes (a hit's
 * value counted though the answer is a view of the item in the heap) and
 * by pieces, and bytes read and not yet parsed; whatever the reader is
 * doing (yielding under -R or not, storing small values or big ones). Meanwhile the server answers others, reading
 * goes on once the client reads, and when the clients leave every item
 * reference they held is dropped and the items' memory comes back.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_HELD_BYTES, MAX_UNSENT_BYTES, MAX_UNSENT_PIECES } from "../../../dist/apps/memcached/network/backpressure.js";
import { startMemcached, type MemcachedServer } from "../../../dist/apps/memcached/server.js";
import { totals } from "../../../dist/apps/memcached/stats/stats.js";
import { census, hogs, until, untilStopped, worst, type Census } from "./census.js";
import { RawClient } from "./client.js";
import { shardMemory, waitForMemoryBack } from "./shard-memory.js";

/** What Node reads from a socket at once: the reader may hold one such read past its bound. */
const ONE_READ = 64 << 10;
/** JS memory a shard's stuck clients may add (ten of them held 0.8-2.1 MiB a shard, measured after a GC; before the bounds, 4 million gets queued held ~800 MiB). */
const TEN_CLIENTS_JS_BYTES = 32 << 20;
const VALUE = "v".repeat(100_000);
/** A get's answer for the 100 KB item `fat`. */
const FAT_ANSWER = `VALUE fat 0 ${VALUE.length}\r\n${VALUE}\r\nEND\r\n`;
/** 400,000 gets of fat: 3.6 MB asked, 40 GB of answers. */
const GETS = Buffer.from("get fat\r\n".repeat(400_000));

describe.each([20, 1_000_000_000])("shardheap memcached -R %i: clients that never read", (requestsPerEvent) => {
  let server: MemcachedServer;
  const shardErrors: string[] = [];
  beforeAll(async () => {
    server = await startMemcached({ shards: 2, memoryPerShard: "16MiB", port: 0, requestsPerEvent });
    server.smp.on("error", (e) => shardErrors.push(`shard ${e.shard}: ${e.message}`));
  });
  afterAll(async () => {
    await server?.close();
  });

  /**
   * Run `stuck` while `n` clients send `script` and never read, once every
   * one of them has had its reading stopped; then close them and check
   * that nothing of theirs is left: no connection, no reference held on
   * either shard's index, nothing counted; `keys` deleted, each shard's
   * memory back where it was before they were stored.
   */
  async function neverRead(n: number, items: string, keys: string[], script: Buffer, stuck: (before: Census[], writer: RawClient) => Promise<void>): Promise<void> {
    const memory = await Promise.all([0, 1].map((s) => shardMemory(server, s)));
    const writer = await RawClient.open(server.port);
    try {
      await writer.request(items, (t) => t.split("STORED\r\n").length - 1 === keys.length);
      const before = await census(server);
      const clients = await hogs(server, n, script);
      try {
        await untilStopped(server, n, MAX_UNSENT_BYTES, MAX_UNSENT_PIECES);
        const now = worst(await census(server));
        expect([now.peakUnsentBytes <= 2 * MAX_UNSENT_BYTES, now.peakUnsentPieces <= 2 * MAX_UNSENT_PIECES]).toEqual([true, true]);
        await stuck(before, writer);
      } finally {
        for (const c of clients) c.close();
      }
      await until(async () => (await census(server)).every((s) => s.connections <= 1 && s.index.held === 0), "the clients' connections to close and their references to go");
      const after = worst(await census(server));
      expect([after.unsentBytes, after.unsentPieces, after.heldBytes, after.stopped]).toEqual([0, 0, 0, 0]);
      expect(await writer.request(keys.map((k) => `delete ${k}\r\n`).join(""), (t) => t.split("DELETED\r\n").length - 1 === keys.length)).toBe("DELETED\r\n".repeat(keys.length));
    } finally {
      writer.close();
    }
    await until(async () => (await census(server)).every((s) => s.connections === 0), "the writer to close");
    for (const s of [0, 1]) await waitForMemoryBack(server, s, memory[s]!);
    expect(server.smp.heap.check()).toEqual([]);
    expect(shardErrors).toEqual([]);
  }

  it.each([1, 10])("%i client(s) pipelining 400,000 gets of a 100 KB item: each stopped within the bounds, others served, everything let go", async (n) => {
    const readBefore = totals(server.config).bytes_read;
    await neverRead(n, `set fat 0 0 ${VALUE.length}\r\n${VALUE}\r\n`, ["fat"], GETS, async (before, writer) => {
      const now = await census(server);
      const held = worst(now);
      // Each connection's answers stayed within the bound, but for the one get's answer that crossed it.
      expect(held.peakUnsentBytes).toBeGreaterThan(MAX_UNSENT_BYTES);
      expect(held.peakUnsentBytes).toBeLessThanOrEqual(MAX_UNSENT_BYTES + FAT_ANSWER.length);
      expect(held.peakUnsentPieces).toBeLessThanOrEqual(MAX_UNSENT_PIECES);
      expect(held.peakHeldBytes).toBeLessThanOrEqual(MAX_HELD_BYTES + ONE_READ);
      // The server read a little of what each sent (3.6 MB), and its shards' JS memory stayed small.
      expect(totals(server.config).bytes_read - readBefore).toBeLessThan(n * (MAX_HELD_BYTES + 2 * ONE_READ) + 200_000);
      for (const s of [0, 1]) expect(now[s]!.jsMemoryBytes - before[s]!.jsMemoryBytes).toBeLessThan(TEN_CLIENTS_JS_BYTES);
      // The items they asked for are referenced (to be written), the others' gets still served.
      // (One index for the cache: every shard's census reads the same one.)
      expect(now[0]!.index.held).toBeGreaterThan(0);
      expect(await writer.request("get fat\r\n", "END\r\n")).toBe(FAT_ANSWER);
    });
  });

  it("small answers: bounded by their pieces", async () => {
    await neverRead(1, "set tiny 0 0 1\r\nt\r\n", ["tiny"], Buffer.from("get tiny\r\n".repeat(400_000)), async () => {
      const held = worst(await census(server));
      expect(held.peakUnsentPieces).toBeGreaterThan(MAX_UNSENT_PIECES);
      expect(held.peakUnsentPieces).toBeLessThanOrEqual(MAX_UNSENT_PIECES + 1);
      expect(held.peakUnsentBytes).toBeLessThan(MAX_UNSENT_BYTES);
    });
  });

  it("sets and gets, small and big, from connections on both shards: within the bounds", async () => {
    const keys = ["mix0", "mix1"];
    const small = "s".repeat(1000);
    const big = "b".repeat(60_000);
    const round = keys.map((k) => `set ${k} 0 0 ${small.length}\r\n${small}\r\nget ${k} fat\r\nset ${k}b 0 0 ${big.length} noreply\r\n${big}\r\nmg ${k}b v\r\nget fat ${k}b\r\n`).join("");
    const script = Buffer.from(round.repeat(Math.ceil(4_000_000 / round.length)));
    const stored = `set fat 0 0 ${VALUE.length}\r\n${VALUE}\r\n`;
    const all = ["fat", ...keys.flatMap((k) => [k!, `${k}b`])];
    const seeded = keys.map((k) => `set ${k} 0 0 1\r\nx\r\nset ${k}b 0 0 1\r\nx\r\n`).join("");
    // What may still come once reading stops: the answers of the read that crossed the bound, one round's at most.
    const oneRound = keys.length * (2 * FAT_ANSWER.length + 2 * big.length + small.length + 200);
    await neverRead(2, stored + seeded, all, script, async (_before, writer) => {
      const held = worst(await census(server));
      expect(held.peakUnsentBytes).toBeLessThanOrEqual(MAX_UNSENT_BYTES + oneRound);
      expect(held.peakHeldBytes).toBeLessThanOrEqual(MAX_HELD_BYTES + ONE_READ);
      expect(await writer.request("get fat\r\n", "END\r\n")).toBe(FAT_ANSWER);
    });
  });

  it("a client that reads late gets every answer, in order: reading resumes as the socket drains", async () => {
    const writer = await RawClient.open(server.port);
    const late = await RawClient.open(server.port);
    try {
      await writer.request(`set fat 0 0 ${VALUE.length}\r\n${VALUE}\r\n`);
      late.socket.pause();
      // 500 gets (50 MB of answers: the bound stops and resumes reading a dozen times), a version at the end.
      late.send("get fat\r\n".repeat(500) + "version\r\n");
      await until(async () => worst(await census(server)).stopped === 1, "the late reader's connection to stop reading");
      late.socket.resume();
      const got = await late.untilBytes(500 * FAT_ANSWER.length + 10, 60_000);
      const answer = Buffer.from(FAT_ANSWER, "latin1");
      for (let i = 0; i < 500; i++) expect(got.subarray(i * answer.length, (i + 1) * answer.length).equals(answer), `answer ${i}`).toBe(true);
      expect(got.subarray(500 * answer.length).toString("latin1")).toMatch(/^VERSION \S+\r\n$/);
      expect(await writer.request("delete fat\r\n")).toBe("DELETED\r\n");
    } finally {
      late.close();
      writer.close();
    }
  });
});
