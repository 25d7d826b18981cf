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
 * (the doorbell, timers and sockets inside a shard depend on it). Every
 * answer is encoded here (value-codec.ts, error-codec.ts): a result or an
 * error that cannot be cloned becomes an answer, never a failed postMessage
 * (which piscina rethrows in the thread, killing the shard).
 */
import { workerData } from "node:worker_threads";
import { Piscina } from "piscina";
import { SharedHeap } from "../memory/shared-heap.js";
import type { ShardAllocator } from "../memory/shard-allocator.js";
import { watchDoorbell } from "./doorbell.js";
import { setCurrentShard, type ShardContext } from "./current-shard.js";
import { encodeError, encodeThrown } from "./error-codec.js";
import type { ShardBootData, ShardReply, ShardRequest } from "./protocol.js";
import { importUserModule } from "./user-module.js";
import { decodeValue, encodeValue, transferablesOf } from "./value-codec.js";

const boot = workerData as ShardBootData;
// The heap's WebAssembly.Memory when it has one: frees then claim with
// WebAssembly atomics, not Atomics (memory/atomics.ts).
const heap = SharedHeap.attach(boot.memory ?? boot.buffer);
// The shard is this thread's: adopt it (a replaced thread's batches are pushed on the way).
const memory = heap.adoptShard(boot.shard);
// A task that ends the thread with process.exit() still hands its batched
// remote frees over ('exit' listeners run in a worker; terminate() runs
// none, and then the next owner pushes the batches it finds in the outbox).
process.once("exit", () => memory.flushCrossShardFrees());
// Frees of other shards' objects travel in chains (flushed within the turn).
memory.batchCrossShardFrees(true);
// set_heap_profiling_enabled at start, as smp::configure does (--heapprof).
if (boot.heapprofRate > 0) memory.setHeapProfilingSampleRate(boot.heapprofRate);
const context: ShardContext = Object.freeze({ id: boot.shard, memory, heap });
setCurrentShard(context);

let userModule: Promise<Record<string, unknown>> | undefined;
function loadUserModule(): Promise<Record<string, unknown>> {
  userModule ??= boot.module === undefined ? Promise.resolve({}) : importUserModule(boot.module);
  return userModule;
}

// Frees other shards push come back without polling (the allocation slow
// paths drain too).
const doorbell = watchDoorbell(memory.i32, memory.doorbell, () => memory.drainCrossShardFrees());
const idleTrim = idleTrimmer(memory, boot.idleTrimMs);

/** piscina's handler: answers every request with a ShardReply (wrapped for transfer when it carries bytes). */
export default async function handle(request: ShardRequest): Promise<unknown> {
  idleTrim.busy();
  try {
    return sendable(await answer(request));
  } catch (e) {
    return { ok: false, thrown: encodeThrown(e) } satisfies ShardReply;
  } finally {
    idleTrim.idle();
  }
}

/** What the request computes (before encoding). */
async function answer(request: ShardRequest): Promise<unknown> {
  switch (request.kind) {
    case "init":
      await loadUserModule();
      return boot.shard;
    case "task": {
      const mod = await loadUserModule();
      const fn = mod[request.task];
      if (typeof fn !== "function") {
        throw new TypeError(`shard ${boot.shard}: the module exports no function named ${JSON.stringify(request.task)}`);
      }
      return await (fn as (arg: unknown, shard: ShardContext) => unknown)(decodeValue(request.arg), context);
    }
    case "heapprof":
      memory.setHeapProfilingSampleRate(request.rate);
      return memory.heapProfilingSampleRate();
    case "stop": {
      doorbell.stop();
      idleTrim.stop();
      // The shard's last flush of batched remote frees and drain of its
      // inbox; whatever other shards push after this, Smp.stop drains from
      // the main thread once the threads are gone.
      memory.flushCrossShardFrees();
      const drained = memory.drainCrossShardFrees();
      // Park once the answer has been posted (piscina posts it in the
      // microtasks after this returns; setImmediate runs after them): the
      // thread then sits in Atomics.wait, where terminate() stops it, so a
      // timer or socket callback of the user's module can never be cut off
      // halfway through a malloc.
      setImmediate(park);
      return drained;
    }
    default:
      throw new TypeError(`shard ${boot.shard}: unknown request ${JSON.stringify(request)}`);
  }
}

/**
 * The reply for a result (a large encoding handed over rather than
 * copied). A result that cannot be cloned becomes an answer naming the
 * DataCloneError, and this thread carries on.
 */
function sendable(result: unknown): unknown {
  let reply: ShardReply;
  try {
    reply = { ok: true, value: encodeValue(result) };
  } catch (e) {
    return { ok: false, unsendable: encodeError(e instanceof Error ? e : new Error(String(e))) } satisfies ShardReply;
  }
  const transfer = transferablesOf(reply.value);
  if (transfer.length === 0) return reply;
  const movable = { [Piscina.transferableSymbol]: transfer, [Piscina.valueSymbol]: reply };
  return Piscina.move(movable as unknown as Parameters<typeof Piscina.move>[0]);
}

/** Block this thread for good (until terminate()). */
function park(): never {
  const word = new Int32Array(new SharedArrayBuffer(4));
  for (;;) Atomics.wait(word, 0, 0);
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
