/**
 * The sender's overflow queue (src/smp/overflow-queue.ts) on its own:
 * thousands of records, several 64 KiB chunks of them, both ways in (a
 * copy with push(), encoded in place with tailChunk()/commitTail()),
 * drained into a 256-byte ring and read back: every record once, in
 * order, bytes as written, and the queue empty at the end. A failure says
 * which record and what was wrong, at once (not a call that never
 * settles).
 */
import { describe, expect, it } from "vitest";
import { OverflowQueue } from "../../src/smp/overflow-queue.js";
import { recordHeaderLength } from "../../src/smp/spsc-ring.js";
import { RING_BYTES, recordBytes, recordProblem, ringPlan, testRing, wrapSizes, writeRecord } from "./ring-records.js";

/** overflow-queue.ts's chunk size (not exported: the test only needs to pass several). */
const CHUNK_BYTES = 64 * 1024;

const align4 = (n: number): number => (n + 3) & ~3;

/** Queue record `seq`: even ones copied in with push(), odd ones encoded in place as the endpoint does. */
function enqueue(q: OverflowQueue, seq: number, byteLength: number): void {
  if (seq % 2 === 0) return q.push(recordBytes(seq, byteLength));
  const chunk = q.tailChunk();
  writeRecord(chunk.i32, chunk.u8, q.tailPos(), seq, byteLength);
  q.commitTail(byteLength);
}

describe("overflow queue", () => {
  it("several 64 KiB chunks of records drained into a 256-byte ring: every record once, in order, intact", () => {
    const sizes = wrapSizes(RING_BYTES, 2, 6000);
    const plan = ringPlan(sizes, RING_BYTES);
    const total = sizes.reduce((sum, n) => sum + align4(n), 0);
    expect(total, "bytes queued: more than four chunks").toBeGreaterThan(4 * CHUNK_BYTES);

    const { i32, u8, base, writer, reader } = testRing();
    const q = new OverflowQueue();

    // Two thirds queued first; the rest while the queue drains (the sender keeps
    // queueing behind what waits), so chunks are appended to a queue being read.
    const firstPart = Math.floor((sizes.length * 2) / 3);
    let queued = 0;
    for (; queued < firstPart; queued++) enqueue(q, queued, sizes[queued]!);
    expect(q.length).toBe(firstPart);

    let moved = 0;
    let read = 0;
    let stalled = 0;
    let problem: string | undefined;
    while (read < sizes.length && problem === undefined) {
      if (queued < sizes.length && read > firstPart / 2) {
        for (const end = Math.min(sizes.length, queued + 500); queued < end; queued++) enqueue(q, queued, sizes[queued]!);
      }
      const before = read;
      const waiting = q.length;
      const n = q.moveInto(writer, i32, u8, () => moved++);
      writer.publish();
      if (n !== waiting - q.length) {
        problem = `the queue went from ${waiting} records waiting to ${q.length} while moveInto moved ${n}: ${waiting - q.length - n} records lost after record #${moved - 1}`;
      }
      for (let at = reader.next(); at >= 0 && problem === undefined; at = reader.next()) {
        problem = recordProblem(i32, u8, at, base, read, sizes[read]!, plan);
        reader.advance(recordHeaderLength(i32[at >>> 2]!));
        read++;
      }
      reader.release();
      stalled = read === before ? stalled + 1 : 0;
      if (problem === undefined && stalled === 2) {
        problem =
          `after record #${read - 1} of ${sizes.length} (${queued} queued, ${moved} moved) nothing more came out: ` +
          `the queue says ${q.length} waiting, next length ${q.nextLength()}`;
      }
    }
    expect(problem).toBeUndefined();
    expect(read).toBe(sizes.length);
    expect(moved, "the moved() callbacks").toBe(sizes.length);
    expect(q.length).toBe(0);
    expect(q.nextLength()).toBe(0);
    expect(reader.next()).toBe(-1);
  });

  it("a record longer than a chunk gets a chunk of its own, between ordinary ones, in order", () => {
    const big = 70_000;
    const sizes = Int32Array.from([100, big, 37, big + 3, 8]);
    const ringBytes = 1 << 17;
    const { i32, u8, base, writer, reader } = testRing(ringBytes);
    const plan = ringPlan(sizes, ringBytes);
    const q = new OverflowQueue();
    sizes.forEach((n, seq) => q.push(recordBytes(seq, n)));
    let read = 0;
    for (let round = 0; round < 10 && read < sizes.length; round++) {
      q.moveInto(writer, i32, u8, () => {});
      writer.publish();
      for (let at = reader.next(); at >= 0; at = reader.next()) {
        expect(recordProblem(i32, u8, at, base, read, sizes[read]!, plan)).toBeUndefined();
        reader.advance(recordHeaderLength(i32[at >>> 2]!));
        read++;
      }
      reader.release();
    }
    expect(read, `records read back (the queue says ${q.length} waiting)`).toBe(sizes.length);
    expect(q.length).toBe(0);
  });
});
