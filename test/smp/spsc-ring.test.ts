/**
 * The single-producer/single-consumer ring (src/smp/spsc-ring.ts) on its
 * own: a 256-byte ring through thousands of records whose sizes start a
 * record at every offset and make the writer pad every length before it
 * wraps, every byte checked, and a record's failure said in a sentence
 * (which record, where it was written, where it was read, which byte).
 * First on one thread (writer and reader taking turns, TAIL watched: it
 * may move only at publish()), then with the writer on a worker thread and
 * the reader here, each record written in two halves with a pause between
 * them until the reader has looked, so a ring that shows a record before
 * its bytes are written fails at once rather than by luck.
 */
import { Worker } from "node:worker_threads";
import { describe, expect, it, onTestFinished } from "vitest";
import { HEAD, TAIL } from "../../src/smp/queue-layout.js";
import { recordHeaderLength } from "../../src/smp/spsc-ring.js";
import { RING_BYTES, firstHalf, recordProblem, ringPlan, testRing, wrapSizes, writeRecord, type RingPlan } from "./ring-records.js";

const SIZES = wrapSizes(RING_BYTES, 3, 4000);
const PLAN = ringPlan(SIZES, RING_BYTES);

describe("the ring's test records", () => {
  it("start at every offset, pad every length, end at the ring's end, and come in every length mod 4", () => {
    const offsets = new Set(PLAN.offsets);
    const pads = new Set([...PLAN.pads].filter((p) => p > 0));
    const everyWord = (from: number, to: number): number[] => Array.from({ length: (to - from) / 4 + 1 }, (_, k) => from + 4 * k);
    expect([...offsets].sort((a, b) => a - b)).toEqual(everyWord(0, RING_BYTES - 4));
    expect([...pads].sort((a, b) => a - b)).toEqual(everyWord(4, RING_BYTES - 4));
    // The two-thread run takes the first 2,000: they pad every length too.
    expect(new Set([...PLAN.pads.subarray(0, 2000)].filter((p) => p > 0)).size).toBe(pads.size);
    const endsExactly = SIZES.filter((n, s) => PLAN.offsets[s]! + ((n + 3) & ~3) === RING_BYTES).length;
    expect(endsExactly).toBeGreaterThan(100);
    expect(new Set([...SIZES].map((n) => n % 4)).size).toBe(4);
    expect(Math.min(...SIZES)).toBe(4);
    expect(Math.max(...SIZES)).toBe(RING_BYTES);
    expect(SIZES.length).toBeGreaterThan(4000);
  });
});

/**
 * Writer and reader on this thread, taking turns: the writer fills the
 * ring (publishing every `batch` records, the rest at the end of its turn),
 * the reader takes between one and all of what is there. Returns the first
 * problem, or undefined after every record arrived intact.
 */
function takeTurns(sizes: Int32Array, plan: RingPlan): string | undefined {
  const { i32, u8, word, base, writer, reader } = testRing();
  const tail = (): number => Atomics.load(i32, word + TAIL);
  let written = 0;
  let read = 0;
  let turn = 0;
  let stalled = 0;
  while (read < sizes.length) {
    turn++;
    const batch = 1 + (turn % 4);
    const before = { written, read };
    for (let inTurn = 0; written < sizes.length; inTurn++) {
      const byteLength = sizes[written]!;
      const published = tail();
      const at = writer.reserve(byteLength);
      if (tail() !== published) return `TAIL moved from ${published} to ${tail()} when record #${written} was reserved, before its bytes were written`;
      if (at < 0) break;
      if (at - base !== plan.offsets[written]) return `the writer put record #${written} at ring offset ${at - base}, the rule says ${plan.offsets[written]}`;
      writeRecord(i32, u8, at, written, byteLength, 0, firstHalf(byteLength));
      if (reader.hasRecords() && read === written) return `the reader sees a record while record #${written} is half written and nothing else is unread`;
      writeRecord(i32, u8, at, written, byteLength, firstHalf(byteLength));
      writer.commit(byteLength);
      if (tail() !== published) return `TAIL moved from ${published} to ${tail()} at commit() of record #${written}, before publish()`;
      written++;
      if ((inTurn + 1) % batch === 0) writer.publish();
    }
    writer.publish();
    const take = written > read ? 1 + ((turn * 7919) % (written - read)) : 0;
    for (let k = 0; k < take; k++) {
      const at = reader.next();
      if (at < 0) return `the reader found the ring empty at record #${read}, with ${written - read} records published and unread`;
      const problem = recordProblem(i32, u8, at, base, read, sizes[read]!, plan);
      if (problem) return problem;
      reader.advance(recordHeaderLength(i32[at >>> 2]!));
      read++;
    }
    // Caught up: next() must say empty (and step over a pad the writer left, so release() hands its bytes back).
    const after = read === written ? reader.next() : -1;
    if (after >= 0) return `the reader found a record at ring offset ${after - base} after #${read - 1}, the last one written`;
    reader.release();
    // A turn may only step over a pad; two in a row without a record is a stuck ring.
    stalled = written === before.written && read === before.read ? stalled + 1 : 0;
    if (stalled === 2) return `no progress at record #${read}: TAIL ${tail()}, HEAD ${Atomics.load(i32, word + HEAD)}`;
  }
  if (reader.next() >= 0) return `the reader found a record after the last one (#${sizes.length - 1})`;
  if (tail() !== Atomics.load(i32, word + HEAD)) return `every record read, but TAIL ${tail()} and HEAD ${Atomics.load(i32, word + HEAD)} differ`;
  return undefined;
}

