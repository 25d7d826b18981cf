/** Heap images: save, read back offline, refuse anything that is not a whole image. */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { HeapFormatError, SharedHeap, readHeapImage } from "../../../src/index.js";

let dir: string;
beforeAll(() => {
  process.env.SHARDHEAP_LOG = "silent";
  dir = mkdtempSync(join(tmpdir(), "shardheap-image-"));
});

function profiledHeap(): SharedHeap {
  const heap = SharedHeap.create({ shards: 2, shardBytes: 4 << 20 });
  const a = heap.shard(1);
  a.setHeapProfilingEnabled(true);
  for (let i = 0; i < 50; i++) a.malloc(100 + i);
  a.malloc(40_000);
  return heap;
}

describe("heap images", () => {
  it("round trip: profiles, statistics and diagnostics read the same offline", async () => {
    const heap = profiledHeap();
    const path = join(dir, "heap.img");
    await heap.saveImage(path);
    const offline = await readHeapImage(path);
    expect(offline.shards).toBe(2);
    expect(offline.heapProfile()).toEqual(heap.heapProfile());
    expect(offline.heapProfile(1)).toEqual(heap.heapProfile(1));
    expect(offline.stats(1)).toEqual(heap.stats(1));
    expect(offline.regions[1]!.id).toBe(1);
    // The image holds metadata, not objects: much smaller than the heap.
    expect(readFileSync(path).length).toBeLessThan(heap.buffer.byteLength / 4);
  });

  it("reads an image another process wrote", async () => {
    const path = join(dir, "child.img");
    const script = `
      import { SharedHeap } from ${JSON.stringify(new URL("../../../dist/index.js", import.meta.url).href)};
      process.env.SHARDHEAP_LOG = "silent";
      const heap = SharedHeap.create({ shards: 1, shardBytes: 1 << 20 });
      const a = heap.shard(0);
      a.setHeapProfilingEnabled(true);
      function allocateInChild() { for (let i = 0; i < 7; i++) a.malloc(64); }
      allocateInChild();
      await heap.saveImage(${JSON.stringify(path)});`;
    execFileSync(process.execPath, ["--input-type=module", "-e", script]);
    const p = (await readHeapImage(path)).heapProfile();
    expect(p.sites).toHaveLength(1);
    expect(p.sites[0]!.frames[0]!.functionName).toBe("allocateInChild");
    expect([p.totalCount, p.totalSize]).toEqual([7, 7 * 64]);
  });

  it("refuses truncated, damaged and foreign files with HeapFormatError", async () => {
    const heap = profiledHeap();
    const good = join(dir, "good.img");
    await heap.saveImage(good);
    const bytes = readFileSync(good);
    const cases: Array<[string, Buffer, RegExp]> = [
      ["empty", Buffer.alloc(0), /shorter than its header/],
      ["truncated", bytes.subarray(0, bytes.length - 100), /checksum mismatch/],
      ["damaged", Buffer.from(bytes).fill(7, 5000, 5001), /checksum mismatch/],
      ["foreign", Buffer.from("GIF89a and some more bytes to pass the header size"), /wrong magic/],
      ["other version", Buffer.concat([bytes.subarray(0, 8), Buffer.from([9, 0, 0, 0]), bytes.subarray(12)]), /version 9/],
    ];
    for (const [what, content, message] of cases) {
      const path = join(dir, `${what}.img`);
      writeFileSync(path, content);
      const error = await readHeapImage(path).catch((e: unknown) => e);
      expect(error, what).toBeInstanceOf(HeapFormatError);
      expect((error as Error).message, what).toMatch(message);
    }
    await expect(readHeapImage(join(dir, "missing.img"))).rejects.toThrow(/ENOENT/);
  });
});
