/**
 * Every error shardheap throws on purpose, and the one table that says what
 * each means to the `shardheap` command (its exit code) and to the admin
 * HTTP API (its status). Both read ERROR_TABLE through errorRow(); neither
 * keeps a mapping of its own (fastify's lib/errors.js is the model: the
 * status travels with the code).
 *
 * Each class sets `name` to its class name (so `err.name` survives
 * structured cloning across threads, where the prototype does not) and a
 * stable `code`, the table's key. Bad values (sizes, rates, numbers,
 * switches) are InvalidValueError, a RangeError, so the README's "RangeError
 * for a bad size" (its Errors table) holds; other misuse of the API (a size the allocator cannot
 * take, a wrong type) stays the built-in RangeError / TypeError.
 */

export interface ErrorRow {
  /** The class (its `name`) whose instances carry this code. */
  readonly error: string;
  /** What the code means; also HttpError's message when none is given. */
  readonly message: string;
  /** The `shardheap` command's exit code when it ends with this error: 2 the input was wrong, 1 anything else. */
  readonly exitCode: 1 | 2;
  /** The admin API's status when a request ends with this error. */
  readonly httpStatus: number;
}

/**
 * code -> class, meaning, exit code, HTTP status. Choices worth a reason:
 * - HeapFormatError exits 2, as the README says for `report` on a file that is
 *   not an image; in the admin server it could only mean its own heap is
 *   damaged, a server fault: 500.
 * - HeapOwnershipError is 500, not 409: the admin server never mutates a
 *   shard itself (switches go through Smp to the owning thread), so the
 *   error would be the server's bug, which no client request can resolve;
 *   409 Conflict tells the client to change its request and retry.
 * - OutOfMemoryError and ShardError are 503: the memory or the shard is
 *   not available now (frees, or piscina's replacement thread, may bring
 *   it back), which is what 503 says; the request itself was fine.
 * - smp.memory without Smp.start({ mainShard: true }), and shardContext()
 *   outside a shard, are ShardErrors of their own codes, not
 *   InvalidValueErrors: no value was given wrong (an InvalidValueError is
 *   a RangeError whose row says "your input": exit 2, 400), the program
 *   reads a shard the runtime or its thread does not have; a program's
 *   mistake, so exit 1 and 500, as ERR_SHARDHEAP_OWNERSHIP.
 * - ERR_SHARDHEAP_MAP_KEY exits 2 and answers 400, unlike the other map
 *   codes: the key is the caller's input, wrong as given (the map is fine),
 *   as an InvalidValueError's value is.
 * - A growth since a baseline that was never set is 409 Conflict: the
 *   server's state, not the request, is missing something the client can
 *   supply (POST the baseline) before asking again.
 */
