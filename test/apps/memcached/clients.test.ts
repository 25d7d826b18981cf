/**
 * `shardheap memcached` from the command line, checked by real memcached
 * clients rather than ours: libmemcached's memccapable (every ASCII
 * conformance test) and memcaslap (a load of gets and sets over several
 * connections, every value verified). Debian installs them as
 * libmemcached-tools (.ci/run does); the tests that need them say that
 * they skipped when they are missing. Each server is a child process,
 * stopped with Ctrl-C (SIGINT) at the end of its test, which also checks
 * what it prints then; but the eviction run's is in this process, so its
 * heap can be checked afterwards.
 */
import { execFile, spawnSync } from "node:child_process";
import { createServer, type AddressInfo } from "node:net";
import { PassThrough } from "node:stream";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { runMemcached } from "../../../dist/apps/memcached/run.js";
import { startMemcached } from "../../../dist/apps/memcached/server.js";
import { totals } from "../../../dist/apps/memcached/stats/stats.js";
import { runCli, spawnCli, waitFor, type CliChild } from "../../helpers.js";
import { freePort, installed, lines, RawClient } from "./client.js";
import { shardMemory, waitForMemoryBack } from "./shard-memory.js";

const haveMemccapable = installed("memccapable", ["-h"]);
const haveMemcaslap = installed("memcaslap", ["-V"]);
if (!haveMemccapable || !haveMemcaslap) {
  console.warn("real memcached clients check SKIPPED (in part): libmemcached-tools (memccapable, memcaslap) is not installed (apt-get install libmemcached-tools)");
}

interface Running {
  cli: CliChild;
  port: number;
  /** Ctrl-C, then everything it printed and its exit code (bounded). */
  interrupt(): Promise<{ code: number | null; stdout: string }>;
}

/** `shardheap memcached --port 0 ARGS`, once it says where it listens (killed when the test ends). */
async function startCli(args: string[]): Promise<Running> {
  const cli = spawnCli(["memcached", "--port", "0", ...args]);
  const m = await cli.output(/^memcached: listening on 127\.0\.0\.1:(\d+) \(\d+ shards\)$/m);
  return {
    cli,
    port: Number(m[1]),
    async interrupt() {
      cli.child.kill("SIGINT");
      const code = await cli.exit(30_000);
      return { code, stdout: cli.stdout() };
    },
  };
}

/** Run a client program to completion (bounded). */
function runClient(program: string, args: string[], timeoutMs: number): { status: number | null; output: string } {
  const r = spawnSync(program, args, { encoding: "utf8", timeout: timeoutMs });
  return { status: r.status, output: `${r.stdout}${r.stderr}` };
}

