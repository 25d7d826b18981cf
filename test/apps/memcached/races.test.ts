/**
 * Two shards writing the same keys at once (`shardheap memcached --smp 2`,
 * a connection on each shard, each write made on its connection's shard
 * over the one index): memcached's guarantees hold per key whichever shard
 * writes. N incr of one key from each end at 2N, every value answered
 * once; an add stores once; of two cas with the same unique value exactly
 * one stores; appends lose none; a delete deletes once; a get never sees a
 * torn or mixed value; cas values stay unique across shards; the counts
 * are those of the items held, and every shard's memory comes back after
 * flush_all.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { startMemcached, type MemcachedServer } from "../../../dist/apps/memcached/server.js";
import { totals } from "../../../dist/apps/memcached/stats/stats.js";
import { clientPerShard } from "./census.js";
import type { RawClient } from "./client.js";
import { shardMemory, waitForMemoryBack, type ShardMemory } from "./shard-memory.js";

let server: MemcachedServer;
let on: RawClient[] = [];
let start: ShardMemory[] = [];
beforeEach(async () => {
  process.env.SHARDHEAP_LOG = "silent";
  server = await startMemcached({ shards: 2, memoryPerShard: "16MiB", port: 0 });
  on = await clientPerShard(server);
  start = await Promise.all([0, 1].map((s) => shardMemory(server, s)));
});
afterEach(async () => {
  for (const c of on) c.close();
  on = [];
  await server.close();
});

/** Send each shard's script at once (the two shards run them in parallel); each connection's whole answer. */
function race(scripts: string[], ends: Array<(t: string) => boolean>): Promise<string[]> {
  return Promise.all(on.map((c, s) => c.request(scripts[s]!, ends[s]!, 60_000)));
}

/** Every answer line of `text` (without the \r\n). */
const answerLines = (text: string): string[] => text.split("\r\n").slice(0, -1);

/** After the race: the counts are those of the items held, and after flush_all every shard's memory comes back. */
async function settled(expectedItems: number): Promise<void> {
  // `stats` waits for every shard to take back what the others handed over (connection.ts statsAnswer).
  const text = await on[0]!.request("stats\r\n", "END\r\n");
  expect(Number(/^STAT curr_items (\d+)\r$/m.exec(text)![1])).toBe(expectedItems);
  expect(totals(server.config).curr_items).toBe(expectedItems);
  expect(await on[1]!.request("flush_all\r\n")).toBe("OK\r\n");
  expect(totals(server.config).curr_items).toBe(0);
  expect(totals(server.config).bytes).toBe(0);
  for (const s of [0, 1]) await waitForMemoryBack(server, s, start[s]!);
  expect(server.smp.heap.check()).toEqual([]);
}

