/**
 * `shardheap memcached` and the shared heap: an item lives in the memory
 * of the shard whose connection wrote it; a get from another shard's
 * connection writes the item from the heap while holding a reference, a
 * change from another shard hands the old item back to its shard, and
 * the item's own shard frees it once the last reference is dropped; LRU
 * eviction under a small --memory; memory back to where it started once
 * everything is deleted. Servers run in this process (two shards on real
 * threads); clientPerShard gives a connection on each shard, so which
 * requests cross shards is known.
 */
import { randomBytes } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { itemSize } from "../../../dist/apps/memcached/store/item.js";
import { parseMemcachedArgs } from "../../../dist/apps/memcached/run.js";
import { classOf, classSize } from "../../../dist/memory/size-classes.js";
import { startMemcached, type MemcachedOptions, type MemcachedServer } from "../../../dist/apps/memcached/server.js";
import { shardCounters, STAT, totals } from "../../../dist/apps/memcached/stats/stats.js";
import { waitFor } from "../../helpers.js";
import { clientPerShard } from "./census.js";
import { lines, RawClient } from "./client.js";
import { shardMemory, waitForMemoryBack } from "./shard-memory.js";

let servers: MemcachedServer[] = [];
let clients: RawClient[] = [];
afterEach(async () => {
  for (const c of clients) c.close();
  clients = [];
  await Promise.all(servers.map((s) => s.close()));
  servers = [];
});

async function start(o: MemcachedOptions): Promise<MemcachedServer> {
  const s = await startMemcached({ port: 0, ...o });
  servers.push(s);
  return s;
}

async function open(server: MemcachedServer): Promise<RawClient> {
  const c = await RawClient.open(server.port);
  clients.push(c);
  return c;
}

/** A connection on each shard, in shard order (closed after the test). */
async function pair(server: MemcachedServer): Promise<RawClient[]> {
  const both = await clientPerShard(server);
  clients.push(...both);
  return both;
}


const live = (s: MemcachedServer, shard: number): number => s.smp.stats(shard).liveObjects;
/** One shard's memcached counter. */
const counter = (s: MemcachedServer, shard: number, name: keyof typeof STAT): number => shardCounters(s.config.statsBuffer, shard)[STAT[name]]!;

/** Write `data` in pieces as the socket takes them (a flood bigger than its buffers). */
async function flood(c: RawClient, pieces: Buffer[]): Promise<void> {
  for (const p of pieces) if (!c.socket.write(p)) await new Promise((r) => c.socket.once("drain", r));
}

