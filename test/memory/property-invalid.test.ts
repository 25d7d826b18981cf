/**
 * A property test of the allocator (fast-check, a fixed seed): invalid
 * calls (double free, interior, misaligned and out-of-range pointers, frees
 * of objects already pending a cross-shard free, bad sizes) interleaved with
 * valid ones (the model of property.test.ts): each must throw the
 * documented error and leave every byte of the buffer as it was.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { InvalidPointerError, PAGE_SIZE, type SharedHeap } from "../../src/index.js";
import { Harness, VERBOSE, newCoverage, plugins } from "./property-harness.js";
import { KiB, MiB, opArb, pickArb, shardArb, type Op } from "./property-ops.js";

type BadCall = "free" | "freeSized" | "realloc" | "objectSize";

type BadOp =
  | { k: "doubleFree"; pick: number; via: number; call: BadCall }
  | { k: "interior"; pick: number; via: number; call: BadCall; offset: number }
  | { k: "misaligned"; pick: number; via: number; call: BadCall; delta: number }
  | { k: "outOfRange"; pick: number; via: number; call: BadCall }
  | { k: "pendingFree"; pick: number; via: number; call: BadCall }
  | { k: "badArgument"; pick: number; via: number; which: number }
  | { k: "freeNull"; via: number; sized: boolean };

const badCallArb = fc.constantFrom<BadCall>("free", "freeSized", "realloc", "objectSize");

const badOpArb: fc.Arbitrary<BadOp> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ k: fc.constant("doubleFree" as const), pick: pickArb, via: shardArb, call: badCallArb }) },
  {
    weight: 2,
    arbitrary: fc.record({ k: fc.constant("interior" as const), pick: pickArb, via: shardArb, call: badCallArb, offset: pickArb }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      k: fc.constant("misaligned" as const),
      pick: pickArb,
      via: shardArb,
      call: badCallArb,
      delta: fc.integer({ min: 1, max: 7 }),
    }),
  },
  { weight: 2, arbitrary: fc.record({ k: fc.constant("outOfRange" as const), pick: pickArb, via: shardArb, call: badCallArb }) },
  { weight: 3, arbitrary: fc.record({ k: fc.constant("pendingFree" as const), pick: pickArb, via: shardArb, call: badCallArb }) },
  { weight: 2, arbitrary: fc.record({ k: fc.constant("badArgument" as const), pick: pickArb, via: shardArb, which: pickArb }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant("freeNull" as const), via: shardArb, sized: fc.boolean() }) },
);

type Step = { valid: Op } | { invalid: BadOp };

const stepArb: fc.Arbitrary<Step> = fc.oneof(
  { weight: 3, arbitrary: opArb.map((valid): Step => ({ valid })) },
  { weight: 2, arbitrary: badOpArb.map((invalid): Step => ({ invalid })) },
);

/** Call `call` on `ptr` through shard `via`; a valid size is passed where one is needed. */
function callOn(heap: SharedHeap, via: number, call: BadCall, ptr: number): void {
  const a = heap.shard(via);
  if (call === "free") a.free(ptr);
  else if (call === "freeSized") a.free(ptr, 8);
  else if (call === "realloc") a.realloc(ptr, 16);
  else a.objectSize(ptr);
}

function describeCall(via: number, call: BadCall, ptr: number): string {
  const args = call === "freeSized" ? `${ptr}, 8` : call === "realloc" ? `${ptr}, 16` : `${ptr}`;
  return `shard(${via}).${call === "freeSized" ? "free" : call}(${args})`;
}

/** Pointers that are no object's start: outside every region, in metadata, not integers. */
function outOfRangePointers(heap: SharedHeap): number[] {
  const end = heap.buffer.byteLength;
  const regionBase = (s: number): number => PAGE_SIZE + s * heap.shardBytes;
  return [
    -8,
    -1,
    8,
    PAGE_SIZE - 8,
    regionBase(0) + 8, // shard 0's header
    regionBase(0) + 2 * PAGE_SIZE, // shard 0's page metadata
    regionBase(1) + 64, // shard 1's inbox word
    end,
    end + 8,
    end + PAGE_SIZE,
    2 ** 32,
    2 ** 32 + 8,
    2 ** 53 + 8,
    0.5,
    PAGE_SIZE + 0.5,
    Number.NaN,
    Number.POSITIVE_INFINITY,
    Number.NEGATIVE_INFINITY,
  ];
}

