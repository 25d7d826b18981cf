/**
 * What crosses between the main thread and a shard, on
 * real worker threads: a result or thrown value that cannot be cloned
 * rejects that call, naming the task, and the shard lives on with its
 * module state; an error keeps every own field, its cause chain and its
 * class; shared memory stays shared. The codecs themselves are checked
 * without threads too (src/smp/value-codec.ts, error-codec.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HeapError, HeapOwnershipError, InvalidPointerError, ShardError, Smp } from "../../dist/index.js";
import { decodeError, encodeThrown, MAX_DEPTH, MAX_ERRORS, type ErrorRecord } from "../../dist/smp/error-codec.js";
import { SHARED_MEMORY, ShapeCache, ShapeTable, WireBytes, WireReader, WireWriter } from "../../dist/smp/wire-codec.js";

const tasks = new URL("../fixtures/shard-tasks.mjs", import.meta.url);
let smp: Smp;
const shardErrors: ShardError[] = [];
beforeAll(async () => {
  smp = await Smp.start({ shards: 2, memoryPerShard: "4MiB", module: tasks });
  smp.on("error", (e) => shardErrors.push(e));
});
afterAll(async () => {
  await smp?.stop();
});

const rejection = (p: Promise<unknown>): Promise<unknown> => p.then(
  (v) => {
    throw new Error(`expected a rejection, got ${String(v)}`);
  },
  (e: unknown) => e,
);

describe("results and thrown values that cannot be cloned", () => {
  it("a function as the result rejects that call, naming the task and DataCloneError's reason; the shard and its module state live on", async () => {
    const before = await smp.submitTo<number>(0, "countCalls");
    for (const deep of [false, true]) {
      const error = await rejection(smp.submitTo(0, "returnsFunction", deep));
      expect(error).toBeInstanceOf(ShardError);
      expect((error as ShardError).shard).toBe(0);
      expect((error as Error).message).toMatch(/^shard 0: task "returnsFunction" returned a value that cannot be sent between threads: .*could not be cloned/);
      expect(((error as Error).cause as Error).name).toBe("DataCloneError");
    }
    // Same thread, same module instance: the counter went on.
    expect(await smp.submitTo<number>(0, "countCalls")).toBe(before + 1);
    expect(shardErrors).toEqual([]);
  });

  it("values that only look like plain data: refused cleanly or delivered as postMessage would", async () => {
    for (const kind of ["array with a function field", "proxy"]) {
      await expect(smp.submitTo(0, "returnsTricky", kind), kind).rejects.toThrow(/returned a value that cannot be sent between threads/);
    }
    // A getter is read once, on the shard: the value it gave then is what arrives.
    expect(await smp.submitTo(0, "returnsTricky", "getter")).toEqual({ value: 1 });
    const cycle = await smp.submitTo<{ n: number; self: unknown }>(0, "returnsTricky", "cycle");
    expect(cycle.self).toBe(cycle);
    expect(await smp.submitTo(0, "echo", "alive")).toBe("alive");
    expect(shardErrors).toEqual([]);
  });

  it("a thrown function rejects with a clear ShardError; a thrown plain value arrives as itself", async () => {
    const error = await rejection(smp.submitTo(1, "throwsValue", false));
    expect(error).toBeInstanceOf(ShardError);
    expect((error as Error).message).toMatch(/^shard 1: task "throwsValue" threw a value that cannot be sent between threads \(function notAnError\): .*could not be cloned/);
    expect(await rejection(smp.submitTo(1, "throwsValue", true))).toEqual({ code: 7, reason: "plain object" });
    expect(await smp.submitTo(1, "echo", "still here")).toBe("still here");
    expect(shardErrors).toEqual([]);
  });

  it("an argument that cannot be cloned is refused at the call, before anything is sent", async () => {
    const error = await rejection(smp.submitTo(0, "echo", { f: () => 1 }));
    expect(error).toBeInstanceOf(TypeError);
    expect((error as Error).message).toMatch(/^submitTo\(0, "echo"\): arg cannot be sent to another thread: .*could not be cloned/);
    await expect(smp.invokeOnAll("echo", Symbol("s"))).rejects.toThrow(/^invokeOnAll\("echo"\): arg cannot be sent/);
  });
});

describe("errors keep every field across the hop", () => {
  it("own fields, code, cause chain (recursively), class where known; uncloneable fields dropped with a note", async () => {
    const e = (await rejection(smp.submitTo(1, "throwsRich"))) as RangeError & Record<string, unknown>;
    expect(e).toBeInstanceOf(RangeError);
    expect(e.message).toBe("rich");
    expect(e.code).toBe("ERR_RICH");
    expect(e.detail).toEqual({ n: 1, list: [1, 2] });
    expect(e.shardSeen).toBe(1);
    expect(e.shard).toBe(1);
    expect(e.inner).toBeInstanceOf(SyntaxError);
    expect((e.inner as Error).message).toBe("inner");
    expect(e.callback).toBeUndefined();
    expect(e.droppedFields).toEqual([expect.stringMatching(/^callback: .*could not be cloned/)]);
    const middle = e.cause as Error;
    expect(middle).toBeInstanceOf(Error);
    expect(middle.message).toBe("middle");
    const root = middle.cause as TypeError & { code: string };
    expect(root).toBeInstanceOf(TypeError);
    expect(root.code).toBe("ERR_ROOT");
    expect(root.stack).toMatch(/shard-tasks\.mjs/);
    expect(e.stack).toMatch(/^RangeError: rich\n[\s\S]*shard-tasks\.mjs[\s\S]*at <shard 1>/);
  });

  it("shardheap's own classes come back as themselves, fields included", async () => {
    const bad = (await rejection(smp.submitTo(0, "badFree", 12345))) as InvalidPointerError;
    expect(bad).toBeInstanceOf(InvalidPointerError);
    expect(bad).toBeInstanceOf(HeapError);
    expect(bad.name).toBe("InvalidPointerError");
    expect(bad.code).toBe("ERR_SHARDHEAP_INVALID_POINTER");
    expect(bad.pointer).toBe(12345);
    const owned = (await rejection(smp.submitTo(0, "throwsOwnership"))) as HeapOwnershipError;
    expect(owned).toBeInstanceOf(HeapOwnershipError);
    expect(owned.code).toBe("ERR_SHARDHEAP_OWNERSHIP");
    expect(owned.shard).toBe(40); // its own field, not overwritten by the shard it came from
  });

  it("AggregateError keeps its errors, each rebuilt", async () => {
    const e = (await rejection(smp.submitTo(1, "throwsAggregate"))) as AggregateError;
    expect(e).toBeInstanceOf(AggregateError);
    expect(e.message).toBe("several things failed");
    expect(e.errors).toHaveLength(2);
    expect(e.errors[0]).toBeInstanceOf(InvalidPointerError);
    expect((e.errors[0] as InvalidPointerError).pointer).toBe(8);
    expect(e.errors[1]).toBeInstanceOf(RangeError);
  });

  it("a class only the shard knows arrives as ShardError with its name and fields; a cause cycle stays bounded", async () => {
    const custom = (await rejection(smp.submitTo(0, "throwsCustom"))) as ShardError & { limit: number };
    expect(custom).toBeInstanceOf(ShardError);
    expect(custom.name).toBe("QuotaError");
    expect(custom.limit).toBe(10);
    expect(custom.shard).toBe(0);
    let e = (await rejection(smp.submitTo(0, "throwsCycle"))) as Error & { droppedFields?: string[] };
    let depth = 0;
    while (e.cause !== undefined) {
      e = e.cause as Error & { droppedFields?: string[] };
      depth++;
    }
    expect(depth).toBe(MAX_DEPTH);
    expect(e.droppedFields).toEqual([`cause: nested more than ${MAX_DEPTH} errors deep`]);
  });
});

describe("values", () => {
  it("shared memory stays shared; large results and ordinary values arrive intact", async () => {
    const { ptr, view } = await smp.submitTo<{ ptr: number; view: Uint8Array }>(0, "viewOf", { size: 16 });
    view[3] = 99;
    expect(smp.heap.bytes(ptr, 16)[3]).toBe(99);
    await smp.submitTo(0, "freeAll", [ptr]);
    const many = await smp.submitTo<number[]>(1, "allocMany", { count: 50_000, size: 16 });
    expect(many).toHaveLength(50_000);
    expect(await smp.submitTo<number>(1, "freeAll", many)).toBe(50_000);
    const value = { n: 1.5, s: "x", big: 10n, when: new Date(0), map: new Map([[1, "a"]]), bytes: new Uint8Array([1, 2, 3]), nested: [undefined, null] };
    expect(await smp.submitTo(0, "echo", value)).toEqual(value);
  });

  it("the codecs on their own: encoding never throws for errors and stays bounded", () => {
    const writer = new WireWriter();
    const roundTrip = (v: unknown): unknown => {
      writer.intoScratch(0);
      writer.writeValue(v);
      return new WireReader(writer.target).readValue();
    };
    expect(roundTrip({ a: [1, "b"] })).toEqual({ a: [1, "b"] });
    expect(() => roundTrip(() => 1)).toThrow(expect.objectContaining({ name: "DataCloneError" }));
    const thrownBy = (f: () => void): unknown => {
      try {
        f();
      } catch (e) {
        return e;
      }
      return undefined;
    };
    // Shared memory cannot be bytes: the caller sends it by postMessage.
    expect(thrownBy(() => roundTrip({ view: new Uint8Array(new SharedArrayBuffer(8)) }))).toBe(SHARED_MEMORY);
    // A fixed target that is too small: the record so far moves to the writer's scratch and goes on there.
    const fixed = new WireBytes(new ArrayBuffer(16));
    writer.into(fixed, 4, 16, 0);
    fixed.u8.set([1, 2, 3, 4], 0); // the record's first bytes (a header), before `pos`
    writer.writeValue({ text: "a string longer than sixteen bytes" });
    expect(writer.spilled).toBe(true);
    expect(Array.from(writer.target.u8.subarray(0, 4))).toEqual([1, 2, 3, 4]);
    const reader = new WireReader(writer.target);
    reader.pos = 4;
    expect(reader.readValue()).toEqual({ text: "a string longer than sixteen bytes" });
    // An AggregateError of AggregateErrors: the record count stays bounded.
    let wide: Error = new Error("leaf");
    for (let level = 0; level < 4; level++) wide = new AggregateError(Array.from({ length: 20 }, () => wide), `level ${level}`);
    const record = encodeThrown(wide);
    expect(record.kind).toBe("error");
    const count = (r: ErrorRecord): number =>
      1 + r.fields.reduce((n, [, f]) => n + (f.kind === "array" ? f.items.reduce((m, i) => m + (i.kind === "error" ? count(i.error) : 0), 0) : 0), 0);
    expect(count((record as { error: ErrorRecord }).error)).toBeLessThanOrEqual(MAX_ERRORS);
    // A getter that throws costs only that field.
    const hostile = new Error("hostile");
    Object.defineProperty(hostile, "trap", { enumerable: true, get: () => { throw new Error("no"); } });
    const back = decodeError((encodeThrown(hostile) as { error: ErrorRecord }).error) as Error & { droppedFields: string[] };
    expect(back.message).toBe("hostile");
    expect(back.droppedFields).toEqual(["trap: reading it threw Error: no"]);
  });

  it("object shapes: keys sent once per channel, objects rebuilt exactly, a shape of a record never sent is forgotten", () => {
    const table = new ShapeTable();
    const writer = new WireWriter();
    const reader = new WireReader(new WireBytes(new ArrayBuffer(8)));
    reader.shapes = new ShapeCache();
    const send = (v: unknown): number => {
      writer.useShapes(table);
      writer.intoScratch(0);
      writer.writeValue(v);
      writer.keepShapes();
      reader.from(writer.target, 0);
      expect(reader.readValue()).toEqual(v);
      return writer.pos;
    };
    const point = (i: number) => ({ x: i, y: -i, label: `p${i}` });
    const first = send(point(1));
    const again = send(point(2)); // the shape's id instead of its keys
    expect(again).toBeLessThan(first);
    for (let i = 3; i < 10; i++) send(point(i)); // compiled builder from the second use on
    expect(send({ y: 1, x: 2, label: "other order" })).toBeGreaterThan(again); // another key order: another shape
    const odd = JSON.parse('{"__proto__": 1, "a": 2}') as unknown;
    send(odd);
    send(odd); // never compiled: a literal would set the prototype
    reader.from(writer.target, 0);
    const back = reader.readValue() as object;
    expect(Object.keys(back)).toEqual(["__proto__", "a"]);
    expect(Object.getPrototypeOf(back)).toBe(Object.prototype);
    send({ nested: [point(1), { deep: point(2) }] });
    // Encoded but not sent (no keepShapes): its new shape is dropped, so the next record defines it again.
    const before = table.size;
    writer.useShapes(table);
    writer.intoScratch(0);
    writer.writeValue({ brandNew: 1 });
    writer.useShapes(table);
    expect(table.size).toBe(before);
    send({ brandNew: 2 });
    expect(table.size).toBe(before + 1);
  });
});
