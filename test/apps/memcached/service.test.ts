/**
 * memcached's command lines as services and harnesses write them, given
 * to `shardheap memcached` unchanged (memcached-flags.ts,
 * memcached-suboptions.ts, service.ts): every option memcached 1.6 takes
 * is taken (honoured, or checked and named once on stderr as ignored),
 * what memcached refuses is refused in its words; Debian's service line
 * (run as root: -u memcache, -P pid file) starts, writes its pid file and
 * serves as the memcache user; -d detaches once serving; production
 * lines with `-o modern` or the slab mover and LRU threads start and
 * serve; -X refuses the dumps.
 */
import { execFileSync } from "node:child_process";
import { chownSync, existsSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it, onTestFinished } from "vitest";
import { parseMemcachedArgs } from "../../../src/apps/memcached/run.js";
import { startMemcached, type MemcachedServer } from "../../../dist/apps/memcached/server.js";
import { freePort, RawClient } from "./client.js";
import { runCli, spawnCli, tempDir, waitFor } from "../../helpers.js";

const MIB = 1024 * 1024;

describe("memcached's options, every one", () => {
  it("takes -X, -u, -P, the long names, and -W as memcached does", () => {
    expect(parseMemcachedArgs(["-X", "-W", "-u", "memcache", "-P", "/run/memcached/memcached.pid"])).toEqual({ dumpEnabled: false, user: "memcache", pidFile: "/run/memcached/memcached.pid" });
    expect(parseMemcachedArgs(["--port=11311", "--listen", "127.0.0.2", "--threads=2", "--memory-limit", "64", "--user=memcache", "--pidfile", "/tmp/p", "--disable-cas", "--extended=idle_timeout=5"])).toEqual({
      port: 11311,
      host: "127.0.0.2",
      shards: 2,
      itemMemory: 64 * MIB,
      user: "memcache",
      pidFile: "/tmp/p",
      casEnabled: false,
      idleTimeout: 5,
    });
    expect(() => parseMemcachedArgs(["--disable-cas=yes"])).toThrow(/option '--disable-cas' doesn't allow an argument/);
    expect(parseMemcachedArgs(["-i"])).toEqual({ license: true });
  });

  it("takes what tunes what is not here, checked with memcached's rules, and names each once as ignored", () => {
    const ignored = (argv: string[]): string[] => (parseMemcachedArgs(argv).ignored ?? []).map(([option]) => option);
    // The suite's own lines (issue_42.t, item_size_max.t, stats.t) and the harness's addition.
    expect(ignored(["-o", "no_modern"])).toEqual(["-o no_modern"]);
    expect(ignored(["-I", "1024", "-o", "slab_chunk_max=1,no_lru_crawler,no_lru_maintainer", "-o", "relaxed_privileges"])).toEqual([
      "-o slab_chunk_max",
      "-o no_lru_crawler",
      "-o no_lru_maintainer",
      "-o relaxed_privileges",
    ]);
    // Production lines.
    expect(ignored(["-o", "modern"])).toEqual(["-o modern"]);
    expect(ignored(["-o", "slab_reassign,slab_automove=1,lru_crawler,lru_maintainer", "-o", "lru_crawler"])).toEqual(["-o slab_reassign", "-o slab_automove", "-o lru_crawler", "-o lru_maintainer"]);
    expect(ignored(["-f", "1.05", "-n", "64", "-L", "-k", "-r", "-a", "700", "-t", "4", "-N", "2"])).toEqual(["-f", "-n", "-L", "-k", "-r", "-a", "-N"]);
    expect(ignored(["-o", "hashpower=20,hash_algorithm=xxh3,tail_repair_time=10,lru_crawler_sleep=50,lru_crawler_tocrawl=5,hot_lru_pct=30,warm_lru_pct=40,hot_max_factor=0.5,temporary_ttl=30,watcher_logbuf_size=64,read_buf_mem_limit=32,track_sizes,slab_sizes=96-200-1024"])).toHaveLength(13);
    const why = new Map(parseMemcachedArgs(["-o", "slab_reassign,lru_crawler,modern"]).ignored);
    expect(why.get("-o slab_reassign")).toMatch(/no slab classes/);
    expect(why.get("-o lru_crawler")).toMatch(/no LRU threads/);
  });

  it("refuses what memcached refuses, in its words", () => {
    const refused: Array<[string[], RegExp]> = [
      [["-o", "foo"], /^Illegal suboption "foo"$/],
      [["-o", "idle_timeout=5,foo=1"], /^Illegal suboption "foo=1"$/],
      [["-o", "hashpower=3"], /^Initial hashtable multiplier of 3 is too low$/],
      [["-o", "hashpower"], /^Missing numeric argument for hashpower$/],
      [["-o", "slab_automove=5"], /^slab_automove must be between 0 and 2$/],
      [["-o", "hash_algorithm=md5"], /^Unknown hash_algorithm option \(jenkins, murmur3, xxh3\)$/],
      [["-o", "slab_chunk_max=2048"], /^slab_chunk_max must be specified in kilobytes\.$/],
      [["-o", "slab_chunk_max=x"], /^could not parse argument to slab_chunk_max$/],
      // memcached's slab chunks must divide -I: 2000 bytes, or 1 KiB with the default 512 KiB chunk, are refused.
      [["-I", "2000"], /^slab_chunk_max \(bytes: 524288\) cannot be larger than -I \(item_size_max 2000\)$/],
      [["-I", "1024"], /cannot be larger than -I/],
      [["-I", "1536", "-o", "slab_chunk_max=1"], /^-I \(item_size_max: 1536\) must be evenly divisible by slab_chunk_max \(bytes: 1024\)$/],
      [["-I", "3m", "-o", "slab_chunk_max=3"], /^slab_chunk_max \(bytes: 3072\) must divide evenly into 1048576 \(slab_page_size\)$/],
      [["-o", "slab_sizes=100-104"], /^slab size 104 must be at least 8 bytes larger than previous class$/],
      [["-o", "hot_lru_pct=60,warm_lru_pct=40"], /^hot_lru_pct \+ warm_lru_pct cannot be more than 80% combined$/],
      [["-o", "temporary_ttl=5,no_lru_maintainer"], /^temporary_ttl requires lru_maintainer to be enabled$/],
      [["-N", "5"], /^Number of napi_ids\(5\) cannot be greater than number of threads\(4\)$/],
      [["-f", "1"], /^Factor must be greater than 1$/],
      [["-n", "0"], /^Chunk size must be greater than 0$/],
      [["-D", ""], /^No delimiter specified$/],
      [["-q"], /unknown flag for memcached: -q \(memcached: invalid option -- 'q'\)/],
      // What is asked for and not here: refused, naming why.
      [["-o", "ssl_chain_cert=x.pem"], /-o ssl_chain_cert is not supported .*TLS/],
      [["-S"], /-S is not supported .*SASL/],
      [["-A"], /-A is not supported .*shutdown/],
      [["-e", "/tmp/mem"], /-e is not supported .*warm restart/],
    ];
    for (const [argv, message] of refused) expect(() => parseMemcachedArgs(argv), argv.join(" ")).toThrow(message);
    // memcached's atoi: a value that is not a number is 0, which idle_timeout takes (no timeout).
    expect(parseMemcachedArgs(["-o", "idle_timeout=x"])).toEqual({ idleTimeout: 0 });
  });
});

/** A free port and a client's set and get on it: what "serves" means here. */
async function serves(port: number): Promise<string> {
  const c = await RawClient.open(port);
  try {
    return await c.request("set svc 0 0 2\r\nok\r\nget svc\r\n", "END\r\n");
  } finally {
    c.close();
  }
}

describe("memcached's command lines, run", () => {
  it("production lines (-o modern; the slab mover and LRU threads) start and serve, each ignored option named once on stderr", async () => {
    for (const extra of [["-o", "modern"], ["-o", "slab_reassign,slab_automove=1,lru_crawler,lru_maintainer"]]) {
      const port = await freePort();
      const cli = spawnCli(["memcached", "-m", "64", "-p", String(port), "-l", "127.0.0.1", "-t", "2", "-c", "1024", ...extra]);
      await cli.output(/listening on 127\.0\.0\.1:\d+ \(2 shards\)/);
      expect(await serves(port)).toBe("STORED\r\nVALUE svc 0 2\r\nok\r\nEND\r\n");
      for (const name of extra[1]!.split(",").map((o) => o.split("=")[0]!)) {
        expect(cli.stderr().split(`ignoring memcached's -o ${name}:`).length - 1, name).toBe(1);
      }
      cli.child.kill("SIGTERM");
      expect(await cli.exit()).toBe(0);
    }
  });

  it("-d: the command exits 0 once its daemon serves, whose id the pid file holds; SIGTERM stops the daemon, and the file goes", async () => {
    const pidFile = join(tempDir(), "memcached.pid");
    const port = await freePort();
    const r = runCli(["memcached", "-d", "-p", String(port), "-t", "1", "-m", "64", "-P", pidFile]);
    expect([r.status, r.stderr]).toEqual([0, ""]);
    const pid = Number(readFileSync(pidFile, "utf8"));
    // Stopped whatever happens below (it is a process of its own, in a session of its own).
    onTestFinished(() => {
      try {
        process.kill(pid, "SIGKILL");
      } catch {}
    });
    expect(await serves(port)).toBe("STORED\r\nVALUE svc 0 2\r\nok\r\nEND\r\n");
    const c = await RawClient.open(port);
    expect(await c.request("stats\r\n", "END\r\n")).toMatch(new RegExp(`^STAT pid ${pid}\r$`, "m"));
    c.close();
    process.kill(pid, "SIGTERM");
    await waitFor(() => !existsSync(`/proc/${pid}`) || readFileSync(`/proc/${pid}/stat`, "utf8").split(" ")[2] === "Z", "the daemon to end");
    expect(existsSync(pidFile)).toBe(false);
  });

  it("-d: a daemon that cannot start makes the command fail with its error and exit code", async () => {
    // Its port is taken.
    const holder = await startMemcached({ shards: 1, memoryPerShard: "4MiB", port: 0 });
    try {
      const r = runCli(["memcached", "-d", "-p", String(holder.port), "-t", "1", "-m", "64"]);
      expect(r.status).toBe(2);
      expect(r.stderr).toMatch(/EADDRINUSE/);
    } finally {
      await holder.close();
    }
  });

  it("-i prints the license; a pid file that cannot be written stops the start (exit 2)", () => {
    const license = runCli(["memcached", "-i"]);
    expect(license.status).toBe(0);
    expect(license.stdout).toBe(readFileSync(new URL("../../../LICENSE", import.meta.url), "utf8"));
    const r = runCli(["memcached", "-p", "0", "-t", "1", "-P", join(tempDir(), "no", "such", "dir", "pid")]);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/ENOENT.*pid\.tmp/);
  });
});