describe("shardheap memcached (the command) with real memcached clients", () => {
  it.skipIf(!haveMemccapable)("memccapable -a: every ASCII test passes", async () => {
    const server = await startCli(["--smp", "2", "--memory", "16MiB"]);
    const r = runClient("memccapable", ["-a", "-h", "127.0.0.1", "-p", String(server.port)], 120_000);
    expect(r.output).toMatch(/All tests passed/);
    expect(r.output).not.toMatch(/\[fail\]/);
    expect(r.output.match(/^ascii .*\[pass\]$/gm)?.length).toBeGreaterThanOrEqual(27);
    expect(r.status).toBe(0);
    const { code } = await server.interrupt();
    expect(code).toBe(0);
  });

  it.skipIf(!haveMemcaslap)("memcaslap: gets and sets on 16 connections, every value verified, no misses; Ctrl-C prints the stats and the profile tree", async () => {
    const server = await startCli(["--smp", "2", "--memory", "32MiB", "--heapprof=64KiB", "--admin-port", "0"]);
    expect(server.cli.stdout()).toMatch(/^admin: http:\/\/127\.0\.0\.1:\d+$/m);
    const r = runClient("memcaslap", ["-s", `127.0.0.1:${server.port}`, "-T", "2", "-c", "16", "-t", "2s", "-v", "1"], 60_000);
    expect(r.status, r.output).toBe(0);
    const figure = (name: string): number => Number(new RegExp(`^${name}: (\\d+)$`, "m").exec(r.output)?.[1] ?? NaN);
    expect(figure("cmd_get")).toBeGreaterThan(100);
    expect(figure("cmd_set")).toBeGreaterThan(10);
    expect(figure("get_misses")).toBe(0);
    expect(figure("verify_misses")).toBe(0);
    expect(figure("verify_failed")).toBe(0);
    const { code, stdout } = await server.interrupt();
    expect(code).toBe(0);
    expect(stdout).toMatch(/^memcached: stopping$/m);
    expect(stdout).toMatch(/^\d+k? connections, \S+ gets \(\S+ hits\), \S+ sets, 0 evictions; \S+ items, \S+ in them$/m);
    expect(stdout).toMatch(/^shard +items +used +free +cross-shard frees$/m);
    // The live heap is the items, allocated where connections stored them or where another shard's request copied them in.
    expect(stdout).toMatch(/^All \(\d+, #\d+\)$/m);
    expect(stdout).toMatch(/reserve \(.*store\.ts:\d+:\d+\)/);
  });

  it("--heapprof=RATE and --admin-port: the admin API serves the items' heap profile; Ctrl-C prints the stats and the profile tree", async () => {
    const server = await startCli(["--smp", "2", "--memory", "16MiB", "--heapprof=4096", "--admin-port", "0", "--max-item-size", "2MiB"]);
    const url = /^admin: (http:\/\/127\.0\.0\.1:\d+)$/m.exec(server.cli.stdout())?.[1];
    expect(url).toBeDefined();
    const c = await RawClient.open(server.port);
    const n = 200;
    const value = "v".repeat(1000);
    try {
      const script = Array.from({ length: n }, (_, i) => `set key${i} 0 0 ${value.length}\r\n${value}\r\n`).join("");
      expect(await c.request(script, lines("STORED", n), 20_000)).toBe("STORED\r\n".repeat(n));
      // Past 1 MiB, within --max-item-size 2MiB: stored.
      const big = "b".repeat(1_500_000);
      expect(await c.request(`set big 0 0 ${big.length}\r\n${big}\r\n`, "\r\n", 20_000)).toBe("STORED\r\n");
    } finally {
      c.close();
    }
    const metrics = await (await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(10_000) })).text();
    expect(metrics).toMatch(/^shardheap_memory_malloc_live_objects\{shard="1"\} \d+/m);
    const profile = (await (await fetch(`${url}/v1/heapprof?format=json`, { signal: AbortSignal.timeout(10_000) })).json()) as { totalSize: number };
    // 200 KB of small items and a 1.5 MB one, sampled one per 4 KiB: the estimate is near what was stored.
    expect(profile.totalSize).toBeGreaterThan(1_000_000);
    const { code, stdout } = await server.interrupt();
    expect(code).toBe(0);
    expect(stdout).toMatch(/^memcached: stopping$/m);
    expect(stdout).toMatch(new RegExp(`, ${n + 1} sets, 0 evictions; ${n + 1} items, `, "m"));
    expect(stdout).toMatch(/^shard +items +used +free +cross-shard frees$/m);
    expect(stdout).toMatch(/^Heap profile \(live bytes, all shards/m);
    expect(stdout).toMatch(/^All \(\d+, #\d+\)$/m);
    expect(stdout).toMatch(/reserve \(.*store\.ts:\d+:\d+\)/);
  });

  it.skipIf(!haveMemcaslap)("memcaslap into 1 MiB shards: items evicted and freed while others are written, no value ever wrong; the heap checks clean and flush_all gives the memory back", async () => {
    // In this process, so the heap can be checked; memcaslap runs beside it (async: the shards' threads serve it).
    // 20,000 requests, a tenth of them sets of 4 KiB values: some 8 MB into 2 MiB of shards, however fast the machine.
    const server = await startMemcached({ shards: 2, memoryPerShard: "1MiB", port: 0 });
    try {
      const start = await Promise.all([0, 1].map((s) => shardMemory(server, s)));
      const r = await promisify(execFile)("memcaslap", ["-s", `127.0.0.1:${server.port}`, "-T", "2", "-c", "16", "-x", "20000", "-X", "4096", "-v", "1"], { timeout: 60_000 }).then(
        ({ stdout, stderr }) => `${stdout}${stderr}`,
        (e: { stdout?: string; stderr?: string; message: string }) => `${e.message}${e.stdout ?? ""}${e.stderr ?? ""}`,
      );
      const figure = (name: string): number => Number(new RegExp(`^${name}: (\\d+)$`, "m").exec(r)?.[1] ?? NaN);
      expect(figure("cmd_set"), r).toBeGreaterThan(1000);
      expect(figure("cmd_get") + figure("cmd_set")).toBe(20_000);
      expect(figure("verify_failed")).toBe(0);
      const t = totals(server.config);
      // More was stored than the shards hold: items were evicted (the misses memcaslap saw), and every set found room.
      expect(t.evictions).toBeGreaterThan(0);
      expect(t.cmd_set).toBeGreaterThanOrEqual(figure("cmd_set"));
      expect(t.store_no_memory).toBe(0);
      expect(server.smp.heap.check()).toEqual([]);
      const c = await RawClient.open(server.port);
      try {
        expect(await c.request("flush_all\r\n")).toBe("OK\r\n");
      } finally {
        c.close();
      }
      for (const s of [0, 1]) await waitForMemoryBack(server, s, start[s]!);
      expect(server.smp.heap.check()).toEqual([]);
    } finally {
      await server.close();
    }
  });

  it("the heap profiler switched on at run time (PUT /v1/heapprof): Ctrl-C prints the tree, not that it was off", async () => {
    const server = await startCli(["--smp", "2", "--memory", "16MiB", "--admin-port", "0"]);
    const url = /^admin: (http:\/\/127\.0\.0\.1:\d+)$/m.exec(server.cli.stdout())?.[1];
    expect(url).toBeDefined();
    const put = await fetch(`${url}/v1/heapprof?shard=all&rate=1`, { method: "PUT", signal: AbortSignal.timeout(10_000) });
    expect(put.status).toBe(200);
    const c = await RawClient.open(server.port);
    try {
      const script = Array.from({ length: 50 }, (_, i) => `set on${i} 0 0 100\r\n${"p".repeat(100)}\r\n`).join("");
      expect(await c.request(script, lines("STORED", 50), 20_000)).toBe("STORED\r\n".repeat(50));
    } finally {
      c.close();
    }
    const { code, stdout } = await server.interrupt();
    expect(code).toBe(0);
    expect(stdout).not.toMatch(/Heap profiler was off/);
    expect(stdout).toMatch(/^Heap profile \(live bytes, all shards/m);
    // Every allocation recorded from the switch on: the 50 items at least.
    const all = /^All \((\d+), #(\d+)\)$/m.exec(stdout);
    expect(Number(all?.[2])).toBeGreaterThanOrEqual(50);
    expect(stdout).toMatch(/reserve \(.*store\.ts:\d+:\d+\)/);
  });

  it("--admin-port on a port in use: the error, exit 2, and no server left serving", async () => {
    const held = createServer();
    await new Promise<void>((resolve) => held.listen(0, "127.0.0.1", resolve));
    try {
      const busy = (held.address() as AddressInfo).port;
      // The command: it says which port failed and leaves (before: it served on without its admin API, never exiting).
      const r = runCli(["memcached", "--port", "0", "--admin-port", String(busy)], { timeoutMs: 30_000 });
      expect(r.status, r.stderr).toBe(2);
      expect(r.stderr).toMatch(new RegExp(`^shardheap: the admin server \\(--admin-port\\): listen EADDRINUSE: address already in use 127\\.0\\.0\\.1:${busy}$`, "m"));
      expect(r.stdout).not.toMatch(/listening on/);
      // In this process: runMemcached rejects with the system error's code, its shards and its port closed.
      const port = await freePort();
      const run = runMemcached({ shards: 2, memoryPerShard: "4MiB", port, adminPort: busy, ...(process.getuid?.() === 0 ? { user: "root" } : {}), interrupted: new Promise(() => {}), out: new PassThrough() });
      await expect(run).rejects.toMatchObject({ code: "EADDRINUSE", syscall: "listen" });
      await expect(RawClient.open(port, "127.0.0.1", 2000)).rejects.toMatchObject({ code: "ECONNREFUSED" });
    } finally {
      await new Promise((r) => held.close(r));
    }
  });

  it("bad flags: one line saying what is wrong, memcached's usage alone, exit code 2", () => {
    for (const args of [["--port", "70000"], ["--max-item-size", "12"], ["--bogus"], ["--smp"], ["--memory", "1M", "--max-item-size", "2M"], ["--max-item-size", "33M"], ["-t", "0"]]) {
      const r = runCli(["memcached", ...args], { timeoutMs: 30_000 });
      expect(r.status, args.join(" ")).toBe(2);
      const [what, blank, usage] = r.stderr.split("\n");
      expect(what, args.join(" ")).toMatch(/^shardheap: \S/);
      expect(blank).toBe("");
      expect(usage).toMatch(/^usage: shardheap memcached \[--smp N\]/);
      expect(r.stderr).toMatch(/^memcached's own options/m); // its flags, memcached's among them
      expect(r.stderr, args.join(" ")).not.toMatch(/shardheap (stress|report|diff)/);
    }
    // As memcached 1.6 ("Cannot set item size limit higher than 1/2 of memory max."): an item lives in one shard.
    const r = runCli(["memcached", "--memory", "1M", "--max-item-size", "2M"], { timeoutMs: 30_000 });
    expect(r.stderr).toMatch(/^shardheap: --max-item-size \(2M\) must be at most half of --memory \(1M per shard\)/m);
    expect(r.stdout).not.toMatch(/listening on/);
  });
});