export const ERROR_TABLE = {
  ERR_SHARDHEAP: { error: "HeapError", message: "a heap error", exitCode: 1, httpStatus: 500 },
  ERR_SHARDHEAP_OUT_OF_MEMORY: { error: "OutOfMemoryError", message: "out of memory in a shard", exitCode: 1, httpStatus: 503 },
  ERR_SHARDHEAP_INVALID_POINTER: { error: "InvalidPointerError", message: "not a live allocation", exitCode: 1, httpStatus: 500 },
  ERR_SHARDHEAP_FORMAT: { error: "HeapFormatError", message: "not a shardheap heap or heap image", exitCode: 2, httpStatus: 500 },
  ERR_SHARDHEAP_OWNERSHIP: { error: "HeapOwnershipError", message: "a shard's local state touched from a thread that does not own it", exitCode: 1, httpStatus: 500 },
  ERR_SHARDHEAP_MAP_HANDLE: { error: "SharedMapError", message: "not the handle of a live SharedMap (never one, or destroyed)", exitCode: 1, httpStatus: 500 },
  ERR_SHARDHEAP_MAP_REFERENCE: { error: "SharedMapError", message: "not a reference this SharedMap handed out that is still held (released already, or never one)", exitCode: 1, httpStatus: 500 },
  ERR_SHARDHEAP_MAP_IN_USE: { error: "SharedMapError", message: "the SharedMap cannot be destroyed while references to its entries are held or reservations are open", exitCode: 1, httpStatus: 500 },
  ERR_SHARDHEAP_MAP_KEY: { error: "SharedMapError", message: "a SharedMap string key that is not valid UTF-16 (a lone surrogate has no UTF-8 encoding)", exitCode: 2, httpStatus: 400 },
  ERR_SHARDHEAP_MAP_FULL: { error: "SharedMapError", message: "a SharedMap holds at most 2^23 entries and 2^24 - 1 entry descriptors", exitCode: 1, httpStatus: 503 },
  ERR_SHARDHEAP_SHARD: { error: "ShardError", message: "a shard failed, stopped or is stopping", exitCode: 1, httpStatus: 503 },
  ERR_SHARDHEAP_CALL_NOT_STARTED: { error: "ShardError", message: "the call never started: its shard's thread died (or the runtime stopped) before taking it, or the shard is gone; safe to retry", exitCode: 1, httpStatus: 503 },
  ERR_SHARDHEAP_QUEUE_FULL: { error: "ShardError", message: "too many calls pending from one thread to one shard (maxPendingCalls): the call was not sent", exitCode: 1, httpStatus: 503 },
  ERR_SHARDHEAP_CALL_MAY_HAVE_RUN: { error: "ShardError", message: "the call was cut off after its shard took it: its task may have run, wholly or in part; not safe to retry blindly", exitCode: 1, httpStatus: 503 },
  ERR_SHARDHEAP_NO_MAIN_SHARD: { error: "ShardError", message: "the main thread has no shard of its own: Smp.start({ mainShard: true }) gives it one (smp.memory)", exitCode: 1, httpStatus: 500 },
  ERR_SHARDHEAP_NOT_IN_SHARD: { error: "ShardError", message: "shard-only code ran on a thread that is no shard's (shardContext() on the main thread)", exitCode: 1, httpStatus: 500 },
  ERR_SHARDHEAP_INVALID_VALUE: { error: "InvalidValueError", message: "a value that does not read as what its field takes", exitCode: 2, httpStatus: 400 },
  ERR_SHARDHEAP_USAGE: { error: "UsageError", message: "a command or request that is not well formed", exitCode: 2, httpStatus: 400 },
  ERR_SHARDHEAP_UNAUTHORIZED: { error: "HttpError", message: "missing or wrong bearer token", exitCode: 1, httpStatus: 401 },
  ERR_SHARDHEAP_FORBIDDEN: { error: "HttpError", message: "not allowed by the server's options", exitCode: 1, httpStatus: 403 },
  ERR_SHARDHEAP_NOT_FOUND: { error: "HttpError", message: "no such endpoint or shard", exitCode: 1, httpStatus: 404 },
  ERR_SHARDHEAP_METHOD_NOT_ALLOWED: { error: "HttpError", message: "method not allowed on this endpoint", exitCode: 1, httpStatus: 405 },
  ERR_SHARDHEAP_BUSY: { error: "HttpError", message: "the server is at its limit for this endpoint; retry later", exitCode: 1, httpStatus: 503 },
  ERR_SHARDHEAP_NO_BASELINE: { error: "HttpError", message: "no baseline is set for the shard: POST /v1/heapprof/baseline first", exitCode: 1, httpStatus: 409 },
  ERR_SHARDHEAP_BASELINES_FULL: { error: "HttpError", message: "the server holds as many baselines as it keeps: DELETE /v1/heapprof/baseline?name=NAME one first", exitCode: 1, httpStatus: 409 },
} as const satisfies Record<string, ErrorRow>;

export type ErrorCode = keyof typeof ERROR_TABLE;

/**
 * Node's system errors (ENOENT, EISDIR, EACCES, ...: a `code` and a
 * `syscall`): a file the command was given could not be read or written,
 * which is wrong input, so exit 2 with its one-line message.
 */
export const SYSTEM_ERROR_ROW: ErrorRow = { error: "Error", message: "a file could not be read or written", exitCode: 2, httpStatus: 500 };

/** Anything else: a bug, reported with its stack. */
export const UNEXPECTED_ERROR_ROW: ErrorRow = { error: "Error", message: "an unexpected error", exitCode: 1, httpStatus: 500 };

