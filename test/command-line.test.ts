/**
 * How every command line is read, corner by corner: `--flag=value` and
 * `--flag value` alike, a missing value, an unknown flag, `--` (refused as
 * an unknown flag: no command takes operands after it), a lone `-`, short
 * flags written alone or, for memcached's own options, getopt's way. The
 * four readers (report and diff, stress, memcached, the bench driver) each
 * keep their words; these pin them.
 */
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { parseMemcachedArgs } from "../src/apps/memcached/run.js";
import { parseCommandFlags, type RuntimeFlags } from "../src/runtime/flags.js";
import { SharedHeap } from "../src/index.js";
import { runCli, tempDir } from "./helpers.js";

/** The first line of what a refused command line printed, and its exit code. */
const refusal = (args: string[], cwd?: string): [number | null, string] => {
  const r = runCli(args, cwd === undefined ? {} : { cwd });
  return [r.status, r.stderr.split("\n")[0]!];
};

describe("runtime flags, as every command reads them", () => {
  const flagsOf = (argv: string[]): RuntimeFlags => {
    const into: RuntimeFlags = {};
    parseCommandFlags(argv, into, ({ arg }) => {
      throw new Error(`not a runtime flag: ${arg}`);
    });
    return into;
  };

  it("take `--flag=value` and `--flag value` alike; a value may start with one dash, not two", () => {
    expect(flagsOf(["--smp=3", "--memory=1MiB", "--heapprof-sites=100"])).toEqual(flagsOf(["--smp", "3", "--memory", "1MiB", "--heapprof-sites", "100"]));
    expect(() => flagsOf(["--memory", "-1"])).toThrow(/--memory must be a byte count/);
    expect(() => flagsOf(["--memory", "--", "1MiB"])).toThrow(/^--memory needs a value$/);
    expect(() => flagsOf(["--smp", "--heapprof"])).toThrow(/^--smp needs a value$/);
    expect(() => flagsOf(["--smp="])).toThrow(/--smp must be a whole number from 1 to \d+, got ""/);
  });

  it("hand the command everything else as written: its flags, operands, `--` and `-`", () => {
    const seen: Array<[string, string, string | undefined]> = [];
    parseCommandFlags(["--smp", "2", "--out=x", "file", "-", "--"], {}, ({ arg, flag, inline }) => void seen.push([arg, flag, inline]));
    expect(seen).toEqual([
      ["--out=x", "--out", "x"],
      ["file", "file", undefined],
      ["-", "-", undefined],
      ["--", "--", undefined],
    ]);
  });
});

