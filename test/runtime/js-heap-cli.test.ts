/** --jsheapprof[=RATE] on the command line: the flag's readings, `stress` writing the JS heap's report, `memcached` switching it on. */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { Profile } from "pprof-format";
import { describe, expect, it } from "vitest";
import { parseMemcachedArgs } from "../../src/apps/memcached/run.js";
import { parseCommandFlags, type RuntimeFlags } from "../../src/runtime/flags.js";
import { runCli, tempDir } from "../helpers.js";

const flagsOf = (argv: string[]): RuntimeFlags => {
  const into: RuntimeFlags = {};
  parseCommandFlags(argv, into, ({ arg }) => {
    throw new Error(`not a runtime flag: ${arg}`);
  });
  return into;
};

describe("--jsheapprof", () => {
  it("alone is 512 KiB; =RATE a size; 0 off; a rate after a space says to use =", () => {
    expect(flagsOf(["--jsheapprof"])).toEqual({ jsHeapprof: 512 * 1024 });
    expect(flagsOf(["--jsheapprof=64KiB", "--heapprof"])).toEqual({ jsHeapprof: 65536, heapprof: true });
    expect(flagsOf(["--jsheapprof=0"])).toEqual({ jsHeapprof: 0 });
    expect(() => flagsOf(["--jsheapprof", "64K"])).toThrow(/did you mean --jsheapprof=64K\? \(--jsheapprof alone samples every 512KiB on average/);
    expect(() => flagsOf(["--jsheapprof=-1"])).toThrow(/--jsheapprof=RATE/);
    expect(parseMemcachedArgs(["--jsheapprof=8192", "-p", "0"])).toMatchObject({ jsHeapprof: 8192, port: 0 });
  });

  it("stress writes the shards' JS heap profile beside the shared heap's", () => {
    const out = join(tempDir("shardheap-jsheap-"), "out");
    const r = runCli(["stress", "--duration", "1", "--smp", "2", "--memory", "4MiB", "--jsheapprof=4096", "--out", out]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^JS heap profile \(sampled live objects in the shards' own V8 heaps; branches under 1% left out\):\nAll \(\d+, #\d+\)$/m);
    for (const f of ["jsheapprof.svg", "jsheapprof.collapsed", "jsheapprof.pb.gz", "jsheapprof.heapprofile", "heapprof.pb.gz"]) expect(existsSync(join(out, f)), f).toBe(true);
    const pprof = Profile.decode(gunzipSync(readFileSync(join(out, "jsheapprof.pb.gz"))));
    expect(pprof.sample.length).toBeGreaterThan(0);
    expect(Number(pprof.period)).toBe(4096);
  });
});
