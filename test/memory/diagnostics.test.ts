/**
 * The diagnostics report's top sites (ShardAllocator.diagnostics,
 * OutOfMemoryError.report, heap.diagnostics): sites of one stack that
 * differ by labels are told apart by their labels on their rows, and a
 * label value's control characters are shown escaped, as every text output
 * shows them.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { OutOfMemoryError, withHeapLabelsSync, type ShardAllocator } from "../../src/index.js";
import { newHeap } from "../helpers.js";

beforeAll(() => {
  process.env.SHARDHEAP_LOG = "silent";
});

const RAW_CONTROL = /[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029]/;

function allocateRecords(a: ShardAllocator, n: number, size: number, kept: number[]): void {
  for (let i = 0; i < n; i++) kept.push(a.malloc(size));
}

/** The report's top-site rows. */
const topRows = (report: string): string[] => {
  const lines = report.split("\n");
  const head = lines.findIndex((l) => l === "     size    count  site");
  expect(head).toBeGreaterThan(0);
  return lines.slice(head + 1).filter((l) => l !== "" && !l.startsWith("("));
};

describe("the diagnostics' top sites", () => {
  it("show each site's labels, escaped: one stack under three label sets reads as three rows", () => {
    const heap = newHeap({ shardBytes: 8 << 20 });
    const a = heap.shard(0);
    a.setHeapProfilingEnabled(true);
    const kept: number[] = [];
    withHeapLabelsSync({ prefix: "user" }, () => allocateRecords(a, 3, 1000, kept));
    withHeapLabelsSync({ prefix: "t\x01\x1b[2J", tenant: "b\nc" }, () => allocateRecords(a, 2, 1000, kept));
    allocateRecords(a, 1, 1000, kept);
    for (const report of [a.diagnostics(), heap.diagnostics(0)]) {
      expect(report).not.toMatch(RAW_CONTROL);
      const rows = topRows(report);
      expect(rows).toHaveLength(3);
      expect(new Set(rows).size).toBe(3);
      expect(rows[0]).toMatch(/^ +3K +3  allocateRecords \(.*\) \[prefix=user\]$/);
      expect(rows[1]).toMatch(/^ +2K +2  allocateRecords \(.*\) \[prefix=t\\x01\\x1b\[2J, tenant=b\\x0ac\]$/);
      expect(rows[2]).toMatch(/^ +1K +1  allocateRecords \([^[\]]*\)$/);
    }
    for (const p of kept) a.free(p);
  });

  it("OutOfMemoryError.report's rows carry the labels too", () => {
    const heap = newHeap({ shardBytes: 4 << 20 });
    const a = heap.shard(0);
    a.setHeapProfilingEnabled(true);
    const kept: number[] = [];
    let failure: unknown;
    withHeapLabelsSync({ tenant: "greedy\x1b" }, () => {
      try {
        for (;;) allocateRecords(a, 1, 64 * 1024, kept);
      } catch (e) {
        failure = e;
      }
    });
    expect(failure).toBeInstanceOf(OutOfMemoryError);
    const report = (failure as OutOfMemoryError).report;
    expect(report).not.toMatch(RAW_CONTROL);
    expect(topRows(report)[0]).toMatch(/allocateRecords \(.*\) \[tenant=greedy\\x1b\]$/);
    for (const p of kept) a.free(p);
  });
});
