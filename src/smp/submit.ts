/**
 * submitTo and invokeOnAll as both the main thread (Smp) and a shard
 * (currentShard) offer them: checked at the call (an unknown shard is a
 * RangeError, a bad task name a TypeError, both as rejections, as from any
 * async function), then sent by this thread's Endpoint.
 */
import { checkCall } from "./call-errors.js";
import type { Endpoint } from "./endpoint.js";

export function submitVia<T>(endpoint: Endpoint, shard: number, task: string, arg: unknown): Promise<T> {
  // The checks inline, for speed: the call's name is made only for a message.
  if (typeof task !== "string" || task.length === 0 || !Number.isInteger(shard) || shard < 0 || shard >= endpoint.shards) {
    try {
      checkCall(() => `submitTo(${String(shard)}, ${JSON.stringify(task)})`, endpoint.shards, shard, task);
    } catch (e) {
      return Promise.reject(e);
    }
  }
  return endpoint.submitTask(shard, task, arg, "submitTo") as Promise<T>;
}

export function invokeOnAllVia<T>(endpoint: Endpoint, task: string, arg: unknown): Promise<T[]> {
  const call = (): string => `invokeOnAll(${JSON.stringify(task)})`;
  try {
    checkCall(call, endpoint.shards, 0, task);
  } catch (e) {
    return Promise.reject(e);
  }
  // All or none: a shard at its bound refuses the whole call, before any shard is sent it.
  for (let shard = 0; shard < endpoint.shards; shard++) {
    const refusal = endpoint.refusal(shard, call());
    if (refusal !== undefined) return Promise.reject(refusal);
  }
  const calls: Array<Promise<unknown>> = [];
  for (let shard = 0; shard < endpoint.shards; shard++) calls.push(endpoint.submitTask(shard, task, arg, "invokeOnAll"));
  return Promise.all(calls) as Promise<T[]>;
}
