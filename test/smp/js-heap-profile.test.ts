/** V8's sampling heap profile (as the inspector gives it) turned into a HeapProfile: frames, sites, figures. */
import type { Protocol } from "devtools-protocol";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { jsHeapProfileOf, sampleCount } from "../../src/smp/js-heap-profile.js";

type Node = Protocol.HeapProfiler.SamplingHeapProfileNode;
let nextId = 1;
const node = (functionName: string, url: string, line: number, children: Node[] = []): Node => ({
  callFrame: { functionName, scriptId: "1", url, lineNumber: line, columnNumber: 4 },
  selfSize: 0,
  id: nextId++,
  children,
});
/** shardheap's own messaging, as a task's stack passes through it. */
const RUNTIME = new URL("../../src/smp/endpoint.ts", import.meta.url).href;
const APP = "file:///srv/app/tasks.mjs";
/** V8 scales a sample of an object of `size` bytes to size x round(1 / (1 - exp(-size / rate))). */
const scaled = (size: number, rate: number): number => size * Math.floor(1 / -Math.expm1(-size / rate) + 0.5);

describe("jsHeapProfileOf", () => {
  it("one site per node with samples, frames leaf first and 1-based, the runtime's tail left out, sizes as V8 scaled them", () => {
    // (root) <- processImmediate (node:) <- runTask (runtime) <- handler (app) <- makeRecords (app) / makeIndex (app)
    const makeRecords = node("makeRecords", APP, 9);
    const makeIndex = node("makeIndex", APP, 19);
    const handler = node("handler", APP, 2, [makeRecords, makeIndex]);
    const runTask = node("runTask", RUNTIME, 40, [handler]);
    const immediate = node("processImmediate", "node:internal/timers", 437, [runTask]);
    const gc = node("(V8 API)", "", -1);
    const head = node("(root)", "", -1, [immediate, gc]);
    const rate = 4096;
    const samples = [
      { size: scaled(40, rate), nodeId: makeRecords.id, ordinal: 1 },
      { size: scaled(40, rate), nodeId: makeRecords.id, ordinal: 2 },
      { size: scaled(100_000, rate), nodeId: makeIndex.id, ordinal: 3 },
      { size: scaled(64, rate), nodeId: gc.id, ordinal: 4 },
    ];
    const p = jsHeapProfileOf({ head, samples }, 3, rate);
    expect(p.shard).toBe(3);
    expect(p.sampleRate).toBe(rate);
    expect(p.sites.map((s) => s.frames.map((f) => `${f.functionName} ${f.url}:${f.line}:${f.column}`))).toEqual([
      [`makeIndex ${APP}:20:5`, `handler ${APP}:3:5`],
      [`makeRecords ${APP}:10:5`, `handler ${APP}:3:5`],
      ["(V8 API) :0:5"],
    ]);
    expect(p.sites[0]).toMatchObject({ size: 100_000, allocSize: 100_000 });
    expect(p.sites[0]!.count).toBeCloseTo(1, 6);
    expect(p.sites[0]!.allocCount).toBe(p.sites[0]!.count);
    expect(p.sites[1]!.size).toBe(2 * scaled(40, rate));
    expect(p.totalSize).toBe(100_000 + 2 * scaled(40, rate) + scaled(64, rate));
    expect(p.totalCount).toBeCloseTo(p.sites.reduce((n, s) => n + s.count, 0), 9);
    // Sites share frame objects, as a profile read from the heap does.
    expect(p.sites[0]!.frames[1]).toBe(p.sites[1]!.frames[1]);
  });

  it("a stack that is the runtime's alone keeps its frames; nodes that differ only in runtime frames are one site", () => {
    const own = fileURLToPath(new URL("../../src/smp/wire-codec.ts", import.meta.url));
    const decode = node("decode", own, 10);
    const viaA = node("task", APP, 5, []);
    const viaB = node("task", APP, 5, []);
    const head = node("(root)", "", -1, [node("decodeLoop", RUNTIME, 1, [decode, node("runA", RUNTIME, 2, [viaA]), node("runB", RUNTIME, 3, [viaB])])]);
    const p = jsHeapProfileOf({ head, samples: [decode, viaA, viaB].map((n, i) => ({ size: 8192, nodeId: n.id, ordinal: i })) }, 0, 4096);
    expect(p.sites.map((s) => [s.frames.map((f) => f.functionName), s.size])).toEqual([
      [["task"], 16384],
      [["decode", "decodeLoop"], 8192],
    ]);
  });

  it("counts: one per object far past the interval, at least half the objects below it (V8's rounding hides the rest)", () => {
    expect(sampleCount(scaled(1 << 20, 4096), 4096)).toBeCloseTo(1, 6);
    expect(sampleCount(scaled(1 << 16, 4096), 4096)).toBeCloseTo(1, 6);
    for (const size of [16, 40, 200, 1000, 5000]) {
      const truth = Math.floor(1 / -Math.expm1(-size / 32768) + 0.5);
      expect(sampleCount(scaled(size, 32768), 32768) / truth, `${size} bytes`).toBeGreaterThanOrEqual(0.5);
    }
  });
});