class InvalidOpRunner {
  constructor(readonly h: Harness) {}

  /** Run `fn`; it must throw `expected` and leave every byte of the buffer as it was. */
  private expectRejected(what: string, expected: "InvalidPointerError" | "RangeError" | "TypeError" | null, fn: () => void): void {
    const heap = this.h.heap;
    const before = new Uint8Array(heap.buffer).slice();
    let thrown: unknown = undefined;
    try {
      fn();
    } catch (e) {
      thrown = e;
    }
    if (expected === null) {
      if (thrown !== undefined) throw new Error(`${what} should do nothing but threw ${String(thrown)}`);
    } else {
      if (thrown === undefined) throw new Error(`${what} should throw ${expected} but returned`);
      const err = thrown as Error;
      if (expected === "InvalidPointerError") {
        if (!(err instanceof InvalidPointerError)) throw new Error(`${what} threw ${err.name}: ${err.message}, not InvalidPointerError`);
      } else if (err.constructor.name !== expected) {
        throw new Error(`${what} threw ${err.name}: ${err.message}, not ${expected}`);
      }
      expect(err.name).toBe(expected);
    }
    const after = new Uint8Array(heap.buffer);
    if (Buffer.compare(before, after) !== 0) {
      let i = 0;
      while (before[i] === after[i]) i++;
      throw new Error(`${what} changed the heap: first difference at byte ${i} (${before[i]} -> ${after[i]})`);
    }
    this.h.cov.invalidCalls++;
  }

  /** True when `ptr` is the start of a live object (a valid argument). */
  private isLiveStart(ptr: number): boolean {
    return this.h.live.some((o) => o.ptr === ptr);
  }

