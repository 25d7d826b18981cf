/**
 * One get line of many keys (up to 1 MiB: some 500,000 one-byte keys) from
 * clients that do not read: the connection answers it key by key and holds
 * the rest of the line between two keys while its unsent answers are past
 * their bounds (backpressure.ts), so what it holds stays within them
 * whatever one line asks; others are served meanwhile; once the clients
 * read, every answer comes, in order, once, with a single END, the hits
 * and misses counted exactly; and when they leave every reference they
 * held goes.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_UNSENT_BYTES, MAX_UNSENT_PIECES } from "../../../dist/apps/memcached/network/backpressure.js";
import { MAX_GET_LINE } from "../../../dist/apps/memcached/protocol/reader.js";
import { startMemcached, type MemcachedServer } from "../../../dist/apps/memcached/server.js";
import { totals, type StatName } from "../../../dist/apps/memcached/stats/stats.js";
import { census, hogs, until, untilStopped, worst, type Census } from "./census.js";
import { lines, RawClient } from "./client.js";

/** One-byte keys. */
const ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
/** Stored, a one-byte value each (the key itself): the first 40; the other 22 miss. */
const SMALL = [...ALPHABET.slice(0, 40)];
/** The i-th key of a line: the alphabet in a stride, hits and misses mixed. */
const keyAt = (i: number): string => ALPHABET[(i * 7 + (i >>> 6)) % ALPHABET.length]!;
/** Keys in a line: 1,000,008 bytes with "gats 0 ", within a get line's 1 MiB (reader.ts). */
const MANY = 500_000;
/** Two 100 KB items (not among SMALL), and a key that misses. */
const BIG: readonly string[] = ["0", "1"];
const BIG_VALUE = "w".repeat(100_000);
const bigAt = (i: number): string => (i % 5 === 4 ? "9" : BIG[i % 2]!);
/** The most one key's answer may add past the bound: its pieces (gets: three), its bytes (a 100 KB hit). */
const HIT_PIECES = 3;
const BIG_HIT_BYTES = `VALUE 0 0 ${BIG_VALUE.length} 18446744073709551615\r\n`.length + BIG_VALUE.length + 2;
/**
 * JS memory one stuck connection adds on its shard: its answers at the
 * bound and its line (a string of 1 MB): 2.4-3.5 MiB measured after a GC.
 * Before the line waited between keys, one line made 320,000-1,000,000
 * pieces at once: 53-151 MiB after a GC.
 */
const LINE_JS_BYTES = 4 << 20;
/** What a shard's heap may also hold, not yet collected (census forces no GC): up to 11 MiB more seen. */
const GARBAGE_JS_BYTES = 16 << 20;

/** A line's answers, as the server must write them, and its hits and misses; `cas` given: gets (gats). */
function answers(keys: readonly string[], value: (k: string) => string | undefined, cas?: ReadonlyMap<string, string>): { text: string; hits: number; misses: number } {
  const parts: string[] = [];
  let hits = 0;
  for (const k of keys) {
    const v = value(k);
    if (v === undefined) continue;
    hits++;
    parts.push(`VALUE ${k} 0 ${v.length}${cas === undefined ? "" : ` ${cas.get(k)}`}\r\n${v}\r\n`);
  }
  parts.push("END\r\n");
  return { text: parts.join(""), hits, misses: keys.length - hits };
}

/** Where two byte strings first differ ("" when alike), without printing megabytes. */
function difference(got: Buffer, want: Buffer): string {
  if (got.equals(want)) return "";
  let i = 0;
  while (i < got.length && i < want.length && got[i] === want[i]) i++;
  const around = (b: Buffer): string => JSON.stringify(b.toString("latin1", Math.max(0, i - 60), i + 60));
  return `${got.length} bytes against ${want.length}, first differing at ${i}: got ${around(got)}, want ${around(want)}`;
}

