/**
 * The messages between Smp (main side, smp.ts) and a shard's bootstrap
 * (worker side, shard-worker.ts), and what a shard is started with. Both
 * sides import these shapes; nothing else crosses the thread boundary
 * (the heap itself is shared memory).
 */

/** workerData of every shard thread. */
export interface ShardBootData {
  readonly buffer: SharedArrayBuffer;
  readonly shard: number;
  /** Heap profiling at start: 0 off, 1 every allocation, N bytes per sample. */
  readonly heapprofRate: number;
  /** The user's module (absolute path or URL), or undefined for none. */
  readonly module: string | undefined;
  /** ms of idleness after which the shard trims its cached pool spans. */
  readonly idleTrimMs: number;
}

export type ShardRequest =
  /** Load the user's module; answers once it has loaded (or throws its error). */
  | { readonly kind: "init" }
  /** Run the module's exported function `task` with `arg`. */
  | { readonly kind: "task"; readonly task: string; readonly arg: unknown }
  /** Set this shard's heap-profiling sample rate (0 off, 1 exact, N bytes). */
  | { readonly kind: "heapprof"; readonly rate: number }
  /** Quiesce: drain the inbox and stop the doorbell watch; answers the drained count. */
  | { readonly kind: "stop" };

/** An error as it crosses the boundary: structured clone keeps only built-in error names. */
export interface SerializedError {
  readonly name: string;
  readonly message: string;
  readonly stack: string | undefined;
  readonly code: string | undefined;
  /** OutOfMemoryError's diagnostics report and request, when that is what was thrown. */
  readonly report?: string;
  readonly requestedBytes?: number;
}
