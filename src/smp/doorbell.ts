/**
 * The per-shard doorbell loop: wait on a doorbell word with
 * Atomics.waitAsync (the thread's event loop keeps running) and call
 * `drain` whenever another thread rings it (Atomics.add + Atomics.notify,
 * see memory/cross-shard.ts). The doorbell is read before each drain, so
 * a ring that lands while draining is never missed: the wait then returns
 * "not-equal" at once and the loop drains again on the next turn.
 */
export interface DoorbellWatch {
  /** Stop watching; wakes the pending wait so nothing is left waiting. */
  stop(): void;
}

export function watchDoorbell(
  i32: Int32Array,
  bell: number,
  drain: () => number,
  onDrain?: (drained: number) => void,
): DoorbellWatch {
  let stopped = false;
  const ring = (): void => {
    if (stopped) return;
    const seen = Atomics.load(i32, bell);
    const n = drain();
    if (n !== 0 && onDrain) onDrain(n);
    const wait = Atomics.waitAsync(i32, bell, seen);
    if (wait.async) void wait.value.then(ring);
    else setImmediate(ring); // rang between the load and the wait
  };
  ring();
  return {
    stop() {
      stopped = true;
      Atomics.add(i32, bell, 1);
      Atomics.notify(i32, bell);
    },
  };
}
