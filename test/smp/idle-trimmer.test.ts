/**
 * The shard's idle trim (src/smp/idle-trimmer.ts): pools give back their
 * cached spans once the shard has been idle for idleTrimMs on end, never
 * sooner, however its busy and idle spells fall; with fake timers and a
 * fake clock, so nothing here depends on the machine's speed.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { idleTrimmer } from "../../src/smp/idle-trimmer.js";

describe("idle trim", () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  const make = (ms: number): { trims: () => number; t: ReturnType<typeof idleTrimmer> } => {
    let trims = 0;
    return {
      trims: () => trims,
      t: idleTrimmer({ trim: () => ++trims }, ms),
    };
  };

  it("trims once the shard has been idle for the whole delay, and once only", () => {
    const { trims, t } = make(100);
    t.busy();
    t.idle();
    vi.advanceTimersByTime(99);
    expect(trims()).toBe(0);
    vi.advanceTimersByTime(1);
    expect(trims()).toBe(1);
    vi.advanceTimersByTime(1000);
    expect(trims()).toBe(1);
  });

  it("a busy spell restarts the delay from the idle() that ends it, wherever the timer stood", () => {
    const { trims, t } = make(100);
    t.busy();
    t.idle(); // idle from 0
    vi.advanceTimersByTime(60);
    t.busy(); // busy at 60 ...
    vi.advanceTimersByTime(20);
    t.idle(); // ... idle again from 80: no trim before 180
    vi.advanceTimersByTime(99); // 179 (the first timer fired at 100, found the shard idle since 80 only)
    expect(trims()).toBe(0);
    vi.advanceTimersByTime(1); // 180
    expect(trims()).toBe(1);
  });

  it("no trim while busy, however long; nested busy() (a piscina request during a turn) counts until the last idle()", () => {
    const { trims, t } = make(100);
    t.busy();
    t.idle();
    vi.advanceTimersByTime(50);
    t.busy();
    t.busy();
    vi.advanceTimersByTime(500);
    t.idle(); // one still busy
    vi.advanceTimersByTime(500);
    expect(trims()).toBe(0);
    t.idle(); // idle from 1050
    vi.advanceTimersByTime(99);
    expect(trims()).toBe(0);
    vi.advanceTimersByTime(1);
    expect(trims()).toBe(1);
  });

  it("wake-ups set no timer each: one timer for a thousand busy/idle spells", () => {
    const { trims, t } = make(100);
    const setTimeoutCalls = vi.spyOn(globalThis, "setTimeout");
    for (let i = 0; i < 1000; i++) {
      t.busy();
      vi.advanceTimersByTime(0.05); // 50 us a spell, as a hop's
      t.idle();
    }
    expect(setTimeoutCalls).toHaveBeenCalledTimes(1);
    expect(vi.getTimerCount()).toBe(1);
    vi.advanceTimersByTime(100);
    expect(trims()).toBe(1);
    setTimeoutCalls.mockRestore();
  });

  it("stop() and idleTrimMs 0: never", () => {
    const a = make(100);
    a.t.busy();
    a.t.idle();
    a.t.stop();
    vi.advanceTimersByTime(1000);
    expect(a.trims()).toBe(0);
    const b = make(0);
    b.t.busy();
    b.t.idle();
    vi.advanceTimersByTime(1000);
    expect(b.trims()).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });
});