describe("memcached's command line", () => {
  it("reads shardheap's and memcached's long options as `--name=value` or `--name value`", () => {
    expect(parseMemcachedArgs(["--port=11311", "--host=127.0.0.2", "--smp=2"])).toEqual(parseMemcachedArgs(["--port", "11311", "--host", "127.0.0.2", "--smp", "2"]));
    expect(parseMemcachedArgs(["--threads=2", "--listen=127.0.0.3", "--user=nobody", "--conn-limit", "9"])).toMatchObject({ shards: 2, host: "127.0.0.3", user: "nobody", maxConnections: 9 });
    expect(parseMemcachedArgs(["--threads", "2", "--listen", "127.0.0.3"])).toMatchObject({ shards: 2, host: "127.0.0.3" });
  });

  it("reads memcached's letters getopt's way: clustered, values attached or next, a value's leading blanks skipped", () => {
    expect(parseMemcachedArgs(["-vvv"]).verbosity).toBe(3);
    expect(parseMemcachedArgs(["-vvvvv"]).verbosity).toBe(3);
    expect(parseMemcachedArgs(["-vMp11311"])).toMatchObject({ verbosity: 1, evict: false, port: 11311 });
    expect(parseMemcachedArgs(["-vMp", "11311"])).toMatchObject({ verbosity: 1, evict: false, port: 11311 });
    expect(parseMemcachedArgs(["-p", " 11311"]).port).toBe(11311);
    expect(() => parseMemcachedArgs(["-p=5"])).toThrow(/^-p =5: the port must be a whole number$/);
    expect(parseMemcachedArgs(["--verbose=2", "-v"]).verbosity).toBe(2);
  });

  it.each([
    [["-p"], /^-p needs a value$/],
    [["-vMp"], /^-vMp needs a value$/],
    [["-p", "--port", "1"], /^-p needs a value$/],
    [["--user"], /^--user needs a value$/],
    [["--port", "--smp", "2"], /^--port needs a value$/],
    [["--"], /^unknown flag for memcached: --$/],
    [["-p", "11311", "--", "-v"], /^unknown flag for memcached: --$/],
    [["-"], /^unknown flag for memcached: -$/],
    [["11211"], /^unknown flag for memcached: 11211$/],
    [["--p", "1"], /^unknown flag for memcached: --p$/],
    [["--bogus=1"], /^unknown flag for memcached: --bogus=1$/],
    [["-M-"], /^unknown flag for memcached: -- \(memcached: invalid option -- '-'\)$/],
    [["-Mq"], /^unknown flag for memcached: -q \(memcached: invalid option -- 'q'\)$/],
    [["-M="], /^unknown flag for memcached: -= \(memcached: invalid option -- '='\)$/],
    [["--daemon=yes"], /^option '--daemon' doesn't allow an argument$/],
  ])("refuses %j in its words", (argv, message) => {
    expect(() => parseMemcachedArgs(argv)).toThrow(message);
  });
});

describe("report and diff", () => {
  let dir: string;
  let image: string;
  beforeAll(async () => {
    process.env.SHARDHEAP_LOG = "silent";
    dir = tempDir("shardheap-command-line-");
    const heap = SharedHeap.create({ shards: 1, shardBytes: 1 << 20 });
    heap.shard(0).setHeapProfilingEnabled(true);
    heap.shard(0).malloc(4096);
    image = join(dir, "heap.img");
    await heap.saveImage(image);
  });

  it("writes the same file with -o OUT, --output OUT and --output=OUT; --format=F is --format F", () => {
    const outputs = [["-o", "a.txt"], ["--output", "b.txt"], ["--output=c.txt"]].map(([...flag], i) => {
      expect(runCli(["report", image, i === 2 ? "--format=collapsed" : "--format", ...(i === 2 ? [] : ["collapsed"]), ...flag], { cwd: dir }).status).toBe(0);
      return readFileSync(join(dir, `${"abc"[i]}.txt`), "utf8");
    });
    expect(outputs[0]).toMatch(/ 4096$/m);
    expect(new Set(outputs).size).toBe(1);
  });

  it.each([
    [["--format"], "--format needs a value"],
    [["-o"], "-o needs a value"],
    [["-oOUT"], "unknown flag -oOUT"],
    [["-o=OUT"], "unknown flag -o=OUT"],
    [["--bogus=1"], "unknown flag --bogus"],
    [["--=1"], "unknown flag --"],
    [["--"], "unknown flag --"],
    [["-"], "unknown flag -"],
    [["-xy"], "unknown flag -xy"],
  ])("report FILE %j: %s, exit 2", (args, message) => {
    expect(refusal(["report", "heap.img", ...args], dir)).toEqual([2, `shardheap: ${message}`]);
  });

  it("diff refuses --peak naming report, and `--` as report does", () => {
    expect(refusal(["diff", "heap.img", "heap.img", "--peak"], dir)).toEqual([2, "shardheap: unknown flag --peak (report takes it: diff compares two images as they are)"]);
    expect(refusal(["diff", "heap.img", "--", "heap.img"], dir)).toEqual([2, "shardheap: unknown flag --"]);
  });
});

describe("stress", () => {
  it.each([
    [["--out"], "--out needs a value"],
    [["--duration", "--smp", "2"], "--duration needs a value"],
    [["--bogus=1"], "unknown flag for stress: --bogus=1"],
    [["--"], "unknown flag for stress: --"],
    [["-x"], "unknown flag for stress: -x"],
    [["extra"], "unknown flag for stress: extra"],
  ])("refuses %j: %s, exit 2", (args, message) => {
    expect(refusal(["stress", ...args])).toEqual([2, `shardheap: ${message}`]);
  });
});

describe("the bench driver's command line", () => {
  const root = new URL("..", import.meta.url).pathname;
  const bench = (...args: string[]): { status: number | null; stderr: string } => {
    const r = spawnSync(process.execPath, ["--import", "tsx", "bench/run.ts", ...args], { cwd: root, encoding: "utf8", timeout: 60_000 });
    return { status: r.status, stderr: r.stderr };
  };

  it.each([
    [["--bogus"], "bench: unknown argument: --bogus"],
    [["--bogus=1"], "bench: unknown argument: --bogus=1"],
    [["--"], "bench: unknown argument: --"],
    [["-x"], "bench: unknown argument: -x"],
    [["churn"], "bench: unknown argument: churn"],
    [["--rounds"], "bench: --rounds needs a value"],
    [["--filter", "--json"], "bench: --filter needs a value"],
    [["--rounds=0"], "bench: --rounds: expected a positive number, got 0"],
    [["--round-ms", "-5"], "bench: --round-ms: expected a positive number, got -5"],
    [["--filter=no-such-module"], "bench: --filter no-such-module matches no module ("],
    [["--filter", "nothing,", "--json=no", "--filter", "zz"], "bench: --filter nothing,zz matches no module ("],
  ])("refuses %j: %s, exit 2, the usage after it", (args, message) => {
    const r = bench(...args);
    expect(r.status, r.stderr).toBe(2);
    const first = r.stderr.split("\n")[0]!;
    // No module matched: the message ends with the modules there are (the list grows), no usage.
    if (message.endsWith("(")) expect(first.startsWith(message), first).toBe(true);
    else expect([first, r.stderr]).toEqual([message, expect.stringMatching(/^usage: npm run bench -- \[options\]$/m)]);
  });

  it("--help and -h print the usage alone and exit 0; -hx is an unknown argument", () => {
    for (const flag of ["--help", "-h", "--help=1"]) {
      const r = bench(flag);
      expect([r.status, r.stderr.split("\n")[0]], flag).toEqual([0, "usage: npm run bench -- [options]"]);
    }
    expect(bench("-hx").stderr.split("\n")[0]).toBe("bench: unknown argument: -hx");
  });
});
