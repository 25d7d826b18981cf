/**
 * Values crossing between threads (task arguments and results): turned into
 * a form that cannot fail in transit, on the side that made them. A value
 * that cannot be structured-cloned (a function, a symbol, a class instance
 * holding a native handle) throws a DataCloneError *here*, where the caller
 * can turn it into an answer, instead of inside postMessage, where it used
 * to kill the shard's thread (issue 9, point 5).
 *
 * The encoded form is V8's structured-clone wire format as bytes
 * (`v8.Serializer`), the same format postMessage uses, so a value decodes
 * to what postMessage would have delivered. The bytes are what the shared-
 * memory queues of DESIGN.md's "Messages between shards" carry.
 *
 * One exception: a value that refers to a SharedArrayBuffer (the heap's
 * buffer, a view of it from heap.bytes()) must arrive *shared*, not copied.
 * Node's v8.Deserializer cannot resolve SharedArrayBuffer ids (it answers
 * "Unable to deserialize cloned data", Node 20), so such a value travels as
 * itself (`{ cloned }`), through postMessage's own structured clone: the
 * serialization pass has already proved it clones.
 */
import { types } from "node:util";
import { Deserializer, Serializer } from "node:v8";

const { isProxy } = types;

/** A value ready to cross a thread boundary: wire-format bytes, or (when it holds shared memory) the value itself. */
export type EncodedValue = { readonly bytes: Uint8Array } | { readonly cloned: unknown };

/** Serializer that notes shared memory instead of refusing it, and names its refusals DataCloneError. */
class CheckingSerializer extends Serializer {
  sharesMemory = false;

  // V8 asks for an id for every SharedArrayBuffer it meets (v8.Serializer
  // without this override throws). The id is never resolved: a value with
  // shared memory travels as itself.
  _getSharedArrayBufferId(_buffer: SharedArrayBuffer): number {
    this.sharesMemory = true;
    return 0;
  }

  // The error structuredClone and postMessage throw for the same value.
  _getDataCloneError(message: string): Error {
    return new DOMException(message, "DataCloneError");
  }
}

/**
 * `value` encoded for another thread; throws a DataCloneError (a
 * DOMException) when it cannot be cloned.
 *
 * Fast path: small plain data (primitives, plain objects and arrays of
 * them) always clones, so it travels as itself. The serializer pass costs
 * a small call ~40 us more in situ (median submitTo round trip 130 us
 * against 90 us for a three-field object, 2 cores), for nothing.
 */
export function encodeValue(value: unknown): EncodedValue {
  if (isSmallPlainData(value, { left: PLAIN_DATA_BUDGET })) return { cloned: value };
  const serializer = new CheckingSerializer();
  serializer.writeHeader();
  serializer.writeValue(value);
  const bytes = serializer.releaseBuffer();
  return serializer.sharesMemory ? { cloned: value } : { bytes };
}

/** The value `encoded` stands for, on the receiving thread. */
export function decodeValue(encoded: EncodedValue): unknown {
  if (!("bytes" in encoded)) return encoded.cloned;
  const deserializer = new Deserializer(encoded.bytes);
  deserializer.readHeader();
  return deserializer.readValue();
}

/** Why `value` cannot be structured-cloned (the DataCloneError's message), or undefined when it can. */
export function cloneRefusal(value: unknown): string | undefined {
  try {
    encodeValue(value);
    return undefined;
  } catch (e) {
    return e instanceof Error ? e.message : String(e);
  }
}

/** The buffers an encoded value can hand over instead of copying (postMessage's transfer list). */
export function transferablesOf(encoded: EncodedValue): ArrayBuffer[] {
  if (!("bytes" in encoded)) return [];
  const { buffer, byteOffset, byteLength } = encoded.bytes;
  // Transferring costs more than copying a few bytes (a small call measured
  // ~25 us slower with it); releaseBuffer() returns a buffer of its own, and
  // only a view of the whole of a plain ArrayBuffer is handed over, so
  // nothing else is detached.
  return byteLength >= MIN_TRANSFER_BYTES && buffer instanceof ArrayBuffer && byteOffset === 0 && byteLength === buffer.byteLength ? [buffer] : [];
}

/** Values the fast path inspects at most; larger values take the serializer (and, big enough, a transfer). */
const PLAIN_DATA_BUDGET = 1000;
const MIN_TRANSFER_BYTES = 64 * 1024;

/**
 * True when `value` is certain to structured-clone: primitives other than
 * symbols, and arrays and plain objects of them, with no accessors (a
 * getter runs again inside postMessage and could answer differently), no
 * proxies, and no own fields on arrays beyond their items (postMessage
 * clones those too). At most `budget.left` values are looked at; beyond
 * that (or for a cycle) the answer is false, and the serializer decides.
 */
function isSmallPlainData(value: unknown, budget: { left: number }): boolean {
  if (--budget.left < 0) return false;
  if (value === null) return true;
  if (typeof value !== "object") return typeof value !== "function" && typeof value !== "symbol";
  if (isProxy(value)) return false;
  const proto: unknown = Object.getPrototypeOf(value);
  if (Array.isArray(value)) {
    if (proto !== Array.prototype || value.length > budget.left || Object.keys(value).length !== value.length) return false;
    for (const item of value) if (!isSmallPlainData(item, budget)) return false;
    return true;
  }
  if (proto !== Object.prototype && proto !== null) return false;
  for (const key of Object.keys(value)) {
    const field = Object.getOwnPropertyDescriptor(value, key);
    if (field === undefined || field.get !== undefined || field.set !== undefined || !isSmallPlainData(field.value, budget)) return false;
  }
  return true;
}
