/**
 * The wire format's vocabulary (the encoding itself: wire-codec.ts): the
 * tag byte that starts every value, the typed-array kinds, the bytes the
 * codec reads and writes (WireBytes: a ring of the messaging buffer, an
 * overflow chunk, a scratch buffer), and the signal for a value that must
 * travel shared. The encoder (wire-writer.ts) and the decoder
 * (wire-reader.ts) both read it; the object shapes are wire-shapes.ts's.
 *
 * A value is a tag byte, then (lengths and ids as little-endian uint32):
 *   UNDEFINED NULL FALSE TRUE   nothing more
 *   INT32 / FLOAT64             4 / 8 bytes
 *   LATIN1 / UTF16              length in characters, then 1 / 2 bytes each
 *   ARRAY                       length, then that many values
 *   OBJECT                      key count, the keys (strings), the values
 *   SHAPE_DEF                   shape id, key count, the keys, the values
 *   SHAPED                      shape id, the values in the shape's order
 *   TYPED                       kind byte (TYPED_ARRAYS), byte length, bytes
 *   V8                          byte length, V8's serializer output (top level only)
 */

// Tags. Only the plain encoding's tags appear inside a value; TAG_V8 only
// at the top.
export const TAG_UNDEFINED = 0;
export const TAG_NULL = 1;
export const TAG_FALSE = 2;
export const TAG_TRUE = 3;
export const TAG_INT32 = 4;
export const TAG_FLOAT64 = 5;
export const TAG_LATIN1 = 6;
export const TAG_UTF16 = 7;
export const TAG_ARRAY = 8;
export const TAG_OBJECT = 9;
export const TAG_TYPED = 10;
export const TAG_V8 = 11;
/** An object whose keys are a shape the receiver knows: the shape id, then the values. */
export const TAG_SHAPED = 12;
/** A new shape (id, key count, keys), then an object of that shape's values. */
export const TAG_SHAPE_DEF = 13;

/** Thrown for a value holding a SharedArrayBuffer: send the writer's sideValue by postMessage. */
export const SHARED_MEMORY: unique symbol = Symbol("shardheap.wire.sharedMemory");

/** The typed arrays the plain encoding carries; a TYPED value names one by its index here. */
export const TYPED_ARRAYS = [
  Int8Array,
  Uint8Array,
  Uint8ClampedArray,
  Int16Array,
  Uint16Array,
  Int32Array,
  Uint32Array,
  Float32Array,
  Float64Array,
  BigInt64Array,
  BigUint64Array,
] as const;
export type TypedArrayClass = (typeof TYPED_ARRAYS)[number];
/** A typed array's prototype -> its index in TYPED_ARRAYS. */
export const TYPED_INDEX = new Map<object, number>(TYPED_ARRAYS.map((c, i) => [c.prototype, i]));

/** Bytes with the three views the codec uses. */
export class WireBytes {
  readonly u8: Uint8Array;
  readonly dv: DataView;
  readonly buf: Buffer;
  /** Whole words, for the 4-aligned record headers (records.ts). */
  readonly i32: Int32Array;
  constructor(readonly buffer: ArrayBuffer | SharedArrayBuffer) {
    this.u8 = new Uint8Array(buffer);
    this.dv = new DataView(buffer);
    this.buf = Buffer.from(buffer);
    this.i32 = new Int32Array(buffer, 0, buffer.byteLength >>> 2);
  }
}

/** o[key] = value, "__proto__" included (a plain assignment to it would set the prototype). */
export function defineField(o: object, key: string, value: unknown): void {
  if (key === "__proto__") Object.defineProperty(o, key, { value, enumerable: true, writable: true, configurable: true });
  else (o as Record<string, unknown>)[key] = value;
}
