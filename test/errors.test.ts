/**
 * The one error table (src/errors.ts): every error class has `name` = its
 * class name and a stable `code` with a row, every row has a class, and
 * errorRow reads codes, Node's system errors and everything else as the
 * CLI and the admin server need; the docs' table of codes (the one page of
 * README.md and docs/ that has it: docs/reference/errors.md) lists every
 * row as it is. Their use of it is in cli.test.ts and admin.test.ts;
 * SharedHeap.create's and attach's refusals, each coded, are here.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import * as errors from "../src/errors.js";
import { docPages } from "./doc-pages.js";
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
  SharedMapError,
  ShardError,
  UNEXPECTED_ERROR_ROW,
  UsageError,
  errorRow,
  type ErrorCode,
} from "../src/errors.js";
import { SharedHeap, Smp } from "../src/index.js";

/** One instance of every class, with every code a class can carry. */
const INSTANCES: Array<Error & { code: string }> = [
  new HeapError("m"),
  new OutOfMemoryError("m", 64, "report"),
  new InvalidPointerError("m", 8),
  new HeapFormatError("m"),
  new HeapOwnershipError("m", 1),
  new SharedMapError("ERR_SHARDHEAP_MAP_HANDLE", "m"),
  new SharedMapError("ERR_SHARDHEAP_MAP_REFERENCE", "m"),
  new SharedMapError("ERR_SHARDHEAP_MAP_IN_USE", "m"),
  new SharedMapError("ERR_SHARDHEAP_MAP_KEY", "m"),
  new SharedMapError("ERR_SHARDHEAP_MAP_FULL", "m"),
  new ShardError(0, "m"),
  new ShardError(0, "m", { code: "ERR_SHARDHEAP_CALL_NOT_STARTED" }),
  new ShardError(0, "m", { code: "ERR_SHARDHEAP_CALL_MAY_HAVE_RUN" }),
  new ShardError(0, "m", { code: "ERR_SHARDHEAP_QUEUE_FULL" }),
  new ShardError(0, "m", { code: "ERR_SHARDHEAP_NO_MAIN_SHARD" }),
  new ShardError(-1, "m", { code: "ERR_SHARDHEAP_NOT_IN_SHARD" }),
  new InvalidValueError("--memory", "m"),
  new UsageError("m"),
  new HttpError("ERR_SHARDHEAP_UNAUTHORIZED"),
  new HttpError("ERR_SHARDHEAP_FORBIDDEN"),
  new HttpError("ERR_SHARDHEAP_NOT_FOUND"),
  new HttpError("ERR_SHARDHEAP_METHOD_NOT_ALLOWED"),
  new HttpError("ERR_SHARDHEAP_BUSY"),
  new HttpError("ERR_SHARDHEAP_NO_BASELINE"),
  new HttpError("ERR_SHARDHEAP_BASELINES_FULL"),
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

  it("maps what the docs fix: bad input exits 2 and answers 400, a missing token 401, an unknown shard 404", () => {
    expect(errorRow(new InvalidValueError("rate", "m"))).toMatchObject({ exitCode: 2, httpStatus: 400 });
    expect(errorRow(new UsageError("m"))).toMatchObject({ exitCode: 2, httpStatus: 400 });
    expect(errorRow(new HeapFormatError("m")).exitCode).toBe(2);
    expect(errorRow(new HttpError("ERR_SHARDHEAP_UNAUTHORIZED")).httpStatus).toBe(401);
    expect(errorRow(new HttpError("ERR_SHARDHEAP_NOT_FOUND")).httpStatus).toBe(404);
    expect(errorRow(new HeapOwnershipError("m", 0))).toMatchObject({ exitCode: 1, httpStatus: 500 });
  });

  it("a bad value is still the RangeError the docs promise, and names its field", () => {
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

describe("the docs' table of codes", () => {
  /** Its rows: each code (`_X` short for `ERR_SHARDHEAP_X`) with the exit code and HTTP status beside it. */
  function readmeRows(): Map<string, { exitCode: number; httpStatus: number }> {
    const HEADER = "| code | exit | HTTP |";
    const pages = docPages().filter((p) => p.text.includes(HEADER));
    expect(pages.map((p) => p.path)).toEqual(["docs/reference/errors.md"]); // one table, where the map of the docs sends readers
    const readme = pages[0]!.text;
    const start = readme.indexOf(HEADER);
    expect(start).toBeGreaterThan(0);
    const lines = readme.slice(start).split("\n");
    const rows = new Map<string, { exitCode: number; httpStatus: number }>();
    for (const line of lines.slice(2)) {
      if (!line.startsWith("|")) break;
      const [codes, exit, http] = line.split("|").slice(1, 4).map((c) => c.trim()) as [string, string, string];
      const names = [...codes.matchAll(/`(ERR_SHARDHEAP\w*|_\w+)`/g)].map((m) => (m[1]!.startsWith("_") ? `ERR_SHARDHEAP${m[1]}` : m[1]!));
      const statuses = http.split(",").map((h) => Number(h.trim()));
      names.forEach((name, i) => {
        expect(rows.has(name), `${name} is in two rows`).toBe(false);
        rows.set(name, { exitCode: Number(exit), httpStatus: statuses.length === 1 ? statuses[0]! : statuses[i]! });
      });
    }
    return rows;
  }

  it("lists every code of src/errors.ts with its exit code and HTTP status, and no code that is not there", () => {
    const rows = readmeRows();
    for (const [code, row] of Object.entries(ERROR_TABLE)) {
      expect(rows.get(code), `${code} in the docs' table of codes`).toEqual({ exitCode: row.exitCode, httpStatus: row.httpStatus });
    }
    expect([...rows.keys()].filter((code) => !Object.hasOwn(ERROR_TABLE, code))).toEqual([]);
  });
});

describe("SharedHeap.create and attach refuse with coded errors", () => {
  const thrown = (f: () => unknown): Error & { code?: string; field?: string } => {
    try {
      f();
    } catch (e) {
      return e as Error;
    }
    throw new Error("did not throw");
  };

  it("a heap past 4 GiB is an InvalidValueError naming the field, as Smp.start's is", async () => {
    for (const o of [{ shards: 64, shardBytes: "64MiB" }, { shards: 1, shardBytes: "5GiB" }, { shards: 1024, shardBytes: 4 * 2 ** 20 + 1 }]) {
      const e = thrown(() => SharedHeap.create(o));
      expect(e, JSON.stringify(o)).toBeInstanceOf(InvalidValueError);
      expect(e).toMatchObject({ code: "ERR_SHARDHEAP_INVALID_VALUE", field: "SharedHeap.create: options.shardBytes" });
      expect(e.message).toMatch(/^SharedHeap.create: options.shardBytes: .* a heap holds at most 4294967296 \(4 GiB\)$/);
    }
    const smp = await Smp.start({ shards: 64, memoryPerShard: "64MiB" }).then(
      async (s) => (await s.stop(), undefined),
      (e: unknown) => e,
    );
    expect(smp).toBeInstanceOf(InvalidValueError);
    expect(smp).toMatchObject({ code: "ERR_SHARDHEAP_INVALID_VALUE" });
  });

  it("every other bad option has a code too; options that are not an object are a TypeError, as in Smp.start", () => {
    for (const o of [{}, { shards: 1 }, { shards: 0, shardBytes: "1MiB" }, { shards: 1.5, shardBytes: "1MiB" }, { shards: 1, shardBytes: -1 }, { shards: 1, shardBytes: "64K" }, { shards: 1, shardBytes: "1.5" }, { shards: 1, shardBytes: 2 ** 53 }, { shards: "x", shardBytes: "1MiB" }, { shards: 1, shardBytes: {} }]) {
      const e = thrown(() => SharedHeap.create(o as unknown as Parameters<typeof SharedHeap.create>[0]));
      expect(e, JSON.stringify(o)).toBeInstanceOf(InvalidValueError);
      expect(e.code, JSON.stringify(o)).toBe("ERR_SHARDHEAP_INVALID_VALUE");
      expect(e.field, JSON.stringify(o)).toMatch(/^SharedHeap.create: options\.(shards|shardBytes)$/);
    }
    for (const o of [null, undefined, 5, "big"]) expect(() => SharedHeap.create(o as unknown as Parameters<typeof SharedHeap.create>[0])).toThrow(TypeError);
  });

  it("attach of anything but a heap is a HeapFormatError", () => {
    const heap = SharedHeap.create({ shards: 1, shardBytes: "128K" });
    const notHeaps: unknown[] = [
      null,
      undefined,
      42,
      "heap",
      { buffer: heap.buffer },
      new ArrayBuffer(4096),
      new (globalThis as unknown as { WebAssembly: { Memory: new (o: { initial: number }) => object } }).WebAssembly.Memory({ initial: 1 }), // not shared
      new SharedArrayBuffer(8, { maxByteLength: 64 }),
      new SharedArrayBuffer(4096),
      heap.buffer.slice(0, 4096),
    ];
    for (const x of notHeaps) {
      const e = thrown(() => SharedHeap.attach(x as SharedArrayBuffer));
      expect(e, String(x)).toBeInstanceOf(HeapFormatError);
      expect(e.code).toBe("ERR_SHARDHEAP_FORMAT");
    }
  });

  // A process that cannot get the heap's memory (here: its address space
  // capped at 1.9 GiB, a 3 GiB heap asked for) was a bare RangeError,
  // "Array buffer allocation failed".
  it.runIf(process.platform === "linux")("a heap the process cannot get memory for is an OutOfMemoryError", () => {
    const index = new URL("../dist/index.js", import.meta.url).href;
    const script = `const { SharedHeap } = await import(${JSON.stringify(index)});
      try { SharedHeap.create({ shards: 3, shardBytes: "1GiB" }); console.log("created"); }
      catch (e) { console.log(JSON.stringify({ name: e.name, code: e.code, requestedBytes: e.requestedBytes, message: e.message })); }`;
    const r = spawnSync("sh", ["-c", 'ulimit -v 2000000 && exec "$0" --input-type=module -e "$1"', process.execPath, script], { encoding: "utf8", timeout: 60_000 });
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({
      name: "OutOfMemoryError",
      code: "ERR_SHARDHEAP_OUT_OF_MEMORY",
      requestedBytes: 3 * 2 ** 30 + 4096,
      message: expect.stringMatching(/^SharedHeap.create: could not get 3221229568 bytes for the heap \(3 shards of 1073741824 bytes\)/),
    });
  });
});