/** The row of whatever was thrown: by its `code`, else a system error's row, else the unexpected row. */
export function errorRow(e: unknown): ErrorRow {
  const code = typeof e === "object" && e !== null ? (e as { code?: unknown }).code : undefined;
  if (typeof code !== "string") return UNEXPECTED_ERROR_ROW;
  if (Object.hasOwn(ERROR_TABLE, code)) return ERROR_TABLE[code as ErrorCode];
  return typeof (e as { syscall?: unknown }).syscall === "string" ? SYSTEM_ERROR_ROW : UNEXPECTED_ERROR_ROW;
}

export type HeapErrorCode =
  | "ERR_SHARDHEAP"
  | "ERR_SHARDHEAP_OUT_OF_MEMORY"
  | "ERR_SHARDHEAP_INVALID_POINTER"
  | "ERR_SHARDHEAP_FORMAT"
  | "ERR_SHARDHEAP_OWNERSHIP"
  | SharedMapErrorCode;

export type SharedMapErrorCode = "ERR_SHARDHEAP_MAP_HANDLE" | "ERR_SHARDHEAP_MAP_REFERENCE" | "ERR_SHARDHEAP_MAP_IN_USE" | "ERR_SHARDHEAP_MAP_KEY" | "ERR_SHARDHEAP_MAP_FULL";

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

/**
 * A SharedMap refused an operation, nothing changed: a handle that names
 * no live map (ERR_SHARDHEAP_MAP_HANDLE), a reference that is not held
 * (ERR_SHARDHEAP_MAP_REFERENCE: released twice, or never one; the release
 * that would free an entry still in the map is refused this way), a
 * destroy while references are held (ERR_SHARDHEAP_MAP_IN_USE), a string
 * key with a lone surrogate (ERR_SHARDHEAP_MAP_KEY), or a map past its
 * limits (ERR_SHARDHEAP_MAP_FULL).
 */
export class SharedMapError extends HeapError {
  declare readonly code: SharedMapErrorCode;
  constructor(code: SharedMapErrorCode, message: string) {
    super(message, code);
  }
}

/**
 * A value a person or a program gave that does not read as what the field
 * takes: a size, a sample rate, a whole number, a switch (units.ts,
 * parse.ts). A RangeError, as the README promises for bad sizes; the message
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

/** A command line or admin request that is not well formed: an unknown flag or command, a missing value or operand. */
export class UsageError extends Error {
  readonly code = "ERR_SHARDHEAP_USAGE";
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/**
 * An error from a shard: a shard that failed, stopped or is stopping
 * (code ERR_SHARDHEAP_SHARD), a call its shard's death cut off (code
 * ERR_SHARDHEAP_CALL_NOT_STARTED when the shard had not taken it, so it
 * did not run; ERR_SHARDHEAP_CALL_MAY_HAVE_RUN when it had: delivery is at
 * most once, nothing runs twice, but only the first is safe to retry),
 * smp.memory read from a runtime started without mainShard
 * (ERR_SHARDHEAP_NO_MAIN_SHARD; `shard` is the id that region would have),
 * shardContext() outside a shard (ERR_SHARDHEAP_NOT_IN_SHARD, shard -1), or
 * a task's own error carried back with its name, message, code and stack
 * (Smp rebuilds it; its code is the task's, as the README promises), plus the
 * shard id.
 */
export class ShardError extends Error {
  readonly shard: number;
  readonly code: string;
  constructor(shard: number, message: string, options?: { cause?: unknown; code?: string }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.shard = shard;
    this.code = options?.code ?? "ERR_SHARDHEAP_SHARD";
  }
}

export type HttpErrorCode =
  | "ERR_SHARDHEAP_UNAUTHORIZED"
  | "ERR_SHARDHEAP_FORBIDDEN"
  | "ERR_SHARDHEAP_NOT_FOUND"
  | "ERR_SHARDHEAP_METHOD_NOT_ALLOWED"
  | "ERR_SHARDHEAP_BUSY"
  | "ERR_SHARDHEAP_NO_BASELINE"
  | "ERR_SHARDHEAP_BASELINES_FULL";

/** An admin API request refused for a reason only HTTP has (token, permission, route); its status is its code's row. */
export class HttpError extends Error {
  readonly code: HttpErrorCode;
  constructor(code: HttpErrorCode, message: string = ERROR_TABLE[code].message) {
    super(message);
    this.name = new.target.name;
    this.code = code;
  }
}
