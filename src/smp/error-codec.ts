/**
 * Errors crossing between threads. A structured clone keeps an error's
 * message and stack and the name of a built-in class, and drops the rest:
 * a RangeError's `code`, InvalidPointerError's `pointer`, every class of
 * shardheap's own. So the sending side turns what was
 * thrown into a ThrownRecord of plain, clone-checked data (value-codec.ts),
 * and the receiving side rebuilds it:
 *   - the class: the nearest one both sides know (the built-in error
 *     classes and every error class src/errors.ts exports), so `instanceof`
 *     works; anything else comes back as the receiver's fallback class with
 *     the original `name`;
 *   - name, message, stack, and every own enumerable field (code, pointer,
 *     report, shard, errno, ...);
 *   - `cause`, AggregateError's `errors`, and any field holding an error,
 *     recursively, at most MAX_DEPTH deep and MAX_ERRORS records in all (a
 *     cause cycle ends there);
 *   - a field that cannot be cloned is dropped and named, with the
 *     DataCloneError's message, in the rebuilt error's `droppedFields`.
 * Encoding never throws and never fails: the worst case is a record saying
 * what could not be sent.
 */
import * as shardheapErrors from "../errors.js";
import { cloneRefusal } from "./value-codec.js";

/** What was thrown, as plain data that clones. */
export type ThrownRecord =
  | { readonly kind: "error"; readonly error: ErrorRecord }
  /** A thrown value that is not an error (`throw 42`), cloned as is. */
  | { readonly kind: "value"; readonly value: unknown }
  /** A thrown value that is not an error and cannot be cloned: what it was, and why it stayed behind. */
  | { readonly kind: "uncloneable"; readonly description: string; readonly why: string };

export interface ErrorRecord {
  /** The class to rebuild: a built-in error class or one of src/errors.ts, by name; "Error" for anything else. */
  readonly className: string;
  readonly name: string;
  readonly message: string;
  readonly stack: string | undefined;
  /** Own enumerable fields, each a plain value or a nested error. */
  readonly fields: ReadonlyArray<readonly [key: string, value: FieldRecord]>;
  readonly cause?: FieldRecord;
  /** "field: why" for every field that could not be cloned. */
  readonly dropped: readonly string[];
}

/** One field's value: cloned as is, a nested error, or an array holding errors (AggregateError's `errors`). */
export type FieldRecord =
  | { readonly kind: "value"; readonly value: unknown }
  | { readonly kind: "error"; readonly error: ErrorRecord }
  | { readonly kind: "array"; readonly items: readonly FieldRecord[] };

/** How deep causes (and errors inside fields) are followed. */
export const MAX_DEPTH = 8;
/** How many error records one thrown value may expand to (an AggregateError of AggregateErrors stays bounded). */
export const MAX_ERRORS = 256;

type ErrorClass = new (...args: never[]) => Error;

/**
 * The classes both sides can rebuild, most derived first, so a record names
 * the nearest one. shardheap's own come from src/errors.ts, whatever it
 * exports, so a class added there needs no change here.
 */
const KNOWN_CLASSES: ReadonlyArray<readonly [string, ErrorClass]> = (() => {
  const own = Object.entries(shardheapErrors as Record<string, unknown>).filter(
    (entry): entry is [string, ErrorClass] => typeof entry[1] === "function" && entry[1].prototype instanceof Error,
  );
  const builtIn: Array<[string, ErrorClass]> = [
    ["AggregateError", AggregateError],
    ["TypeError", TypeError],
    ["RangeError", RangeError],
    ["SyntaxError", SyntaxError],
    ["ReferenceError", ReferenceError],
    ["EvalError", EvalError],
    ["URIError", URIError],
  ];
  const depth = (c: ErrorClass): number => {
    let n = 0;
    for (let p: unknown = c.prototype; p !== null && p !== undefined; p = Object.getPrototypeOf(p)) n++;
    return n;
  };
  return [...own, ...builtIn].sort((a, b) => depth(b[1]) - depth(a[1]));
})();
const CLASS_BY_NAME = new Map<string, ErrorClass>(KNOWN_CLASSES);

/** Fields the record carries on their own lines, not among `fields`. */
const STRUCTURAL_FIELDS = new Set(["name", "message", "stack", "cause"]);

/** What was thrown (any value), as a record for another thread. Never throws. */
export function encodeThrown(thrown: unknown): ThrownRecord {
  if (thrown instanceof Error) return { kind: "error", error: encodeError(thrown) };
  const why = cloneRefusal(thrown);
  if (why === undefined) return { kind: "value", value: thrown };
  return { kind: "uncloneable", description: describe(thrown), why };
}

/** An error as a record for another thread. Never throws. */
export function encodeError(e: Error): ErrorRecord {
  return encodeNested(e, 0, { records: 0 });
}

/**
 * The error a record stands for, on this thread. `fallback` is the class
 * for an error whose own class this side does not know (Smp uses
 * ShardError, so `instanceof ShardError` tells a shard's error); errors
 * nested in it (causes, fields) fall back to Error. The fallback's
 * constructor is not run: the record's fields are set as they were.
 */