describe.each([20, 1_000_000_000])("shardheap memcached -R %i: a get line of many keys, never read", (requestsPerEvent) => {
  let server: MemcachedServer;
  let version = "";
  const shardErrors: string[] = [];
  beforeAll(async () => {
    server = await startMemcached({ shards: 2, memoryPerShard: "16MiB", port: 0, requestsPerEvent });
    server.smp.on("error", (e) => shardErrors.push(`shard ${e.shard}: ${e.message}`));
    const c = await RawClient.open(server.port);
    try {
      version = await c.request("version\r\n");
    } finally {
      c.close();
    }
  });
  afterAll(async () => {
    await server?.close();
  });

  /**
   * `n` clients send `script` and do not read: each connection stops
   * reading within the bounds (its answers past them by one key's at
   * most), its shard's JS memory stays small, and another client is
   * served; then `then` runs with the clients (they read, or not) and the
   * server's counts before they sent, and
   * once they are closed nothing of theirs is left.
   */
  async function stuck(n: number, items: string, keys: readonly string[], script: Buffer, most: { bytes: number; pieces: number }, then: (clients: RawClient[], writer: RawClient, counted: Record<StatName, number>) => Promise<void>): Promise<void> {
    const writer = await RawClient.open(server.port);
    try {
      await writer.request(items, lines("STORED", keys.length));
      const before = await census(server);
      const counted = totals(server.config);
      const clients = await hogs(server, n, script);
      try {
        await untilStopped(server, n, MAX_UNSENT_BYTES, MAX_UNSENT_PIECES);
        const now = await census(server);
        const held = worst(now);
        expect({ stopped: held.stopped, bytes: held.peakUnsentBytes <= most.bytes, pieces: held.peakUnsentPieces <= most.pieces }).toEqual({ stopped: n, bytes: true, pieces: true });
        for (const s of [0, 1]) expect(now[s]!.jsMemoryBytes - before[s]!.jsMemoryBytes).toBeLessThan(GARBAGE_JS_BYTES + n * LINE_JS_BYTES);
        // Others are served meanwhile (a version: no hit or miss counted).
        expect(await writer.request("version\r\n")).toBe(version);
        await then(clients, writer, counted);
      } finally {
        for (const c of clients) c.close();
      }
      await until(async () => (await census(server)).every((s: Census) => s.connections <= 1 && s.index.held === 0), "the clients' connections to close and their references to go");
      expect(worst(await census(server))).toMatchObject({ unsentBytes: 0, unsentPieces: 0, heldBytes: 0, stopped: 0 });
      expect(await writer.request(keys.map((k) => `delete ${k}\r\n`).join(""), lines("DELETED", keys.length))).toBe("DELETED\r\n".repeat(keys.length));
    } finally {
      writer.close();
    }
    await until(async () => (await census(server)).every((s) => s.connections === 0), "the writer to close");
    expect(server.smp.heap.check()).toEqual([]);
    expect(shardErrors).toEqual([]);
  }

  it.each([
    [1, "get"],
    [1, "gats 0"],
    [8, "get"],
  ])("%i client(s), one %s line of 500,000 one-byte keys: stopped between keys within the bounds; then every answer, in order, once, one END", async (n, command) => {
    const keys = Array.from({ length: MANY }, (_, i) => keyAt(i));
    const line = `${command} ${keys.join(" ")}\r\n`;
    expect(line.length).toBeLessThan(MAX_GET_LINE);
    const stored = new Set(SMALL);
    const items = SMALL.map((k) => `set ${k} 0 0 1\r\n${k}\r\n`).join("");
    await stuck(n, items, SMALL, Buffer.from(`${line}version\r\n`, "latin1"), { bytes: MAX_UNSENT_BYTES, pieces: MAX_UNSENT_PIECES + HIT_PIECES }, async (clients, writer, before) => {
      // gats: each hit with its cas (a touch keeps it).
      let cas: Map<string, string> | undefined;
      if (command.startsWith("gats")) {
        const got = await writer.request(`gets ${SMALL.join(" ")}\r\n`, "END\r\n");
        cas = new Map([...got.matchAll(/^VALUE (\S+) 0 1 (\d+)\r$/gm)].map((m) => [m[1]!, m[2]!]));
        expect(cas.size).toBe(SMALL.length);
      }
      const want = answers(keys, (k) => (stored.has(k) ? k : undefined), cas);
      const wantBytes = Buffer.from(want.text + version, "latin1");
      for (const c of clients) c.socket.resume();
      const got = await Promise.all(clients.map((c) => c.untilBytes(wantBytes.length, 60_000)));
      for (const g of got) expect(difference(g, wantBytes)).toBe("");
      // Counted: every key of every line once (and the gets of the cas, all hits).
      const after = totals(server.config);
      const asked = cas === undefined ? 0 : SMALL.length;
      const counted = (name: StatName): number => after[name] - before[name];
      expect([counted("cmd_get"), counted("get_hits"), counted("get_misses")]).toEqual([n * MANY + asked, n * want.hits + asked, n * want.misses]);
    });
  });

  it.each([1, 8])("%i client(s), one get line of 400,000 keys of 100 KB items: each stopped within the bounds, past them by one answer at most, and no more answered once it is gone", async (n) => {
    const keys = Array.from({ length: 400_000 }, (_, i) => bigAt(i));
    const items = BIG.map((k) => `set ${k} 0 0 ${BIG_VALUE.length}\r\n${BIG_VALUE}\r\n`).join("");
    const asked = totals(server.config).cmd_get;
    await stuck(n, items, BIG, Buffer.from(`get ${keys.join(" ")}\r\n`, "latin1"), { bytes: MAX_UNSENT_BYTES + BIG_HIT_BYTES, pieces: MAX_UNSENT_PIECES }, async (clients, writer) => {
      expect(await writer.request("get 0\r\n", "END\r\n")).toBe(`VALUE 0 0 ${BIG_VALUE.length}\r\n${BIG_VALUE}\r\nEND\r\n`);
    });
    // Once its client is gone a connection answers no more of its line (a few hundred keys each were, not 400,000).
    expect(totals(server.config).cmd_get - asked).toBeLessThan(n * 20_000);
  });

  it("a gats line of one-byte and 100 KB items read late: within the bounds, every answer in order, once, one END", async () => {
    const writer = await RawClient.open(server.port);
    const late = await RawClient.open(server.port);
    const stored = [...SMALL, ...BIG];
    const smallAt = (i: number): string => (BIG.includes(keyAt(i)) ? "a" : keyAt(i));
    try {
      const items = SMALL.map((k) => `set ${k} 0 0 1\r\n${k}\r\n`).join("") + BIG.map((k) => `set ${k} 0 0 ${BIG_VALUE.length}\r\n${BIG_VALUE}\r\n`).join("");
      await writer.request(items, lines("STORED", stored.length));
      const got = await writer.request(`gets ${stored.join(" ")}\r\n`, "END\r\n");
      const cas = new Map([...got.matchAll(/^VALUE (\S+) 0 \d+ (\d+)\r$/gm)].map((m) => [m[1]!, m[2]!]));
      expect(cas.size).toBe(stored.length);
      // 20,000 keys, one in a hundred a 100 KB item: 20 MB of answers in some 40,000 pieces.
      const keys = Array.from({ length: 20_000 }, (_, i) => (i % 100 === 0 ? BIG[(i / 100) % 2]! : i % 100 === 50 ? "9" : smallAt(i)));
      const value = (k: string): string | undefined => (BIG.includes(k) ? BIG_VALUE : SMALL.includes(k) ? k : undefined);
      const want = Buffer.from(answers(keys, value, cas).text + version, "latin1");
      late.socket.pause();
      late.send(`gats 0 ${keys.join(" ")}\r\nversion\r\n`);
      await untilStopped(server, 1, MAX_UNSENT_BYTES, MAX_UNSENT_PIECES);
      // Every key answered as it was asked, each counted among the pieces.
      expect(worst(await census(server)).peakUnsentPieces).toBeLessThanOrEqual(MAX_UNSENT_PIECES + HIT_PIECES);
      late.socket.resume();
      expect(difference(await late.untilBytes(want.length, 60_000), want)).toBe("");
      expect(await writer.request(stored.map((k) => `delete ${k}\r\n`).join(""), lines("DELETED", stored.length))).toBe("DELETED\r\n".repeat(stored.length));
    } finally {
      late.close();
      writer.close();
    }
    await until(async () => (await census(server)).every((s) => s.connections === 0 && s.index.held === 0), "the connections to close and their references to go");
    expect(server.smp.heap.check()).toEqual([]);
    expect(shardErrors).toEqual([]);
  });
});
