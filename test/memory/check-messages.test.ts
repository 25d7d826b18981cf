/**
 * Every message heap.check() can give, each provoked on an idle heap by
 * writing buffer words by hand (the slots of src/memory/layout.ts, through
 * the region's accessors), and expected exactly: the whole list of
 * violations, which is the message asked for plus, where the corruption
 * cannot help it, the consequences named in the case.
 *
 * The messages are read from the checker's source (src/memory/check.ts,
 * and checkHeader in src/memory/shared-heap.ts, which SharedHeap.check
 * runs first), so a message added there without a case here fails the
 * suite, and so does a case whose message is gone.
 */
import { describe, expect, it } from "vitest";
import { HeapFormatError, SharedHeap } from "../../src/index.js";
import { dataPagesFor, maxProfilerSites } from "../../src/memory/layout.js";
import { MIN_SHARD_BYTES } from "../../src/memory/shared-heap.js";
import { classFallbackSpanPages, classSpanPages } from "../../src/memory/size-classes.js";
import { CHAIN_CASES } from "./check-messages/chains.js";
import { C16384, MiB, forgePoolSpan, type Case } from "./check-messages/corruption.js";
import { FREE_SPAN_CASES } from "./check-messages/free-spans.js";
import { HEADER_CASES } from "./check-messages/header.js";
import { PAGE_WALK_CASES } from "./check-messages/page-walk.js";
import { POOL_SPAN_CASES } from "./check-messages/pool-spans.js";
import { QUARANTINE_CASES } from "./check-messages/quarantine.js";
import { CHAIN_PLACES, CHECK_MESSAGES, HEADER_MESSAGES, HOLE, escape, pattern, shapesOf } from "./check-messages/shapes.js";

/** Every case, one file of check-messages/ for each part of the checker. */
const CASES: readonly Case[] = [...CHAIN_CASES, ...PAGE_WALK_CASES, ...FREE_SPAN_CASES, ...POOL_SPAN_CASES, ...HEADER_CASES, ...QUARANTINE_CASES];

/**
 * Header messages check() cannot give on a heap that exists, each with why
 * and a test of the reason below.
 */
const NOT_FROM_A_LIVE_HEAP = new Map([
  // A heap's buffer never shrinks; attach() gives this one (tested below).
  [`not a shardheap heap: ${HOLE} bytes is smaller than its header`, "attach"],
  // Shards of at least MIN_SHARD_BYTES (checked just before) always hold the largest fallback span.
  [`corrupt shardheap header: a shard of ${HOLE} bytes is too small`, "unreachable"],
]);

describe("heap.check() messages", () => {
  it("the messages are read from the source: check.ts and checkHeader", () => {
    // A scanner that found nothing would make the coverage test below vacuous.
    expect(CHECK_MESSAGES.length).toBeGreaterThanOrEqual(40);
    expect(CHECK_MESSAGES).toContain(`free spans at pages ${HOLE} and ${HOLE} touch but were not merged`);
    expect(CHECK_MESSAGES).toContain(`shard ${HOLE}: object ${HOLE} is in two cross-shard chains`);
    expect(HEADER_MESSAGES).toContain("not a shardheap heap: wrong magic number");
    expect(HEADER_MESSAGES.length).toBeGreaterThanOrEqual(6);
    expect(CHAIN_PLACES).toEqual(["cross-shard inbox", `shard ${HOLE}'s outbox`]);
  });

  it("every message in the source has a case, and every case's message is in the source", () => {
    const covered = new Set([...CASES.map((c) => c.shape), ...NOT_FROM_A_LIVE_HEAP.keys()]);
    const inSource = new Set([...CHECK_MESSAGES, ...HEADER_MESSAGES]);
    expect([...inSource].filter((s) => !covered.has(s)), "messages of the checker without a case here").toEqual([]);
    expect([...covered].filter((s) => !inSource.has(s)), "cases whose message the checker no longer has").toEqual([]);
  });

  it("the chain messages are tested in both kinds of chain forEachChained walks: an inbox and an outbox", () => {
    const chainShapes = CHECK_MESSAGES.filter((s) => s.startsWith(`shard ${HOLE}: ${HOLE} `));
    expect(chainShapes).toHaveLength(2);
    for (const shape of chainShapes) {
      const messages = CASES.filter((c) => c.shape === shape).flatMap((c) => c.arrange(SharedHeap.create({ shards: c.shards ?? 1, shardBytes: MiB }))());
      for (const place of CHAIN_PLACES) {
        const inPlace = new RegExp(`^shard \\d+: ${place.split(HOLE).map(escape).join(".+?")} `);
        expect(messages.some((m) => pattern(shape).test(m) && inPlace.test(m)), `"${shape}" in "${place}"`).toBe(true);
      }
    }
  });

  for (const c of CASES) {
    it(`${c.shape}: ${c.what}`, () => {
      const heap = SharedHeap.create({ shards: c.shards ?? 1, shardBytes: MiB, debugPointers: c.debugPointers ?? false });
      const corrupt = c.arrange(heap);
      expect(heap.check(), "the heap before the corruption").toEqual([]);
      const saved = new Uint8Array(heap.buffer).slice();
      const expected = corrupt();
      for (const m of expected) expect(shapesOf(m), `the message shape "${m}" is an instance of`).toHaveLength(1);
      expect(expected.some((m) => shapesOf(m)[0] === c.shape), "the case expects its own message").toBe(true);
      expect(heap.check()).toEqual(expected);
      new Uint8Array(heap.buffer).set(saved);
      expect(heap.check(), "the heap with the words put back").toEqual([]);
    });
  }

  it("control: the pool span the length case forges is clean at the class's own length", () => {
    const heap = SharedHeap.create({ shards: 1, shardBytes: MiB });
    forgePoolSpan(heap.regions[0]!, C16384, classSpanPages[C16384]!);
    expect(heap.check()).toEqual([]);
  });

  it(`"smaller than its header" comes from attach, which checks a buffer with the same function`, () => {
    expect(() => SharedHeap.attach(new SharedArrayBuffer(64))).toThrow(HeapFormatError);
    expect(() => SharedHeap.attach(new SharedArrayBuffer(64))).toThrow(/^not a shardheap heap: 64 bytes is smaller than its header$/);
  });

  it(`"a shard ... is too small" cannot happen after the MIN_SHARD_BYTES check before it`, () => {
    // dataPagesFor grows with the shard: its floor is at MIN_SHARD_BYTES, whatever profiler capacity the header allows.
    const floor = dataPagesFor(MIN_SHARD_BYTES, maxProfilerSites(MIN_SHARD_BYTES));
    expect(floor).toBeGreaterThanOrEqual(Math.max(...classFallbackSpanPages));
    for (let bytes = MIN_SHARD_BYTES; bytes <= 64 * MiB; bytes += 4096 * 61) {
      expect(dataPagesFor(bytes, maxProfilerSites(bytes))).toBeGreaterThanOrEqual(floor);
      expect(dataPagesFor(bytes, 1)).toBeGreaterThanOrEqual(floor);
    }
  });
});
