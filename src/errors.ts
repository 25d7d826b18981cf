/**
 * Every error shardheap throws on purpose, in one place.
 *
 * Each class sets `name` to its class name (so `err.name` survives
 * structured cloning across threads, where the prototype does not) and a
 * stable `code` that the CLI maps to exit codes and the admin API to HTTP
 * statuses. Input validation errors that are not about the heap itself use
 * the built-in RangeError / TypeError, as the DESIGN contract says.
 */

export type HeapErrorCode =
  | "ERR_SHARDHEAP"
  | "ERR_SHARDHEAP_OUT_OF_MEMORY"
  | "ERR_SHARDHEAP_INVALID_POINTER"
  | "ERR_SHARDHEAP_FORMAT"
  | "ERR_SHARDHEAP_OWNERSHIP";

/**
 * A value a person or a program gave that does not read as what the field
 * takes: a size, a sample rate, a whole number, a switch (units.ts,
 * parse.ts). A RangeError, as DESIGN promises for bad sizes; the message
 * names the field and the rule, `field` names the field alone.
 */
export class InvalidValueError extends RangeError {
  readonly code = "ERR_SHARDHEAP_INVALID_VALUE";
  /** The field as the caller knows it: "--memory", "options.shardBytes", "rate". */
  readonly field: string;
  constructor(field: string, message: string) {
    super(message);
    this.name = new.target.name;
    this.field = field;
  }
}

/** Base class of every heap error. */
export class HeapError extends Error {
  readonly code: HeapErrorCode;
  constructor(message: string, code: HeapErrorCode = "ERR_SHARDHEAP") {
    super(message);
    this.name = new.target.name;
    this.code = code;
  }
}

/**
 * An allocation could not be satisfied. The shard drained its cross-shard
 * list and returned its cached small-pool spans before giving up, so this is
 * a real exhaustion (or a request larger than any shard). `report` is the
 * shard's diagnostics at the moment of failure.
 */
export class OutOfMemoryError extends HeapError {
  readonly report: string;
  readonly requestedBytes: number;
  constructor(message: string, requestedBytes: number, report: string) {
    super(message, "ERR_SHARDHEAP_OUT_OF_MEMORY");
    this.requestedBytes = requestedBytes;
    this.report = report;
  }
}

/**
 * free / realloc / objectSize of anything that is not the start of a live
 * allocation. The heap is left exactly as it was.
 */
export class InvalidPointerError extends HeapError {
  readonly pointer: unknown;
  constructor(message: string, pointer: unknown) {
    super(message, "ERR_SHARDHEAP_INVALID_POINTER");
    this.pointer = pointer;
  }
}

/** A buffer or heap image that is not a shardheap heap (or not this version). */
export class HeapFormatError extends HeapError {
  constructor(message: string) {
    super(message, "ERR_SHARDHEAP_FORMAT");
  }
}

/**
 * An operation on a shard's local state (malloc, a local free, realloc,
 * drain, trim, profiler switches) from a thread that does not own the
 * shard. A shard belongs to the thread that took it with heap.shard(id),
 * or to its Smp worker; reads (stats, heapProfile, diagnostics, check)
 * stay open to every thread, and heap.free(ptr) frees from any thread.
 * Nothing was changed.
 */
export class HeapOwnershipError extends HeapError {
  /** The shard whose state was touched. */
  readonly shard: number;
  constructor(message: string, shard: number) {
    super(message, "ERR_SHARDHEAP_OWNERSHIP");
    this.shard = shard;
  }
}