const root = process.getuid?.() === 0;
const memcacheIds = ((): { uid: number; gid: number } | undefined => {
  try {
    return { uid: Number(execFileSync("id", ["-u", "memcache"], { encoding: "utf8" })), gid: Number(execFileSync("id", ["-g", "memcache"], { encoding: "utf8" })) };
  } catch {
    return undefined;
  }
})();
if (!root) console.warn("Debian's service line SKIPPED: not running as root (-u memcache changes the user only for root)");
else if (memcacheIds === undefined) console.warn("Debian's service line SKIPPED: no memcache user (apt-get install memcached creates it)");

describe.runIf(root && memcacheIds !== undefined)("Debian's service line, as root", () => {
  it("-m 64 -p P -u memcache -l 127.0.0.1 -P FILE: starts, writes its pid file, serves as memcache (every thread), removes the file at SIGTERM", async () => {
    const { uid, gid } = memcacheIds!;
    // Debian's /var/run/memcached is the memcache user's: the pid file is written after the user changed.
    const dir = tempDir("shardheap-service-");
    chownSync(dir, uid, gid);
    const pidFile = join(dir, "memcached.pid");
    const port = await freePort();
    const cli = spawnCli(["memcached", "-m", "64", "-p", String(port), "-u", "memcache", "-l", "127.0.0.1", "-P", pidFile]);
    await cli.output(/listening on 127\.0\.0\.1:\d+/);
    expect(readFileSync(pidFile, "utf8")).toBe(`${cli.child.pid}\n`);
    expect(await serves(port)).toBe("STORED\r\nVALUE svc 0 2\r\nok\r\nEND\r\n");
    // Every thread of the process (the shards' worker threads too) runs as memcache, with no other groups.
    const tasks = readdirSync(`/proc/${cli.child.pid}/task`);
    expect(tasks.length).toBeGreaterThan(2);
    for (const task of tasks) {
      const status = readFileSync(`/proc/${cli.child.pid}/task/${task}/status`, "utf8");
      expect(/^Uid:\s+(.*)$/m.exec(status)![1]!.split(/\s+/).map(Number), task).toEqual([uid, uid, uid, uid]);
      expect(/^Gid:\s+(.*)$/m.exec(status)![1]!.split(/\s+/).map(Number), task).toEqual([gid, gid, gid, gid]);
      expect(/^Groups:[ \t]*(.*)$/m.exec(status)![1]!.trim(), task).toBe("");
    }
    cli.child.kill("SIGTERM");
    expect(await cli.exit()).toBe(0);
    expect(existsSync(pidFile)).toBe(false);
  });

  it("root without -u is refused in memcached's words, exit 2, before anything is bound", () => {
    const r = runCli(["memcached", "-p", "0", "-t", "1"], { asIs: true });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/^shardheap: can't run as root without the -u switch$/m);
    expect(r.stdout).not.toMatch(/listening/);
  });

  it("-u with a user the system does not know is refused in memcached's words, exit 2", () => {
    const r = runCli(["memcached", "-p", "0", "-t", "1", "-u", "no-such-user-here"]);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/can't find the user no-such-user-here to switch to/);
  });
});

describe("-X in a running server", () => {
  let server: MemcachedServer | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  it("refuses stats cachedump and stats detail in memcached's words; stats settings says dump_enabled no", async () => {
    server = await startMemcached({ shards: 2, memoryPerShard: "4MiB", port: 0, dumpEnabled: false });
    const c = await RawClient.open(server.port);
    try {
      expect(await c.request("stats cachedump 1 0\r\nstats detail dump\r\nstats detail on\r\n", (t: string) => t.split("\r\n").length > 3)).toBe(
        "CLIENT_ERROR stats cachedump not allowed\r\nCLIENT_ERROR stats detail not allowed\r\nCLIENT_ERROR stats detail not allowed\r\n",
      );
      expect(await c.request("stats settings\r\n", "END\r\n")).toMatch(/^STAT dump_enabled no\r$/m);
    } finally {
      c.close();
    }
  });
});
