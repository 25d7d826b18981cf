/**
 * `shardheap memcached`'s ASCII protocol, byte for byte: every command,
 * noreply, errors in memcached's words, pipelining, requests split across
 * packets, the binary protocol refused. The table of requests and answers
 * (protocol-cases.ts) is checked against shardheap here (two shards: keys
 * land on both, so answers come from the connection's own shard and
 * through the other), and against memcached 1.6 itself in
 * protocol-reference.test.ts.
 */
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startMemcached, type MemcachedServer } from "../../../dist/apps/memcached/server.js";
import { lines, RawClient } from "./client.js";
import { BINARY_ME, CASES, DEBUG_LINE, META_COUNTED, binaryMe, counted, debugLine, expected, fill, highBytes, normal, run } from "./protocol-cases.js";

describe("shardheap memcached: the ASCII protocol", () => {
  let server: MemcachedServer;
  beforeAll(async () => {
    server = await startMemcached({ shards: 2, memoryPerShard: "16MiB", port: 0 });
  });
  afterAll(async () => {
    await server?.close();
  });

  it.each(CASES.map((c, i) => [c.name, c, i] as const))("%s", async (_name, c, i) => {
    const key = `p${i}k`;
    expect(await run(server.port, c, key)).toBe(expected(c, key));
  });

  it("answers pipelined requests, all in one packet, in order (keys of both shards)", async () => {
    const cases = CASES.filter((c) => !c.closes && !c.send.includes("flush_all") && !c.send.includes("stats"));
    const script = cases.map((c, i) => fill(c.send, `pipe${i}k`)).join("") + "version\r\n";
    const want = cases.map((c, i) => expected(c, `pipe${i}k`)).join("");
    const client = await RawClient.open(server.port);
    try {
      const got = await client.request(script, /VERSION [^\r\n]*\r\n$/, 30_000);
      expect(normal(got).replace(/VERSION\r\n$/, "")).toBe(want);
    } finally {
      client.close();
    }
  });

  it("answers requests split across packets, down to one byte each", async () => {
    const cases = CASES.filter((c) => !c.closes && !c.send.includes("flush_all") && c.send.length < 400);
    const script = Buffer.from(cases.map((c, i) => fill(c.send, `split${i}k`)).join("") + "version\r\n", "latin1");
    const want = cases.map((c, i) => expected(c, `split${i}k`)).join("");
    const client = await RawClient.open(server.port);
    try {
      // Pieces of 1, 2, 3, ... 7 bytes, each its own write after the last has gone out.
      let at = 0;
      for (let n = 1; at < script.length; n = (n % 7) + 1) {
        const piece = script.subarray(at, at + n);
        at += n;
        await new Promise<void>((resolve) => client.socket.write(piece, () => resolve()));
        if (at % 97 < 7) await new Promise((r) => setImmediate(r));
      }
      const got = await client.take(/VERSION [^\r\n]*\r\n$/, 30_000);
      expect(normal(got).replace(/VERSION\r\n$/, "")).toBe(want);
    } finally {
      client.close();
    }
  });

  it("flush_all with a delay: the items stay until the delay is up, then every shard's are gone", async () => {
    const client = await RawClient.open(server.port);
    try {
      // Keys on both shards (a flush runs on every shard).
      const keys = Array.from({ length: 8 }, (_, i) => `delayed${i}`);
      await client.request(keys.map((k) => `set ${k} 0 0 1\r\nx\r\n`).join(""), lines("STORED", keys.length));
      const flushedAt = Date.now();
      expect(await client.request("flush_all 2\r\n")).toBe("OK\r\n");
      const all = `get ${keys.join(" ")}\r\n`;
      expect((await client.request(all, "END\r\n")).match(/^VALUE /gm)).toHaveLength(keys.length);
      const deadline = Date.now() + 10_000;
      while ((await client.request(all, "END\r\n")) !== "END\r\n") {
        if (Date.now() > deadline) throw new Error("flush_all 2 had not emptied the cache after 10 s");
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(Date.now() - flushedAt).toBeGreaterThanOrEqual(1000);
    } finally {
      client.close();
    }
  });

  it("refuses the binary protocol with a binary error it can read, then closes", async () => {
    const client = await RawClient.open(server.port);
    try {
      // A binary "get" with opaque 0xdeadbeef.
      const request = Buffer.alloc(24);
      request[0] = 0x80;
      request[1] = 0x00;
      request.writeUInt32BE(0xdeadbeef, 12);
      client.send(request);
      const got = Buffer.from(await client.untilClosed(), "latin1");
      expect(got[0]).toBe(0x81);
      expect(got.readUInt16BE(6)).toBe(0x0083); // not supported
      expect(got.readUInt32BE(12)).toBe(0xdeadbeef);
      expect(got.subarray(24, 24 + got.readUInt32BE(8)).toString()).toMatch(/ASCII protocol only/);
    } finally {
      client.close();
    }
  });

  it("closes without a word on a line with no \\n in 2048 bytes, as memcached does (a get may be longer)", async () => {
    const client = await RawClient.open(server.port);
    try {
      client.send(`incr ${" ".repeat(2048)} manyspaces 1`);
      expect(await client.untilClosed()).toBe("");
    } finally {
      client.close();
    }
    // A multi-get may be longer than 2048 bytes, as in memcached.
    const keys = Array.from({ length: 400 }, (_, i) => `long${i}`).join(" ");
    const c2 = await RawClient.open(server.port);
    try {
      c2.send("set long7 0 0 1\r\n7\r\n");
      expect(await c2.take()).toBe("STORED\r\n");
      c2.send("get ");
      for (let i = 0; i < keys.length; i += 500) c2.send(keys.slice(i, i + 500));
      expect(await c2.request("\r\n", "END\r\n")).toBe("VALUE long7 0 1\r\n7\r\nEND\r\n");
    } finally {
      c2.close();
    }
  });

  it("refuses lengths past 2^31 as current memcached does (1.6.18 read 99999999999 as 1215752191 bytes to skip)", async () => {
    const client = await RawClient.open(server.port);
    try {
      expect(await client.request("set f 0 0 99999999999\r\nversion\r\n", /VERSION [^\r\n]*\r\n$/)).toMatch(/^CLIENT_ERROR bad command line format\r\nVERSION /);
      // mcmc_tokto32: no sign but '-'.
      expect(await client.request("set f 0 0 +1\r\nversion\r\n", /VERSION [^\r\n]*\r\n$/)).toMatch(/^CLIENT_ERROR bad command line format\r\nVERSION /);
      expect(await client.request("set f 0 0 2147483645\r\n", "\r\n")).toBe("SERVER_ERROR object too large for cache\r\n");
    } finally {
      client.close();
    }
  });

  it("me: an item's metadata in memcached's form", async () => {
    expect(await debugLine(server.port, "debugged")).toMatch(DEBUG_LINE);
  });

  it("a key's bytes past 0x7f come back as sent in me and stats cachedump; t of an exptime passed counts back from 2^32", async () => {
    const got = await highBytes(server.port);
    expect(got.me).toMatch(/^ME hi\xe9\xff exp=-1 /);
    expect(got.dump).toMatch(/^ITEM hi\xe9\xff \[1 b; 0 s\]\r$/m);
    expect(got.ttl).toBeGreaterThanOrEqual(2 ** 31);
    expect(got.ttl).toBeLessThanOrEqual(2 ** 32 - 61);
  });

  it("me of a base64 key: answered in base64 as sent (a plain item's key plain), right behind its ms on either shard", async () => {
    expect(await binaryMe(server.port)).toMatch(BINARY_ME.answer);
  });

  it("counts meta commands in stats as memcached does", async () => {
    // A server of its own: curr_items is the whole cache's, and the earlier
    // tests' short-lived items, reclaimed while the script runs (the tail
    // look of a set, a quiet shard's timer), took one from it on a loaded
    // machine, in memcached (its LRU crawler) as here.
    const own = await startMemcached({ shards: 2, memoryPerShard: "16MiB", port: 0 });
    try {
      expect(await counted(own.port, META_COUNTED.script.replaceAll("{k}", "counted"), Object.keys(META_COUNTED.counts))).toEqual(META_COUNTED.counts);
    } finally {
      await own.close();
    }
  });

  it("version: memcached's numeric form, which clients parse; stats says what the server is", async () => {
    const client = await RawClient.open(server.port);
    try {
      const line = await client.request("version\r\n");
      // The npm memcached client's pattern (it threw on a suffix), on the line without its \r\n.
      expect(line.slice(0, -2)).toMatch(/^VERSION (\d+)\.(\d+)\.(\d+)$/);
      const stats = await client.request("stats\r\n", "END\r\n");
      expect(stats).toContain(`STAT version ${line.slice("VERSION ".length, -2)}\r\n`);
      const own = (JSON.parse(readFileSync(new URL("../../../package.json", import.meta.url), "utf8")) as { version: string }).version;
      expect(stats).toContain(`STAT shardheap_version ${own}\r\n`);
    } finally {
      client.close();
    }
  });

  it("stats: memcached's fields, then each shard's MemoryStats", async () => {
    const client = await RawClient.open(server.port);
    try {
      await client.request("set statkey 0 0 3\r\nabc\r\nget statkey statmiss\r\n", "END\r\n");
      const text = await client.request("stats\r\n", "END\r\n");
      const stats = new Map(text.split("\r\n").filter((l) => l.startsWith("STAT ")).map((l) => l.split(" ").slice(1) as [string, string]));
      for (const field of ["pid", "uptime", "time", "version", "curr_items", "total_items", "bytes", "get_hits", "get_misses", "evictions", "curr_connections", "total_connections", "cmd_get", "cmd_set", "threads"]) {
        expect(stats.has(field), field).toBe(true);
      }
      expect(Number(stats.get("pid"))).toBe(process.pid);
      expect(Number(stats.get("threads"))).toBe(2);
      expect(Number(stats.get("curr_connections"))).toBeGreaterThanOrEqual(1);
      expect(Number(stats.get("get_hits"))).toBeGreaterThanOrEqual(1);
      expect(Number(stats.get("get_misses"))).toBeGreaterThanOrEqual(1);
      for (const s of [0, 1]) {
        for (const f of ["mallocs", "frees", "crossShardFrees", "liveObjects", "freeMemory", "allocatedMemory", "totalMemory", "curr_items", "curr_connections"]) {
          expect(stats.has(`shard${s}:${f}`), `shard${s}:${f}`).toBe(true);
        }
      }
      expect(Number(stats.get("shard0:curr_items")) + Number(stats.get("shard1:curr_items"))).toBe(Number(stats.get("curr_items")));
      const settings = await client.request("stats settings\r\n", "END\r\n");
      expect(settings).toMatch(/^STAT item_size_max 1048576\r$/m);
    } finally {
      client.close();
    }
  });
});
