/**
 * The checked accessors next to the raw view: objectBytes bounded by the
 * object, strings in and out of objects (heap.bytes past the object's end
 * or on a freed pointer once silently returned a view).
 */
import { describe, expect, it } from "vitest";
import { InvalidPointerError } from "../../src/index.js";
import { newHeap } from "../helpers.js";

describe("objectBytes, writeString, readString", () => {
  it("objectBytes is the object's bytes, all of them by default, and refuses anything else", () => {
    const heap = newHeap({ shards: 2, shardBytes: "1MiB" });
    const a = heap.shard(0);
    const p = a.malloc(100); // a 112-byte object
    expect(heap.objectBytes(p).length).toBe(112);
    expect(heap.objectBytes(p, 100).byteOffset).toBe(p);
    expect(() => heap.objectBytes(p, 113)).toThrow(RangeError);
    expect(() => heap.objectBytes(p, -1)).toThrow(RangeError);
    expect(() => heap.objectBytes(p + 8)).toThrow(InvalidPointerError);
    a.free(p);
    expect(() => heap.objectBytes(p)).toThrow(/not a live object/);
    expect(heap.bytes(p, 200).length).toBe(200); // the raw view still answers: that is the difference
    const big = a.malloc(50_000);
    expect(heap.objectBytes(big).length).toBe(53_248); // 13 pages
  });

  it("strings go in as UTF-8 and come back, and one that does not fit writes nothing", () => {
    const heap = newHeap({ shards: 2, shardBytes: "1MiB" });
    const p = heap.shard(1).malloc(16);
    expect(heap.writeString(p, "héllo, wörld")).toBe(14);
    expect(heap.readString(p, 14)).toBe("héllo, wörld");
    heap.objectBytes(p).fill(7);
    expect(() => heap.writeString(p, "0123456789abcdefg")).toThrow(/17 bytes of UTF-8 do not fit a 16-byte object/);
    expect([...heap.objectBytes(p)].every((b) => b === 7)).toBe(true);
    expect(() => heap.readString(p, 17)).toThrow(RangeError);
    expect(() => heap.writeString(p, 5 as unknown as string)).toThrow(TypeError);
    expect(heap.check()).toEqual([]);
  });
});
