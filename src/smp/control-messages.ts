/**
 * The messages between Smp (main side, smp.ts) and a shard's bootstrap
 * (worker side, shard-worker.ts) that travel through piscina, and what a
 * shard is started with. Tasks do not come this way: they travel through
 * the messaging buffer's rings (endpoint.ts); piscina keeps the worker's
 * lifecycle (start, replacement, termination) and these few control
 * requests. Errors travel as records (error-codec.ts).
 */
import type { MessagePort } from "node:worker_threads";
import type { HeapProfile } from "../memory/heap-profile.js";
import type { WasmMemory } from "../memory/atomics.js";
import type { ObjectCount } from "../memory/orphans.js";
import type { ThrownRecord } from "./error-codec.js";

/** workerData of every shard thread. */
export interface ShardBootData {
  readonly buffer: SharedArrayBuffer;
  /** The heap's shared WebAssembly.Memory, when it is one (SharedHeap.memory). */
  readonly memory: WasmMemory | undefined;
  readonly shard: number;
  readonly shards: number;
  /** The messaging buffer (queue-layout.ts) and its ring size. */
  readonly queues: SharedArrayBuffer;
  readonly ringBytes: number;
  /** Heap profiling at start: 0 off, 1 every allocation, N bytes per sample. */
  readonly heapprofRate: number;
  /** The user's module as a URL string, or undefined for none. */
  readonly module: string | undefined;
  /** ms of idleness after which the shard trims its cached pool spans. */
  readonly idleTrimMs: number;
  /** Calls this shard may have pending to one shard at once (Smp.start's maxPendingCalls). */
  readonly maxPendingCalls: number;
  /** What a new thread does with the objects a dead one left (SmpOptions.orphans). */
  readonly orphans: "keep" | "free";
  /** The JS heap board (js-heap-board.ts): where the shard posts its V8 heap figures and reads its JS heap profiler rate. */
  readonly jsHeapBoard: SharedArrayBuffer;
  /** The ports the shards listen on together (listen-table.ts). */
  readonly listens: SharedArrayBuffer;
}

export type ShardRequest =
  /**
   * Join the messaging buffer as this incarnation (`epoch`) with `control`
   * (side-links.ts), then load the user's module; answers once it has
   * loaded (or throws its error).
   */
  | { readonly kind: "init"; readonly epoch: number; readonly control: MessagePort }
  /** Set this shard's heap-profiling sample rate (0 off, 1 exact, N bytes). */
  | { readonly kind: "heapprof"; readonly rate: number }
  /**
   * Quiesce (Smp.stop, once every call has finished): stop taking
   * messages, flush this shard's batched remote frees, drain its inbox,
   * stop the doorbell watch, answer the drained count, then park the
   * thread so nothing runs until it is terminated.
   */
  | { readonly kind: "stop" }
  /** Free the objects the shard's dead thread left (ShardAllocator.freeOrphans) but those in `keep`. */
  | { readonly kind: "freeOrphans"; readonly keep: readonly number[] }
  /** Start this shard's peak again from now (ShardAllocator.resetPeak). */
  | { readonly kind: "resetPeak" }
  /** Set this shard's JS heap profiler interval (0 off, N bytes: js-heap-profiler.ts); answers the rate. */
  | { readonly kind: "jsheapprof"; readonly rate: number }
  /** The sampled objects live in this shard's JS heap, as a HeapProfile. */
  | { readonly kind: "jsheapProfile" };

/** What this thread found when it took the shard over (init's answer): the orphans, and whether it freed them. */
export interface ShardTakeover {
  readonly orphans: ObjectCount;
  readonly freed: boolean;
}

/** What a shard answers to every request. */
export type ShardReply =
  | { readonly ok: true; readonly value: number | ShardTakeover | (ObjectCount & { kept: number }) | HeapProfile }
  /** The request threw (the module's loading, a bad request). */
  | { readonly ok: false; readonly thrown: ThrownRecord };

/** A request as its caller names it (in errors). */
export function describeRequest(request: ShardRequest): string {
  switch (request.kind) {
    case "init":
      return "loading the module";
    case "heapprof":
      return "setHeapProfiling";
    case "stop":
      return "stop";
    case "freeOrphans":
      return "freeOrphans";
    case "resetPeak":
      return "resetPeak";
    case "jsheapprof":
      return "setJsHeapProfiling";
    case "jsheapProfile":
      return "jsHeapProfile";
  }
}
