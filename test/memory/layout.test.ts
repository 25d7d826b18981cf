/**
 * The heap's layout holds together: the shard header's sections are in
 * order, inside SHARD_HEADER_BYTES and on the cache lines their comments
 * promise (layout.ts); every shard size from the documented minimum up
 * makes a heap that checks, attaches and allocates every size class.
 */
import { describe, expect, it } from "vitest";
import { HeapFormatError, MAX_SMALL_SIZE, SharedHeap } from "../../src/index.js";
import { SHARD_HEADER_SECTIONS, checkShardHeaderLayout } from "../../src/memory/layout.js";
import { MIN_SHARD_BYTES } from "../../src/memory/shared-heap.js";
import { POOL_COUNT, classSize } from "../../src/memory/size-classes.js";

describe("the shard header", () => {
  it("has its sections in order, inside its bytes, alone where they must be", () => {
    expect(checkShardHeaderLayout(POOL_COUNT)).toEqual([]);
  });

  it("the check fails when a section overflows or shares the inbox's line", () => {
    // The check is only as good as its ability to fail: grow the pools past the outbox.
    expect(checkShardHeaderLayout(POOL_COUNT + 200).join("\n")).toMatch(/pool records .* overlaps or precedes|past SHARD_HEADER_BYTES/);
    const inbox = SHARD_HEADER_SECTIONS.find((s) => s.name.startsWith("inbox"))!;
    expect(inbox.alone).toBe(true);
    expect(inbox.byte % 64).toBe(0);
  });
});

describe("shard sizes", () => {
  it("every size from the 128 KiB minimum up checks, attaches, allocates every class and gives it all back", () => {
    expect(MIN_SHARD_BYTES).toBe(128 * 1024);
    for (let bytes = MIN_SHARD_BYTES; bytes <= 256 * 1024; bytes += 4096) {
      const heap = SharedHeap.create({ shards: 2, shardBytes: bytes });
      expect(heap.check(), `${bytes}`).toEqual([]);
      expect(SharedHeap.attach(heap.buffer).shards).toBe(2);
      const a = heap.shard(1);
      for (const size of [...new Set(classSize)].filter((s) => s <= MAX_SMALL_SIZE)) {
        const p = a.malloc(size);
        heap.bytes(p, size).fill(0xab);
        a.free(p);
      }
      a.free(a.malloc(MAX_SMALL_SIZE + 1));
      a.trim();
      const s = a.stats();
      expect(s.freeMemory, `${bytes}`).toBe(s.totalMemory);
      expect(heap.check(), `${bytes}`).toEqual([]);
    }
  });

  it("a growable SharedArrayBuffer is not a heap", () => {
    const heap = SharedHeap.create({ shards: 1, shardBytes: MIN_SHARD_BYTES });
    const growable = new (SharedArrayBuffer as unknown as new (n: number, o: { maxByteLength: number }) => SharedArrayBuffer)(
      heap.buffer.byteLength,
      { maxByteLength: heap.buffer.byteLength * 2 },
    );
    new Uint8Array(growable).set(new Uint8Array(heap.buffer));
    expect(() => SharedHeap.attach(growable)).toThrow(HeapFormatError);
    expect(() => SharedHeap.attach(growable)).toThrow(/growable/);
  });
});
