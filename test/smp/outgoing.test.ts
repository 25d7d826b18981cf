/**
 * Outgoing and Sender (src/smp/outgoing.ts) on one thread, read back with
 * a RingReader and the decoder: the records a call makes, when they are
 * published, what waits in the overflow (a full ring, a peer that is
 * down) and in what order it goes out, and what a reset forgets.
 */
import { describe, expect, it } from "vitest";
import { Outgoing, Sender } from "../../src/smp/outgoing.js";
import { createQueueBuffer, queueGeometry, ringData, ringWord, type QueueGeometry } from "../../src/smp/queue-layout.js";
import { HEADER_BYTES, KIND_REQUEST, KIND_REQUEST_NAMED, KIND_RESULT, SIDE, type PeerState, type SideLinks } from "../../src/smp/records.js";
import { KIND_MASK, RingReader, RingWriter } from "../../src/smp/spsc-ring.js";
import { ShapeCache, WireBytes, WireReader } from "../../src/smp/wire-codec.js";

interface Record {
  readonly kind: number;
  readonly w1: number;
  readonly w2: number;
  readonly name?: string;
  readonly value?: unknown;
}

/** Endpoint 0's sending side towards endpoint 1, and endpoint 1's reader of that ring. */
function rig(ringBytes = 4096) {
  const g: QueueGeometry = queueGeometry(2, ringBytes);
  const buffer = createQueueBuffer(g);
  const i32 = new Int32Array(buffer);
  const posted: unknown[] = [];
  const links: SideLinks = {
    portTo: () => ({ postMessage: (m: unknown) => posted.push(m) }) as unknown as ReturnType<SideLinks["portTo"]>,
    drop: () => undefined,
  };
  let turnsAsked = 0;
  const sender = new Sender(i32, buffer, g, links, { scheduleTurn: () => void turnsAsked++ });
  const state: PeerState = { epoch: 0, up: true, gone: false };
  const out = new Outgoing(1, new RingWriter(i32, ringWord(g, 0, 1), ringData(g, 0, 1), ringBytes), state, sender, g, 0);
  const ring = new RingReader(i32, ringWord(g, 0, 1), ringData(g, 0, 1), ringBytes);
  const reader = new WireReader(new WireBytes(buffer));
  reader.shapes = new ShapeCache();
  /** Every record published so far, decoded (the reader's shapes persist, as an Incoming's do). */
  const read = (): Record[] => {
    const records: Record[] = [];
    for (let at = ring.next(); at >= 0; at = ring.next()) {
      const i = at >>> 2;
      const kind = i32[i]! & KIND_MASK;
      reader.pos = at + HEADER_BYTES;
      const name = (kind & ~SIDE) === KIND_REQUEST_NAMED ? reader.readString() : undefined;
      const value = kind & SIDE ? undefined : reader.readValue();
      records.push({ kind, w1: i32[i + 1]!, w2: i32[i + 2]!, ...(name === undefined ? {} : { name }), ...(kind & SIDE ? {} : { value }) });
      ring.advance(i32[i]! >>> 4);
    }
    ring.release();
    return records;
  };
  return { sender, out, state, read, posted, turnsAsked: () => turnsAsked };
}