describe("spsc ring, one thread", () => {
  it("thousands of records through a 256-byte ring, every wrap, every byte as written", () => {
    expect(takeTurns(SIZES, PLAN)).toBeUndefined();
  });

  it("a record as long as the ring, after a pad, when the ring is empty", () => {
    const sizes = Int32Array.from([8, RING_BYTES, 4, RING_BYTES - 1, RING_BYTES]);
    expect(takeTurns(sizes, ringPlan(sizes, RING_BYTES))).toBeUndefined();
  });
});

/** Control words shared with fixtures/ring-writer.mjs. */
const CTL = { POLLS: 0, STOP: 1, WRITTEN: 2, LOOKED: 3 } as const;
const READER_DEADLINE_MS = 30_000;
/**
 * The two-thread run's records: the first 2,000 (every pad length comes in
 * the first ~460); with a writer that pauses up to 1 ms a record for the
 * reader, fewer records keep the run short on a loaded machine (~11 s of
 * 4,462 records with 2 ms pauses at load 12 on 2 cores).
 */
const THREADED = SIZES.subarray(0, 2000);

describe("spsc ring, writer on a worker thread, reader here", () => {
  it("every record arrives whole and in order while the writer writes each in two halves", async () => {
    const { buffer, i32, u8, word, base, reader } = testRing();
    const ctl = new Int32Array(new SharedArrayBuffer(16));
    const worker = new Worker(new URL("../fixtures/ring-writer.mjs", import.meta.url), {
      workerData: { buffer, word, base, capacity: RING_BYTES, sizes: THREADED, ctl: ctl.buffer },
    });
    onTestFinished(async () => {
      Atomics.store(ctl, CTL.STOP, 1);
      await worker.terminate();
    });
    let workerError: unknown;
    worker.on("error", (e) => (workerError = e));

    const t0 = performance.now();
    let problem: string | undefined;
    let read = 0;
    let idle = 0;
    while (read < THREADED.length && problem === undefined) {
      const at = reader.next();
      if (at >= 0) {
        problem = recordProblem(i32, u8, at, base, read, THREADED[read]!, PLAN, firstHalf(THREADED[read]!));
        if (problem === undefined) {
          reader.advance(recordHeaderLength(i32[at >>> 2]!));
          read++;
          if (read % 3 === 0) reader.release();
        }
        idle = 0;
      } else {
        reader.release();
        if (++idle % 4096 === 0) {
          // Let the worker's error event in, and bound the wait.
          await new Promise((r) => setImmediate(r));
          if (workerError !== undefined) problem = `the writer failed: ${String(workerError)}`;
          else if (performance.now() - t0 > READER_DEADLINE_MS) {
            problem = `after ${READER_DEADLINE_MS} ms the reader had ${read} of ${THREADED.length} records; the writer had written ${Atomics.load(ctl, CTL.WRITTEN)}`;
          }
        }
      }
      Atomics.add(ctl, CTL.POLLS, 1);
    }
    Atomics.store(ctl, CTL.STOP, 1);
    expect(problem).toBeUndefined();
    expect(read).toBe(THREADED.length);
    reader.release();
    expect(reader.next(), "nothing after the last record").toBe(-1);
    // The test proves something only if the reader did look at half-written records
    // (each pause ends when it does, or after 1 ms when this thread is off the CPU).
    expect(Atomics.load(ctl, CTL.LOOKED), "records the reader looked at while half written").toBeGreaterThan(THREADED.length / 10);
  });
});
