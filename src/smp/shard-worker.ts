/**
 * A shard's bootstrap: the worker side of smp.ts (Seastar's per-shard part
 * of smp::configure). Piscina loads this file once in the shard's thread:
 *   1. attach the shared heap and take this shard's allocator
 *      (memory::configure);
 *   2. apply the start-up profiling setting (set_heap_profiling_enabled;
 *      recorded by the profiler, see FilledSmpOptions.heapprofRate);
 *   3. publish `currentShard`, start watching the doorbell;
 *   4. on the "init" request, import the user's module.
 * The default export answers every request; piscina runs with atomics
 * "disabled" so this thread's event loop keeps turning between requests
 * (the doorbell, timers and sockets inside a shard depend on it).
 */
import { workerData } from "node:worker_threads";
import { OutOfMemoryError } from "../errors.js";
import { SharedHeap } from "../memory/shared-heap.js";
import type { ShardAllocator } from "../memory/shard-allocator.js";
import { watchDoorbell } from "./doorbell.js";
import { setCurrentShard, type ShardContext } from "./current-shard.js";
import type { SerializedError, ShardBootData, ShardRequest } from "./protocol.js";

const boot = workerData as ShardBootData;
const heap = SharedHeap.attach(boot.buffer);
// The shard is this thread's: adopt it (a replaced thread's batches are pushed on the way).
const memory = heap.adoptShard(boot.shard);
// Frees of other shards' objects travel in chains (flushed within the turn).
memory.batchCrossShardFrees(true);
// set_heap_profiling_enabled at start, as smp::configure does (--heapprof).
if (boot.heapprofRate > 0) memory.setHeapProfilingSampleRate(boot.heapprofRate);
const context: ShardContext = Object.freeze({ id: boot.shard, memory, heap });
setCurrentShard(context);

let userModule: Promise<Record<string, unknown>> | undefined;
function loadUserModule(): Promise<Record<string, unknown>> {
  userModule ??= boot.module === undefined ? Promise.resolve({}) : (import(boot.module) as Promise<Record<string, unknown>>);
  return userModule;
}

// Frees other shards push come back without polling (the allocation slow
// paths drain too).
const doorbell = watchDoorbell(memory.i32, memory.doorbell, () => memory.drainCrossShardFrees());
const idleTrim = idleTrimmer(memory, boot.idleTrimMs);

/** What crosses back to the main side: a value, or an error it can rebuild. */
export type ShardReply = { ok: true; value: unknown } | { ok: false; error: SerializedError };

export default async function handle(request: ShardRequest): Promise<ShardReply> {
  idleTrim.busy();
  try {
    switch (request.kind) {
      case "init":
        await loadUserModule();
        return { ok: true, value: boot.shard };
      case "task": {
        const mod = await loadUserModule();
        const fn = mod[request.task];
        if (typeof fn !== "function") {
          throw new TypeError(`shard ${boot.shard}: the module exports no function named ${JSON.stringify(request.task)}`);
        }
        return { ok: true, value: await (fn as (arg: unknown, shard: ShardContext) => unknown)(request.arg, context) };
      }
      case "heapprof":
        memory.setHeapProfilingSampleRate(request.rate);
        return { ok: true, value: memory.heapProfilingSampleRate() };
      case "stop":
        doorbell.stop();
        idleTrim.stop();
        memory.flushCrossShardFrees();
        return { ok: true, value: memory.drainCrossShardFrees() };
      default:
        throw new TypeError(`shard ${boot.shard}: unknown request ${JSON.stringify(request)}`);
    }
  } catch (e) {
    return { ok: false, error: serializeError(e) };
  } finally {
    idleTrim.idle();
  }
}

function serializeError(e: unknown): SerializedError {
  if (e instanceof OutOfMemoryError) {
    return { name: e.name, message: e.message, stack: e.stack, code: e.code, report: e.report, requestedBytes: e.requestedBytes };
  }
  if (e instanceof Error) {
    const code = (e as { code?: unknown }).code;
    return { name: e.name, message: e.message, stack: e.stack, code: typeof code === "string" ? code : undefined };
  }
  return { name: "Error", message: `non-Error thrown: ${String(e)}`, stack: undefined, code: undefined };
}

/** Trim cached pool spans once the shard has been idle for `ms` (0 = never). */
function idleTrimmer(shard: ShardAllocator, ms: number): { busy(): void; idle(): void; stop(): void } {
  let running = 0;
  let timer: NodeJS.Timeout | undefined;
  let stopped = ms <= 0;
  return {
    busy() {
      running++;
      if (timer) clearTimeout(timer);
      timer = undefined;
    },
    idle() {
      if (--running > 0 || stopped) return;
      timer = setTimeout(() => {
        timer = undefined;
        if (running === 0 && !stopped) shard.trim();
      }, ms);
      timer.unref();
    },
    stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
    },
  };
}
