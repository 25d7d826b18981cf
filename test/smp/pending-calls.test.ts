/** PendingCalls (src/smp/pending-calls.ts) on one thread: ids, the per-peer bound, settling, rejecting a peer's calls. */
import { describe, expect, it } from "vitest";
import { PendingCalls } from "../../src/smp/pending-calls.js";

describe("PendingCalls", () => {
  it("opens calls with their peer, record and task id, settles them once, and reuses a settled call's id", async () => {
    const calls = new PendingCalls(3, Infinity, false);
    const a = calls.takeId();
    const pa = calls.open(a, 2, 7, 4);
    const b = calls.takeId();
    const pb = calls.open(b, 1, 0, 9);
    expect(a).not.toBe(b);
    expect([calls.peerOf(a), calls.recordOf(a), calls.taskIdOf(a)]).toEqual([2, 7, 4]);
    expect([calls.peerOf(b), calls.recordOf(b), calls.taskIdOf(b)]).toEqual([1, 0, 9]);
    expect([calls.count, calls.pendingOn(1), calls.pendingOn(2), calls.pendingOn(0)]).toEqual([2, 1, 1, 0]);
    expect(calls.isPendingOn(a, 2)).toBe(true);
    expect(calls.isPendingOn(a, 1)).toBe(false); // an answer from another peer is stale
    calls.settle(a, true, "done");
    calls.settle(b, false, new RangeError("no"));
    await expect(pa).resolves.toBe("done");
    await expect(pb).rejects.toThrow(RangeError);
    expect([calls.count, calls.pendingOn(1), calls.pendingOn(2)]).toEqual([0, 0, 0]);
    expect(calls.isPendingOn(a, 2)).toBe(false);
    expect([calls.takeId(), calls.takeId()].sort()).toEqual([a, b].sort());
  });

  it("a returned id (the call was not sent) is handed out again and never counted", () => {
    const calls = new PendingCalls(1, Infinity, false);
    const id = calls.takeId();
    calls.returnId(id);
    expect(calls.count).toBe(0);
    expect(calls.takeId()).toBe(id);
  });

  it("keeps each call's words when the slots grow past their first 256", async () => {
    const calls = new PendingCalls(2, Infinity, false);
    const opened = Array.from({ length: 1000 }, (_, i) => {
      const id = calls.takeId();
      return { id, promise: calls.open(id, i & 1, i * 3, i + 1) };
    });
    opened.forEach(({ id }, i) => expect([calls.peerOf(id), calls.recordOf(id), calls.taskIdOf(id)]).toEqual([i & 1, i * 3, i + 1]));
    for (const { id } of opened) calls.settle(id, true, id);
    expect(await Promise.all(opened.map((o) => o.promise))).toEqual(opened.map((o) => o.id));
  });

  it("the bound is per peer: at maxPending calls a peer is at its bound, the others are not", () => {
    const calls = new PendingCalls(2, 2, false);
    const ids = [calls.takeId(), calls.takeId()];
    for (const id of ids) void calls.open(id, 0, 0, 0);
    expect(calls.atBound(0)).toBe(true);
    expect(calls.atBound(1)).toBe(false);
    calls.settle(ids[0]!, true, undefined);
    expect(calls.atBound(0)).toBe(false);
    calls.settle(ids[1]!, true, undefined);
  });

  it("settledOn resolves once the peer's last call settles, not before; at once when none is pending", async () => {
    const calls = new PendingCalls(2, Infinity, false);
    await calls.settledOn(0);
    const ids = [calls.takeId(), calls.takeId()];
    for (const id of ids) void calls.open(id, 0, 0, 0);
    let settled = false;
    const waiting = calls.settledOn(0).then(() => (settled = true));
    calls.settle(ids[0]!, true, undefined);
    await Promise.resolve();
    expect(settled).toBe(false);
    calls.settle(ids[1]!, true, undefined);
    await waiting;
    expect(settled).toBe(true);
  });

  it("rejectPending rejects the calls of one peer (or all) with the error made for each, and leaves the others pending", async () => {
    const calls = new PendingCalls(3, Infinity, false);
    const on = (peer: number) => {
      const id = calls.takeId();
      return { id, promise: calls.open(id, peer, 0, 0) };
    };
    const [x, y, z] = [on(0), on(1), on(0)];
    calls.rejectPending(0, (id) => new Error(`cut ${id}`));
    await expect(x.promise).rejects.toThrow(`cut ${x.id}`);
    await expect(z.promise).rejects.toThrow(`cut ${z.id}`);
    expect([calls.count, calls.pendingOn(0), calls.isPendingOn(y.id, 1)]).toEqual([1, 0, true]);
    calls.rejectPending(undefined, () => new Error("stopped"));
    await expect(y.promise).rejects.toThrow("stopped");
    expect(calls.count).toBe(0);
  });
});
