import { describe, expect, it } from "vitest";
import { fillSmpOptions, parseRuntimeFlag, type RuntimeFlags } from "../src/runtime/options.js";
import { formatSize, parseSize } from "../src/units.js";

describe("sizes", () => {
  it.each([
    ["65536", 65536],
    ["64MiB", 64 * 2 ** 20],
    ["64m", 64 * 2 ** 20],
    ["1GiB", 2 ** 30],
    ["1.5K", 1536],
    [" 2 gb ", 2 * 2 ** 30],
    [4096, 4096],
  ] as const)("parses %j", (text, bytes) => {
    expect(parseSize(text)).toBe(bytes);
  });

  it.each(["", "-1", "64XB", "MiB", "1e3", "0x10"])("rejects %j with a RangeError naming the field", (text) => {
    expect(() => parseSize(text, "--memory")).toThrow(/--memory must be a byte count/);
  });

  it("formats sizes briefly in binary units", () => {
    expect(formatSize(0)).toBe("0B");
    expect(formatSize(4096)).toBe("4K");
    expect(formatSize(1536 * 1024)).toBe("1.5M");
    expect(formatSize(2 ** 30)).toBe("1G");
  });
});

describe("Smp options", () => {
  it("fills defaults and converts heapprof", () => {
    const o = fillSmpOptions({ shards: 2, memoryPerShard: "1MiB", heapprof: true });
    expect(o).toEqual({ shards: 2, memoryPerShard: 2 ** 20, heapprofRate: 1, module: undefined, loadTimeoutMs: 30_000, stopTimeoutMs: 10_000 });
    expect(fillSmpOptions({ shards: 1, loadTimeoutMs: Infinity, stopTimeoutMs: 0 })).toMatchObject({ loadTimeoutMs: Infinity, stopTimeoutMs: 0 });
    expect(fillSmpOptions({ shards: 1, heapprof: 524288 }).heapprofRate).toBe(524288);
    expect(fillSmpOptions({ shards: 1 }).heapprofRate).toBe(0);
    expect(fillSmpOptions({ shards: 1, module: new URL("file:///x.mjs") }).module).toBe("file:///x.mjs");
  });

  it.each([
    [{ shards: 0 }, /options.shards must be an integer/],
    [{ shards: 2.5 }, /options.shards/],
    [{ shards: 1, memoryPerShard: "lots" }, /options.memoryPerShard must be a byte count/],
    [{ shards: 1, memoryPerShard: 1000 }, /at least 131072/],
    [{ shards: 64, memoryPerShard: "1GiB" }, /fit in 4 GiB/],
    [{ shards: 1, heapprof: -5 }, /options.heapprof/],
    [{ shards: 1, loadTimeoutMs: -1 }, /options.loadTimeoutMs must be a whole number of milliseconds/],
    [{ shards: 1, stopTimeoutMs: Number.NaN }, /options.stopTimeoutMs/],
    [{ shards: 1, module: "" }, /options.module/],
  ])("rejects %j", (o, message) => {
    expect(() => fillSmpOptions(o as never)).toThrow(message);
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
    expect(parse(["--smp", "4", "--memory=64MiB", "--heapprof"])).toEqual({ smp: 4, memory: "64MiB", heapprof: true });
    expect(parse(["--smp=2", "--memory", "1G", "--heapprof=512KiB"])).toEqual({ smp: 2, memory: "1G", heapprof: 524288 });
    expect(parse(["--heapprof=0"])).toEqual({ heapprof: 0 });
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
    [["--heapprof=fast"], /--heapprof=RATE must be a byte count/],
  ])("rejects %j clearly", (argv, message) => {
    expect(() => parse(argv)).toThrow(message);
  });
});