describe("shardheap memcached on the shared heap", () => {
  it("a cache filled past its budget, evicting, raises no memory-pressure event: full is its normal state", async () => {
    const server = await start({ shards: 1, memoryPerShard: "2MiB" });
    let events = 0;
    server.smp.on("memoryPressure", () => events++);
    const c = await open(server);
    const value = "v".repeat(1000);
    for (let batch = 0; counter(server, 0, "evictions") === 0; batch++) {
      expect(batch, "evictions within 40 batches of 100 sets").toBeLessThan(40);
      const keys = Array.from({ length: 100 }, (_, i) => `full${batch}-${i}`);
      await c.request(keys.map((k) => `set ${k} 0 0 ${value.length}\r\n${value}\r\n`).join(""), lines("STORED", keys.length));
    }
    // The heap is as full as the cache makes it: past both default thresholds.
    expect(server.smp.stats(0).allocatedMemory / server.smp.stats(0).totalMemory).toBeGreaterThan(0.8);
    await new Promise((r) => setTimeout(r, 100)); // the watch runs on the main thread's ticks
    expect(events).toBe(0);
  });

  it("a connection on shard 0 reads shard 1's item in place and writes it from the heap; deleted meanwhile from shard 0, the item lives until written, then shard 1 frees it", async () => {
    const server = await start({ shards: 2, memoryPerShard: "64MiB", maxItemSize: 16 << 20 });
    const key = "big";
    const value = randomBytes(8 << 20);
    const [reader, writer] = await pair(server);
    const [deleter] = await pair(server);
    const before1 = live(server, 1);
    const before0 = live(server, 0);
    expect(await writer!.request(Buffer.concat([Buffer.from(`set ${key} 7 0 ${value.length}\r\n`), value, Buffer.from("\r\n")]))).toBe("STORED\r\n");
    // The item is on shard 1 (its writer's), allocated there before the value arrived: shard 0 holds no copy of it.
    expect(live(server, 1)).toBe(before1 + 1);
    expect(live(server, 0)).toBe(before0);
    const crossBefore = server.smp.stats(0).crossShardFrees;

    // A get of it four times to a client that does not read: the first key's answer (8 MiB) passes the
    // bound on unwritten answers (backpressure.ts), and the get waits there, before its second key.
    reader!.socket.pause();
    // Read before sending: the shard may hand the answer over before this thread looks again.
    const written = totals(server.config).bytes_written;
    reader!.send(`get ${key} ${key} ${key} ${key}\r\n`);
    // (The socket buffers take some 4 MiB of it, with the client not reading: tcp_wmem's most, and the client's first window.)
    await waitFor(() => totals(server.config).bytes_written >= written + value.length, "the first answer to be handed to the socket", 30_000);
    // Deleted on shard 0: the entry is out of the index, the item handed back to shard 1 (hand-over.ts).
    expect(await deleter!.request(`delete ${key}\r\n`)).toBe("DELETED\r\n");
    expect(await writer!.request(`get ${key}\r\n`, "END\r\n")).toBe("END\r\n");
    // Unlinked, but still held by the socket's writes: not freed.
    await new Promise((r) => setTimeout(r, 100));
    expect(live(server, 1)).toBe(before1 + 1);
    expect(server.smp.stats(0).crossShardFrees).toBe(crossBefore);

    // Read, the first answer comes whole; the get goes on, and its other keys, looked up now, miss.
    reader!.socket.resume();
    const header = `VALUE ${key} 7 ${value.length}\r\n`;
    const one = header.length + value.length + 2;
    const got = await reader!.untilBytes(one + 5, 30_000);
    expect(got.toString("latin1", 0, header.length)).toBe(header);
    expect(got.subarray(header.length, header.length + value.length).equals(value), "the answer intact").toBe(true);
    expect(got.toString("latin1", one)).toBe("END\r\n");
    // The last references were shard 0's hazard slots and shard 1's inbox: once shard 1 has taken the item back and the
    // slots are clear, shard 1's reclaim frees it (no cross-shard free).
    await waitFor(() => live(server, 1) === before1, "shard 1's item to be freed", 10_000);
    expect(server.smp.stats(0).crossShardFrees).toBe(crossBefore);
    expect(server.smp.heap.check()).toEqual([]);
  });

  it("a get of an item another shard wrote is served by the connection's shard from the shared index, and sees every change the connection made before it", async () => {
    const server = await start({ shards: 2, memoryPerShard: "16MiB" });
    const [c, w] = (await pair(server)) as [RawClient, RawClient];
    const keys = Array.from({ length: 50 }, (_, i) => `far${i}-`);
    expect(await w.request(keys.map((k) => `set ${k} 1 0 2\r\nv1\r\n`).join(""), lines("STORED", keys.length))).toBe("STORED\r\n".repeat(keys.length));
    const hits = [0, 1].map((s) => counter(server, s, "get_hits"));
    const answer = await c.request(keys.map((k) => `get ${k}\r\n`).join(""), lines("END", keys.length));
    expect(answer).toBe(keys.map((k) => `VALUE ${k} 1 2\r\nv1\r\nEND\r\n`).join(""));
    // Shard 0 served them (it counts the hits); shard 1, whose memory holds them, was not asked.
    expect(counter(server, 0, "get_hits") - hits[0]!).toBe(keys.length);
    expect(counter(server, 1, "get_hits") - hits[1]!).toBe(0);

    // Pipelined in one packet: each get comes after the change before it on the same key, made on shard 0 over shard 1's items.
    const [a, b, d, e] = keys;
    const script =
      `set ${a} 2 0 2\r\nv2\r\nget ${a}\r\n` +
      `delete ${b}\r\nget ${b}\r\n` +
      `append ${d} 0 0 1\r\n!\r\nget ${d} ${e}\r\n` +
      `incr ${e} 1\r\nset ${e} 0 0 1\r\n7\r\nincr ${e} 1\r\nget ${e}\r\n` +
      `gat -1 ${a}\r\nget ${a}\r\n` +
      `flush_all\r\nget ${keys[10]} ${keys[11]}\r\n`;
    expect(await c.request(script, (t) => t.split("END\r\n").length - 1 >= 7)).toBe(
      `STORED\r\nVALUE ${a} 2 2\r\nv2\r\nEND\r\n` +
        `DELETED\r\nEND\r\n` +
        `STORED\r\nVALUE ${d} 1 3\r\nv1!\r\nVALUE ${e} 1 2\r\nv1\r\nEND\r\n` +
        `CLIENT_ERROR cannot increment or decrement non-numeric value\r\nSTORED\r\n8\r\nVALUE ${e} 0 1\r\n8\r\nEND\r\n` +
        `VALUE ${a} 2 2\r\nv2\r\nEND\r\nEND\r\n` +
        `OK\r\nEND\r\n`,
    );
    // A connection on the other shard sees what the first was told was stored.
    expect(await c.request(`set ${a} 3 0 2\r\nv3\r\n`)).toBe("STORED\r\n");
    expect(await w.request(`get ${a}\r\n`, "END\r\n")).toBe(`VALUE ${a} 3 2\r\nv3\r\nEND\r\n`);
    expect(server.smp.heap.check()).toEqual([]);
  });

  it("gets and sets across shards, every item counted where its memory is; after flush_all the memory is back where it started", async () => {
    const server = await start({ shards: 2, memoryPerShard: "16MiB" });
    const on = (await pair(server)) as [RawClient, RawClient];
    const c = on[0];
    await c.request("version\r\n");
    const start0 = await Promise.all([0, 1].map((s) => shardMemory(server, s)));
    /** Live objects besides the index's own: the items. */
    const items = async (s: number): Promise<number> => {
      const m = await shardMemory(server, s);
      return m.liveObjects - m.indexObjects - (start0[s]!.liveObjects - start0[s]!.indexObjects);
    };
    const n = 400;
    const keys = Array.from({ length: n }, (_, i) => `x${i}`);
    // Key i written on shard i % 2.
    const owners = keys.map((_, i) => i % 2);
    const values = keys.map((k, i) => `${k}:${"v".repeat(i % 300)}`);
    for (const s of [0, 1]) {
      const script = keys.map((k, i) => (owners[i] === s ? `set ${k} ${i} 0 ${values[i]!.length}\r\n${values[i]}\r\n` : "")).join("");
      expect(await on[s].request(script, lines("STORED", n / 2))).toBe("STORED\r\n".repeat(n / 2));
    }
    const perShard = [0, 1].map((s) => owners.filter((o) => o === s).length);
    for (const s of [0, 1]) expect(await items(s)).toBe(perShard[s]);

    const answer = await c.request(`get ${keys.join(" ")}\r\n`, "END\r\n");
    expect(answer).toBe(keys.map((k, i) => `VALUE ${k} ${i} ${values[i]!.length}\r\n${values[i]}\r\n`).join("") + "END\r\n");
    // Rewrites, each a new item on the shard that makes it (the old one handed back to its own): append on
    // shard 1, set and incr on shard 0, delete on shard 1; then every item is still counted once, where it is.
    expect(await on[1].request(keys.slice(0, 50).map((k) => `append ${k} 0 0 1\r\n!\r\n`).join(""), lines("STORED", 50))).toBe("STORED\r\n".repeat(50));
    expect(await on[0].request(keys.slice(50, 100).map((k) => `set ${k} 0 0 1\r\n9\r\nincr ${k} 1\r\n`).join(""), lines("10", 50))).toBe("STORED\r\n10\r\n".repeat(50));
    expect(await on[1].request(keys.slice(100, 150).map((k) => `delete ${k}\r\n`).join(""), lines("DELETED", 50))).toBe("DELETED\r\n".repeat(50));
    for (let i = 0; i < 100; i++) owners[i] = i < 50 ? 1 : 0;
    // `stats` first: every shard takes back what the others handed over before the counts are read.
    await c.request("stats\r\n", "END\r\n");
    const t = totals(server.config);
    expect(t.curr_items).toBe(n - 50);
    for (const s of [0, 1]) expect(counter(server, s, "curr_items"), `shard ${s}'s items`).toBe(keys.filter((_, i) => owners[i] === s && (i < 100 || i >= 150)).length);
    for (const s of [0, 1]) {
      const linked = keys.filter((_, i) => owners[i] === s && (i < 100 || i >= 150)).length;
      // Replaced and deleted items go once their readers let go and their owner reclaims them (store.ts: within RECLAIM_AFTER_MS).
      const t0 = performance.now();
      while ((await items(s)) !== linked && performance.now() - t0 < 5000) await new Promise((r) => setTimeout(r, 20));
      expect(await items(s), `shard ${s}'s live objects`).toBe(linked);
    }

    expect(await c.request("flush_all\r\n")).toBe("OK\r\n");
    expect(await c.request(`get ${keys.slice(0, 20).join(" ")}\r\n`, "END\r\n")).toBe("END\r\n");
    expect(totals(server.config).curr_items).toBe(0);
    expect(totals(server.config).bytes).toBe(0);
    // Each shard returns its cached pool spans once idle (200 ms): its memory is back but for its index's growth.
    for (const s of [0, 1]) await waitForMemoryBack(server, s, start0[s]!);
    // A client sees each shard's MemoryStats in `stats`.
    const text = await c.request("stats\r\n", "END\r\n");
    for (const s of [0, 1]) expect(Number(new RegExp(`^STAT shard${s}:liveObjects (\\d+)\\r$`, "m").exec(text)?.[1])).toBe(server.smp.stats(s).liveObjects);
    expect(server.smp.heap.check()).toEqual([]);
  });

  it("spreads connections over both shards (one port)", async () => {
    const server = await start({ shards: 2, memoryPerShard: "4MiB" });
    expect(server.listenMode).not.toBe("single");
    const opened: RawClient[] = [];
    for (let wave = 0; wave < 8; wave++) {
      for (let i = 0; i < 8; i++) opened.push(await open(server));
      await new Promise((r) => setTimeout(r, 20));
    }
    const probe = opened[0]!;
    // A client's connect completes before its shard has taken the connection (accepts take turns: accept-balance.ts).
    let stats = "";
    const count = (s: number): number => Number(new RegExp(`^STAT shard${s}:curr_connections (\\d+)\\r$`, "m").exec(stats)![1]);
    const t0 = performance.now();
    do stats = await probe.request("stats\r\n", "END\r\n");
    while (count(0) + count(1) < opened.length && performance.now() - t0 < 5000);
    expect(count(0) + count(1)).toBe(opened.length);
    expect(count(0)).toBeGreaterThan(0);
    expect(count(1)).toBeGreaterThan(0);
  });

  it("evicts least recently used items when a shard's memory is full; an item up to half a shard fits a full one", async () => {
    // One connection, nothing to yield to: -R's yields (every 20 requests of a read) change when the
    // other shard gets its stores and frees what eviction retired, and with them how often a malloc
    // fails before eviction catches up (measured: 4-5 failed mallocs a run without yields, 4-15 with
    // them, 97 on a loaded machine). This test is about eviction: it runs without them.
    const server = await start({ shards: 2, memoryPerShard: "1MiB", maxItemSize: 512 << 10, requestsPerEvent: 1 << 30 });
    const on = (await pair(server)) as [RawClient, RawClient];
    const c = on[0];
    const hot = "hot0";
    const value = "v".repeat(2000);
    expect(await c.request(`set ${hot} 0 0 ${value.length}\r\n${value}\r\n`)).toBe("STORED\r\n");
    // 4 MB of values into 2 MiB of shards (batches on each shard in turn), the hot key read between batches.
    const n = 2000;
    for (let batch = 0; batch < n; batch += 100) {
      const script = Array.from({ length: 100 }, (_, j) => `set k${batch + j} 0 0 ${value.length}\r\n${value}\r\n`).join("");
      expect(await on[(batch / 100) % 2]!.request(script, lines("STORED", 100))).toBe("STORED\r\n".repeat(100));
      expect(await c.request(`get ${hot}\r\n`, "END\r\n")).toBe(`VALUE ${hot} 0 ${value.length}\r\n${value}\r\nEND\r\n`);
    }
    const t = totals(server.config);
    expect(t.evictions).toBeGreaterThan(n / 2);
    expect(t.curr_items).toBeLessThan(n);
    expect(t.curr_items + t.evictions).toBe(n + 1);
    // The oldest cold keys are gone, the newest are there.
    expect(await c.request("get k0 k1 k2\r\n", "END\r\n")).toBe("END\r\n");
    const newest = Array.from({ length: 20 }, (_, j) => `k${n - 20 + j}`);
    expect((await c.request(`get ${newest.join(" ")}\r\n`, "END\r\n")).match(/^VALUE /gm)).toHaveLength(20);
    // Half a shard (the most --max-item-size may be, as memcached's -I and -m) into a full shard: room is made.
    const half = "h".repeat((512 << 10) - 100);
    // (128 pages in one piece among 20 KiB spans whose slots were refilled out of LRU order: eviction,
    // in LRU order, may have to take nearly all the shard holds; measured: all of its 325 items. The
    // items' index is made whole at the start (item-cache.ts INDEX_BYTES_PER_ENTRY): made as it grew, its
    // chunks left no 384 KiB in one piece.)
    expect(await c.request(`set half 0 0 ${half.length}\r\n${half}\r\nget half\r\n`, "END\r\n")).toBe(`STORED\r\nVALUE half 0 ${half.length}\r\n${half}\r\nEND\r\n`);
    expect(totals(server.config).store_no_memory).toBe(0);
    // Past --max-item-size: refused before any memory is touched.
    const tooBig = "t".repeat(5 << 20);
    expect(await c.request(`set toobig 0 0 ${tooBig.length}\r\n${tooBig}\r\n`)).toBe("SERVER_ERROR object too large for cache\r\n");
    expect(await c.request("set after 0 0 2\r\nok\r\nget after\r\n", "END\r\n")).toBe("STORED\r\nVALUE after 0 2\r\nok\r\nEND\r\n");
    for (const s of [0, 1]) expect(server.smp.stats(s).failedAllocations).toBeLessThan(50);
    expect(server.smp.heap.check()).toEqual([]);
  });

  it("-m is the items' memory, as memcached's: -m 32 -t 2 holds 32 MiB of items, each shard its half, the index beside them", async () => {
    const args = parseMemcachedArgs(["-m", "32", "-t", "2"]);
    const server = await start({ ...args, requestsPerEvent: 1 << 30 });
    const on = (await pair(server)) as [RawClient, RawClient];
    expect(await on[0].request("stats\r\n", "END\r\n")).toMatch(/^STAT limit_maxbytes 33554432\r$/m);
    const value = "v".repeat(1000);
    const key = (i: number): string => `fill:${String(i).padStart(7, "0")}`;
    // What one item takes from the heap: its map entry (the key, 8-aligned, then the item) at its size class.
    const entry = classSize[classOf[(16 + itemSize(key(0).length, 0, value.length) + 7) >> 3]!]!;
    let i = 0;
    const evicted = (s: number): boolean => counter(server, s, "evictions") > 0;
    while (!evicted(0) || !evicted(1)) {
      // Each shard's connection in turn, until both shards evict.
      const script = Array.from({ length: 200 }, () => `set ${key(i++)} 0 0 ${value.length} noreply\r\n${value}\r\n`).join("");
      expect(await on[(i / 200) % 2]!.request(`${script}mn\r\n`)).toBe("MN\r\n");
      expect(i).toBeLessThan(3 * 32 * 1024);
    }
    await waitFor(() => counter(server, 0, "total_items") + counter(server, 1, "total_items") === i, "every set to be stored");
    for (const s of [0, 1]) {
      // Every shard's items take its 16 MiB, to within one item: no budget kept for the index or slack.
      expect(counter(server, s, "curr_items")).toBe(Math.floor((16 << 20) / entry));
      expect(server.smp.stats(s).failedAllocations).toBe(0);
    }
    expect(server.smp.heap.check()).toEqual([]);
  });

  it("200,000 items of 100 B, then 40 of 900 KB into 8 MiB shards: all 40 stored, each shard evicting only what it must", async () => {
    // A cache of small items that then takes big ones, a connection on each shard, each writing 100,000 of the small items and 20 of the big ones.
    const server = await start({ shards: 2, memoryPerShard: "8MiB" });
    const on = (await pair(server)) as [RawClient, RawClient];
    const c = on[0];
    const small = "s".repeat(100);
    // One connection after the other: the index is one map both shards write, and two floods at once
    // raced for who grows its tables and where its descriptor chunks land among the small items (each
    // shard's part of the index came out 1.36 to 1.90 MB from run to run, and the chunks' pages cut
    // the free runs that the big items need: a shard then kept 3 big items where 4 fit). The races of
    // writers on one index are the race tests' subject, not this one's.
    for (const [s, client] of on.entries()) {
      const pieces: Buffer[] = [];
      for (let i = s * 100_000; i < (s + 1) * 100_000; i += 2000) {
        let text = "";
        for (let j = i; j < i + 2000; j++) text += `set k${j} 0 0 100 noreply\r\n${small}\r\n`;
        pieces.push(Buffer.from(text, "latin1"));
      }
      await flood(client, pieces);
      // The connection's mn comes back once every set before it is stored.
      await client.request("mn\r\n", "MN\r\n", 60_000);
    }
    for (const s of [0, 1]) expect(counter(server, s, "curr_items") + counter(server, s, "evictions"), `shard ${s}'s sets`).toBe(100_000);
    const smallItems = [0, 1].map((s) => counter(server, s, "curr_items"));

    const value = Buffer.alloc(900_000, 0x62);
    const set = (key: string): Buffer => Buffer.concat([Buffer.from(`set ${key} 0 0 ${value.length}\r\n`), value, Buffer.from("\r\n")]);
    // 900,000 B and its header: 220 pages, 901,120 B; a small item's object is 192 B (its size class:
    // the map entry's key area, 8 B, and the item's 159).
    const bigBytes = 220 * 4096;
    const smallBytes = 192;
    // Each shard's first big item, one at a time: the small items it displaces are the least recently
    // used, and their bytes need not be much more than three times its own (4,693 x 192 B). Alone (the
    // same flood, then the set) each shard evicts 4,688, in this test's sequence too since pool spans
    // pack at the bottom of the shard (before they did, shard 0 took one more batch: 9,376). In a
    // full, loaded run of the suite shard 0 (where staging copies of shard 1's keys were cut, before
    // writes were made on the connection's shard) once took three batches, 14,064. A shard that lets a
    // lowered budget fragment its pages evicted 16,878 (shard 0) or more.
    const keys = Array.from({ length: 40 }, (_, i) => `big${i}`);
    // Big item i written on shard i % 2.
    const shardOf = (k: string): number => Number(k.slice(3)) % 2;
    const firstOf = [0, 1].map((s) => keys.find((k) => shardOf(k) === s)!);
    for (const s of [0, 1]) {
      const before = counter(server, s, "evictions");
      expect(await on[s]!.request(set(firstOf[s]!), "\r\n", 30_000), `${firstOf[s]} (shard ${s})`).toBe("STORED\r\n");
      const evicted = counter(server, s, "evictions") - before;
      expect(evicted, `small items shard ${s} evicted for its first 900 KB item`).toBeLessThanOrEqual(Math.ceil((bigBytes / smallBytes) * 3.05));
      expect(counter(server, s, "curr_items"), `shard ${s} kept the rest`).toBe(smallItems[s]! - evicted + 1);
    }
    // The other 38, pipelined on each shard's connection, as clients that do not wait: every one stored.
    const rest = keys.filter((k) => !firstOf.includes(k));
    for (const s of [0, 1]) on[s]!.send(Buffer.concat(rest.filter((k) => shardOf(k) === s).map(set)));
    for (const s of [0, 1]) expect(await on[s]!.take(lines("STORED", rest.length / 2), 60_000)).toBe("STORED\r\n".repeat(rest.length / 2));
    expect(totals(server.config).store_no_memory).toBe(0);

    // Neither shard emptied itself: each holds as many of its latest big items as 85% of its memory
    // takes (the store keeps 10% for slack), and the items it holds are the latest ones.
    const answer = await c.request(`get ${keys.join(" ")}\r\n`, "END\r\n", 30_000);
    const held = [...answer.matchAll(/^VALUE (\S+) 0 900000\r$/gm)].map((m) => m[1]!);
    for (const s of [0, 1]) {
      const mine = keys.filter((k) => shardOf(k) === s);
      // The index's structure stays (31,000 entries of 100 B made it 1.6 MB here: its descriptors outlive the entries).
      const index = (await shardMemory(server, s)).indexBytes;
      // And the chunks it grew among the small items cut runs of 220 free pages: one item fewer (measured 5 of 6).
      const fits = Math.floor(((server.smp.stats(s).totalMemory - index) * 0.85) / bigBytes) - 1;
      const kept = held.filter((k) => shardOf(k) === s);
      expect(kept.length, `shard ${s}'s big items`).toBeGreaterThanOrEqual(Math.min(fits, mine.length));
      expect(kept, `shard ${s} kept its most recent`).toEqual(mine.slice(mine.length - kept.length));
      // Nothing refused for good (store_no_memory 0 above), and no malloc refused and retried after an eviction
      // either: the store keeps 10% of the shard free, and nothing but items takes it. (Staging copies of other
      // shards' values from the heap once did: 45-259 failed 192 B mallocs on shard 0 in loaded runs.)
      expect(server.smp.stats(s).failedAllocations, `shard ${s}`).toBe(0);
    }
    expect(server.smp.heap.check()).toEqual([]);
  });
});
