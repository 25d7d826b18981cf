/**
 * SharedMap on one thread (src/memory/shared-map/): what it stores and
 * finds, against a model; references that outlive deletes and replaces;
 * the two kinds of reference; bad input refused with the heap unchanged;
 * out of memory with the map unchanged; destroy and what comes back. Every
 * map is checked (map.check() is []) and the heap too (newHeap). The races
 * between threads are in memory/shared-map/shared-map-races.test.ts.
 */
import { Worker } from "node:worker_threads";
import { describe, expect, it } from "vitest";
import { HeapOwnershipError, InvalidValueError, OutOfMemoryError, SharedHeap, SharedMap, SharedMapError } from "../../../src/index.js";
import { AtomicsMapSteps, NO_TABLE, descriptorAddress, encodeMapModule, mapAtomics, type MapAtomics } from "../../../src/memory/shared-map/atomics.js";
import { KeyScratch } from "../../../src/memory/shared-map/keys.js";
import * as L from "../../../src/memory/shared-map/layout.js";
import { mulberry32 } from "../../../bench/timing.js";
import { newHeap, thrown } from "../../helpers.js";

const utf8 = new TextEncoder();
const text = (b: Uint8Array | undefined): string | undefined => (b === undefined ? undefined : Buffer.from(b).toString("utf8"));

function snapshot(heap: SharedHeap): Buffer {
  return Buffer.from(new Uint8Array(heap.buffer).slice());
}

/** A header word of the map, by its layout offset. */
function headerWord(map: SharedMap, offset: number): number {
  return new Int32Array(map.heap.buffer)[(map.handle + offset) >>> 2]!;
}

/** Byte address of segment s of the map. */
function segmentAt(map: SharedMap, s: number): number {
  return map.handle + L.SEGMENTS + s * L.SEGMENT_BYTES;
}

/** A word of every segment, added up. */
function segmentsTotal(map: SharedMap, offset: number): number {
  let n = 0;
  for (let s = 0; s <= headerWord(map, L.M_SEGMENT_MASK); s++) n += new Int32Array(map.heap.buffer)[(segmentAt(map, s) + offset) >>> 2]!;
  return n;
}

/**
 * A worker that owns shard 1 of `heap`, makes a map there holding `key`
 * -> `value` and posts its handle; for each message `m` it gets then, it
 * posts back the value of `onMessage` (JavaScript with m, map and heap in
 * scope). answer(): the next message back.
 */
function mapOwner(heap: SharedHeap, key: string, value: string, onMessage: string): { worker: Worker; answer: () => Promise<unknown> } {
  const worker = new Worker(
    `const { workerData, parentPort } = require("node:worker_threads");
     import(workerData.dist).then(({ SharedHeap, SharedMap }) => {
       const heap = SharedHeap.attach(workerData.memory);
       heap.shard(1);
       const map = SharedMap.create(heap, { shard: 1 });
       map.set(${JSON.stringify(key)}, ${JSON.stringify(value)});
       parentPort.postMessage(map.handle);
       parentPort.on("message", (m) => parentPort.postMessage(${onMessage}));
     });`,
    { eval: true, workerData: { memory: heap.memory, dist: new URL("../../../dist/index.js", import.meta.url).href } },
  );
  const answer = () => new Promise<unknown>((resolve, reject) => (worker.once("message", resolve), worker.once("error", reject)));
  return { worker, answer };
}

/** The map as another thread sees it: attached through the buffer alone (Atomics, not WebAssembly). */
function viaAtomics(map: SharedMap): SharedMap {
  return SharedMap.attach(SharedHeap.attach(map.heap.buffer), map.handle);
}