export function decodeError(record: ErrorRecord, fallback: ErrorClass = Error): Error {
  const cls = CLASS_BY_NAME.get(record.className) ?? fallback;
  // A real Error (stack slot, isNativeError) whose prototype is `cls`:
  // shardheap's constructors take different arguments and would recompute
  // fields the record already carries.
  const error = Reflect.construct(Error, [record.message], cls) as Error;
  if (error.name !== record.name) setField(error, "name", record.name, true);
  setField(error, "stack", record.stack ?? `${record.name}: ${record.message}`, false);
  for (const [key, value] of record.fields) setField(error, key, decodeField(value), true);
  if (record.cause !== undefined) setField(error, "cause", decodeField(record.cause), false);
  if (record.dropped.length > 0) setField(error, "droppedFields", [...record.dropped], true);
  return error;
}

/** Error records made so far for one thrown value (bounded by MAX_ERRORS). */
interface Budget {
  records: number;
}

/** `e` as a record; `depth` counts the errors it is nested in. */
function encodeNested(e: Error, depth: number, budget: Budget): ErrorRecord {
  budget.records++;
  const className = KNOWN_CLASSES.find(([, cls]) => e instanceof cls)?.[0] ?? "Error";
  const dropped: string[] = [];
  const read = (key: string): unknown => {
    try {
      return (e as unknown as Record<string, unknown>)[key];
    } catch (x) {
      dropped.push(`${key}: reading it threw ${describe(x)}`);
      return undefined;
    }
  };
  const text = (key: string, fallback: string): string => {
    const v = read(key);
    return typeof v === "string" ? v : v === undefined ? fallback : describe(v);
  };
  const stack = read("stack");
  // Own enumerable fields, plus `code` and `errors`, which some classes keep
  // on the prototype or as non-enumerable properties (DOMException.code,
  // AggregateError.errors).
  const keys = new Set(Object.keys(e));
  for (const key of ["code", "errors"]) if (key in e) keys.add(key);
  const fields: Array<readonly [string, FieldRecord]> = [];
  for (const key of keys) {
    if (STRUCTURAL_FIELDS.has(key)) continue;
    const field = encodeField(key, read(key), depth + 1, budget, dropped);
    if (field !== undefined) fields.push([key, field]);
  }
  const cause = "cause" in e ? encodeField("cause", read("cause"), depth + 1, budget, dropped) : undefined;
  return {
    className,
    name: text("name", "Error"),
    message: text("message", ""),
    stack: typeof stack === "string" ? stack : undefined,
    fields,
    ...(cause === undefined ? {} : { cause }),
    dropped,
  };
}

/** One field's value for the record, or undefined (and a note in `dropped`) when it cannot go. */
function encodeField(key: string, value: unknown, depth: number, budget: Budget, dropped: string[]): FieldRecord | undefined {
  if (value instanceof Error) {
    if (depth > MAX_DEPTH) dropped.push(`${key}: nested more than ${MAX_DEPTH} errors deep`);
    else if (budget.records >= MAX_ERRORS) dropped.push(`${key}: more than ${MAX_ERRORS} errors in one thrown value`);
    else return { kind: "error", error: encodeNested(value, depth, budget) };
    return undefined;
  }
  if (Array.isArray(value) && value.some((v) => v instanceof Error)) {
    const items: FieldRecord[] = [];
    for (let i = 0; i < value.length; i++) {
      if (budget.records >= MAX_ERRORS) {
        dropped.push(`${key}[${i}..${value.length - 1}]: more than ${MAX_ERRORS} errors in one thrown value`);
        break;
      }
      // An item that cannot go stays as a hole, so the others keep their index.
      items.push(encodeField(`${key}[${i}]`, value[i], depth, budget, dropped) ?? { kind: "value", value: undefined });
    }
    return { kind: "array", items };
  }
  const why = cloneRefusal(value);
  if (why === undefined) return { kind: "value", value };
  dropped.push(`${key}: ${why}`);
  return undefined;
}

function decodeField(field: FieldRecord): unknown {
  switch (field.kind) {
    case "value":
      return field.value;
    case "error":
      return decodeError(field.error);
    case "array":
      return field.items.map(decodeField);
  }
}

/** Set a field as the original had it: own, writable; enumerable as class fields are, hidden as `stack`/`cause` are. */
function setField(target: object, key: string, value: unknown, enumerable: boolean): void {
  Object.defineProperty(target, key, { value, enumerable, writable: true, configurable: true });
}

/** A short description of a value for a message: never throws, never long. */
function describe(value: unknown): string {
  let s: string;
  try {
    s = typeof value === "function" ? `function ${value.name || "(anonymous)"}` : typeof value === "symbol" ? value.toString() : String(value);
  } catch {
    s = Object.prototype.toString.call(value);
  }
  return s.length > 200 ? `${s.slice(0, 200)}...` : s;
}