describe("two shards writing the same keys at once", () => {
  it("incr: N from each shard end at 2N, each value answered exactly once", async () => {
    const N = 3000;
    expect(await on[0]!.request("set n 0 0 1\r\n0\r\n")).toBe("STORED\r\n");
    const script = "incr n 1\r\n".repeat(N);
    const all = (t: string): boolean => t.split("\r\n").length - 1 === N;
    const answers = await race([script, script], [all, all]);
    const values = answers.flatMap(answerLines).map(Number);
    // Each connection's own answers rise; together they are 1..2N, none twice (no lost update, no value read twice).
    for (const a of answers) {
      const mine = answerLines(a).map(Number);
      expect(mine.every((v, i) => i === 0 || v > mine[i - 1]!)).toBe(true);
    }
    expect(new Set(values).size).toBe(2 * N);
    expect(Math.min(...values)).toBe(1);
    expect(Math.max(...values)).toBe(2 * N);
    expect(await on[1]!.request("get n\r\n", "END\r\n")).toBe(`VALUE n 0 ${String(2 * N).length}\r\n${2 * N}\r\nEND\r\n`);
    await settled(1);
  });

  it("add stores once, delete deletes once, of two cas with the same value exactly one stores", async () => {
    const M = 1000;
    const keys = Array.from({ length: M }, (_, i) => `k${i}`);
    const count = (t: string): boolean => t.split("\r\n").length - 1 === M;
    // add: each key from both shards, each shard its own value.
    const added = await race(
      [0, 1].map((s) => keys.map((k) => `add ${k} ${s} 0 1\r\n${s}\r\n`).join("")),
      [count, count],
    );
    const a = added.map(answerLines);
    for (let i = 0; i < M; i++) expect([a[0]![i], a[1]![i]].sort(), keys[i]).toEqual(["NOT_STORED", "STORED"]);
    // Whichever stored, the item is its: flags and value of one shard.
    const got = await on[0]!.request(`gets ${keys.join(" ")}\r\n`, "END\r\n");
    const items = [...got.matchAll(/^VALUE (\S+) (\d) 1 (\d+)\r\n(\d)\r$/gm)];
    expect(items).toHaveLength(M);
    for (const [, k, flags, , value] of items) expect([flags, value], k).toEqual(a[0]![Number(k!.slice(1))] === "STORED" ? ["0", "0"] : ["1", "1"]);
    // cas values are unique, whichever shard made them.
    const cas = items.map((m) => m[3]!);
    expect(new Set(cas).size).toBe(M);
    // cas: both shards with the value gets answered; exactly one of each pair stores.
    const cased = await race(
      [0, 1].map((s) => items.map(([, k, , c]) => `cas ${k} 7 0 1 ${c}\r\n${s}\r\n`).join("")),
      [count, count],
    );
    const c = cased.map(answerLines);
    for (let i = 0; i < M; i++) expect([c[0]![i], c[1]![i]].sort()).toEqual(["EXISTS", "STORED"]);
    // delete: both shards; exactly one deletes.
    const deleted = await race([0, 1].map(() => keys.map((k) => `delete ${k}\r\n`).join("")), [count, count]);
    const d = deleted.map(answerLines);
    for (let i = 0; i < M; i++) expect([d[0]![i], d[1]![i]].sort()).toEqual(["DELETED", "NOT_FOUND"]);
    await settled(0);
  });

  it("append from both shards loses none; a get on either never sees a torn or mixed value", async () => {
    const N = 2000;
    expect(await on[0]!.request("set log 0 0 0\r\n\r\n")).toBe("STORED\r\n");
    const appends = await race(
      ["a", "b"].map((ch) => `append log 0 0 1\r\n${ch}\r\n`.repeat(N)),
      [0, 1].map(() => (t: string) => t.split("\r\n").length - 1 === N),
    );
    for (const a of appends) expect(a).toBe("STORED\r\n".repeat(N));
    const log = /^VALUE log 0 (\d+)\r\n(.*)\r$/m.exec(await on[1]!.request("get log\r\n", "END\r\n"))!;
    expect(Number(log[1])).toBe(2 * N);
    expect([...log[2]!].filter((x) => x === "a").length).toBe(N);

    // Sets of one key from both shards, each value one letter repeated as many times as its flags say,
    // and gets of it on both shards between them.
    const R = 600;
    const set = (ch: string, i: number): string => {
      const length = 1 + ((i * 37) % 3000);
      return `set torn ${length} 0 ${length}\r\n${ch.repeat(length)}\r\nget torn\r\n`;
    };
    const answers = await race(
      ["x", "y"].map((ch) => Array.from({ length: R }, (_, i) => set(ch, i)).join("")),
      [0, 1].map(() => (t: string) => t.split("END\r\n").length - 1 === R),
    );
    let seen = 0;
    for (const a of answers) {
      for (const m of a.matchAll(/VALUE torn (\d+) (\d+)\r\n([^\r]*)\r\n/g)) {
        expect(m[1]).toBe(m[2]);
        expect(m[3]!.length).toBe(Number(m[2]));
        expect(/^(x+|y+)$/.test(m[3]!), "one shard's value, whole").toBe(true);
        seen++;
      }
    }
    expect(seen).toBe(2 * R);
    await settled(2);
  });
});
