/**
 * The one reading of sizes, rates, whole numbers and switches (units.ts,
 * parse.ts), and that every edge uses it: SharedHeap.create, Smp.start,
 * setHeapProfiling. The CLI's and the admin API's use is in cli.test.ts,
 * apps/stress/stress-cli.test.ts and runtime/admin.test.ts.
 */
import { describe, expect, it } from "vitest";
import { InvalidValueError } from "../src/errors.js";
import { SharedHeap } from "../src/memory/shared-heap.js";
import { parseBoolean, parseDecimal, parseInteger } from "../src/parse.js";
import { formatSize, parseSize } from "../src/units.js";
import { Smp } from "../dist/index.js";
import { startSmp } from "./helpers.js";

/** The error `f` throws (fails the test when it throws nothing). */
function thrown(f: () => unknown): Error {
  try {
    f();
  } catch (e) {
    return e as Error;
  }
  throw new Error("expected an error");
}

describe("parseSize", () => {
  it.each([
    ["65536", 65536],
    ["0", 0],
    ["64MiB", 64 * 2 ** 20],
    ["64m", 64 * 2 ** 20],
    ["64K", 65536],
    ["64kb", 65536],
    ["1GiB", 2 ** 30],
    ["2TiB", 2 * 2 ** 40],
    ["512B", 512],
    ["1.5K", 1536],
    ["1.50K", 1536],
    ["0.5KiB", 512],
    ["1.0", 1],
    ["1.25M", 1.25 * 2 ** 20],
    [" 2 gb ", 2 * 2 ** 30],
    [4096, 4096],
    [0, 0],
    [Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER],
  ] as const)("reads %j as %d bytes", (text, bytes) => {
    expect(parseSize(text)).toBe(bytes);
  });

  it.each(["", " ", "-1", "+1", "64XB", "MiB", "1e3", "0x10", "1,000", "1K1", ".5K", "5.K", "NaN", "Infinity"])("refuses junk %j, naming the field", (text) => {
    const e = thrown(() => parseSize(text, "--memory"));
    expect(e).toBeInstanceOf(InvalidValueError);
    expect(e).toBeInstanceOf(RangeError);
    expect(e.message).toBe(`--memory must be a byte count like 65536, 64MiB or 1.5GiB, got ${JSON.stringify(text)}`);
    expect((e as InvalidValueError).field).toBe("--memory");
  });

  it.each([
    ["0.5", "0.5"],
    ["1.5", "1.5"],
    ["1.3K", "1331.2"],
    ["0.1b", "0.1"],
    ["1.0000001M", "1048576.1048576"],
  ])("refuses %j: not a whole number of bytes (%s)", (text, bytes) => {
    expect(() => parseSize(text, "rate")).toThrow(`rate must be a whole number of bytes: "${text}" is ${bytes} bytes`);
  });

  it.each([0.5, 1.5, -1, NaN, Infinity, -Infinity])("refuses the number %d", (n) => {
    expect(() => parseSize(n, "options.shardBytes")).toThrow(/^options.shardBytes must be a whole number of bytes, 0 or more/);
  });

  it("refuses what no JS number holds exactly", () => {
    expect(() => parseSize(2 ** 53, "x")).toThrow("x is too large: 9007199254740992 bytes");
    expect(() => parseSize("8192TiB", "x")).toThrow('x is too large: "8192TiB"');
  });

  it("refuses what is neither a number nor a string", () => {
    for (const v of [true, null, undefined, {}, 64n]) {
      expect(() => parseSize(v as never, "options.memoryPerShard")).toThrow(/^options.memoryPerShard must be a byte count \(a number, or a string like "64MiB"\)/);
    }
  });

  it("checks limits after reading, naming the field", () => {
    expect(parseSize("128K", "m", { min: 131072 })).toBe(131072);
    expect(() => parseSize("127K", "m", { min: 131072 })).toThrow("m must be at least 131072 bytes, got 130048");
    expect(parseSize("2147483647", "r", { max: 2 ** 31 - 1 })).toBe(2 ** 31 - 1);
    expect(() => parseSize("2GiB", "r", { max: 2 ** 31 - 1 })).toThrow("r must be at most 2147483647 bytes, got 2147483648");
  });

  it("formats sizes briefly in binary units", () => {
    expect(formatSize(0)).toBe("0B");
    expect(formatSize(4096)).toBe("4K");
    expect(formatSize(1536 * 1024)).toBe("1.5M");
    expect(formatSize(2 ** 30)).toBe("1G");
  });
});

