/**
 * SharedMap string keys (src/memory/shared-map/keys.ts): a key is its
 * UTF-8, so a string with a lone surrogate, which has none (TextEncoder
 * would write U+FFFD's bytes), is refused by every call that takes a key,
 * with ERR_SHARDHEAP_MAP_KEY and the heap unchanged; without the refusal
 * "\uD800", "\uDC00" and "\uFFFD" were one key. Valid pairs, and "\uFFFD"
 * itself, are ordinary keys.
 */
import { readFileSync, readdirSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { SharedHeap, SharedMap, SharedMapError } from "../../../src/index.js";
import { newHeap, thrown } from "../../helpers.js";

const LONE = ["\uD800", "\uDC00", "a\uD800b", "\uDBFF\uDBFF\uDC00", "\uDE00\uD83D", `key:${"x".repeat(300)}\uDFFF`, "ключ\uD83D"];

/** Every call that takes a key, as (map, key) => its result; a string key goes through each. */
const ENTRY_POINTS: Record<string, (map: SharedMap, key: string) => unknown> = {
  acquire: (m, k) => m.acquire(k),
  has: (m, k) => m.has(k),
  get: (m, k) => m.get(k),
  getString: (m, k) => m.getString(k),
  set: (m, k) => m.set(k, "value"),
  reserve: (m, k) => m.reserve(k, 8),
  delete: (m, k) => m.delete(k),
  take: (m, k) => m.take(k),
};

describe("SharedMap: string keys must be valid UTF-16", () => {
  it("the entry points listed here are every method that takes a key (read from the source)", () => {
    const folder = new URL("../../../src/memory/shared-map/", import.meta.url);
    const src = readdirSync(folder).map((f) => readFileSync(new URL(f, folder), "utf8")).join("\n");
    const taking = [...src.matchAll(/^ {2}(\w+)\(key: string \| Uint8Array\b/gm)].map((m) => m[1]!);
    expect(taking.length).toBeGreaterThan(0);
    expect(taking.sort()).toEqual(Object.keys(ENTRY_POINTS).sort());
  });

  it("every entry point refuses a lone surrogate with ERR_SHARDHEAP_MAP_KEY, on the owner's object and readers', the heap unchanged", () => {
    const heap = newHeap();
    const map = SharedMap.create(heap, { shard: 0 });
    // What a lone surrogate used to alias: U+FFFD's UTF-8 is what TextEncoder writes for one.
    map.set("\uFFFD", "replacement character");
    map.set("a\uFFFDb", "inside");
    map.set("\uD83D\uDE00", "a pair");
    const readers = [SharedMap.attach(heap, map.handle), SharedMap.attach(SharedHeap.attach(heap.buffer), map.handle)];
    const before = Buffer.from(new Uint8Array(heap.buffer).slice());
    for (const key of LONE) {
      for (const [name, call] of Object.entries(ENTRY_POINTS)) {
        for (const m of [map, ...readers]) {
          if (m !== map && ["set", "reserve", "delete"].includes(name)) continue; // the owner's only
          const e = thrown(() => call(m, key));
          expect(e, `${name}(${JSON.stringify(key)})`).toBeInstanceOf(SharedMapError);
          expect(e.code).toBe("ERR_SHARDHEAP_MAP_KEY");
          expect(Buffer.from(heap.buffer).equals(before), `${name}(${JSON.stringify(key)}) changed the heap`).toBe(true);
        }
      }
    }
    expect(map.size).toBe(3);
    expect(map.getString("\uFFFD")).toBe("replacement character");
    expect(map.check()).toEqual([]);
    for (const r of readers) r.close();
    map.destroy();
  });

  it("the message says where the lone surrogate is", () => {
    const heap = newHeap();
    const map = SharedMap.create(heap, { shard: 0 });
    expect(thrown(() => map.has("a\uD800b")).message).toBe('SharedMap: a string key must be valid UTF-16, "a\\ud800b" has a lone surrogate (\\uD800) at index 1, which has no UTF-8 encoding');
    expect(thrown(() => map.has("\uD83D\uDE00\uDC00")).message).toMatch(/\(\\uDC00\) at index 2,/);
    map.destroy();
  });

  it("valid pairs are keys; U+FFFD is a key of its own, which neither a lone surrogate nor a pair finds", () => {
    const heap = newHeap();
    const map = SharedMap.create(heap, { shard: 0 });
    expect(map.has("\uFFFD")).toBe(false);
    map.set("\uD83D\uDE00", "grinning");
    map.set("\uFFFD", "replacement");
    map.set(`${"x".repeat(300)}\uD83D\uDE00`, "long");
    expect(map.getString("\uD83D\uDE00")).toBe("grinning");
    expect(map.getString("\uFFFD")).toBe("replacement");
    expect(map.getString(`${"x".repeat(300)}\uD83D\uDE00`)).toBe("long");
    expect(map.getString(new Uint8Array([0xf0, 0x9f, 0x98, 0x80])), "a pair is its 4 bytes of UTF-8").toBe("grinning");
    expect(map.getString(new Uint8Array([0xef, 0xbf, 0xbd]))).toBe("replacement");
    expect(map.size).toBe(3);
    expect(map.delete("\uFFFD")).toBe(true);
    expect(map.has("\uD83D\uDE00")).toBe(true);
    expect(map.has("\uFFFD")).toBe(false);
    expect(map.check()).toEqual([]);
    map.destroy();
  });
});