describe("SharedMap: storing and finding", () => {
  it("the probe's WebAssembly module validates", () => {
    const wasm = (globalThis as unknown as { WebAssembly: { validate(b: Uint8Array): boolean } }).WebAssembly;
    expect(wasm.validate(encodeMapModule())).toBe(true);
  });

  // R3 (shared-map.ts, "The protocol"): after protecting a descriptor the
  // probe reads the slot and the table pointer again, and trusts neither
  // unless both still name what it found. On one thread the owner cannot
  // change them between the probe's steps, but the probe's own hazard
  // store can, when the "hazard slot" it is given is the word itself: the
  // slot (as if the owner unlinked the entry there) or M_TABLE (as if a
  // resize replaced the table). The race tests cannot aim at that window
  // of a few instructions; this does, in both implementations.
  it("the probe validates what it protected (R3): a slot or table changed after the tag matched is not trusted", () => {
    for (const kind of ["WebAssembly", "Atomics"]) {
      for (const changed of ["slot", "table"]) {
        const heap = SharedHeap.create({ shards: 1, shardBytes: 1 << 20 }); // left broken on purpose: not checked
        const map = SharedMap.create(heap, { shard: 0, segments: 1 });
        map.set("k", "v");
        const i32 = new Int32Array(heap.buffer);
        const T = i32[(segmentAt(map, 0) + L.SG_TABLE) >>> 2]! >>> 0;
        let slot = (T + L.TABLE_HEADER_BYTES) >>> 2;
        while (i32[slot] === 0) slot++;
        const d = descriptorAddress(i32, map.handle, i32[slot]! >>> 8);
        const hash = i32[(d + L.D_HASH) >>> 2]!;
        const steps: MapAtomics = kind === "Atomics" ? new AtomicsMapSteps(i32) : mapAtomics(heap.buffer, heap.memory);
        expect(steps.probe(map.handle, hash, 0), `${kind}: the probe finds the entry`).toBe(d);
        steps.release(d);
        const hazard = changed === "slot" ? slot * 4 : segmentAt(map, 0) + L.SG_TABLE;
        // The hazard store overwrites the slot (then its clearing empties it: absent), or M_TABLE (then 0: no table).
        expect(steps.probe(map.handle, hash, hazard), `${kind}, ${changed} changed under the probe`).toBe(changed === "slot" ? 0 : NO_TABLE);
      }
    }
  });

  it("stores, finds, replaces and deletes; a string key is its UTF-8 bytes", () => {
    const heap = newHeap();
    const map = SharedMap.create(heap, { shard: 0 });
    expect(map.set("hello", "world")).toBe(false);
    expect(map.set("hello", "there")).toBe(true);
    expect(map.getString("hello")).toBe("there");
    expect(map.getString(utf8.encode("hello"))).toBe("there");
    expect(map.size).toBe(1);
    const keys: Array<string | Uint8Array> = ["", "ключ 😀", "x".repeat(1000), "a\0", new Uint8Array([0]), new Uint8Array([0, 0]), new Uint8Array(300).fill(255)];
    keys.forEach((k, i) => map.set(k, `value ${i}`));
    keys.forEach((k, i) => expect(map.getString(k), String(i)).toBe(`value ${i}`));
    expect(map.getString("a")).toBeUndefined();
    expect(map.getString(utf8.encode("ключ 😀"))).toBe("value 1");
    expect(map.getString(new Uint8Array(0))).toBe("value 0");
    const request = Buffer.from("GET hello\r\n");
    const ref = map.acquireBytes(request, 4, 9);
    expect(ref).not.toBe(0);
    expect(text(map.value(ref))).toBe("there");
    expect(text(map.key(ref))).toBe("hello");
    expect(map.keyLength(ref)).toBe(5);
    expect(map.valueLength(ref)).toBe(5);
    expect(map.valuePointer(ref) % 8).toBe(0);
    map.release(ref);
    expect(map.delete("hello")).toBe(true);
    expect(map.delete("hello")).toBe(false);
    expect(map.has("hello")).toBe(false);
    expect(map.size).toBe(keys.length);
    expect(map.check()).toEqual([]);
    map.destroy();
  });

  it("agrees with a model through random sets, deletes, reservations and clears: the table grows, clusters shift, entries retire", () => {
    const heap = newHeap({ shardBytes: 32 << 20 });
    const start = heap.stats(0).liveObjects;
    const map = SharedMap.create(heap, { shard: 0, capacity: 4 });
    const readers = [map, viaAtomics(map)];
    const model = new Map<string, string>();
    const random = mulberry32(19);
    const keyOf = (n: number): string => (n % 7 === 0 ? `ключ-${n}` : `k${n}`);
    let replaced = 0;
    for (let step = 0; step < 30_000; step++) {
      const r = random();
      const key = keyOf(Math.floor(random() * (step < 15_000 ? 3000 : 800)));
      if (r < 0.45) {
        const value = `${key}=${step}`.repeat(1 + (step % 5));
        if (map.set(key, value)) replaced++;
        model.set(key, value);
      } else if (r < 0.75) {
        expect(map.delete(key)).toBe(model.delete(key));
      } else if (r < 0.8) {
        const value = `reserved ${step}`;
        const ref = map.reserve(key, value.length);
        new Uint8Array(heap.buffer, map.valuePointer(ref), value.length).set(utf8.encode(value));
        if (random() < 0.2) {
          map.release(ref); // given up: never seen
        } else {
          map.publish(ref);
          model.set(key, value);
        }
      } else if (r < 0.8005) {
        expect(map.clear()).toBe(model.size);
        model.clear();
      } else {
        const reader = readers[step & 1]!;
        expect(reader.getString(key), key).toBe(model.get(key));
      }
      if (step % 5000 === 4999) {
        expect(map.check()).toEqual([]);
        expect(map.size).toBe(model.size);
        for (const [k, v] of model) expect(readers[step & 1]!.getString(k)).toBe(v);
      }
    }
    // It went through what it was meant to.
    const stats = map.stats();
    expect(stats.oldTables, "the table grew").toBeGreaterThan(4);
    expect(segmentsTotal(map, L.SG_MOVES), "deletes moved entries back (the backward shift)").toBeGreaterThan(100);
    expect(replaced).toBeGreaterThan(1000);
    expect(stats.freeDescriptors + stats.retired, "deleted entries were retired and reclaimed").toBeGreaterThan(100);
    expect(stats.held).toBe(0);
    expect(map.check()).toEqual([]);
    for (const r of readers.slice(1)) r.close();
    map.destroy();
    expect(heap.stats(0).liveObjects, "everything the map allocated came back").toBe(start);
  });

  // The race tests exercise long shifts under readers (the "shift" scenario),
  // but a reader is lost by a missing bump only if the owner's shift front
  // overtakes it and it then overtakes the front again, which they did not
  // hit in runs with the bumps planted away: the rule is checked here.
  it("a backward shift bumps SG_MOVES before each store that removes an older copy: 15 entries moved, 15 bumps", () => {
    const heap = newHeap();
    const map = SharedMap.create(heap, { shard: 0, capacity: 16, segments: 1 });
    const i32 = new Int32Array(heap.buffer);
    const mask = i32[((i32[(segmentAt(map, 0) + L.SG_TABLE) >>> 2]! >>> 0) + L.T_MASK) >>> 2]!;
    const scratch = new KeyScratch();
    const names: string[] = [];
    for (let n = 0; names.length < 16; n++) if ((scratch.ofString(`k${n}`, headerWord(map, L.M_SEED)) & mask) === 0) names.push(`k${n}`);
    for (const name of names) map.set(name, name);
    const before = segmentsTotal(map, L.SG_MOVES);
    expect(map.delete(names[0]!)).toBe(true);
    expect(segmentsTotal(map, L.SG_MOVES) - before).toBe(15);
    for (const name of names.slice(1)) expect(map.getString(name)).toBe(name);
    expect(map.stats().oldTables, "one cluster in one table").toBe(0);
    expect(map.check()).toEqual([]);
    map.destroy();
  });

  it("spreads keys: the longest probe path of 20,000 similar keys stays short", () => {
    const heap = newHeap({ shardBytes: 32 << 20 });
    const map = SharedMap.create(heap, { shard: 0 });
    for (let i = 0; i < 20_000; i++) map.set(`user:${i}`, "");
    const i32 = new Int32Array(heap.buffer);
    let longest = 0;
    for (let seg = 0; seg <= headerWord(map, L.M_SEGMENT_MASK); seg++) {
      const T = i32[(segmentAt(map, seg) + L.SG_TABLE) >>> 2]! >>> 0;
      const mask = i32[(T + L.T_MASK) >>> 2]!;
      for (let i = 0; i <= mask; i++) {
        const s = i32[((T + L.TABLE_HEADER_BYTES) >>> 2) + i]!;
        if (s === 0) continue;
        const home = i32[(descriptorAddress(i32, map.handle, s >>> 8) + L.D_HASH) >>> 2]! & mask;
        longest = Math.max(longest, (i - home) & mask);
      }
    }
    // Linear probing at half load: the longest of 20,000 paths is a few dozen at most with a good hash.
    expect(longest).toBeLessThan(40);
    map.destroy();
  });
});

