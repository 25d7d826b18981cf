/**
 * The classic commands on their own (commands/classic-commands.ts, with
 * storing.ts and the stats answers of stats/stats-commands.ts), against a
 * fake connection (command-host.ts CommandHost) over a real one-shard
 * store: what each line asks of the host (answers now, answers in line,
 * reading held or ended, a value's data) and what it does to the store.
 */
import { describe, expect, it } from "vitest";
import { ClassicCommands } from "../../../../dist/apps/memcached/commands/classic-commands.js";
import type { CommandContext, CommandHost } from "../../../../dist/apps/memcached/commands/command-host.js";
import { reserveItem, storeReceived } from "../../../../dist/apps/memcached/commands/storing.js";
import type { Chunk } from "../../../../dist/apps/memcached/protocol/answers.js";
import type { MetaStoreCommand } from "../../../../dist/apps/memcached/protocol/meta-protocol.js";
import { PrefixStats } from "../../../../dist/apps/memcached/stats/prefix-stats.js";
import { NOW, cleanStore, storeFixture } from "../store-fixture.js";

const text = (c: Chunk): string => (typeof c === "string" ? c : c.toString("latin1"));

/** A connection stand-in: every call it gets, in order, as text; a storage command's data is given by `data`. */
function fake(o: { flushAllowed?: boolean; everyShard?: (task: string, arg: unknown) => unknown } = {}) {
  const s = storeFixture();
  const events: string[] = [];
  const later: Array<Promise<Chunk>> = [];
  const missed: string[] = [];
  let pending: { cmd: MetaStoreCommand; ptr: number; ref: number } | undefined;
  const ctx = {
    shard: 0,
    shards: 1,
    views: s.views,
    store: s.store,
    map: s.store.map,
    heap: s.heap,
    counters: s.counters,
    rows: [s.counters],
    config: { flushAllowed: o.flushAllowed ?? true, maxItemSize: 1 << 20, dumpEnabled: true, shards: 1, memoryPerShard: 4 << 20, itemMemoryPerShard: 0, startedAt: NOW - 100 },
    detail: new PrefixStats(":", false),
    everyShard: async (task: string, arg?: unknown) => [o.everyShard?.(task, arg)],
    flushAll: async (delay: number) => {
      events.push(`flushAll ${delay}`);
      s.cache.flush(0);
    },
    settled: async () => {},
    missed: (key: string) => void missed.push(key),
    resetStats: async () => void events.push("resetStats"),
  } as unknown as CommandContext;
  const host: CommandHost = {
    ctx,
    id: 7,
    now: () => NOW,
    answer: (c) => void events.push(text(c)),
    answerAll: (chunks, refs) => {
      events.push(chunks.map(text).join(""));
      for (const r of refs) s.store.map.release(r);
    },
    answerLater: (p) => {
      events.push("(in line)");
      later.push(p);
    },
    hit: (ref, withCas, last) => {
      events.push(`hit ${s.views.value(s.store.map.valuePointer(ref)).toString("latin1")}${withCas ? " cas" : ""}${last ? " END" : ""}`);
      s.store.map.release(ref);
    },
    full: () => false,
    runGet: (g) => {
      events.push("runGet");
      expect(g.run()).toBe(true);
    },
    beginStore: (cmd) => {
      const r = reserveItem(host, cmd);
      events.push(`beginStore ${cmd.key} ${r.ptr === 0 ? "refused" : "reserved"}`);
      pending = { cmd, ...r };
      return cmd.bytes + 2;
    },
    holdReadingUntil: (done) => void events.push(`hold ${done instanceof Promise}`),
    endAfterAnswers: () => void events.push("end"),
  };
  const commands = new ClassicCommands(host);
  /** A line and, for a storage command, its data block (as the connection copies it in). */
  const run = (line: string, data?: string): number => {
    const bytes = commands.run(line, line.length + 2);
    if (data !== undefined && pending !== undefined) {
      const { cmd, ptr, ref } = pending;
      pending = undefined;
      if (ptr !== 0) {
        s.views.bytes.write(`${data}\r\n`, s.views.dataStart(ptr), "latin1");
        storeReceived(host, cmd, ptr, ref);
      }
    }
    return bytes;
  };
  const take = (): string[] => events.splice(0);
  return { s, run, take, later, missed };
}

