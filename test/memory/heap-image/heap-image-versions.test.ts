/**
 * Heap images of earlier formats still read: a real version 4 image (made by
 * shardheap before peaks, test/fixtures/make-v4-image.mjs) has no peak
 * records nor timeline, and its pages start where its own layout put them.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import { HeapFormatError, decodeHeapImage } from "../../../src/index.js";
import { runCli, siteNamed, tempDir, thrown } from "../../helpers.js";

const V4_IMAGE = gunzipSync(readFileSync(new URL("../../fixtures/heap-v4.img.gz", import.meta.url)));

describe("a version 4 heap image (before peaks)", () => {
  it("reads: its statistics and its profile", () => {
    const heap = decodeHeapImage(V4_IMAGE, "heap-v4.img");
    expect(heap.shards).toBe(2);
    expect(heap.profilerSites).toBe(63);
    const p = heap.heapProfile(0);
    expect(siteNamed(p, "keepRecords")).toMatchObject({ count: 9, size: 9 * 1024, allocCount: 10 });
    expect(siteNamed(p, "keepBlob")).toMatchObject({ count: 1, size: 20480 });
    expect(heap.stats(0).liveObjects).toBe(10);
  });

  it("has no peak profile: a HeapFormatError that says why", () => {
    const heap = decodeHeapImage(V4_IMAGE, "heap-v4.img");
    for (const read of [() => heap.peakProfile(0), () => heap.peakProfile()]) {
      const e = thrown(read);
      expect(e).toBeInstanceOf(HeapFormatError);
      expect(e.message).toMatch(/format version 4\) was written before shardheap kept peaks: it holds no peak profile/);
    }
  });

  it("shardheap report reads it, and report --peak exits 2 with the one line; diff takes no --peak", () => {
    const file = join(tempDir("shardheap-v4-"), "heap-v4.img");
    writeFileSync(file, V4_IMAGE);
    const tree = runCli(["report", file, "--shard", "0"]);
    expect([tree.status, tree.stderr]).toEqual([0, ""]);
    expect(tree.stdout).toMatch(/^All \(29696, #10\)$/m);
    const peak = runCli(["report", file, "--peak"]);
    expect([peak.status, peak.stdout]).toEqual([2, ""]);
    expect(peak.stderr).toBe("shardheap: this heap (format version 4) was written before shardheap kept peaks: it holds no peak profile\n");
    const diff = runCli(["diff", file, file, "--peak"]);
    expect(diff.status).toBe(2);
    expect(diff.stderr).toMatch(/^shardheap: unknown flag --peak \(report takes it/);
  });
});
