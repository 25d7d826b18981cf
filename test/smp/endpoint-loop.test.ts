/**
 * EndpointLoop (src/smp/endpoint-loop.ts) on one thread, with a stand-in
 * for the endpoint's work: it turns while there is work, sleeps (SLEEPING
 * set, busy/idle reported in pairs) when there is none, wakes when its
 * bell rings; and how its answer-poll window adapts. Every wait is bounded.
 */
import { afterEach, describe, expect, it } from "vitest";
import { ANSWER_POLL_MS, EndpointLoop, MIN_ANSWER_POLL_MS, nextPollWindow, wakeEndpoint } from "../../src/smp/endpoint-loop.js";
import { BELL, createQueueBuffer, endpointWord, queueGeometry, SLEEPING } from "../../src/smp/queue-layout.js";

const g = queueGeometry(2, 256);

/** Poll `cond` every few ms, for at most 5 s. */
async function until(cond: () => boolean, what: string): Promise<void> {
  const end = Date.now() + 5000;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

/** A loop of endpoint 1 whose work is a counter of records to handle, one a turn. */
function rig() {
  const i32 = new Int32Array(createQueueBuffer(g));
  const events: string[] = [];
  const state = { queued: 0, turns: 0 };
  const loop = new EndpointLoop(
    i32,
    g,
    1,
    {
      turn: () => {
        state.turns++;
        if (state.queued === 0) return 0;
        state.queued--;
        return 1;
      },
      hasWork: () => state.queued > 0,
      pendingCalls: () => 0,
    },
    { busy: () => events.push("busy"), idle: () => events.push("idle") },
  );
  const sleeping = (): boolean => Atomics.load(i32, endpointWord(g, 1) + SLEEPING) === 1;
  return { i32, loop, events, state, sleeping };
}

let stopAll: Array<() => void> = [];
afterEach(() => {
  for (const stop of stopAll) stop();
  stopAll = [];
});

describe("nextPollWindow", () => {
  it("a wake soon after sleeping doubles the window (to 1.5x the wait at least, capped); a later one halves it (floored)", () => {
    expect(nextPollWindow(MIN_ANSWER_POLL_MS, MIN_ANSWER_POLL_MS / 10)).toBe(MIN_ANSWER_POLL_MS * 2);
    expect(nextPollWindow(MIN_ANSWER_POLL_MS, ANSWER_POLL_MS * 0.6)).toBeCloseTo(ANSWER_POLL_MS * 0.9, 12);
    expect(nextPollWindow(ANSWER_POLL_MS, ANSWER_POLL_MS * 0.9)).toBe(ANSWER_POLL_MS);
    expect(nextPollWindow(ANSWER_POLL_MS, ANSWER_POLL_MS)).toBe(ANSWER_POLL_MS / 2);
    expect(nextPollWindow(MIN_ANSWER_POLL_MS, 10)).toBe(MIN_ANSWER_POLL_MS);
  });
});

describe("EndpointLoop", () => {
  it("turns while there is work, then sleeps: SLEEPING set, busy then idle reported once each", async () => {
    const { loop, events, state, sleeping } = rig();
    stopAll.push(() => loop.stop());
    state.queued = 5;
    loop.scheduleTurn();
    await until(() => sleeping(), "sleep");
    expect(state.queued).toBe(0);
    expect(state.turns).toBe(6); // five with work, one that found none
    expect(events).toEqual(["busy", "idle"]);
  });

  it("a bell rung while it sleeps brings a turn: SLEEPING cleared, the work done, and it sleeps again", async () => {
    const { i32, loop, events, state, sleeping } = rig();
    stopAll.push(() => loop.stop());
    loop.scheduleTurn();
    await until(() => sleeping(), "first sleep");
    const turns = state.turns;
    state.queued = 2;
    wakeEndpoint(i32, g, 1);
    expect(sleeping()).toBe(false); // the waker takes the flag
    expect(Atomics.load(i32, endpointWord(g, 1) + BELL)).toBe(1);
    await until(() => state.queued === 0 && sleeping(), "the rung work and the next sleep");
    expect(state.turns).toBe(turns + 3);
    expect(events).toEqual(["busy", "idle", "busy", "idle"]);
  });

  it("wakeEndpoint leaves an endpoint that is awake alone (no bell)", () => {
    const { i32 } = rig();
    wakeEndpoint(i32, g, 1);
    expect(Atomics.load(i32, endpointWord(g, 1) + BELL)).toBe(0);
  });

  it("work that appears as it goes to sleep (hasWork after SLEEPING is set) is taken without a bell", async () => {
    const i32 = new Int32Array(createQueueBuffer(g));
    let late = 1;
    let handled = 0;
    const loop = new EndpointLoop(
      i32,
      g,
      1,
      {
        turn: () => (handled < 1 - late ? ++handled && 1 : 0),
        // Asked once SLEEPING is set: the record a sender published just before.
        hasWork: () => {
          if (late === 0) return false;
          late = 0;
          return true;
        },
        pendingCalls: () => 0,
      },
      undefined,
    );
    stopAll.push(() => loop.stop());
    loop.scheduleTurn();
    await until(() => handled === 1 && Atomics.load(i32, endpointWord(g, 1) + SLEEPING) === 1, "the late record");
    expect(Atomics.load(i32, endpointWord(g, 1) + BELL)).toBe(0);
  });

  it("stop() ends the wait on the bell and no turn comes after it", async () => {
    const { i32, loop, state, sleeping } = rig();
    loop.scheduleTurn();
    await until(() => sleeping(), "sleep");
    loop.stop();
    expect(loop.stopped).toBe(true);
    expect(Atomics.load(i32, endpointWord(g, 1) + BELL)).toBe(1); // the wait was released
    const turns = state.turns;
    state.queued = 1;
    loop.scheduleTurn();
    await new Promise((r) => setImmediate(r));
    await new Promise((r) => setImmediate(r));
    expect(state.turns).toBe(turns);
  });
});
