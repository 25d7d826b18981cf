/**
 * Debug pointers' quarantine protects its own words: a held object's first
 * two words are the chain's link and its check word, and a stale pointer
 * writes there as easily as anywhere. Such a write is a write after free
 * like any other (counted, warned about, named by heap.check()), and the
 * link it damaged is never followed: no live object is handed out again,
 * no later free or malloc faults, and every held object is still
 * recycled, in the order it was freed.
 */
import { Worker } from "node:worker_threads";
import { describe, expect, it } from "vitest";
import { SharedHeap } from "../../src/index.js";
import { S_QUARANTINE_HEAD, S_QUARANTINE_OBJECTS } from "../../src/memory/layout.js";

const USE_AFTER_FREE = /use after free/;
/** Any message heap.check() gives of writes after free, one object's or the count of them. */
const WRITE_MESSAGE = /was written after it was freed|freed objects? w[a-z]+ written after/;
const WRITTEN_ONCE = "shard 0: 1 freed object was written after its free (debug pointers found them in the quarantine; see the SHARDHEAP_WRITE_AFTER_FREE warnings)";

/** What heap.check() says of held object `ptr` written at byte `at`. */
const heldWritten = (ptr: number, size: number, at: number): string => `shard 0: object ${ptr} (${size} bytes) was written after it was freed, at byte ${at} (debug pointers)`;
/** The SHARDHEAP_WRITE_AFTER_FREE warning for it. */
const warning = (ptr: number, size: number, at: number): string => `shard 0: object ${ptr} (${size} bytes) was written after it was freed, at byte ${at} (debug pointers found it in the quarantine)`;

function debugHeap(shardBytes = "1MiB"): SharedHeap {
  return SharedHeap.create({ shards: 1, shardBytes, debugPointers: true });
}

/**
 * A stale write through a raw view: `value` into the 32-bit word at byte
 * `at` of `ptr`. Returns the offset in the object of the first byte it
 * changed.
 */
function writeWord(heap: SharedHeap, ptr: number, at: number, value: number): number {
  const bytes = heap.bytes(ptr + at, 4);
  const old = bytes.slice();
  new DataView(heap.buffer).setUint32(ptr + at, value, true);
  const changed = bytes.findIndex((b, i) => b !== old[i]);
  expect(changed, "the write changes the word").toBeGreaterThanOrEqual(0);
  return at + changed;
}

/** The SHARDHEAP_WRITE_AFTER_FREE warnings `run` causes (emitted on the next tick). */
async function writeWarnings(run: () => void): Promise<string[]> {
  const seen: string[] = [];
  const onWarning = (w: Error & { code?: string }): void => {
    if (w.code === "SHARDHEAP_WRITE_AFTER_FREE") seen.push(w.message);
  };
  process.on("warning", onWarning);
  try {
    run();
    await new Promise((resolve) => setImmediate(resolve));
  } finally {
    process.off("warning", onWarning);
  }
  return seen;
}

/**
 * `n` malloc(size) that must each return memory nobody holds: each is
 * freed at once unless it is one of `held` (then counted). Returns how many
 * came back as an object still held, and what was thrown, if anything.
 */
function churn(heap: SharedHeap, size: number, n: number, held: ReadonlySet<number>): { twice: number; thrown?: string } {
  const a = heap.shard(0);
  let twice = 0;
  try {
    for (let i = 0; i < n; i++) {
      const q = a.malloc(size);
      if (held.has(q)) twice++;
      else a.free(q);
    }
  } catch (e) {
    return { twice, thrown: String(e) };
  }
  return { twice };
}

/**
 * Let every held object go (a malloc that only fits once the quarantine is
 * empty and the pools trimmed), free it, and return the free memory the
 * shard had then plus that object's bytes: what it had before, when
 * nothing else is live.
 */
function freeMemoryOnceDrained(heap: SharedHeap): number {
  const a = heap.shard(0);
  const reclaims = a.stats().reclaims;
  const big = a.malloc(a.stats().totalMemory - 128 * 1024);
  expect(a.stats().reclaims).toBe(reclaims + 1);
  const free = a.stats().freeMemory + a.objectSize(big);
  expect(heap.regions[0]!.u32[heap.regions[0]!.hdr + S_QUARANTINE_OBJECTS]).toBe(0);
  a.free(big);
  return free;
}

