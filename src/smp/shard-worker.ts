/**
 * A shard's bootstrap: the worker side of smp.ts (Seastar's per-shard part
 * of smp::configure). Piscina loads this file once in the shard's thread:
 *   1. attach the shared heap and take this shard's allocator
 *      (memory::configure);
 *   2. apply the start-up profiling setting (set_heap_profiling_enabled;
 *      recorded by the profiler, see FilledSmpOptions.heapprofRate);
 *   3. publish `currentShard`, start watching the doorbell;
 *   4. on the "init" request, join the messaging buffer (endpoint.ts: from
 *      then on tasks arrive through its rings, from the main thread and
 *      from every shard) and import the user's module.
 * The default export answers piscina's control requests (control-messages.ts);
 * piscina runs with atomics "disabled" so this thread's event loop keeps
 * turning between requests (the rings' doorbell, timers and sockets inside
 * a shard depend on it).
 */
import { workerData } from "node:worker_threads";
import { SharedHeap } from "../memory/shared-heap.js";
import "../memory/profiler/plug-in.js";
import "../memory/heap-image/plug-in.js";
import type { ShardAllocator } from "../memory/shard-allocator.js";
import { watchDoorbell } from "./doorbell.js";
import { setCurrentShard, type ShardContext } from "./current-shard.js";
import { Endpoint } from "./endpoint.js";
import type { TaskFunction } from "./incoming.js";
import { encodeThrown } from "./error-codec.js";
import { idleTrimmer } from "./idle-trimmer.js";
import type { ShardBootData, ShardReply, ShardRequest, ShardTakeover } from "./control-messages.js";
import { queueGeometry } from "./queue-layout.js";
import { ShardSideLinks } from "./side-links.js";
import { invokeOnAllVia, submitVia } from "./submit.js";
import { typedTasks } from "./typed-tasks.js";
import type { Tasks } from "./task-types.js";
import { importUserModule } from "./user-module.js";
import { JsHeapBoard, postJsHeapFigures } from "./js-heap-board.js";
import { JsHeapProfiler } from "./js-heap-profiler.js";
import { ShardListener, type ListenOptions } from "./shard-listen.js";
import type { Server } from "node:net";
import type { HeapProfile } from "../memory/heap-profile.js";

const boot = workerData as ShardBootData;
// The heap's WebAssembly.Memory when it has one: frees then claim with
// WebAssembly atomics, not Atomics (memory/atomics.ts).
const heap = SharedHeap.attach(boot.memory ?? boot.buffer);
// The shard is this thread's: adopt it (a replaced thread's batches are pushed on the way).
const memory = heap.adoptShard(boot.shard);
// Whatever is live now a dead thread of this shard allocated (nothing, at
// the first start): tracked, or freed before any call if so configured.
const takeover: ShardTakeover = { orphans: memory.trackOrphans(), freed: boot.orphans === "free" };
if (takeover.freed) memory.freeOrphans();
// A task that ends the thread with process.exit() still hands its batched
// remote frees over ('exit' listeners run in a worker; terminate() runs
// none, and then the next owner pushes the batches it finds in the outbox).
process.once("exit", () => memory.flushCrossShardFrees());
// Frees of other shards' objects travel in chains (flushed within the turn).
memory.batchCrossShardFrees(true);
// set_heap_profiling_enabled at start, as smp::configure does (--heapprof).
if (boot.heapprofRate > 0) memory.setHeapProfilingSampleRate(boot.heapprofRate);
// This thread's own JS heap: its figures posted on the board, its profiler
// at the rate Smp last asked for (a replacement thread resumes it).
const jsHeapBoard = new JsHeapBoard(heap.shards, boot.jsHeapBoard);
const stopPostingJsHeap = postJsHeapFigures(jsHeapBoard, boot.shard);
const jsHeap = new JsHeapProfiler(boot.shard);
/** This thread's end of the messaging buffer, from the "init" request on. */
let endpoint: Endpoint | undefined;
/** currentShard.tasks(): one object for every type argument (they exist only at compile time). */
let tasks: Tasks<object> | undefined;
/** currentShard.listen: this shard's side of the ports the shards share. */
const listener = new ShardListener(boot.listens, boot.shard, boot.shards);
const context: ShardContext = Object.freeze({
  id: boot.shard,
  shards: boot.shards,
  memory,
  heap,
  submitTo<T>(shard: number, task: string, arg?: unknown): Promise<T> {
    return submitVia<T>(joined(), shard, task, arg);
  },
  invokeOnAll<T>(task: string, arg?: unknown): Promise<T[]> {
    return invokeOnAllVia<T>(joined(), task, arg);
  },
  tasks<M extends object>(): Tasks<M> {
    tasks ??= typedTasks(context);
    return tasks as Tasks<M>;
  },
  listen(server: Server, o: ListenOptions) {
    return listener.listen(server, o);
  },
});
setCurrentShard(context);