describe("classic commands against a fake connection", () => {
  it("stores through the host's reservation, answers a get with the host's hit, and counts hits and misses", () => {
    const f = fake();
    expect(f.run("set a 5 0 3", "abc")).toBe(5);
    expect(f.take()).toEqual(["beginStore a reserved", "STORED\r\n"]);
    f.run("get a");
    f.run("gets a b");
    expect(f.take()).toEqual(["hit abc END", "runGet", "hit abc cas", "END\r\n"]);
    expect(f.missed).toEqual(["b"]);
    expect([f.s.stat("cmd_get"), f.s.stat("get_hits"), f.s.stat("get_misses")]).toEqual([3, 2, 1]);
    f.run("add a 0 0 1", "x");
    f.run("incr a 1");
    f.run("set n 0 0 2", "41");
    f.run("incr n 1");
    f.run("delete n");
    f.run("delete n noreply");
    f.run("touch n 10");
    expect(f.take()).toEqual([
      "beginStore a reserved",
      "NOT_STORED\r\n",
      "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n",
      "beginStore n reserved",
      "STORED\r\n",
      "42\r\n",
      "DELETED\r\n",
      "NOT_FOUND\r\n",
    ]);
    cleanStore(f.s);
  });

  it("refuses an item past the limit at its line, and a value whose data block lacks its \\r\\n", () => {
    const f = fake();
    f.run(`set big 0 0 ${2 << 20}`);
    expect(f.take()).toEqual(["SERVER_ERROR object too large for cache\r\n", "beginStore big refused"]);
    expect(f.s.stat("store_too_large")).toBe(1);
    f.run("set a 0 0 3", "abcd");
    expect(f.take()).toEqual(["beginStore a reserved", "CLIENT_ERROR bad data chunk\r\n"]);
    expect(f.s.read("a")).toBeUndefined();
    cleanStore(f.s);
  });

  it("flush_all answers in line and holds reading until every shard has flushed; -F refuses it; noreply takes no place", async () => {
    const f = fake();
    f.run("set a 0 0 1", "x");
    f.take();
    f.run("flush_all");
    expect(f.take()).toEqual(["flushAll 0", "(in line)", "hold true"]);
    expect(text(await f.later[0]!)).toBe("OK\r\n");
    expect(f.s.read("a")).toBeUndefined();
    f.run("flush_all 0 noreply");
    expect(f.take()).toEqual(["flushAll 0", "hold true"]);
    const refused = fake({ flushAllowed: false });
    refused.run("flush_all");
    expect(refused.take()).toEqual(["CLIENT_ERROR flush_all not allowed\r\n"]);
    cleanStore(f.s);
    cleanStore(refused.s);
  });

  it("stats answers: in line once settled, at once when local, ERROR for an unknown one; cachedump's bounds", async () => {
    const f = fake({ everyShard: (task) => (task === "cacheDump" ? [["k1", 3, 0], ["k2", 4, 0]] : undefined) });
    f.run("stats reset");
    f.run("stats sizes");
    f.run("stats nonsense");
    f.run("stats cachedump 1");
    f.run("stats cachedump 0 0");
    f.run("stats cachedump 1 1");
    expect(f.take()).toEqual(["resetStats", "(in line)", "STAT sizes_status disabled\r\nEND\r\n", "ERROR\r\n", "CLIENT_ERROR bad command line\r\n", "END\r\n", "(in line)"]);
    expect(text(await f.later[0]!)).toBe("RESET\r\n");
    expect(text(await f.later[1]!)).toBe("ITEM k1 [3 b; 0 s]\r\nEND\r\n");
    cleanStore(f.s);
  });

  it("quit and a line that closes end the connection through the host; meta commands answer through answerAll", () => {
    const f = fake();
    f.run("mn");
    f.run("quit");
    expect(f.take()).toEqual(["MN\r\n", "end"]);
    cleanStore(f.s);
  });
});
