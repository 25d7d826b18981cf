/**
 * V8's structured-clone wire format for values (the second of wire-codec's
 * two encodings): the same format and the same refusals as postMessage, so
 * a value decodes to what postMessage would have delivered, and a value it
 * cannot carry throws a DataCloneError *here*, on the sending side, where
 * the caller can turn it into an answer.
 *
 * A value that refers to a SharedArrayBuffer (the heap's buffer, a view of
 * it from heap.bytes()) must arrive *shared*, not copied, and Node's
 * v8.Deserializer cannot resolve SharedArrayBuffer ids ("Unable to
 * deserialize cloned data", Node 20): serializeValue reports such a value
 * (undefined) once the whole value has been checked, and the caller sends
 * it through postMessage's own structured clone (outgoing.ts, the side
 * path).
 */
import { Deserializer, Serializer } from "node:v8";

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
 * `value` in V8's wire format, or undefined when it holds shared memory
 * (then it clones, but only postMessage can carry it). Throws a
 * DataCloneError (a DOMException) when it cannot be cloned at all.
 */
export function serializeValue(value: unknown): Uint8Array | undefined {
  const serializer = new CheckingSerializer();
  serializer.writeHeader();
  serializer.writeValue(value);
  const bytes = serializer.releaseBuffer();
  return serializer.sharesMemory ? undefined : bytes;
}

/** The value serializeValue's bytes stand for, on the receiving thread. */
export function deserializeValue(bytes: Uint8Array): unknown {
  const deserializer = new Deserializer(bytes);
  deserializer.readHeader();
  return deserializer.readValue();
}

/** Why `value` cannot be structured-cloned (the DataCloneError's message), or undefined when it can. */
export function cloneRefusal(value: unknown): string | undefined {
  try {
    serializeValue(value);
    return undefined;
  } catch (e) {
    return e instanceof Error ? e.message : String(e);
  }
}