describe("Outgoing", () => {
  it("a task's first request carries its name, later ones only its id; each task its own id; records counted", async () => {
    const { out, read } = rig();
    expect(out.sendRequest(10, "add", { a: 1, b: 2 })).toBe(0);
    expect(out.sendRequest(11, "add", [3])).toBe(0);
    expect(out.sendRequest(12, "mul", 7)).toBe(1);
    expect(out.sendRequest(13, "add", "x")).toBe(0);
    expect(out.records).toBe(4);
    expect([out.taskName(0), out.taskName(1)]).toEqual(["add", "mul"]);
    await Promise.resolve();
    expect(read()).toEqual([
      { kind: KIND_REQUEST_NAMED, w1: 10, w2: 0, name: "add", value: { a: 1, b: 2 } },
      { kind: KIND_REQUEST, w1: 11, w2: 0, value: [3] },
      { kind: KIND_REQUEST_NAMED, w1: 12, w2: 1, name: "mul", value: 7 },
      { kind: KIND_REQUEST, w1: 13, w2: 0, value: "x" },
    ]);
  });

  it("publishes at the end of the job, or at once every 16 records", async () => {
    const { out, read } = rig();
    out.emit(KIND_RESULT, 1, 0, undefined, "a");
    expect(read()).toEqual([]); // committed, not yet published
    await Promise.resolve();
    expect(read().map((r) => r.value)).toEqual(["a"]);
    for (let i = 0; i < 16; i++) out.emit(KIND_RESULT, i, 0, undefined, i);
    expect(read().map((r) => r.value)).toEqual(Array.from({ length: 16 }, (_, i) => i));
    out.emit(KIND_RESULT, 99, 0, undefined, 99);
    expect(read()).toEqual([]);
    await Promise.resolve();
    expect(read().map((r) => r.w1)).toEqual([99]);
  });

  it("a value that cannot be cloned throws and sends nothing; the task's name goes with its next request", async () => {
    const { out, read } = rig();
    expect(() => out.sendRequest(1, "f", () => 0)).toThrow(/could not be cloned/);
    expect(out.records).toBe(0);
    out.sendRequest(2, "f", 5);
    await Promise.resolve();
    expect(read()).toEqual([{ kind: KIND_REQUEST_NAMED, w1: 2, w2: 1, name: "f", value: 5 }]);
  });

  it("a full ring: the rest waits in the overflow, and goes out in order as the reader makes room", async () => {
    const { sender, out, read } = rig(256);
    const payload = "p".repeat(40);
    for (let i = 0; i < 40; i++) out.emit(KIND_RESULT, i, 0, undefined, payload);
    expect(out.records).toBe(40);
    expect(out.overflow.length).toBeGreaterThan(0);
    const seen: number[] = [];
    for (let round = 0; round < 100 && seen.length < 40; round++) {
      await Promise.resolve();
      seen.push(...read().map((r) => r.w1));
      sender.flushOverflow();
      sender.flush();
    }
    expect(seen).toEqual(Array.from({ length: 40 }, (_, i) => i));
    expect(out.overflow.length).toBe(0);
  });

  it("nothing goes into the ring of a peer that is down: it waits, and goes out once the peer is up", async () => {
    const { sender, out, state, read } = rig();
    state.up = false;
    out.sendRequest(1, "t", "first");
    out.sendRequest(2, "t", "second");
    await Promise.resolve();
    expect(read()).toEqual([]);
    expect(sender.flushOverflow()).toBe(0);
    expect(sender.overflowReady()).toBe(false);
    state.up = true;
    expect(sender.overflowReady()).toBe(true);
    expect(sender.flushOverflow()).toBe(2);
    sender.flush();
    expect(read().map((r) => [r.w1, r.value])).toEqual([
      [1, "first"],
      [2, "second"],
    ]);
  });

  it("a value holding shared memory goes by the side path, a SIDE record marking its place", async () => {
    const { out, read, posted } = rig();
    const shared = new SharedArrayBuffer(8);
    out.sendRequest(3, "share", { shared });
    await Promise.resolve();
    expect(posted).toEqual([{ value: { shared } }]);
    expect(read()).toEqual([{ kind: KIND_REQUEST_NAMED | SIDE, w1: 3, w2: 0, name: "share" }]);
  });

  it("reset (the peer's incarnation ended) forgets the stream, the task ids and what waited", async () => {
    const { sender, out, state, read } = rig();
    out.sendRequest(1, "t", 1);
    await Promise.resolve();
    read();
    state.up = false;
    out.sendRequest(2, "t", 2);
    out.reset();
    expect([out.records, out.overflow.length, out.taskIds.size]).toEqual([0, 0, 0]);
    state.up = true;
    expect(sender.flushOverflow()).toBe(0);
    out.sendRequest(3, "t", 3);
    await Promise.resolve();
    expect(read()).toEqual([{ kind: KIND_REQUEST_NAMED, w1: 3, w2: 0, name: "t", value: 3 }]);
  });
});