/**
 * Free 4000-byte objects until every one of `freed` (48-byte objects,
 * freed in this order) has left the quarantine, then take them back with
 * malloc(48): a pool hands out what came back last first, so reversed,
 * this is the order they left in.
 */
function leavingOrder(heap: SharedHeap, freed: readonly number[]): number[] {
  const a = heap.shard(0);
  const r = heap.regions[0]!;
  const waiting = new Set(freed);
  for (let i = 0; i < 10_000 && waiting.has(r.u32[r.hdr + S_QUARANTINE_HEAD]!); i++) a.free(a.malloc(4000));
  return Array.from({ length: freed.length }, () => a.malloc(48)).reverse();
}

/** A held object (`victim`) with newer ones after it, and a live object whose address a stale write may use. */
function heldWithSuccessors(heap: SharedHeap, size = 48): { live: number; victim: number } {
  const a = heap.shard(0);
  const live = a.malloc(size);
  heap.objectBytes(live).fill(7, 8); // its first words 0, as a fresh object's
  const victim = a.malloc(size);
  a.free(victim);
  for (let i = 0; i < 10; i++) a.free(a.malloc(size));
  expect(() => a.objectSize(victim)).toThrow(USE_AFTER_FREE);
  return { live, victim };
}

describe("debug pointers' quarantine links", () => {
  it("a live object's address written into a held object's first word: reported, never followed, nothing handed out twice", async () => {
    const heap = debugHeap();
    const a = heap.shard(0);
    const { live, victim } = heldWithSuccessors(heap);
    const at = writeWord(heap, victim, 0, live);
    let churned = {};
    const warnings = await writeWarnings(() => {
      churned = churn(heap, 48, 20_000, new Set([live]));
    });
    expect(churned).toEqual({ twice: 0 });
    expect(warnings).toEqual([warning(victim, 48, at)]);
    expect([...heap.objectBytes(live).subarray(8)].every((b) => b === 7)).toBe(true);
    expect(a.stats()).toMatchObject({ mallocs: 20_012, frees: 20_011, liveObjects: 1 });
    expect(heap.check()).toEqual([WRITTEN_ONCE]);
  });

  for (const [what, value] of [
    ["past the buffer's end", 0x7ffffff8],
    ["inside the shard's metadata", 4096 + 64],
    ["misaligned, inside the pages", 0],
    ["the object itself", -1],
  ] as const) {
    it(`a held object's link set to an address ${what}: no fault, later frees and mallocs work`, async () => {
      const heap = debugHeap();
      const a = heap.shard(0);
      const { live, victim } = heldWithSuccessors(heap);
      const stale = value === 0 ? victim + 12 : value === -1 ? victim : value;
      const at = writeWord(heap, victim, 0, stale);
      const warnings = await writeWarnings(() => {
        expect(churn(heap, 48, 20_000, new Set([live]))).toEqual({ twice: 0 });
        const p = a.malloc(48);
        a.free(p); // the plain free that faulted
        a.free(live);
      });
      expect(warnings).toEqual([warning(victim, 48, at)]);
      expect(a.stats().liveObjects).toBe(0);
      expect(heap.check()).toEqual([WRITTEN_ONCE]);
    });
  }

  it("a held object's link cut (set to 0): every object after it is still recycled, and the free memory comes back", async () => {
    const heap = debugHeap();
    const a = heap.shard(0);
    const before = a.stats().freeMemory;
    const { live, victim } = heldWithSuccessors(heap);
    a.free(live);
    const at = writeWord(heap, victim, 0, 0);
    const warnings = await writeWarnings(() => {
      expect(churn(heap, 48, 20_000, new Set())).toEqual({ twice: 0 });
    });
    const s = a.stats();
    expect(s.mallocs - s.frees).toBe(0);
    expect(s.liveObjects).toBe(0);
    expect(freeMemoryOnceDrained(heap)).toBe(before);
    expect(warnings).toEqual([warning(victim, 48, at)]);
    expect(heap.check()).toEqual([WRITTEN_ONCE]);
  });

  for (const [word, value] of [
    ["its check word alone", 4],
    ["its link, to a live object", 0],
  ] as const) {
    it(`a write to ${word} is a write after free; the objects after it still leave in the order they were freed`, async () => {
      const heap = debugHeap();
      const a = heap.shard(0);
      const live = a.malloc(48);
      const freed = Array.from({ length: 20 }, () => a.malloc(48));
      for (const p of freed) a.free(p);
      const victim = freed[3]!;
      const at = writeWord(heap, victim, value, value === 4 ? 0x12345678 : live);
      expect(heap.check()).toEqual([heldWritten(victim, 48, at)]);
      let order: number[] = [];
      const warnings = await writeWarnings(() => {
        order = leavingOrder(heap, freed);
      });
      expect(order).toEqual(freed);
      expect(warnings).toEqual([warning(victim, 48, at)]);
      expect(heap.check()).toEqual([WRITTEN_ONCE]);
    });
  }

  it("the newest held object's link written: found when the next object joins, and counted once", async () => {
    const heap = debugHeap();
    const a = heap.shard(0);
    const live = a.malloc(48);
    const victim = a.malloc(48);
    a.free(victim);
    const at = writeWord(heap, victim, 0, live);
    const warnings = await writeWarnings(() => {
      a.free(a.malloc(48)); // links a newer object after it
      expect(churn(heap, 48, 20_000, new Set([live]))).toEqual({ twice: 0 });
    });
    expect(warnings).toEqual([warning(victim, 48, at)]);
    expect(heap.check()).toEqual([WRITTEN_ONCE]);
  });

  it("a held page-span object's first word written: reported, its pages and every later object recycled", async () => {
    const heap = debugHeap("4MiB");
    const a = heap.shard(0);
    const before = a.stats().freeMemory;
    const live = a.malloc(100_000);
    const victim = a.malloc(100_000);
    a.free(victim);
    for (let i = 0; i < 3; i++) a.free(a.malloc(100_000));
    const at = writeWord(heap, victim, 0, live);
    const stillHeld = heap.check();
    const warnings = await writeWarnings(() => {
      expect(churn(heap, 100_000, 200, new Set([live]))).toEqual({ twice: 0 });
    });
    a.free(live);
    expect(a.stats().liveObjects).toBe(0);
    expect(freeMemoryOnceDrained(heap)).toBe(before);
    expect(stillHeld).toEqual([heldWritten(victim, 102400, at)]);
    expect(warnings).toEqual([warning(victim, 102400, at)]);
    expect(heap.check()).toEqual([WRITTEN_ONCE]);
  });

  it("random stale writes to held objects' link words: never a live object twice, never a fault, every object recycled", async () => {
    const heap = debugHeap("2MiB");
    const a = heap.shard(0);
    const before = a.stats().freeMemory;
    let seed = 0x2545f491;
    const rand = (n: number): number => {
      seed ^= seed << 13;
      seed ^= seed >>> 17;
      seed ^= seed << 5;
      return (seed >>> 0) % n;
    };
    const sizes = [0, 8, 16, 48, 200, 3000, 20_000];
    const live = new Set<number>();
    const recent: number[] = [];
    let damaged = 0;
    const view = new DataView(heap.buffer);
    const warnings = await writeWarnings(() => {
      for (let step = 0; step < 6000; step++) {
        const op = live.size > 100 ? 5 : rand(10);
        if (op < 4 || live.size === 0) {
          const p = a.malloc(sizes[rand(sizes.length)]!);
          expect(live.has(p)).toBe(false);
          live.add(p);
        } else if (op < 8) {
          const p = [...live][rand(live.size)]!;
          live.delete(p);
          a.free(p);
          recent.push(p);
          if (recent.length > 40) recent.shift();
        } else {
          // A stale write to an object still held (its use throws as a use after free).
          const p = recent[rand(recent.length)];
          if (p === undefined || live.has(p)) continue;
          try {
            a.objectSize(p);
            continue;
          } catch (e) {
            if (!USE_AFTER_FREE.test(String(e))) continue;
          }
          const values = [0, 1, 0xffffffff, 8, [...live][0] ?? 0, recent[rand(recent.length)]!, p, 0x7ffffff8];
          const value = values[rand(values.length)]!;
          const at = p + 4 * rand(2);
          if (view.getUint32(at, true) === value) continue;
          view.setUint32(at, value, true);
          damaged++;
        }
      }
      for (const p of live) a.free(p);
    });
    expect(a.stats().liveObjects).toBe(0);
    expect(heap.check().filter((e) => !WRITE_MESSAGE.test(e))).toEqual([]);
    let freeMemory = 0;
    warnings.push(...(await writeWarnings(() => (freeMemory = freeMemoryOnceDrained(heap)))));
    expect(freeMemory).toBe(before);
    // Every damaged object reported once (some were damaged twice before they were found).
    expect(damaged).toBeGreaterThan(100);
    expect(warnings.length).toBeGreaterThan(damaged / 2);
    expect(warnings.length).toBeLessThanOrEqual(damaged);
    expect(heap.check()).toEqual([`shard 0: ${warnings.length} freed objects were written after their free (debug pointers found them in the quarantine; see the SHARDHEAP_WRITE_AFTER_FREE warnings)`]);
  });
  it("stale writes from another thread while the owner frees and the held objects leave: never a live object twice, never a fault", async () => {
    const heap = debugHeap("4MiB");
    const a = heap.shard(0);
    const before = a.stats().freeMemory;
    const kept = new Set(Array.from({ length: 50 }, () => a.malloc(48)));
    // 300 held objects for the thread to write into; the newest (the chain's tail) left out.
    const freed = Array.from({ length: 301 }, () => a.malloc(48));
    for (const p of freed) a.free(p);
    const targets = new Uint32Array(new SharedArrayBuffer(300 * 4));
    targets.set(freed.slice(0, 300));
    // control: [0] the thread is ready, [1] the phase the owner asks for, [2] the phase the thread is in.
    const control = new Int32Array(new SharedArrayBuffer(3 * 4));
    const source = `
      const { workerData } = require("node:worker_threads");
      const { buffer, control, targets } = workerData;
      const u32 = new Uint32Array(buffer), c = new Int32Array(control), t = new Uint32Array(targets);
      let seed = 0x9e3779b9;
      const rand = (n) => { seed ^= seed << 13; seed ^= seed >>> 17; seed ^= seed << 5; return (seed >>> 0) % n; };
      Atomics.store(c, 0, 1);
      while (Atomics.load(c, 1) === 0);
      for (let phase; (phase = Atomics.load(c, 1)) !== 3; ) {
        Atomics.store(c, 2, phase);
        // Phase 1 (none of them leaves): any of the first four words. Phase 2
        // (they leave and are reused): not word 0, a free object's list link,
        // which a stale write breaks undetectably in any allocator.
        const word = phase === 1 ? rand(4) : 1 + rand(3);
        const values = [0, 1, 0xffffffff, 8, t[rand(t.length)], rand(0x100000000)];
        u32[(t[rand(t.length)] >>> 2) + word] = values[rand(values.length)];
      }`;
    const worker = new Worker(source, { eval: true, workerData: { buffer: heap.buffer, control: control.buffer, targets: targets.buffer } });
    const waitPhase = async (phase: number, slot = 2): Promise<void> => {
      const t0 = Date.now();
      while (Atomics.load(control, slot) !== phase) {
        if (Date.now() - t0 > 10_000) throw new Error(`the writing thread did not reach phase ${phase} within 10 s`);
        await new Promise((resolve) => setImmediate(resolve));
      }
    };
    try {
      await waitPhase(1, 0);
      const warnings = await writeWarnings(() => {
        Atomics.store(control, 1, 1);
        // Under the budget: nothing leaves while word 0 may be written.
        expect(churn(heap, 48, 5000, kept)).toEqual({ twice: 0 });
      });
      await waitPhase(1);
      Atomics.store(control, 1, 2);
      await waitPhase(2);
      warnings.push(
        ...(await writeWarnings(() => {
          // One class only: a page its objects leave is carved again at the
          // same 48-byte stride, so the thread's writes stay inside them.
          expect(churn(heap, 48, 25_000, kept)).toEqual({ twice: 0 });
        })),
      );
      Atomics.store(control, 1, 3);
      await new Promise((resolve, reject) => {
        worker.once("exit", resolve);
        worker.once("error", reject);
      });
      for (const p of kept) a.free(p);
      expect(a.stats().liveObjects).toBe(0);
      expect(heap.check().filter((e) => !WRITE_MESSAGE.test(e))).toEqual([]);
      warnings.push(...(await writeWarnings(() => expect(freeMemoryOnceDrained(heap)).toBe(before))));
      expect(warnings.length).toBeGreaterThan(100);
      expect(heap.check()).toEqual([`shard 0: ${warnings.length} freed objects were written after their free (debug pointers found them in the quarantine; see the SHARDHEAP_WRITE_AFTER_FREE warnings)`]);
    } finally {
      Atomics.store(control, 1, 3);
      await worker.terminate();
    }
  });
});
