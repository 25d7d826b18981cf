/**
 * memcached's own command line on `shardheap memcached` (memcached-flags.ts
 * and run.ts): each flag accepted and what it sets, each refusal in its
 * words; then what the settings do in a running server: -M (an error
 * instead of evicting), -F (flush_all refused), -c (connections past the
 * limit told and closed), -o idle_timeout (idle connections closed), -R
 * (a connection yields after that many requests, answers still in order).
 */
import { afterEach, describe, expect, it } from "vitest";
import { parseMemcachedArgs } from "../../../src/apps/memcached/run.js";
import { startMemcached, type MemcachedServer } from "../../../dist/apps/memcached/server.js";
import { lines, RawClient } from "./client.js";
import { runCli } from "../../helpers.js";

const MIB = 1024 * 1024;

describe("memcached's flags", () => {
  it("takes -p -l -U 0 -m -c -t -I -M -F -R -D -v -o idle_timeout, getopt's way", () => {
    expect(parseMemcachedArgs(["-p", "11311", "-l", "127.0.0.2", "-U", "0", "-c", "50", "-t", "2", "-R", "7", "-D", "/", "-vv", "-o", "idle_timeout=9"])).toEqual({
      port: 11311,
      host: "127.0.0.2",
      maxConnections: 50,
      shards: 2,
      requestsPerEvent: 7,
      prefixDelimiter: "/",
      verbosity: 2,
      idleTimeout: 9,
    });
    // Values attached, switches clustered; -m is the whole cache's items, split over the shards by the server.
    expect(parseMemcachedArgs(["-p11312", "-MF", "-t", "4", "-m", "256", "-I", "32m"])).toEqual({
      port: 11312,
      evict: false,
      flushAllowed: false,
      shards: 4,
      itemMemory: 256 * MIB,
      maxItemSize: 32 * MIB,
    });
    expect(parseMemcachedArgs(["-I", "512k"]).maxItemSize).toBe(512 * 1024);
    expect(parseMemcachedArgs(["-I", "2097152"]).maxItemSize).toBe(2 * MIB);
    expect(parseMemcachedArgs(["-B", "ascii"])).toEqual({ protocol: "ascii" });
    expect(parseMemcachedArgs(["-Bauto", "-C", "-b", "8675"])).toEqual({ protocol: "auto", casEnabled: false, tcpBacklog: 8675 });
    expect(parseMemcachedArgs(["-h"])).toEqual({ help: true });
    expect(parseMemcachedArgs(["-V"])).toEqual({ version: true });
  });

  it("refuses bad values in memcached's words", () => {
    const refused: Array<[string[], RegExp]> = [
      [["-c", "0"], /-c 0: Maximum connections must be greater than 0/],
      [["-c", "-1"], /-c -1: Maximum connections must be greater than 0/],
      [["-t", "0"], /Number of threads must be greater than 0/],
      [["-R", "0"], /Number of requests per event must be greater than 0/],
      [["-I", "1000"], /Item max size cannot be less than 1024 bytes/],
      [["-I", "2g"], /bytes, or a number with k or m/],
      [["-I", "2048m"], /Cannot set item size limit higher than 1 GB/],
      // memcached 1.6: -I above half of -m (64 MB by default here too: per shard).
      [["-I", "256m"], /-I \(256M\) must be at most half of --memory/],
      [["-m", "64", "-I", "33m"], /Cannot set item size limit higher than 1\/2 of memory max/],
      [["-U", "11211"], /-U 11211: shardheap memcached speaks TCP only/],
      [["-D", "::"], /one character/],
      [["-B", "http"], /Invalid value for binding protocol: http -- should be one of auto, binary, or ascii/],
      [["-b", "0"], /the listen backlog must be greater than 0/],
      [["-b", "x"], /the listen backlog must be a whole number/],
      [["-l", "127.0.0.1,127.0.0.2"], /one address/],
      [["-p"], /-p needs a value/],
      [["-o", "idle_timeout"], /Missing numeric argument for idle_timeout/],
      [["-t", "2", "--smp", "2"], /--smp and -t say the same thing/],
      [["-m", "1", "-t", "16"], /-m 1: 64K for each of 16 shards, below the 128K a shard needs/],
      [["-m", "64", "--memory", "64MiB"], /--memory and -m say the same thing/],
    ];
    for (const [argv, message] of refused) {
      expect(() => parseMemcachedArgs(argv), argv.join(" ")).toThrow(message);
      // Exit code 2 on the command (a UsageError, or the InvalidValueError of the -I / --memory rule).
      expect(() => parseMemcachedArgs(argv)).toThrow(expect.objectContaining({ code: expect.stringMatching(/^ERR_SHARDHEAP_(USAGE|INVALID_VALUE)$/) }));
    }
  });

  it("refuses memcached's options that mean nothing here, naming each and why", () => {
    const refused: Array<[string[], RegExp]> = [
      [["-s", "/tmp/mc.sock"], /-s is not supported .*unix sockets/],
      [["-S"], /-S is not supported .*SASL/],
      [["-Z"], /-Z is not supported .*TLS/],
      [["-B", "binary"], /-B is not supported .*binary protocol/],
      [["-A"], /-A is not supported .*shutdown/],
      [["-o", "ext_path=/tmp/x:64m"], /-o ext_path is not supported .*extstore/],
      [["-o", "idle_timeout=5,proxy_config=x.lua"], /-o proxy_config is not supported .*proxy/],
      [["-q"], /unknown flag for memcached: -q/],
    ];
    for (const [argv, message] of refused) expect(() => parseMemcachedArgs(argv), argv.join(" ")).toThrow(message);
  });

  it("on the command: -h prints what is taken (nothing the suite's harness reads as a feature), bad flags exit 2", () => {
    const help = runCli(["memcached", "-h"]);
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/-o idle_timeout=N/);
    expect(help.stdout).toMatch(/^  -M /m);
    // MemcachedTest.pm's feature probes (sasl, extstore, proxy, TLS, unix sockets, dropping privileges).
    expect(help.stdout).not.toMatch(/sasl|ext_path|proxy_config|enable-ssl|unix-socket|no_drop_privileges/i);
    // -V as memcached's: its name and a version scripts can parse (major.minor.micro, nothing after).
    const version = runCli(["memcached", "-V"]);
    expect([version.status, version.stdout]).toEqual([0, "memcached 1.6.18\n"]);
    for (const [argv, message] of [
      [["-I", "256m"], /must be at most half/],
      [["-U", "5"], /speaks TCP only/],
      [["-S"], /SASL/],
      [["--heapprof-sites", "0"], /--heapprof-sites must be a whole number from 1 to/],
      [["-m", "64", "-t", "1", "--heapprof-sites", "65536"], /--heapprof-sites 65536 does not fit shards of 1\d\dM: .* need each shard's region for its share of -m of 153M or more/],
    ] as const) {
      const r = runCli(["memcached", ...argv]);
      expect(r.status, argv.join(" ")).toBe(2);
      expect(r.stderr).toMatch(message);
    }
  });
});

