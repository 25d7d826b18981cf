/**
 * Stored values: an object that carries its own length, so one number (the
 * pointer) is enough to hand a string or a byte string to another thread
 * and read it back there. The allocator's size classes round sizes up
 * (100 bytes live in a 112-byte object), so the object's size cannot say
 * how long the value is; these 8 bytes at its start do:
 *
 *   ptr + 0  u32  length: the value's bytes (UTF-8 for a string)
 *   ptr + 4  u32  length ^ STORED_MAGIC: tells a stored value from any
 *                 other object (a pointer to something else is refused
 *                 instead of read as a length)
 *   ptr + 8  the value's bytes (8-aligned, so a Float64Array view fits)
 *
 * Written by ShardAllocator.mallocString / mallocBytes on the owner's
 * thread; read by SharedHeap.storedString / storedBytes / storedView /
 * storedLength from any thread, checked as objectBytes checks (a live
 * object, its header intact, its length inside the object). A stored value
 * is an ordinary object: free(ptr) frees it.
 */
import { InvalidPointerError } from "../errors.js";
import { liveObjectRegion, objectSizeIn, type HeapGeometry } from "./pointers.js";

/** Bytes before a stored value's own bytes. */
export const STORED_HEADER_BYTES = 8;
/** "SHVL": the check word is the length XOR this. */
const STORED_MAGIC = 0x4c564853;

/**
 * Write a stored value's header into the object at `ptr` (its owner's
 * thread, just allocated with room for `length` bytes after it).
 */
export function writeStoredHeader(u32: Uint32Array, ptr: number, length: number): void {
  u32[ptr >>> 2] = length;
  u32[(ptr >>> 2) + 1] = (length ^ STORED_MAGIC) >>> 0;
}

/**
 * The length of the stored value at `ptr`, checked: InvalidPointerError
 * unless `ptr` is a live object (liveObjectRegion's reasons) holding a
 * stored value's header with a length that fits the object.
 */
export function storedLengthIn(g: HeapGeometry, u32: Uint32Array, ptr: number, op: string): number {
  const size = objectSizeIn(liveObjectRegion(g, ptr, op), ptr);
  const length = u32[ptr >>> 2]!;
  if (u32[(ptr >>> 2) + 1] !== (length ^ STORED_MAGIC) >>> 0 || length > size - STORED_HEADER_BYTES) {
    throw new InvalidPointerError(
      `${op}(${ptr}): not a stored value (a live ${size}-byte object without the header mallocString and mallocBytes write)`,
      ptr,
    );
  }
  return length;
}

/** The bytes of `value` as one view (no copy): a Uint8Array over any ArrayBuffer view, ArrayBuffer or SharedArrayBuffer. */
export function bytesOf(value: unknown, op: string): Uint8Array {
  if (value instanceof Uint8Array) return value;
  if (ArrayBuffer.isView(value)) return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  if (value instanceof ArrayBuffer || value instanceof SharedArrayBuffer) return new Uint8Array(value);
  throw new TypeError(`${op}: expected a Uint8Array, Buffer, another ArrayBuffer view, an ArrayBuffer or a SharedArrayBuffer, got ${describe(value)}`);
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (typeof value === "object") return (value as object).constructor?.name ?? "an object";
  return typeof value;
}
