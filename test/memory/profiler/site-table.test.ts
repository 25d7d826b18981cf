/**
 * The profiler's building blocks: stack capture and the site table in the
 * shared buffer (profiler.test.ts has them wired into malloc and free).
 */
import { Worker } from "node:worker_threads";
import { once } from "node:events";
import { describe, expect, it } from "vitest";
import { SharedHeap } from "../../../src/index.js";
import { OTHER_SITES } from "../../../src/memory/layout.js";
import { SiteTable, readSites, OTHER_SITES_NAME } from "../../../src/memory/profiler/site-table.js";
import { captureStack, internStack, newHeap } from "../../helpers.js";
import type { Frame } from "../../../src/memory/heap-profile.js";

function allocatingFunction(): Frame[] {
  return captureStack(16);
}
function otherAllocatingFunction(): Frame[] {
  return captureStack(16);
}

describe("captureStack", () => {
  it("starts at the caller, leaf first, with 1-based positions and no shardheap frames", () => {
    const frames = allocatingFunction();
    expect(frames[0]!.functionName).toBe("allocatingFunction");
    expect(frames[0]!.url).toMatch(/site-table\.test\.ts$/);
    expect(frames[0]!.line).toBeGreaterThan(0);
    expect(frames[0]!.column).toBeGreaterThan(0);
    expect(frames.some((f) => /\/src\/memory\//.test(f.url))).toBe(false);
    expect(frames.length).toBeLessThanOrEqual(16);
  });

  it("honours the depth and restores V8's stack settings", () => {
    const before = [Error.prepareStackTrace, Error.stackTraceLimit];
    expect(captureStack(2).length).toBeLessThanOrEqual(2);
    expect([Error.prepareStackTrace, Error.stackTraceLimit]).toEqual(before);
    expect(typeof new Error("x").stack).toBe("string");
  });
});

describe("site table", () => {
  it("interns stacks and frames, and counts live and cumulative objects", () => {
    const heap = newHeap({ shards: 2, shardBytes: 4 << 20 });
    const table = new SiteTable(heap.regions[1]!);
    const a = allocatingFunction();
    const b = otherAllocatingFunction();
    const sa = internStack(table, a);
    expect(internStack(table, allocatingFunction())).not.toBe(sa); // another line: another stack
    expect(internStack(table, a)).toBe(sa);
    const sb = internStack(table, b);
    expect(sb).not.toBe(sa);
    table.recordAlloc(sa, 1, 64);
    table.recordAlloc(sa, 1, 64);
    table.recordAlloc(sb, 1, 4096);
    table.recordFree(sa, 1, 64);
    const sites = readSites(heap.regions[1]!);
    const siteA = sites.find((s) => s.id === sa)!;
    expect(siteA.frames).toEqual(a);
    expect([siteA.count, siteA.size, siteA.allocCount, siteA.allocSize]).toEqual([1, 64, 2, 128]);
    expect(sites.find((s) => s.id === sb)!.size).toBe(4096);
    // Sites without history are not reported; other shards are untouched.
    expect(sites.length).toBe(2);
    expect(readSites(heap.regions[0]!)).toEqual([]);
  });

  it("keeps the books exact: a free takes off what its allocation added, in any order; an over-subtraction shows", () => {
    const heap = newHeap({ shards: 1, shardBytes: 1 << 20 });
    const table = new SiteTable(heap.regions[0]!);
    const s = internStack(table, allocatingFunction());
    // Weights as the sampler makes them: 1/(1-exp(-size/rate)), any double.
    const objects = [48, 112, 1024, 5000, 70_000].map((size) => ({ size, weight: 1 / (1 - Math.exp(-size / 3000)) }));
    for (const o of objects) table.recordAlloc(s, o.weight, o.size);
    for (const o of [...objects].reverse()) table.recordFree(s, o.weight, o.size);
    const [site] = readSites(heap.regions[0]!);
    expect([site!.count, site!.size]).toEqual([0, 0]); // not 1.8e-10
    expect(site!.allocCount).toBeCloseTo(objects.reduce((n, o) => n + o.weight, 0), 4);
    // No clamp at zero: freeing more than was recorded is a bug, and it shows.
    table.recordFree(s, 1.5, 100);
    const [after] = readSites(heap.regions[0]!);
    expect([after!.count, after!.size]).toEqual([-1.5, -150]);
  });

  it("folds stacks into (other sites) when the table is full, keeping totals exact", () => {
    const heap = newHeap({ shards: 1, shardBytes: 1 << 20 }); // 64 stacks (and site 0)
    const table = new SiteTable(heap.regions[0]!);
    let total = 0;
    for (let i = 0; i < 200; i++) {
      const site = internStack(table, [{ functionName: `f${i}`, url: "file:///app.js", line: i + 1, column: 1 }]);
      table.recordAlloc(site, 1, 16);
      total += 16;
    }
    const sites = readSites(heap.regions[0]!);
    const other = sites.find((s) => s.id === OTHER_SITES)!;
    expect(other.frames[0]!.functionName).toBe(OTHER_SITES_NAME);
    expect(heap.profilerSites).toBe(64);
    expect(other.allocCount).toBe(200 - 64);
    expect(sites.reduce((n, s) => n + s.size, 0)).toBe(total);
  });

  it("a table made again over the same region (a restarted shard) finds the existing sites", () => {
    const heap = newHeap({ shards: 1, shardBytes: 1 << 20 });
    const stack = allocatingFunction();
    const first = internStack(new SiteTable(heap.regions[0]!), stack);
    const again = new SiteTable(SharedHeap.attach(heap.buffer).regions[0]!);
    expect(internStack(again, stack)).toBe(first);
    expect(internStack(again, otherAllocatingFunction())).toBe(first + 1);
  });

  it("keeps apart frames of two eval'd scripts at the same positions (no file name to cache them under)", () => {
    process.env.SHARDHEAP_LOG = "silent";
    const heap = newHeap({ shards: 1, shardBytes: 1 << 20 });
    const a = heap.shard(0);
    a.setHeapProfilingEnabled(true);
    for (const name of ["/scripts/one.js", "/scripts/two.js"]) {
      const allocate = new Function("malloc", `return (function inEval() { return malloc(64); })();\n//# sourceURL=${name}`) as (m: (n: number) => number) => number;
      allocate((n) => a.malloc(n));
    }
    const urls = heap.heapProfile().sites.map((s) => s.frames.find((f) => f.functionName === "inEval")?.url);
    expect(urls.sort()).toEqual(["/scripts/one.js", "/scripts/two.js"]);
  });

  it("another thread reads the same sites from the buffer alone", async () => {
    const heap = newHeap({ shards: 1, shardBytes: 1 << 20 });
    const table = new SiteTable(heap.regions[0]!);
    const s = internStack(table, [{ functionName: "écrire", url: "file:///ü.js", line: 3, column: 7 }]);
    table.recordAlloc(s, 1, 48);
    const worker = new Worker(
      `const { workerData, parentPort } = require("node:worker_threads");
       import(workerData.site).then(({ readSites }) => import(workerData.heap).then(({ SharedHeap }) => {
         parentPort.postMessage(readSites(SharedHeap.attach(workerData.buffer).regions[0]));
       }));`,
      {
        eval: true,
        workerData: {
          buffer: heap.buffer,
          site: new URL("../../../dist/memory/profiler/site-table.js", import.meta.url).href,
          heap: new URL("../../../dist/index.js", import.meta.url).href,
        },
      },
    );
    const [remote] = await once(worker, "message");
    await worker.terminate();
    expect(remote).toEqual(readSites(heap.regions[0]!));
  });
});
