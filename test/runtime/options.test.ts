import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { parseMemcachedArgs } from "../../src/apps/memcached/run.js";
import { checkProfilerSitesFlag, parseCommandFlags, parseRuntimeFlag, type RuntimeFlags } from "../../src/runtime/flags.js";
import { fillSmpOptions } from "../../src/smp/options.js";
import { InvalidValueError, UsageError } from "../../src/errors.js";
import { SharedHeap } from "../../src/index.js";

describe("Smp options", () => {
  it("fills defaults and converts heapprof", () => {
    const o = fillSmpOptions({ shards: 2, memoryPerShard: "1MiB", heapprof: true });
    expect(o).toEqual({ shards: 2, memoryPerShard: 2 ** 20, heapprofRate: 1, jsHeapprofRate: 0, heapprofSites: 64, module: undefined, loadTimeoutMs: 30_000, stopTimeoutMs: 10_000, idleTrimMs: 200, queueBytes: 65536, maxPendingCalls: 262_144, orphans: "keep", execArgv: undefined, mainShard: false, debugPointers: false, memoryPressure: [0.8, 0.9], timelineIntervalMs: 1000 });
    expect(fillSmpOptions({ shards: 1, queueBytes: "4KiB" }).queueBytes).toBe(4096);
    expect(fillSmpOptions({ shards: 255, memoryPerShard: "1MiB" }).queueBytes).toBe(1024); // 256^2 queues stay under 64 MiB
    expect(fillSmpOptions({ shards: 1, loadTimeoutMs: Infinity, stopTimeoutMs: 0 })).toMatchObject({ loadTimeoutMs: Infinity, stopTimeoutMs: 0 });
    expect(fillSmpOptions({ shards: 1, heapprof: 524288 }).heapprofRate).toBe(524288);
    expect(fillSmpOptions({ shards: 1 }).heapprofRate).toBe(0);
    // The JS heap profiler: true is its default interval, not "every allocation".
    expect([true, "64KiB", 1, false].map((jsHeapprof) => fillSmpOptions({ shards: 1, jsHeapprof }).jsHeapprofRate)).toEqual([512 * 1024, 65536, 1, 0]);
    expect(() => fillSmpOptions({ shards: 1, jsHeapprof: -1 })).toThrow(/options\.jsHeapprof/);
    expect(fillSmpOptions({ shards: 1, module: new URL("file:///x.mjs") }).module).toBe("file:///x.mjs");
    expect(fillSmpOptions({ shards: 1, orphans: "free" }).orphans).toBe("free");
    expect(fillSmpOptions({ shards: 1, memoryPressure: [0.95, 0.5, 0.95] }).memoryPressure).toEqual([0.5, 0.95]);
    expect(fillSmpOptions({ shards: 1, memoryPressure: false }).memoryPressure).toEqual([]);
  });

  it("reads a module path against the caller's working directory, and keeps URLs as given", () => {
    const module = (m: string): string | undefined => fillSmpOptions({ shards: 1, module: m }).module;
    expect(module("./tasks.mjs")).toBe(pathToFileURL(join(process.cwd(), "tasks.mjs")).href);
    expect(module("lib/tasks.mjs")).toBe(pathToFileURL(join(process.cwd(), "lib", "tasks.mjs")).href);
    expect(module("/srv/app/tasks.mjs")).toBe("file:///srv/app/tasks.mjs");
    expect(module("file:///srv/app/tasks.mjs")).toBe("file:///srv/app/tasks.mjs");
    expect(module("data:text/javascript,export const x = 1")).toBe("data:text/javascript,export const x = 1");
  });

  it.each([
    [{ shards: 0 }, /options.shards must be a whole number from 1 to 1024, got 0/],
    [{ shards: 2.5 }, /options.shards/],
    [{ shards: 1, memoryPerShard: "lots" }, /options.memoryPerShard must be a byte count/],
    [{ shards: 1, memoryPerShard: 1000 }, /at least 131072/],
    [{ shards: 64, memoryPerShard: "1GiB" }, /fit in 4 GiB/],
    [{ shards: 1, heapprof: -5 }, /options.heapprof must be a whole number of bytes/],
    [{ shards: 1, heapprof: 0.5 }, /options.heapprof must be a whole number of bytes/],
    [{ shards: 1, heapprof: 2 ** 31 }, /options.heapprof must be at most 2147483647 bytes/],
    [{ shards: 1, heapprof: "1.5" }, /options.heapprof must be a whole number of bytes: "1.5" is 1.5 bytes/],
    [{ shards: 1, loadTimeoutMs: -1 }, /options.loadTimeoutMs must be a whole number from 0/],
    [{ shards: 1, stopTimeoutMs: Number.NaN }, /options.stopTimeoutMs/],
    [{ shards: 1, idleTrimMs: Infinity }, /options.idleTrimMs/], // setTimeout would fire at once
    [{ shards: 1, idleTrimMs: 2.5 }, /options.idleTrimMs/],
    [{ shards: 1, module: "" }, /options.module/],
    [{ shards: 1, queueBytes: 100 }, /options.queueBytes must be a power of two from 128/],
    [{ shards: 1, queueBytes: 3000 }, /options.queueBytes must be a power of two/],
    [{ shards: 1, memoryPressure: [0.8, 1.5] }, /options.memoryPressure must be false or a list of at most 8 fractions of a shard's memory, each above 0 and at most 1 \(\[0.8, 0.9\]\), got \[0.8, 1.5\]/],
    [{ shards: 1, memoryPressure: [0] }, /options.memoryPressure must be false or a list .*, got \[0\]/],
    [{ shards: 1, memoryPressure: ["0.8"] }, /options.memoryPressure .*, got \["0.8"\]/],
    [{ shards: 1, memoryPressure: 0.8 }, /options.memoryPressure .*, got 0.8$/],
    [{ shards: 1, memoryPressure: true }, /options.memoryPressure .*, got true$/],
    [{ shards: 1, memoryPressure: Array(9).fill(0.5) }, /options.memoryPressure must be false or a list of at most 8/],
    [{ shards: 1, timelineIntervalMs: 10 }, /options.timelineIntervalMs must be a whole number from 50 to 3600000, got 10/],
  ])("rejects %j", (o, message) => {
    expect(() => fillSmpOptions(o as never)).toThrow(message);
    expect(() => fillSmpOptions(o as never)).toThrow("module" in o ? TypeError : RangeError);
  });

  it("takes heapprof as a size too, and caps it at the Int32 rate slot", () => {
    expect(fillSmpOptions({ shards: 1, heapprof: "512KiB" }).heapprofRate).toBe(524288);
    expect(fillSmpOptions({ shards: 1, heapprof: 2 ** 31 - 1 }).heapprofRate).toBe(2 ** 31 - 1);
    expect(fillSmpOptions({ shards: 1, heapprof: false }).heapprofRate).toBe(0);
  });

  it("takes heapprofSites up to what a quarter of a shard holds, with the default one per 32 KiB (64 to 4096)", () => {
    expect(fillSmpOptions({ shards: 1 }).heapprofSites).toBe(2048); // 64 MiB
    expect(fillSmpOptions({ shards: 1, memoryPerShard: "1GiB" }).heapprofSites).toBe(4096);
    expect(fillSmpOptions({ shards: 1, memoryPerShard: "128KiB" }).heapprofSites).toBe(64);
    expect(fillSmpOptions({ shards: 1, memoryPerShard: "160MiB", heapprofSites: 65536 }).heapprofSites).toBe(65536);
    expect(fillSmpOptions({ shards: 1, memoryPerShard: "128MiB", heapprofSites: 54844 }).heapprofSites).toBe(54844);
    expect(fillSmpOptions({ shards: 1, heapprofSites: 1 }).heapprofSites).toBe(1);
  });

  it.each([
    [0, /options\.heapprofSites must be a whole number from 1 to \d+, got 0/],
    [-5, /options\.heapprofSites must be a whole number from 1 to \d+, got -5/],
    [1.5, /options\.heapprofSites must be a whole number from 1 to \d+, got 1\.5/],
    [NaN, /options\.heapprofSites must be a whole number/],
    ["lots", /options\.heapprofSites must be a whole number/],
    [2 ** 40, /options\.heapprofSites must be a whole number from 1 to \d+/],
    [54845, /options\.heapprofSites 54845 does not fit shards of 128M: the profiler's tables \(608 bytes a site\) may take a quarter of a shard, 54844 sites in this one; 54845 need options\.memoryPerShard of 129M or more/],
  ])("refuses heapprofSites %s, naming the option", (sites, message) => {
    const start = (): unknown => fillSmpOptions({ shards: 1, memoryPerShard: "128MiB", heapprofSites: sites as number });
    expect(start).toThrow(message);
    expect(start).toThrow(InvalidValueError);
    expect(() => SharedHeap.create({ shards: 1, shardBytes: "128MiB", heapprofSites: sites as number })).toThrow(/SharedHeap\.create: options\.heapprofSites/);
  });
});

describe("runtime flags", () => {
  const parse = (argv: string[]): RuntimeFlags => {
    const flags: RuntimeFlags = {};
    for (let i = 0; i < argv.length; ) {
      const used = parseRuntimeFlag(argv, i, flags);
      if (used === 0) throw new Error(`not a runtime flag: ${argv[i]}`);
      i += used;
    }
    return flags;
  };

  it("parses --smp, --memory and --heapprof[=RATE] in both spellings", () => {
    expect(parse(["--smp", "4", "--memory=64MiB", "--heapprof"])).toEqual({ smp: 4, memory: 64 * 2 ** 20, heapprof: true });
    expect(parse(["--smp=2", "--memory", "1G", "--heapprof=512KiB"])).toEqual({ smp: 2, memory: 2 ** 30, heapprof: 524288 });
    expect(parse(["--heapprof=0"])).toEqual({ heapprof: 0 });
  });

  it("points --heapprof RATE at --heapprof=RATE, in every command that takes it; a bare --heapprof still means every allocation", () => {
    for (const rate of ["64K", "65536", "1.5MiB", "0"]) {
      const hint = new RegExp(`--heapprof takes its rate after "=": did you mean --heapprof=${rate.replace(".", "\\.")}\\?`);
      expect(() => parse(["--heapprof", rate])).toThrow(hint);
      expect(() => parse(["--heapprof", rate])).toThrow(UsageError);
      expect(() => parseMemcachedArgs(["--smp", "2", "--heapprof", rate])).toThrow(hint);
    }
    expect(parse(["--heapprof", "--smp", "2"])).toEqual({ heapprof: true, smp: 2 });
    expect(parseMemcachedArgs(["--heapprof", "--port", "11311"])).toMatchObject({ heapprof: true, port: 11311 });
    expect(() => parseMemcachedArgs(["--heapprof", "fast"])).toThrow(/unknown flag for memcached: fast/);
  });

  it("parses --heapprof-sites N in both spellings, into Smp's options for stress and memcached", () => {
    expect(parse(["--heapprof-sites", "65536", "--heapprof"])).toEqual({ heapprofSites: 65536, heapprof: true });
    expect(parse(["--heapprof-sites=100"])).toEqual({ heapprofSites: 100 });
    expect(parseMemcachedArgs(["--memory", "256MiB", "--heapprof-sites=65536"])).toMatchObject({ memoryPerShard: 256 * 2 ** 20, heapprofSites: 65536 });
    expect(parseMemcachedArgs(["--port", "1"])).not.toHaveProperty("heapprofSites");
  });

  it("refuses --heapprof-sites too big for the shards, naming both flags (memcached's -m as each shard's share)", () => {
    const flags: RuntimeFlags = {};
    parseCommandFlags(["--heapprof-sites", "65536"], flags, () => undefined);
    expect(() => checkProfilerSitesFlag(flags, 64 * 2 ** 20, "--memory")).toThrow(/^--heapprof-sites 65536 does not fit shards of 64M: .* 27250 sites in this one; 65536 need --memory of 153M or more$/);
    expect(() => checkProfilerSitesFlag(flags, 64 * 2 ** 20, "--memory")).toThrow(InvalidValueError);
    expect(() => checkProfilerSitesFlag(flags, 153 * 2 ** 20, "--memory")).not.toThrow();
    expect(() => parseMemcachedArgs(["--heapprof-sites", "65536"])).toThrow(/need --memory of 153M/);
    // -m is the items' memory: each shard's region holds the profiler's tables beside them, at most a quarter of it.
    expect(() => parseMemcachedArgs(["-t", "2", "-m", "128", "--heapprof-sites", "65536"])).toThrow(/need each shard's region for its share of -m of 153M/);
    expect(() => parseMemcachedArgs(["-t", "2", "-m", "128", "--heapprof-sites", "40000"])).not.toThrow();
  });

  it("leaves other flags to the command", () => {
    expect(parseRuntimeFlag(["--duration", "5"], 0, {})).toBe(0);
  });

  it.each([
    [["--smp"], /--smp needs a value/],
    [["--smp", "--memory", "1M"], /--smp needs a value/],
    [["--smp", "zero"], /--smp must be a whole number/],
    [["--smp=0"], /--smp must be a whole number/],
    [["--memory=12XB"], /--memory must be a byte count/],
    [["--memory=64K"], /--memory must be at least 131072 bytes, got 65536/],
    [["--heapprof=fast"], /--heapprof=RATE must be a byte count/],
    [["--heapprof=0.5"], /--heapprof=RATE must be a whole number of bytes: "0.5" is 0.5 bytes/],
    [["--heapprof=1.5"], /--heapprof=RATE must be a whole number of bytes/],
    [["--heapprof=2GiB"], /--heapprof=RATE must be at most 2147483647 bytes/],
    [["--heapprof="], /--heapprof=RATE must be a byte count/],
    [["--heapprof-sites"], /--heapprof-sites needs a value/],
    [["--heapprof-sites", "--smp", "2"], /--heapprof-sites needs a value/],
    [["--heapprof-sites=0"], /--heapprof-sites must be a whole number from 1 to \d+, got "0"/],
    [["--heapprof-sites", "-3"], /--heapprof-sites must be a whole number from 1 to \d+, got "-3"/],
    [["--heapprof-sites=1.5"], /--heapprof-sites must be a whole number from 1 to \d+, got "1\.5"/],
    [["--heapprof-sites=64K"], /--heapprof-sites must be a whole number from 1 to \d+, got "64K"/],
    [["--heapprof-sites=99999999999"], /--heapprof-sites must be a whole number from 1 to \d+/],
  ])("rejects %j clearly, naming the flag", (argv, message) => {
    expect(() => parse(argv)).toThrow(message);
    expect(() => parse(argv)).toThrow(/needs a value/.test(String(message)) ? UsageError : InvalidValueError);
  });
});