describe("parseBoolean", () => {
  it.each([
    [true, true],
    [false, false],
    ["1", true],
    ["true", true],
    ["TRUE", true],
    ["yes", true],
    ["on", true],
    [" 1 ", true],
    ["0", false],
    ["false", false],
    ["False", false],
    ["no", false],
    ["off", false],
  ] as const)("reads %j as %s", (v, b) => {
    expect(parseBoolean(v, "enabled")).toBe(b);
  });

  it.each(["", "2", "ture", "enabled", "-1", "y"])("refuses %j rather than reading it as off", (v) => {
    const e = thrown(() => parseBoolean(v, "enabled"));
    expect(e).toBeInstanceOf(InvalidValueError);
    expect(e.message).toBe(`enabled must be 1, true, yes, on or 0, false, no, off; got ${JSON.stringify(v)}`);
  });
});

describe("parseInteger and parseDecimal", () => {
  it("reads whole numbers in range, from numbers or digits", () => {
    expect(parseInteger("4", "--smp", 1, 1024)).toBe(4);
    expect(parseInteger(" 7 ", "--smp", 1, 1024)).toBe(7);
    expect(parseInteger(1024, "--smp", 1, 1024)).toBe(1024);
    expect(parseInteger("0", "--admin-port", 0, 65535)).toBe(0);
  });

  it.each([["0"], ["1025"], ["1.5"], ["-1"], ["1e3"], ["0x10"], [""], ["four"], [1.5], [NaN]] as const)("refuses %j", (v) => {
    expect(() => parseInteger(v, "--smp", 1, 1024)).toThrow(`--smp must be a whole number from 1 to 1024, got ${typeof v === "string" ? JSON.stringify(v) : String(v)}`);
  });

  it("reads decimals in range and refuses the rest", () => {
    expect(parseDecimal("0.25", "--cross-shard", 0, 1)).toBe(0.25);
    expect(parseDecimal("1", "--cross-shard", 0, 1)).toBe(1);
    for (const v of ["", "2", "-0.5", ".5", "1e-1", "0x1", "half"]) {
      expect(() => parseDecimal(v, "--cross-shard", 0, 1), v).toThrow(`--cross-shard must be a number from 0 to 1, got ${JSON.stringify(v)}`);
    }
  });
});

describe("every edge reads sizes and rates the same way", () => {
  it("SharedHeap.create takes shardBytes as a number or a size string", () => {
    expect(SharedHeap.create({ shards: 2, shardBytes: "256KiB" }).shardBytes).toBe(256 * 1024);
    expect(SharedHeap.create({ shards: 1, shardBytes: 256 * 1024 }).shardBytes).toBe(256 * 1024);
    expect(() => SharedHeap.create({ shards: 1, shardBytes: "1.5" })).toThrow(/^SharedHeap.create: options.shardBytes must be a whole number of bytes/);
    expect(() => SharedHeap.create({ shards: 1, shardBytes: "64K" })).toThrow("SharedHeap.create: options.shardBytes must be at least 131072 bytes, got 65536");
    expect(() => SharedHeap.create({ shards: 0, shardBytes: "1MiB" })).toThrow("SharedHeap.create: options.shards must be a whole number from 1 to 1024, got 0");
  });

  it("Smp.start refuses a rate over the cap at the call, before any shard starts", async () => {
    const e = await Smp.start({ shards: 1, memoryPerShard: "1MiB", heapprof: 2 ** 31 }).then(
      () => undefined,
      (error: unknown) => error as Error & { field?: string; code?: string },
    );
    expect(e?.name).toBe("InvalidValueError");
    expect(e?.field).toBe("options.heapprof");
    expect(e?.message).toBe("options.heapprof must be at most 2147483647 bytes, got 2147483648");
    await expect(Smp.start({ shards: 1, memoryPerShard: "1MiB", heapprof: 0.5 })).rejects.toThrow(/options.heapprof must be a whole number of bytes/);
  });

  it("setHeapProfiling reads its rate the same way", async () => {
    process.env.SHARDHEAP_LOG = "silent";
    const smp = await startSmp({ shards: 1, memoryPerShard: "1MiB" });
    await expect(smp.setHeapProfiling(0, 1.5)).rejects.toThrow("setHeapProfiling: rate must be a whole number of bytes, 0 or more, got 1.5");
    await expect(smp.setHeapProfiling(0, 2 ** 31)).rejects.toThrow(/setHeapProfiling: rate must be at most 2147483647 bytes/);
    await smp.setHeapProfiling(0, "64KiB");
    expect(smp.heapProfile(0).sampleRate).toBe(65536);
    await smp.setHeapProfiling(0, false);
    expect(smp.heapProfile(0).sampleRate).toBe(0);
  });
});
