/**
 * Where spans go (page-spans.ts): pool spans at the lowest address that holds
 * them, found through the free-span index (free-span-index.ts), which is
 * derived state: it must agree with the page records after any sequence
 * of operations, and a stale one must never make an allocation wrong.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { SharedHeap } from "../../src/index.js";
import { FreeSpanIndex } from "../../src/memory/free-span-index.js";
import { PAGE_FREE, PAGE_SIZE, PM_SPAN_PAGES, PM_STATE } from "../../src/memory/layout.js";
import type { ShardRegion } from "../../src/memory/region.js";
import { newHeap } from "../helpers.js";

const MiB = 1024 * 1024;

/** Heads of the free spans, from the page records (the truth). */
function freeHeads(r: ShardRegion): number[] {
  const heads: number[] = [];
  for (let p = 0; p < r.dataPages; ) {
    const m = r.pageMeta(p);
    const pages = r.i32[m + PM_SPAN_PAGES]!;
    if (r.i32[m + PM_STATE] === PAGE_FREE) heads.push(p);
    p += pages > 0 ? pages : 1;
  }
  return heads;
}

/** Every page the index has a bit for, in order. */
function indexed(index: FreeSpanIndex, pages: number): number[] {
  const out: number[] = [];
  for (let p = index.next(0); p >= 0 && p < pages; p = index.next(p + 1)) out.push(p);
  return out;
}

describe("FreeSpanIndex", () => {
  it("finds the next set page across words and summary words, and forgets removed ones", () => {
    const pages = 40_000; // 1,250 words, 40 summary words
    const index = new FreeSpanIndex(pages);
    expect(index.next(0)).toBe(-1);
    const set = [0, 31, 32, 1023, 1024, 1025, 33_000, pages - 1];
    for (const p of set) index.add(p);
    expect(indexed(index, pages)).toEqual(set);
    expect(index.next(2)).toBe(31);
    expect(index.next(1026)).toBe(33_000);
    expect(index.next(pages)).toBe(-1);
    index.remove(1024);
    index.remove(1025);
    index.remove(1023);
    expect(index.next(100)).toBe(33_000);
    index.remove(pages - 1);
    expect(index.next(33_001)).toBe(-1);
  });

  it("agrees with a set of pages under any sequence of adds and removes", () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.boolean(), fc.integer({ min: 0, max: 5000 })), { maxLength: 300 }), fc.integer({ min: 0, max: 5000 }), (ops, from) => {
        const index = new FreeSpanIndex(5001);
        const model = new Set<number>();
        for (const [add, p] of ops) {
          if (add) {
            index.add(p);
            model.add(p);
          } else {
            index.remove(p);
            model.delete(p);
          }
        }
        const want = [...model].filter((p) => p >= from).sort((a, b) => a - b)[0] ?? -1;
        expect(index.next(from)).toBe(want);
      }),
      { numRuns: 300 },
    );
  });
});

describe("span placement", () => {
  it("keeps the index equal to the free spans the page records list, through random mallocs and frees", () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.boolean(), fc.integer({ min: 1, max: 200 * 1024 }), fc.nat()), { minLength: 1, maxLength: 400 }),
        (ops) => {
          const heap = SharedHeap.create({ shards: 1, shardBytes: 4 * MiB }); // checked below, not held to the test's end

          const a = heap.shard(0);
          a.free(a.malloc(8)); // a pool span: the index is built on the first one
          const live: number[] = [];
          for (const [alloc, size, pick] of ops) {
            if (alloc || live.length === 0) {
              try {
                live.push(a.malloc(size));
              } catch {
                // full: the next free makes room
              }
            } else {
              const i = pick % live.length;
              a.free(live[i]!);
              live[i] = live[live.length - 1]!;
              live.pop();
            }
          }
          a.trim();
          const r = a as unknown as ShardRegion;
          expect(r.freeIndex, "the index is built on the first pool span").toBeDefined();
          expect(indexed(r.freeIndex!, r.dataPages)).toEqual(freeHeads(r));
          for (const p of live) a.free(p);
          expect(heap.check()).toEqual([]);
        },
      ),
      { numRuns: 40 },
    );
  });

  it("puts pool spans at the lowest free pages, not in the best-fitting hole, and large objects at the top", () => {
    const heap = newHeap({ shards: 1, shardBytes: 16 * MiB });
    const a = heap.shard(0);
    const r = a as unknown as ShardRegion;
    const pageOf = (ptr: number): number => Math.floor((ptr - r.dataStart) / PAGE_SIZE);
    const small: number[] = [];
    for (let k = 0; k < 64; k++) small.push(a.malloc(1024));
    // Two 5-page objects at the top; the topmost freed: a 5-page hole up there, the best fit for any pool span.
    const top = a.malloc(5 * PAGE_SIZE);
    const guard = a.malloc(5 * PAGE_SIZE);
    expect(pageOf(top)).toBeGreaterThan(pageOf(guard));
    a.free(top);
    // A trickle of long-lived records: every new pool span is the lowest free one, none goes into the hole.
    const records: number[] = [];
    for (let i = 0; i < 2000; i++) records.push(a.malloc(1024));
    const recordPages = [...records, ...small].map(pageOf);
    const highest = Math.max(...recordPages);
    expect(highest).toBeLessThan(pageOf(guard));
    // Packed: the records' pages are a prefix of the shard (but for the pages of the last refill's objects, still in the pool's list).
    expect(highest + 1).toBeLessThanOrEqual(new Set(recordPages).size + 8);
    // A large object goes at the top end of the free run, above them.
    const big = a.malloc(1024 * 1024);
    expect(pageOf(big)).toBeGreaterThan(highest);
    for (const p of [...records, ...small, big, guard]) a.free(p);
    a.trim();
    expect(a.largestFreeSpan()).toBe(a.stats().totalMemory);
  });

  it("allocates correctly through a stale index (a second object of the same shard in this thread changed the records)", () => {
    const heap = newHeap({ shards: 1, shardBytes: 8 * MiB });
    const first = heap.shard(0);
    const keep: number[] = [];
    for (let i = 0; i < 200; i++) keep.push(first.malloc(1024 + (i % 7) * 1500));
    // Another view of the same buffer in this thread: its allocator builds its own index and changes the records under the first one's.
    const second = SharedHeap.attach(heap.buffer).shard(0);
    const theirs: number[] = [];
    for (let i = 0; i < 200; i++) theirs.push(second.malloc(3000 + (i % 5) * 6 * 1024));
    for (const p of keep.splice(0, 100)) second.free(p);
    second.trim();
    // The first allocator's index is stale now; what it hands out must still be free memory, distinct from everything live.
    const mine: number[] = [];
    for (let i = 0; i < 400; i++) mine.push(first.malloc(1024 + (i % 3) * 4 * 1024));
    const all = [...keep, ...theirs, ...mine];
    expect(new Set(all).size).toBe(all.length);
    expect(heap.check()).toEqual([]);
    for (const p of all) first.free(p);
    first.trim();
    expect(heap.check()).toEqual([]);
    expect(first.stats().liveObjects).toBe(0);
  });
});