describe("SharedMap: references", () => {
  it("an entry outlives its delete and its replacement while a reference holds it, and is freed after the last one goes", () => {
    const heap = newHeap();
    const map = SharedMap.create(heap, { shard: 0 });
    map.set("a", "first");
    const live = heap.stats(0).liveObjects;
    const held = map.acquire("a");
    expect(held & L.HAZARD_REF, "a hazard reference").not.toBe(0);
    map.set("a", "second"); // the old entry leaves the map, still held
    expect(text(map.value(held))).toBe("first");
    expect(map.getString("a")).toBe("second");
    expect(map.stats()).toMatchObject({ entries: 1, held: 1, retired: 1 });
    expect(map.reclaim(), "a hazard names it").toBe(0);
    expect(heap.stats(0).liveObjects).toBe(live + 1);
    map.release(held);
    expect(map.reclaim()).toBe(1);
    expect(heap.stats(0).liveObjects).toBe(live);
    expect(map.stats()).toMatchObject({ held: 0, retired: 0 });
    expect(map.check()).toEqual([]);
    map.destroy();
  });

  it("a counted reference (retain) holds the entry too, and can be released on its own", () => {
    const heap = newHeap();
    const map = SharedMap.create(heap, { shard: 0 });
    map.set("k", "v1");
    const live = heap.stats(0).liveObjects;
    const hazard = map.acquire("k");
    const counted = map.retain(hazard);
    expect(counted & L.HAZARD_REF).toBe(0);
    map.release(hazard);
    expect(map.delete("k")).toBe(true);
    expect(text(map.value(counted))).toBe("v1");
    expect(map.stats()).toMatchObject({ entries: 0, unlinkedHeld: 1, held: 1 });
    map.release(counted); // the last count: retired here (the owner's thread), freed by the next reclaim
    map.reclaim();
    expect(heap.stats(0).liveObjects).toBe(live - 1);
    expect(map.check()).toEqual([]);
    map.destroy();
  });

  it("a retain of an entry whose count is gone (retired, still named by a hazard) keeps it until released", () => {
    const heap = newHeap();
    const map = SharedMap.create(heap, { shard: 0 });
    map.set("k", "v");
    const hazard = map.acquire("k");
    map.delete("k"); // count 0, retired; only the hazard protects it
    const counted = map.retain(hazard);
    map.release(hazard);
    expect(map.reclaim(), "the count keeps it").toBe(0);
    expect(text(map.value(counted))).toBe("v");
    map.release(counted);
    expect(map.reclaim()).toBe(1);
    expect(map.check()).toEqual([]);
    map.destroy();
  });

  it("an object holds 15 hazard references at once; past them its references are counted ones, all released the same way", () => {
    const heap = newHeap();
    const map = SharedMap.create(heap, { shard: 0 });
    for (let i = 0; i < 20; i++) map.set(`k${i}`, `v${i}`);
    const refs = Array.from({ length: 20 }, (_, i) => map.acquire(`k${i % 10}`));
    expect(refs.filter((r) => (r & L.HAZARD_REF) !== 0).length).toBe(L.HAZARDS_PER_READER);
    expect(map.stats().held).toBe(20);
    refs.forEach((r, i) => expect(text(map.value(r))).toBe(`v${i % 10}`));
    for (const r of refs) map.release(r);
    expect(map.stats().held).toBe(0);
    expect(map.check()).toEqual([]);
    map.destroy();
  });

  it("reader records run out after `readers` objects: the next reads with counted references; close gives one back", () => {
    const heap = newHeap();
    const map = SharedMap.create(heap, { shard: 0, readers: 2 });
    map.set("k", "v");
    const [a, b, c] = [viaAtomics(map), SharedMap.attach(heap, map.handle), SharedMap.attach(heap, map.handle)];
    const ra = a.acquire("k");
    const rb = b.acquire("k");
    const rc = c.acquire("k");
    expect([ra, rb, rc].map((r) => (r & L.HAZARD_REF) !== 0)).toEqual([true, true, false]);
    expect(map.stats()).toMatchObject({ readers: 2, readerRecords: 2, held: 3 });
    expect(thrown(() => a.close()).code, "a holds a reference").toBe("ERR_SHARDHEAP_MAP_IN_USE");
    a.release(ra);
    a.close();
    expect(thrown(() => a.acquire("k")).code).toBe("ERR_SHARDHEAP_MAP_HANDLE");
    const d = SharedMap.attach(heap, map.handle);
    const rd = d.acquire("k");
    expect(rd & L.HAZARD_REF, "a's record went to d").not.toBe(0);
    for (const [m, r] of [[b, rb], [c, rc], [d, rd]] as const) m.release(r);
    expect(map.check()).toEqual([]);
    map.destroy();
  });

  it("a reference that is not held is refused, and nothing changes", () => {
    const heap = newHeap();
    const map = SharedMap.create(heap, { shard: 0 });
    map.set("k", "v");
    const other = SharedMap.attach(heap, map.handle);
    const hazard = map.acquire("k");
    const counted = map.retain(hazard);
    const before = snapshot(heap);
    const bad = [0, -1, 2 ** 30, 2 ** 31, 1.5, NaN, "1" as unknown as number, L.HAZARD_REF | (3 << 24) | 1, 5, (counted + (1 << 24)) & 0x3fffffff];
    for (const ref of bad) {
      for (const op of ["release", "retain", "valuePointer", "valueLength", "value", "key", "keyLength"] as const) {
        expect(thrown(() => map[op](ref)).code, `${op}(${String(ref)})`).toBe("ERR_SHARDHEAP_MAP_REFERENCE");
      }
    }
    expect(thrown(() => other.release(hazard)).code, "a hazard reference is its own object's").toBe("ERR_SHARDHEAP_MAP_REFERENCE");
    expect(Buffer.from(heap.buffer).equals(before)).toBe(true);
    map.release(hazard);
    expect(thrown(() => map.release(hazard)).code, "released twice").toBe("ERR_SHARDHEAP_MAP_REFERENCE");
    map.release(counted);
    // The entry's last count is the map's own now: a second release would free an entry still in the map.
    const again = thrown(() => map.release(counted));
    expect(again).toBeInstanceOf(SharedMapError);
    expect(again.code).toBe("ERR_SHARDHEAP_MAP_REFERENCE");
    expect(again.message).toMatch(/still in the map/);
    expect(map.getString("k")).toBe("v");
    expect(map.check()).toEqual([]);
    // A reference to an entry long gone: its descriptor was used again (another generation).
    map.delete("k");
    map.reclaim();
    map.set("k2", "v2");
    expect(thrown(() => map.release(counted)).code).toBe("ERR_SHARDHEAP_MAP_REFERENCE");
    expect(map.getString("k2")).toBe("v2");
    expect(map.check()).toEqual([]);
    map.destroy();
  });
});