function joined(): Endpoint {
  // The module loads after the endpoint exists, so only code run before
  // "init" (none of the user's) could get here without one.
  if (endpoint === undefined) throw new Error(`shard ${boot.shard}: not started yet`);
  return endpoint;
}

let userModule: Promise<Record<string, unknown>> | undefined;
/** The module's exports once loaded (tasks are looked up here). */
let exports: Record<string, unknown> = {};
function loadUserModule(): Promise<Record<string, unknown>> {
  userModule ??= (boot.module === undefined ? Promise.resolve({}) : importUserModule(boot.module)).then((m) => (exports = m));
  return userModule;
}

// Frees other shards push come back without polling (the allocation slow
// paths drain too).
const doorbell = watchDoorbell(memory.i32, memory.doorbell, () => memory.drainCrossShardFrees());
const idleTrim = idleTrimmer(memory, boot.idleTrimMs);

/** piscina's handler: answers every request with a ShardReply. */
export default async function handle(request: ShardRequest): Promise<ShardReply> {
  idleTrim.busy();
  try {
    return { ok: true, value: await answer(request) };
  } catch (e) {
    return { ok: false, thrown: encodeThrown(e) };
  } finally {
    idleTrim.idle();
  }
}

/** What the request computes. */
async function answer(request: ShardRequest): Promise<number | ShardTakeover | ReturnType<ShardAllocator["freeOrphans"]> | HeapProfile> {
  switch (request.kind) {
    case "init": {
      const links = new ShardSideLinks(request.control, boot.shard, request.epoch);
      // The endpoint exists before the module's code runs (the module may
      // call other shards as it loads); requests wait until it has loaded.
      let loaded!: () => void;
      const ready = new Promise<void>((resolve) => (loaded = resolve));
      endpoint = new Endpoint({
        buffer: boot.queues,
        geometry: queueGeometry(boot.shards + 1, boot.ringBytes),
        self: boot.shard,
        shards: boot.shards,
        links,
        maxPendingCalls: boot.maxPendingCalls,
        host: {
          lookup: (name) => {
            const fn = exports[name];
            return typeof fn === "function" ? (fn as TaskFunction) : undefined;
          },
          hasModule: boot.module !== undefined,
          context,
          ready,
          busy: () => idleTrim.busy(),
          idle: () => idleTrim.idle(),
        },
      });
      links.listen(endpoint);
      endpoint.start();
      try {
        // Before the module loads, so what it allocates as it loads is in the profile.
        await jsHeap.setRate(jsHeapBoard.rate(boot.shard));
        await loadUserModule();
      } finally {
        loaded();
      }
      return takeover;
    }
    case "freeOrphans":
      return memory.freeOrphans(request.keep);
    case "heapprof":
      memory.setHeapProfilingSampleRate(request.rate);
      return memory.heapProfilingSampleRate();
    case "resetPeak":
      memory.resetPeak();
      return 0;
    case "jsheapprof":
      return jsHeap.setRate(request.rate);
    case "jsheapProfile":
      return jsHeap.profile();
    case "stop": {
      endpoint?.stop();
      doorbell.stop();
      idleTrim.stop();
      stopPostingJsHeap();
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
      throw new TypeError(`shard ${boot.shard}: unknown request ${JSON.stringify((request as { kind?: unknown }).kind)}`);
  }
}

/** Block this thread for good (until terminate()). */
function park(): never {
  const word = new Int32Array(new SharedArrayBuffer(4));
  for (;;) Atomics.wait(word, 0, 0);
}