  run(op: BadOp): void {
    const h = this.h;
    const heap = h.heap;
    switch (op.k) {
      case "doubleFree": {
        // Freed pointers that are not live again (they may be pending, or inside a newer object).
        const stale = h.freed.filter((p) => !this.isLiveStart(p));
        if (stale.length === 0) return this.run({ ...op, k: "outOfRange" });
        const ptr = stale[op.pick % stale.length]!;
        this.expectRejected(`double ${describeCall(op.via, op.call, ptr)}`, "InvalidPointerError", () =>
          callOn(heap, op.via, op.call, ptr),
        );
        return;
      }
      case "interior": {
        const big = h.live.filter((o) => o.usable >= 16);
        if (big.length === 0) return this.run({ ...op, k: "outOfRange" });
        const o = big[op.pick % big.length]!;
        // ptr + 8 mostly; anywhere inside the object otherwise.
        const granules = o.usable / 8 - 1;
        const k = op.offset % 2 === 0 ? 1 : 1 + (op.offset % granules);
        const ptr = o.ptr + 8 * k;
        this.expectRejected(`interior ${describeCall(op.via, op.call, ptr)} (object at ${o.ptr})`, "InvalidPointerError", () =>
          callOn(heap, op.via, op.call, ptr),
        );
        return;
      }
      case "misaligned": {
        const o = h.live[op.pick % Math.max(1, h.live.length)];
        if (!o) return this.run({ ...op, k: "outOfRange" });
        const ptr = o.ptr + op.delta;
        this.expectRejected(`misaligned ${describeCall(op.via, op.call, ptr)}`, "InvalidPointerError", () =>
          callOn(heap, op.via, op.call, ptr),
        );
        return;
      }
      case "outOfRange": {
        const list = outOfRangePointers(heap);
        const ptr = list[op.pick % list.length]!;
        this.expectRejected(`out-of-range ${describeCall(op.via, op.call, ptr)}`, "InvalidPointerError", () =>
          callOn(heap, op.via, op.call, ptr),
        );
        return;
      }
      case "pendingFree": {
        const pend = h.pending.flat();
        if (pend.length === 0) {
          // Make one: free a live object through the other shard first.
          const o = h.live[op.pick % Math.max(1, h.live.length)];
          if (!o) return this.run({ ...op, k: "outOfRange" });
          h.crossFree(o, false);
          return this.run(op);
        }
        const o = pend[op.pick % pend.length]!;
        this.expectRejected(
          `${describeCall(op.via, op.call, o.ptr)} of an object pending its cross-shard free (owner ${o.owner})`,
          "InvalidPointerError",
          () => callOn(heap, op.via, op.call, o.ptr),
        );
        return;
      }
      case "badArgument": {
        const o = h.live[op.pick % Math.max(1, h.live.length)];
        const a = heap.shard(op.via);
        const cases: Array<[string, "RangeError" | "TypeError", () => unknown]> = [
          ["malloc(-1)", "RangeError", () => a.malloc(-1)],
          ["malloc(1.5)", "RangeError", () => a.malloc(1.5)],
          ["malloc(NaN)", "RangeError", () => a.malloc(Number.NaN)],
          ["malloc(Infinity)", "RangeError", () => a.malloc(Number.POSITIVE_INFINITY)],
          ["malloc(2**53)", "RangeError", () => a.malloc(2 ** 53)],
          ['malloc("8")', "TypeError", () => a.malloc("8" as unknown as number)],
          ["allocateAligned(3, 8)", "RangeError", () => a.allocateAligned(3, 8)],
          ["allocateAligned(0, 8)", "RangeError", () => a.allocateAligned(0, 8)],
          ["allocateAligned(2**32, 8)", "RangeError", () => a.allocateAligned(2 ** 32, 8)],
          ["allocateAligned(8, -8)", "RangeError", () => a.allocateAligned(8, -8)],
          ['free("8")', "TypeError", () => a.free("8" as unknown as number)],
        ];
        if (o) {
          cases.push(
            [`free(${o.ptr}, ${o.usable + 1}) larger than the object`, "RangeError", () => a.free(o.ptr, o.usable + 1)],
            [`free(${o.ptr}, -1)`, "RangeError", () => a.free(o.ptr, -1)],
            [`free(${o.ptr}, 0.5)`, "RangeError", () => a.free(o.ptr, 0.5)],
            [`realloc(${o.ptr}, -1)`, "RangeError", () => a.realloc(o.ptr, -1)],
            [`realloc(${o.ptr}, 2.5)`, "RangeError", () => a.realloc(o.ptr, 2.5)],
          );
        }
        const [what, expected, fn] = cases[op.which % cases.length]!;
        this.expectRejected(`shard(${op.via}).${what}`, expected, fn);
        if (o) this.h.verifyPattern(o);
        return;
      }
      case "freeNull":
        this.expectRejected(`shard(${op.via}).free(0${op.sized ? ", 8" : ""})`, null, () =>
          op.sized ? heap.shard(op.via).free(0, 8) : heap.shard(op.via).free(0),
        );
        return;
    }
  }
}

describe("allocator properties", () => {

  it("invalid pointers and arguments throw and leave every byte of the heap unchanged", () => {
    const cov = newCoverage();
    fc.assert(
      fc.property(
        fc.constantFrom(256 * KiB, 1 * MiB),
        fc.array(stepArb, { minLength: 5, maxLength: 80, size: "max" }),
        (shardBytes, steps) => {
          const h = new Harness(shardBytes, cov);
          const bad = new InvalidOpRunner(h);
          for (const step of steps) {
            if ("valid" in step) h.run(step.valid);
            else bad.run(step.invalid);
            h.checkInvariants(true);
          }
          h.finish();
        },
      ),
      { seed: 0x5eed_0002, numRuns: 60, plugins },
    );
    expect(cov.invalidCalls).toBeGreaterThan(0);
    if (VERBOSE) console.log("invalid-operation coverage:", JSON.stringify(cov));
  });
});
