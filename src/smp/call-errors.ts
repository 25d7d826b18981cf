/**
 * What a caller sees when a call to a shard fails, whoever the caller is
 * (the main thread or another shard; endpoint.ts): the task's own error
 * rebuilt (error-codec.ts), or a ShardError saying why there is no answer.
 * One wording for every hop, so shard -> shard -> main reads the same as
 * main -> shard.
 */
import { ShardError } from "../errors.js";
import { decodeError, type ErrorRecord, type ThrownRecord } from "./error-codec.js";

/** How a call names itself in messages: `task "name"`. */
export function describeTask(task: string): string {
  return `task ${JSON.stringify(task)}`;
}

/** Reject a call before it is sent: bad shard id (RangeError) or task name (TypeError). */
export function checkCall(call: () => string, shards: number, shard: unknown, task: unknown): void {
  if (!Number.isInteger(shard) || (shard as number) < 0 || (shard as number) >= shards) {
    // Id `shards` is the main thread (its endpoint, and its region with mainShard): it runs no task.
    const main = shard === shards ? ` (${shards} is the main thread, which runs no tasks)` : "";
    throw new RangeError(`${call()}: shard must be an integer from 0 to ${shards - 1}, got ${String(shard)}${main}`);
  }
  if (typeof task !== "string" || task.length === 0) throw new TypeError(`${call()}: task must be a function name`);
}

/**
 * `bound` calls to `shard` are pending from this thread already
 * (maxPendingCalls): the call is refused, nothing sent (without a
 * bound, 2M calls to a busy shard grew the sender to 1.45 GB).
 */
export function queueFull(shard: number, call: string, bound: number): ShardError {
  return new ShardError(
    shard,
    `${call}: ${bound} calls to shard ${shard} are pending from this thread already (maxPendingCalls); this one was not sent: wait for some to settle, or raise maxPendingCalls`,
    { code: "ERR_SHARDHEAP_QUEUE_FULL" },
  );
}

/** The argument could not be encoded: refused at the call, naming it. */
export function unsendableArg(call: string, cause: unknown): TypeError {
  return new TypeError(`${call}: arg cannot be sent to another thread: ${errorMessage(cause)}`, { cause });
}

/** The task's result could not be encoded on the shard. */
export function unsendableResult(shard: number, task: string, record: ErrorRecord): ShardError {
  const cause = decodeError(record);
  return new ShardError(shard, `shard ${shard}: ${describeTask(task)} returned a value that cannot be sent between threads: ${cause.message}`, { cause });
}

/**
 * What a shard's task threw, on this side: the error rebuilt with every
 * field (error-codec.ts; classes this side does not know become ShardError
 * with the original name), with a `shard` field unless it has its own, and
 * its stack followed by the hop (`at <shard N>`). A thrown non-error value
 * arrives as itself, as it would from a local async function.
 */
export function rebuildThrown(shard: number, task: string, thrown: ThrownRecord): unknown {
  switch (thrown.kind) {
    case "value":
      return thrown.value;
    case "uncloneable":
      return new ShardError(shard, `shard ${shard}: ${describeTask(task)} threw a value that cannot be sent between threads (${thrown.description}): ${thrown.why}`);
    case "error": {
      const error = decodeError(thrown.error, ShardError);
      if (!("shard" in error)) Object.defineProperty(error, "shard", { value: shard, enumerable: true, writable: true, configurable: true });
      // The caller's own stack is not captured: that would cost every call
      // ~1 us for the rare one that fails. The hop is marked instead.
      error.stack = `${error.stack}\n    at <shard ${shard}>`;
      return error;
    }
  }
}

/** Which API made a call, for messages: submitTo names the shard, invokeOnAll does not. */
export type CallName = "submitTo" | "invokeOnAll";

export function callName(via: CallName, peer: number, task: string): string {
  return via === "submitTo" ? `submitTo(${peer}, ${JSON.stringify(task)})` : `invokeOnAll(${JSON.stringify(task)})`;
}

/** A call to a shard whose thread died and could not be replaced. */
export function downError(peer: number, call: string): ShardError {
  return new ShardError(peer, `${call}: shard ${peer} is gone (its thread died and a new one could not start)`, { code: "ERR_SHARDHEAP_CALL_NOT_STARTED" });
}

export function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