describe("SharedMap: the owner's operations", () => {
  it("reserve, fill in place, publish; a reservation is invisible until then, and can be given up", () => {
    const heap = newHeap();
    const map = SharedMap.create(heap, { shard: 0 });
    const live = heap.stats(0).liveObjects;
    const ref = map.reserve("item", 4);
    new Uint8Array(heap.buffer, map.valuePointer(ref), 4).set([1, 2, 3, 4]);
    expect(map.has("item")).toBe(false);
    expect(map.stats().reserved).toBe(1);
    expect(thrown(() => map.retain(ref)).code).toBe("ERR_SHARDHEAP_MAP_REFERENCE");
    expect(map.publish(ref)).toBe(false);
    expect(thrown(() => map.publish(ref)).code).toBe("ERR_SHARDHEAP_MAP_REFERENCE");
    expect([...map.get("item")!]).toEqual([1, 2, 3, 4]);
    const dropped = map.reserve("other", 10);
    map.release(dropped);
    map.reclaim();
    expect(map.has("other")).toBe(false);
    expect(map.stats()).toMatchObject({ reserved: 0, entries: 1 });
    expect(heap.stats(0).liveObjects).toBe(live + 1);
    expect(map.check()).toEqual([]);
    map.destroy();
  });

  it("unlink removes the entry it names and no other; forEach visits every entry and may remove them", () => {
    const heap = newHeap();
    const map = SharedMap.create(heap, { shard: 0 });
    const first = map.reserve("k", 1);
    map.publish(first);
    const held = map.acquire("k");
    map.set("k", "2");
    expect(map.unlink(held), "the entry it names left the map already").toBe(false);
    expect(map.getString("k")).toBe("2");
    map.release(held);
    const second = map.reserve("j", 1);
    map.publish(second);
    expect(map.unlink(second)).toBe(true);
    expect(map.has("j")).toBe(false);
    for (let i = 0; i < 100; i++) map.set(`e${i}`, String(i));
    const seen: string[] = [];
    map.forEach((ref) => {
      const key = text(map.key(ref))!;
      seen.push(key);
      if (key.startsWith("e")) map.unlink(ref);
    });
    expect(seen.sort()).toEqual(["k", ...Array.from({ length: 100 }, (_, i) => `e${i}`)].sort());
    expect(map.size).toBe(1);
    expect(map.check()).toEqual([]);
    map.destroy();
  });

  it("clear removes every entry; one still held is readable until released", () => {
    const heap = newHeap();
    const map = SharedMap.create(heap, { shard: 0 });
    for (let i = 0; i < 1000; i++) map.set(`c${i}`, `v${i}`);
    const held = map.acquire("c7");
    expect(map.clear()).toBe(1000);
    expect(map.size).toBe(0);
    expect(map.has("c1")).toBe(false);
    expect(text(map.value(held))).toBe("v7");
    map.release(held);
    map.set("again", "yes");
    expect(map.getString("again")).toBe("yes");
    expect(map.check()).toEqual([]);
    map.destroy();
  });

  it("bad input is refused with a specific error and the heap unchanged", () => {
    const heap = newHeap();
    const map = SharedMap.create(heap, { shard: 0 });
    map.set("k", "v");
    const before = snapshot(heap);
    const cases: Array<[() => unknown, new (...a: never[]) => Error]> = [
      [() => map.acquire(5 as unknown as string), TypeError],
      [() => map.acquire(null as unknown as string), TypeError],
      [() => map.set({} as unknown as string, "v"), TypeError],
      [() => map.set("k", 5 as unknown as string), TypeError],
      [() => map.reserve("k", -1), RangeError],
      [() => map.reserve("k", 1.5), RangeError],
      [() => map.reserve("k", "3" as unknown as number), TypeError],
      [() => map.set("x".repeat(L.MAX_KEY_BYTES + 1), "v"), InvalidValueError],
      [() => map.acquire(new Uint8Array(L.MAX_KEY_BYTES + 1)), InvalidValueError],
      [() => map.set("ключ".repeat(16_384), "v"), InvalidValueError], // 65,536 code units, 131,072 bytes of UTF-8
      [() => map.acquireBytes(new Uint8Array(4), 3, 2), RangeError],
      [() => map.acquireBytes(new Uint8Array(4), 0, 5), RangeError],
      [() => map.destroy({ forse: true } as unknown as { force: boolean }), InvalidValueError],
      [() => SharedMap.create(heap, { shard: 1 }), InvalidValueError],
      [() => SharedMap.create(heap, { shard: 0, capacity: -1 }), InvalidValueError],
      [() => SharedMap.create(heap, { shard: 0, readers: 1025 }), InvalidValueError],
      [() => SharedMap.create(heap, { shard: 0, sharrd: 0 } as unknown as { shard: number }), InvalidValueError],
      [() => SharedMap.create(heap, null as unknown as { shard: number }), TypeError],
    ];
    for (const [f, kind] of cases) {
      expect(thrown(f), f.toString()).toBeInstanceOf(kind);
      expect(Buffer.from(heap.buffer).equals(before), f.toString()).toBe(true);
    }
  });

  it("attach refuses whatever is not a live map", () => {
    const heap = newHeap();
    const map = SharedMap.create(heap, { shard: 0 });
    const plain = heap.shard(0).malloc(400);
    for (const handle of [0, 1, -8, 4096, 2 ** 40, plain, map.handle + 8, NaN, "1" as unknown as number]) {
      const e = thrown(() => SharedMap.attach(heap, handle));
      expect(e, String(handle)).toBeInstanceOf(SharedMapError);
      expect(e.code).toBe("ERR_SHARDHEAP_MAP_HANDLE");
    }
    const handle = map.handle;
    map.destroy();
    expect(thrown(() => SharedMap.attach(heap, handle)).code, "destroyed").toBe("ERR_SHARDHEAP_MAP_HANDLE");
    expect(thrown(() => map.acquire("k")).code).toBe("ERR_SHARDHEAP_MAP_HANDLE");
    expect(thrown(() => map.set("k", "v")).code).toBe("ERR_SHARDHEAP_MAP_HANDLE");
    heap.shard(0).free(plain);
  });

  it("destroy refuses while references are held; force frees them anyway; everything comes back", () => {
    const heap = newHeap();
    const start = heap.stats(0).liveObjects;
    const map = SharedMap.create(heap, { shard: 0 });
    for (let i = 0; i < 500; i++) map.set(`d${i}`, "x".repeat(i));
    const reader = viaAtomics(map);
    const ref = reader.acquire("d3");
    const e = thrown(() => map.destroy());
    expect(e).toBeInstanceOf(SharedMapError);
    expect(e.code).toBe("ERR_SHARDHEAP_MAP_IN_USE");
    expect(map.getString("d3")).toBe("xxx");
    const reservation = map.reserve("r", 1);
    reader.release(ref);
    expect(thrown(() => map.destroy()).code, "a reservation is open").toBe("ERR_SHARDHEAP_MAP_IN_USE");
    map.release(reservation);
    map.destroy();
    expect(heap.stats(0).liveObjects).toBe(start);

    const forced = SharedMap.create(heap, { shard: 0 });
    forced.set("a", "b");
    const lost = viaAtomics(forced);
    lost.acquire("a"); // as a thread that died holding it
    forced.reserve("c", 3);
    forced.destroy({ force: true });
    expect(heap.stats(0).liveObjects).toBe(start);
  });

  it("running out of memory leaves the map as it was, reservations included", () => {
    const heap = newHeap({ shardBytes: "1MiB" });
    const start = heap.stats(0).liveObjects;
    const map = SharedMap.create(heap, { shard: 0 });
    let stored = 0;
    const big = new Uint8Array(20_000).fill(7);
    const books = (): object => {
      const { entries, capacity, reserved, held, retired, unlinkedHeld } = map.stats();
      return { entries, capacity, reserved, held, retired, unlinkedHeld };
    };
    for (;;) {
      const before = books();
      try {
        map.set(`big${stored}`, big);
        stored++;
      } catch (e) {
        expect(e).toBeInstanceOf(OutOfMemoryError);
        expect(books()).toEqual(before);
        break;
      }
    }
    expect(stored).toBeGreaterThan(10);
    for (let i = 0; i < stored; i++) expect(map.get(`big${i}`)!.every((b) => b === 7)).toBe(true);
    // Small entries until the table cannot grow: publish fails, the reservation stays.
    let small = 0;
    for (;;) {
      let ref = 0;
      try {
        ref = map.reserve(`s${small}`, 0);
        map.publish(ref);
        small++;
      } catch (e) {
        expect(e).toBeInstanceOf(OutOfMemoryError);
        if (ref !== 0) {
          expect(map.stats().reserved, "the reservation is still there").toBe(1);
          expect(map.has(`s${small}`)).toBe(false);
          map.release(ref);
        }
        expect(map.stats()).toMatchObject({ entries: stored + small, reserved: 0, held: 0, retired: 0 });
        break;
      }
    }
    expect(map.check()).toEqual([]);
    map.destroy();
    expect(heap.stats(0).liveObjects).toBe(start);
  });

  // The race tests catch a reader thread that frees without looking at the
  // hazards in most runs, not all (two of three with the check planted
  // away): here the order is fixed.
  it("a reader thread that drops an entry's last count frees it only if no hazard names it; else the owner's reclaim does, later", async () => {
    const heap = newHeap({ shards: 2 });
    const { worker, answer } = mapOwner(heap, "k", "the value",
      `m === "delete" ? map.delete("k") : (map.reclaim(), map.destroy(), heap.shard(1).drainCrossShardFrees(), heap.stats(1).liveObjects)`);
    try {
      const handle = (await answer()) as number;
      const a = SharedMap.attach(heap, handle);
      const b = SharedMap.attach(heap, handle);
      const hazard = a.acquire("k");
      expect(hazard & (1 << 29), "a's reference is a hazard one").not.toBe(0);
      const counted = a.retain(hazard);
      worker.postMessage("delete");
      expect(await answer()).toBe(true);
      b.release(counted); // the last count, on a thread that does not own the shard: a's hazard still names the entry
      const books = a.stats();
      expect(books, "handed to the owner's reclaim, not freed").toMatchObject({ entries: 0, retired: 1 });
      expect(books.descriptors - books.freeDescriptors, "its descriptor is not back").toBe(1);
      expect(text(a.value(hazard))).toBe("the value");
      a.release(hazard);
      a.close();
      b.close();
      worker.postMessage("end");
      expect(await answer(), "the owner freed everything").toBe(0);
    } finally {
      await worker.terminate();
    }
  });

  it("a thread that owns no shard reads a map and cannot change it (HeapOwnershipError); once it owns one, it writes, the entry in its own shard", async () => {
    const heap = newHeap({ shards: 2 });
    const { worker, answer } = mapOwner(heap, "from", "the owner", `m === "read" ? map.getString("k") : m === "replace" ? map.set("k", "from shard 1") : (map.destroy(), "done")`);
    try {
      const handle = (await answer()) as number;
      const map = SharedMap.attach(heap, handle);
      expect(map.getString("from")).toBe("the owner");
      const before = snapshot(heap);
      for (const write of [() => map.set("k", "v"), () => map.delete("from"), () => map.take("from"), () => map.reserve("k", 1), () => map.clear(), () => map.reclaim(), () => map.forEach(() => {}), () => map.destroy()]) {
        const e = thrown(write);
        expect(e, write.toString()).toBeInstanceOf(HeapOwnershipError);
        expect(e.message).toMatch(/owns no shard of this heap/);
      }
      expect(Buffer.from(heap.buffer).equals(before), "nothing changed").toBe(true);
      heap.shard(0); // this thread takes shard 0: it may write now
      expect(map.set("k", "from shard 0")).toBe(false);
      const ref = map.acquire("k");
      expect(heap.ownerOf(map.valuePointer(ref)), "the entry is in the writer's shard").toBe(0);
      map.release(ref);
      worker.postMessage("read");
      expect(await answer(), "the map's home shard reads what shard 0 wrote").toBe("from shard 0");
      worker.postMessage("replace");
      expect(await answer(), "shard 1 replaced shard 0's entry").toBe(true);
      expect(map.getString("k")).toBe("from shard 1");
      expect(map.check()).toEqual([]);
      map.close();
      worker.postMessage("stop");
      expect(await answer()).toBe("done");
      heap.shard(0).drainCrossShardFrees();
      expect(heap.stats(0).liveObjects, "shard 0's entry went back when the map was destroyed").toBe(0);
    } finally {
      await worker.terminate();
    }
  });

});