describe("memcached's settings in a running server", () => {
  let server: MemcachedServer | undefined;
  const clients: RawClient[] = [];
  afterEach(async () => {
    for (const c of clients.splice(0)) c.close();
    await server?.close();
    server = undefined;
  });
  const open = async (): Promise<RawClient> => {
    const c = await RawClient.open(server!.port);
    clients.push(c);
    return c;
  };
  const stat = async (c: RawClient, name: string): Promise<number> => {
    const text = await c.request("stats\r\n", "END\r\n");
    const m = new RegExp(`^STAT ${name} (\\d+)\\r$`, "m").exec(text);
    if (m === null) throw new Error(`no ${name} in stats`);
    return Number(m[1]);
  };

  it("-M: memory full answers SERVER_ERROR out of memory storing object, nothing is evicted", async () => {
    server = await startMemcached({ shards: 2, memoryPerShard: "1MiB", port: 0, evict: false });
    const c = await open();
    const value = "B".repeat(8192);
    let stored = 0;
    let answer = "";
    for (; stored < 1000; stored++) {
      answer = await c.request(`set dash${stored} 0 0 ${value.length}\r\n${value}\r\n`);
      if (answer !== "STORED\r\n") break;
    }
    expect(answer).toBe("SERVER_ERROR out of memory storing object\r\n");
    expect(stored).toBeGreaterThan(20);
    // Every item stored is still there: none was evicted to make room.
    for (let i = 0; i < stored; i++) expect(await c.request(`get dash${i}\r\n`, "END\r\n")).toBe(`VALUE dash${i} 0 ${value.length}\r\n${value}\r\nEND\r\n`);
    expect(await stat(c, "evictions")).toBe(0);
    expect(await stat(c, "store_no_memory")).toBeGreaterThanOrEqual(1);
    // Room an item gives back is used again (every item of this connection is in its shard's memory).
    expect(await c.request(`delete dash0\r\n`)).toBe("DELETED\r\n");
    expect(await c.request(`set dash${stored} 0 0 ${value.length}\r\n${value}\r\n`)).toBe("STORED\r\n");
    expect(server.smp.heap.check()).toEqual([]);
  });

  it("-F: flush_all is refused in memcached's words, with a delay or noreply too, and the items stay", async () => {
    server = await startMemcached({ shards: 2, memoryPerShard: "4MiB", port: 0, flushAllowed: false });
    const c = await open();
    expect(await c.request("set a 0 0 1\r\nx\r\nflush_all\r\nflush_all 10\r\nflush_all invalid\r\nflush_all noreply\r\nget a\r\n", "END\r\n")).toBe(
      "STORED\r\n" + "CLIENT_ERROR flush_all not allowed\r\n".repeat(3) + "VALUE a 0 1\r\nx\r\nEND\r\n",
    );
    expect(await stat(c, "cmd_flush")).toBe(4);
  });

  it("-c: a connection past the limit is told and closed (rejected_connections); once one closes, the next is served", async () => {
    server = await startMemcached({ shards: 2, memoryPerShard: "4MiB", port: 0, maxConnections: 3 });
    const held = [await open(), await open(), await open()];
    for (const c of held) expect(await c.request("version\r\n")).toMatch(/^VERSION /);
    const refused = await open();
    expect(await refused.untilClosed()).toBe("ERROR Too many open connections\r\n");
    expect(await stat(held[0]!, "rejected_connections")).toBe(1);
    expect(await stat(held[0]!, "curr_connections")).toBe(3);
    held[2]!.close();
    const deadline = Date.now() + 10_000;
    for (;;) {
      const next = await open();
      const answer = await next.request("version\r\n").catch(() => "closed");
      if (answer.startsWith("VERSION ")) break;
      if (Date.now() > deadline) throw new Error("no connection was served after one of three closed");
      await new Promise((r) => setTimeout(r, 100));
    }
  });

  it("-o idle_timeout: an idle connection is closed (idle_kicks), a busy one is not", async () => {
    server = await startMemcached({ shards: 2, memoryPerShard: "4MiB", port: 0, idleTimeout: 1 });
    const idle = await open();
    const busy = await open();
    expect(await idle.request("version\r\n")).toMatch(/^VERSION /);
    const started = Date.now();
    // The busy one asks something every 300 ms while the idle one waits to be closed (within 1 s + the 1 s scan + slack).
    const closed = idle.untilClosed(8_000);
    let busyAnswers = 0;
    let idleGone = false;
    void closed.then(() => (idleGone = true));
    while (!idleGone && Date.now() - started < 8_000) {
      expect(await busy.request("version\r\n")).toMatch(/^VERSION /);
      busyAnswers++;
      await new Promise((r) => setTimeout(r, 300));
    }
    expect(await closed).toBe("");
    expect(Date.now() - started).toBeGreaterThanOrEqual(1000);
    expect(busyAnswers).toBeGreaterThan(3);
    expect(await busy.request("version\r\n")).toMatch(/^VERSION /);
    expect(await stat(busy, "idle_kicks")).toBe(1);
  });

  it("-R: a connection yields after that many requests of one read (conn_yields), answers in order, big values too", async () => {
    server = await startMemcached({ shards: 2, memoryPerShard: "8MiB", port: 0, requestsPerEvent: 1 });
    const c = await open();
    // Each value big enough for a page span of its own.
    const big = (i: number): string => String(i).repeat(100_000);
    const keys = Array.from({ length: 6 }, (_, i) => `yield${i}`);
    const script = keys.map((k, i) => `set ${k} 0 0 100000\r\n${big(i)}\r\n`).join("") + `get ${keys.join(" ")}\r\n`;
    const got = await c.request(script, "END\r\n", 20_000);
    expect(got).toBe("STORED\r\n".repeat(6) + keys.map((k, i) => `VALUE ${k} 0 100000\r\n${big(i)}\r\n`).join("") + "END\r\n");
    expect(await stat(c, "conn_yields")).toBeGreaterThanOrEqual(6);
    expect(server.smp.heap.check()).toEqual([]);
  });

  it("-C: every cas is 0 (gets, mg c), so every cas command fails as memcached's (a cas of 0 is none); stats settings says so", async () => {
    server = await startMemcached({ shards: 2, memoryPerShard: "4MiB", port: 0, casEnabled: false });
    const c = await open();
    const keys = ["nocas0", "nocas1", "nocas2", "nocas3"];
    for (const k of keys) {
      expect(await c.request(`set ${k} 0 0 1\r\nx\r\ngets ${k}\r\n`, "END\r\n")).toBe(`STORED\r\nVALUE ${k} 0 1 0\r\nx\r\nEND\r\n`);
      expect(await c.request(`cas ${k} 0 0 1 7\r\ny\r\ncas ${k} 0 0 1 0\r\nz\r\n`, (t: string) => t.split("\r\n").length > 2)).toBe("EXISTS\r\nEXISTS\r\n");
      expect(await c.request(`ms ${k} 1 E99\r\nw\r\nmg ${k} c v\r\n`, "w\r\n")).toBe("HD\r\nVA 1 c0\r\nw\r\n");
    }
    const settings = await c.request("stats settings\r\n", "END\r\n");
    expect(settings).toMatch(/^STAT cas_enabled no\r$/m);
    expect(settings).toMatch(/^STAT binding_protocol auto-negotiate\r$/m);
  });

  it("-b sets the listen backlog (stats settings tcp_backlog); -B ascii reads a first byte of 0x80 as text, -B auto answers it in binary", async () => {
    server = await startMemcached({ shards: 2, memoryPerShard: "4MiB", port: 0, tcpBacklog: 8675, protocol: "ascii" });
    const c = await open();
    const settings = await c.request("stats settings\r\n", "END\r\n");
    expect(settings).toMatch(/^STAT tcp_backlog 8675\r$/m);
    expect(settings).toMatch(/^STAT binding_protocol ascii\r$/m);
    const text = await open();
    expect(await text.request("\x80get\r\nversion\r\n", /VERSION [^\r\n]*\r\n$/)).toMatch(/^ERROR\r\nVERSION /);
    await server.close();
    server = await startMemcached({ shards: 1, memoryPerShard: "4MiB", port: 0 });
    const binary = await open();
    binary.send(Buffer.from([0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]));
    expect(Buffer.from(await binary.untilClosed(), "latin1")[0]).toBe(0x81);
  });

  it("the default -R (20) lets a short pipeline through without yielding", async () => {
    server = await startMemcached({ shards: 2, memoryPerShard: "4MiB", port: 0 });
    const c = await open();
    expect(await c.request("set a 0 0 1\r\nx\r\n".repeat(5), lines("STORED", 5))).toBe("STORED\r\n".repeat(5));
    expect(await stat(c, "conn_yields")).toBe(0);
  });
});
