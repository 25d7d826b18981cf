/**
 * The one error table (src/errors.ts): every error class has `name` = its
 * class name and a stable `code` with a row, every row has a class, and
 * errorRow reads codes, Node's system errors and everything else as the
 * CLI and the admin server need. Their use of it is in cli.test.ts and
 * admin.test.ts.
 */
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import * as errors from "../src/errors.js";
import {
  ERROR_TABLE,
  HeapError,
  HeapFormatError,
  HeapOwnershipError,
  HttpError,
  InvalidPointerError,
  InvalidValueError,
  OutOfMemoryError,
  SYSTEM_ERROR_ROW,
  ShardError,
  UNEXPECTED_ERROR_ROW,
  UsageError,
  errorRow,
  type ErrorCode,
} from "../src/errors.js";

/** One instance of every class, with every code a class can carry. */
const INSTANCES: Array<Error & { code: string }> = [
  new HeapError("m"),
  new OutOfMemoryError("m", 64, "report"),
  new InvalidPointerError("m", 8),
  new HeapFormatError("m"),
  new HeapOwnershipError("m", 1),
  new ShardError(0, "m"),
  new ShardError(0, "m", { code: "ERR_SHARDHEAP_CALL_NOT_STARTED" }),
  new ShardError(0, "m", { code: "ERR_SHARDHEAP_CALL_MAY_HAVE_RUN" }),
  new ShardError(0, "m", { code: "ERR_SHARDHEAP_QUEUE_FULL" }),
  new InvalidValueError("--memory", "m"),
  new UsageError("m"),
  new HttpError("ERR_SHARDHEAP_UNAUTHORIZED"),
  new HttpError("ERR_SHARDHEAP_FORBIDDEN"),
  new HttpError("ERR_SHARDHEAP_NOT_FOUND"),
  new HttpError("ERR_SHARDHEAP_METHOD_NOT_ALLOWED"),
  new HttpError("ERR_SHARDHEAP_BUSY"),
  new HttpError("ERR_SHARDHEAP_NO_BASELINE"),
];

describe("the error table", () => {
  it("every error class errors.ts exports is among the instances checked here", () => {
    const classes = (Object.values(errors) as unknown[]).filter((v): v is new (...a: never[]) => Error => typeof v === "function" && v.prototype instanceof Error);
    expect(classes.length).toBeGreaterThanOrEqual(9);
    for (const c of classes) expect(INSTANCES.some((e) => e.constructor === c), c.name).toBe(true);
  });

  it("every instance has name = its class name and a code whose row names that class", () => {
    for (const e of INSTANCES) {
      expect(e.name).toBe(e.constructor.name);
      const code = e.code as ErrorCode;
      expect(Object.hasOwn(ERROR_TABLE, code), code).toBe(true);
      expect(ERROR_TABLE[code].error, code).toBe(e.name);
      expect(errorRow(e)).toBe(ERROR_TABLE[code]);
    }
  });

  it("every row has a class, an exit code and an HTTP error status", () => {
    for (const [code, row] of Object.entries(ERROR_TABLE)) {
      expect(INSTANCES.some((e) => e.code === code), code).toBe(true);
      expect([1, 2], code).toContain(row.exitCode);
      expect(row.httpStatus, code).toBeGreaterThanOrEqual(400);
      expect(row.httpStatus, code).toBeLessThan(600);
      expect(row.message.length, code).toBeGreaterThan(0);
    }
  });

  it("maps what DESIGN fixes: bad input exits 2 and answers 400, a missing token 401, an unknown shard 404", () => {
    expect(errorRow(new InvalidValueError("rate", "m"))).toMatchObject({ exitCode: 2, httpStatus: 400 });
    expect(errorRow(new UsageError("m"))).toMatchObject({ exitCode: 2, httpStatus: 400 });
    expect(errorRow(new HeapFormatError("m")).exitCode).toBe(2);
    expect(errorRow(new HttpError("ERR_SHARDHEAP_UNAUTHORIZED")).httpStatus).toBe(401);
    expect(errorRow(new HttpError("ERR_SHARDHEAP_NOT_FOUND")).httpStatus).toBe(404);
    expect(errorRow(new HeapOwnershipError("m", 0))).toMatchObject({ exitCode: 1, httpStatus: 500 });
  });

  it("a bad value is still the RangeError DESIGN promises, and names its field", () => {
    const e = new InvalidValueError("options.memoryPerShard", "options.memoryPerShard must be ...");
    expect(e).toBeInstanceOf(RangeError);
    expect(e.field).toBe("options.memoryPerShard");
  });

  it("an HttpError without a message takes its row's", () => {
    expect(new HttpError("ERR_SHARDHEAP_UNAUTHORIZED").message).toBe("missing or wrong bearer token");
    expect(new HttpError("ERR_SHARDHEAP_NOT_FOUND", "no shard 9").message).toBe("no shard 9");
  });

  it("a ShardError carries ERR_SHARDHEAP_SHARD, or the task's own code when it carries a task's error", () => {
    expect(new ShardError(1, "shard 1 failed").code).toBe("ERR_SHARDHEAP_SHARD");
    const task = new ShardError(1, "boom", { code: "E_MY_TASK" });
    expect(task.code).toBe("E_MY_TASK");
    expect(errorRow(task)).toBe(UNEXPECTED_ERROR_ROW);
  });

  it("reads Node's system errors as unreadable input (exit 2), anything else as unexpected (exit 1, 500)", () => {
    const dir = mkdtempSync(join(tmpdir(), "shardheap-errors-"));
    const eisdir = ((): unknown => {
      try {
        return readFileSync(dir);
      } catch (e) {
        return e;
      }
    })();
    expect((eisdir as NodeJS.ErrnoException).code).toBe("EISDIR");
    expect(errorRow(eisdir)).toBe(SYSTEM_ERROR_ROW);
    expect(SYSTEM_ERROR_ROW.exitCode).toBe(2);
    for (const thrown of [new Error("x"), new RangeError("x"), Object.assign(new Error("x"), { code: "ERR_SOMETHING_ELSE" }), "a string", null, undefined, 42]) {
      expect(errorRow(thrown)).toBe(UNEXPECTED_ERROR_ROW);
    }
    expect(UNEXPECTED_ERROR_ROW).toMatchObject({ exitCode: 1, httpStatus: 500 });
  });
});
