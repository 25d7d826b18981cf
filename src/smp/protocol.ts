/**
 * The messages between Smp (main side, smp.ts) and a shard's bootstrap
 * (worker side, shard-worker.ts), and what a shard is started with. Both
 * sides import these shapes; nothing else crosses the thread boundary
 * (the heap itself is shared memory). Task arguments and results travel
 * encoded (value-codec.ts), errors as records (error-codec.ts), so nothing
 * a task returns or throws can fail inside postMessage.
 */
import type { WasmMemory } from "../memory/atomics.js";
import type { ErrorRecord, ThrownRecord } from "./error-codec.js";
import type { EncodedValue } from "./value-codec.js";

/** workerData of every shard thread. */
export interface ShardBootData {
  readonly buffer: SharedArrayBuffer;
  /** The heap's shared WebAssembly.Memory, when it is one (SharedHeap.memory). */
  readonly memory: WasmMemory | undefined;
  readonly shard: number;
  /** Heap profiling at start: 0 off, 1 every allocation, N bytes per sample. */
  readonly heapprofRate: number;
  /** The user's module as a URL string, or undefined for none. */
  readonly module: string | undefined;
  /** ms of idleness after which the shard trims its cached pool spans. */
  readonly idleTrimMs: number;
}

export type ShardRequest =
  /** Load the user's module; answers once it has loaded (or throws its error). */
  | { readonly kind: "init" }
  /** Run the module's exported function `task` with `arg`. */
  | { readonly kind: "task"; readonly task: string; readonly arg: EncodedValue }
  /** Set this shard's heap-profiling sample rate (0 off, 1 exact, N bytes). */
  | { readonly kind: "heapprof"; readonly rate: number }
  /**
   * Quiesce (Smp.stop, once every task has finished): flush this shard's
   * batched remote frees, drain its inbox, stop the doorbell watch, answer
   * the drained count, then park the thread so nothing runs until it is
   * terminated.
   */
  | { readonly kind: "stop" };

/** What a shard answers to every request. */
export type ShardReply =
  | { readonly ok: true; readonly value: EncodedValue }
  /** The request threw (the task, the module's loading, a bad request). */
  | { readonly ok: false; readonly thrown: ThrownRecord }
  /** The task returned a value that cannot be cloned: the DataCloneError, as a record. The shard lives on. */
  | { readonly ok: false; readonly unsendable: ErrorRecord };
