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
import { Deserializer, Serializer } from "node:v8";

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

/** `value` encoded for another thread; throws a DataCloneError (a DOMException) when it cannot be cloned. */
export function encodeValue(value: unknown): EncodedValue {
  // Most results are numbers, strings or small arrays of pointers: skip the
  // serializer for primitives, which always clone.
  if (value === null || (typeof value !== "object" && typeof value !== "function" && typeof value !== "symbol")) return { cloned: value };
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
  // releaseBuffer() returns a buffer of its own; transfer only when the view
  // is the whole of a plain ArrayBuffer, so nothing else is detached.
  return buffer instanceof ArrayBuffer && byteOffset === 0 && byteLength === buffer.byteLength ? [buffer] : [];
}
