/**
 * The encoder (the format: wire-codec.ts and wire-format.ts): WireWriter
 * writes a value into a fixed target (a ring of the messaging buffer in
 * place, or an overflow chunk: outgoing.ts) and, past that target's
 * limit, moves what it wrote to its own growing scratch buffer and goes
 * on there (spill), so nothing in the value is read twice. It tries the
 * plain encoding first; when that gives up part way it rewinds and hands
 * the value to V8's serializer (value-codec.ts), reading a copy of what
 * the plain pass already read when a visited object has a getter
 * (wire-snapshot.ts). Object keys go through the channel's ShapeTable
 * (wire-shapes.ts). A value holding shared memory throws SHARED_MEMORY,
 * with sideValue set, for the caller to post instead.
 */
import { types } from "node:util";
import { serializeValue } from "./value-codec.js";
import * as format from "./wire-format.js";
import { SHARED_MEMORY, TYPED_INDEX, WireBytes, type TypedArrayClass } from "./wire-format.js";
import { MAX_SHAPE_KEYS, type ShapeTable } from "./wire-shapes.js";
import { snapshotOf } from "./wire-snapshot.js";

// The tags as module-private consts: V8 compiles a switch over a module's
// own consts to a jump table, but loads an imported (or exported) binding
// from its cell at every use (a 14-case switch over a steady run of tags:
// 2.0 ns a dispatch against 6-9.6 ns, node 20.20).
const { TAG_ARRAY, TAG_FALSE, TAG_FLOAT64, TAG_INT32, TAG_LATIN1, TAG_NULL, TAG_OBJECT, TAG_SHAPE_DEF, TAG_SHAPED, TAG_TRUE, TAG_TYPED, TAG_UNDEFINED, TAG_UTF16, TAG_V8 } = format;

const { isProxy, isSharedArrayBuffer, isDataView, isTypedArray } = types;
/** The views' own getters, so no accessor a value defines on a view runs (structuredClone reads the internal slots). */
const typedArrayBuffer = getterOf(Object.getPrototypeOf(Int8Array.prototype) as object, "buffer") as (this: ArrayBufferView) => ArrayBufferLike;
const typedArrayByteOffset = getterOf(Object.getPrototypeOf(Int8Array.prototype) as object, "byteOffset") as (this: ArrayBufferView) => number;
const typedArrayByteLength = getterOf(Object.getPrototypeOf(Int8Array.prototype) as object, "byteLength") as (this: ArrayBufferView) => number;
const dataViewBuffer = getterOf(DataView.prototype, "buffer") as (this: DataView) => ArrayBufferLike;

function getterOf(o: object, key: string): (this: unknown) => unknown {
  return Object.getOwnPropertyDescriptor(o, key)!.get!;
}

/** Nesting the plain encoding follows before handing the value to V8's serializer. */
const MAX_PLAIN_DEPTH = 64;
/** Objects the plain encoding tracks by array scan before switching to a Set. */
const SCAN_LIMIT = 16;
/** Strings up to this length are copied by a loop; longer ones by Buffer's native copies. */
const SHORT_STRING = 24;
const NON_LATIN1 = /[^\x00-\xff]/;

export class WireWriter {
  /** Where the next byte goes. */
  pos = 0;
  /** Where the record being written starts in its target: what spill() takes along. */
  recordStart = 0;
  /** The record left its fixed target for the scratch buffer (spill) since into(). */
  spilled = false;
  /** After SHARED_MEMORY: what to post instead (the value, or the copy snapshotOf made). */
  sideValue: unknown;
  private bytes: WireBytes;
  private limit = 0;
  private growable = false;
  /** Objects (and typed arrays' buffers) the plain pass visited in this value, in order (identity must survive). */
  private seen: object[] = [];
  /** Per visited plain object, its keys and the values read (undefined for arrays and buffers): snapshotOf's input. */
  private seenKeys: Array<string[] | undefined> = [];
  private seenValues: Array<unknown[] | undefined> = [];
  private seenCount = 0;
  private seenSet: Set<object> | undefined;
  /** The plain pass stopped at shared memory: it goes by postMessage, V8's serializer need not read it first. */
  private sawShared = false;
  /** The channel's shapes (undefined: keys go inline), and its size before this record's encoding. */
  private shapes: ShapeTable | undefined;
  private shapesBefore = 0;

  constructor() {
    this.bytes = new WireBytes(new ArrayBuffer(256));
  }

  /**
   * Encode objects with `shapes` (a channel's table) from now on, or with
   * their keys inline. Shapes an encoding adds stay only if keepShapes()
   * is called before the next into() / intoScratch() / useShapes().
   */
  useShapes(shapes: ShapeTable | undefined): void {
    this.dropShapes();
    this.shapes = shapes;
    this.shapesBefore = shapes?.size ?? 0;
  }

  /** The record just encoded was sent: its new shapes are the receiver's now. */
  keepShapes(): void {
    this.shapesBefore = this.shapes?.size ?? 0;
  }

  private dropShapes(): void {
    if (this.shapes !== undefined && this.shapes.size > this.shapesBefore) this.shapes.truncate(this.shapesBefore);
  }

  /**
   * Write into `bytes` from `pos` up to `limit` (exclusive), the record
   * starting at `recordStart`; past `limit` the record so far moves to the
   * scratch buffer and goes on there (spill).
   */
  into(bytes: WireBytes, pos: number, limit: number, recordStart = pos): void {
    this.dropShapes();
    this.bytes = bytes;
    this.pos = pos;
    this.limit = limit;
    this.recordStart = recordStart;
    this.growable = false;
    this.spilled = false;
  }

  /** Write into this writer's own growing scratch buffer, from `pos` (the record starting at 0). */
  intoScratch(pos: number): void {
    this.dropShapes();
    if (this.growable === false) this.bytes = this.scratch;
    this.pos = pos;
    this.limit = this.bytes.u8.length;
    this.recordStart = 0;
    this.growable = true;
    this.spilled = false;
  }

  /**
   * Leave the fixed target: copy the record so far (from recordStart) to
   * the start of the scratch buffer and go on writing there. The encoding
   * goes on where it was, so nothing in the value is read again.
   */
  spill(): void {
    if (this.growable) return;
    const n = this.pos - this.recordStart;
    let scratch = this.scratch;
    if (scratch.u8.length < n * 2) {
      let size = scratch.u8.length * 2;
      while (size < n * 2) size *= 2;
      scratch = this.scratch = new WireBytes(new ArrayBuffer(size));
    }
    scratch.u8.set(this.bytes.u8.subarray(this.recordStart, this.pos), 0);
    this.bytes = scratch;
    this.pos = n;
    this.recordStart = 0;
    this.limit = scratch.u8.length;
    this.growable = true;
    this.spilled = true;
  }

  /** The scratch buffer (valid until the next intoScratch that grows it). */
  get target(): WireBytes {
    return this.bytes;
  }

  private scratch = new WireBytes(new ArrayBuffer(1024));

  /**
   * Encode `value`, reading it once (getters run once). Throws a
   * DataCloneError (a DOMException) for what a structured clone refuses,
   * SHARED_MEMORY for a value holding shared memory (post `sideValue`).
   */
  writeValue(value: unknown): void {
    // Relative to the record: a spill moves it.
    const start = this.pos - this.recordStart;
    const shapes = this.shapes?.size ?? 0;
    let plain: boolean;
    let input = value;
    this.sawShared = false;
    try {
      plain = this.plain(value, 0);
      if (!plain && this.visitedAccessor()) input = snapshotOf(value, this.seen, this.seenKeys, this.seenValues, this.seenCount);
    } finally {
      // Drop the references (no user object is kept alive by the writer).
      for (let i = 0; i < this.seenCount; i++) {
        this.seen[i] = undefined as unknown as object;
        this.seenKeys[i] = undefined;
        this.seenValues[i] = undefined;
      }
      this.seenCount = 0;
      this.seenSet = undefined;
    }
    if (plain) return;
    this.pos = this.recordStart + start;
    if (this.shapes !== undefined && this.shapes.size > shapes) this.shapes.truncate(shapes);
    if (this.sawShared) {
      this.sideValue = input;
      throw SHARED_MEMORY;
    }
    const encoded = serializeValue(input);
    if (encoded === undefined) {
      this.sideValue = input;
      throw SHARED_MEMORY;
    }
    this.room(5 + encoded.length);
    this.bytes.u8[this.pos] = TAG_V8;
    this.bytes.dv.setUint32(this.pos + 1, encoded.length, true);
    this.bytes.u8.set(encoded, this.pos + 5);
    this.pos += 5 + encoded.length;
  }

  /** Encode a string (a task name). */
  writeString(s: string): void {
    this.string(s);
  }

  /** Write the value's plain encoding; false when it is not plain data (the caller rewinds). */
  private plain(v: unknown, depth: number): boolean {
    switch (typeof v) {
      case "number":
        this.number(v);
        return true;
      case "string":
        this.string(v);
        return true;
      case "boolean":
        this.room(1);
        this.bytes.u8[this.pos++] = v ? TAG_TRUE : TAG_FALSE;
        return true;
      case "undefined":
        this.room(1);
        this.bytes.u8[this.pos++] = TAG_UNDEFINED;
        return true;
      case "object":
        if (v === null) {
          this.room(1);
          this.bytes.u8[this.pos++] = TAG_NULL;
          return true;
        }
        return depth < MAX_PLAIN_DEPTH && this.object(v, depth);
      default:
        // bigint, symbol, function: V8's serializer carries or refuses them.
        return false;
    }
  }

  private number(v: number): void {
    this.room(9);
    const { u8, dv } = this.bytes;
    if ((v | 0) === v && (v !== 0 || 1 / v > 0)) {
      u8[this.pos] = TAG_INT32;
      dv.setInt32(this.pos + 1, v, true);
      this.pos += 5;
    } else {
      u8[this.pos] = TAG_FLOAT64;
      dv.setFloat64(this.pos + 1, v, true);
      this.pos += 9;
    }
  }

  private string(s: string): void {
    const n = s.length;
    if (n <= SHORT_STRING) {
      this.room(5 + 2 * n);
      const { u8, dv } = this.bytes;
      const at = this.pos;
      let p = at + 5;
      for (let i = 0; i < n; i++) {
        const c = s.charCodeAt(i);
        if (c > 0xff) return this.utf16(s, at);
        u8[p++] = c;
      }
      u8[at] = TAG_LATIN1;
      dv.setUint32(at + 1, n, true);
      this.pos = p;
      return;
    }
    if (NON_LATIN1.test(s)) return this.utf16(s, this.pos);
    this.room(5 + n);
    const { u8, dv, buf } = this.bytes;
    u8[this.pos] = TAG_LATIN1;
    dv.setUint32(this.pos + 1, n, true);
    buf.write(s, this.pos + 5, n, "latin1");
    this.pos += 5 + n;
  }

  /** `s` as UTF-16 code units (lone surrogates kept, as a structured clone keeps them), from `at`. */
  private utf16(s: string, from: number): void {
    const n = s.length;
    this.pos = from;
    this.room(5 + 2 * n); // may spill: `from` is then elsewhere
    const at = this.pos;
    const { u8, dv, buf } = this.bytes;
    u8[at] = TAG_UTF16;
    dv.setUint32(at + 1, n, true);
    if (n <= SHORT_STRING) {
      for (let i = 0; i < n; i++) dv.setUint16(at + 5 + 2 * i, s.charCodeAt(i), true);
    } else {
      buf.write(s, at + 5, 2 * n, "utf16le");
    }
    this.pos = at + 5 + 2 * n;
  }

  private object(o: object, depth: number): boolean {
    if (isProxy(o)) return false;
    const proto: unknown = Object.getPrototypeOf(o);
    if (proto === Object.prototype) {
      if (!this.firstTime(o)) return false;
      let keys = Object.keys(o);
      // One builtin call for the values (in keys' order, each getter read
      // once) instead of a keyed load per key, which goes megamorphic.
      const values = Object.values(o);
      if (values.length !== keys.length) {
        // A getter removed a key before it was read (Object.values, as a
        // structured clone, skips it) or made it non-enumerable.
        keys = keys.filter((k) => Object.prototype.propertyIsEnumerable.call(o, k));
        if (values.length !== keys.length) return false;
      }
      this.seenKeys[this.seenCount - 1] = keys;
      this.seenValues[this.seenCount - 1] = values;
      this.objectHead(keys);
      for (let i = 0; i < values.length; i++) {
        if (!this.plain(values[i], depth + 1)) return false;
      }
      return true;
    }
    if (proto === Array.prototype) {
      const a = o as unknown[];
      const n = a.length;
      // Fields beyond the items (a regex match's `index`) travel in a
      // structured clone: leave such arrays to V8's serializer.
      if (!Array.isArray(a) || Object.keys(a).length !== n || !this.firstTime(o)) return false;
      this.room(5);
      this.bytes.u8[this.pos] = TAG_ARRAY;
      this.bytes.dv.setUint32(this.pos + 1, n, true);
      this.pos += 5;
      for (let i = 0; i < n; i++) {
        const item = a[i];
        // A hole (with a field making up the count) keeps its shape only in V8's format.
        if ((item === undefined && !(i in a)) || !this.plain(item, depth + 1)) return false;
      }
      return true;
    }
    const kind = TYPED_INDEX.get(proto as object);
    if (kind !== undefined) {
      // A whole plain ArrayBuffer: a structured clone copies the view's
      // whole buffer, so only a view of all of it is carried here.
      const view = o as InstanceType<TypedArrayClass>;
      const buffer = typedArrayBuffer.call(view);
      const byteLength = typedArrayByteLength.call(view);
      if (!(buffer instanceof ArrayBuffer)) {
        if (isSharedArrayBuffer(buffer)) this.sawShared = true;
        return false;
      }
      if (typedArrayByteOffset.call(view) !== 0 || byteLength !== buffer.byteLength || !this.firstTime(buffer)) return false;
      this.room(6 + byteLength);
      this.bytes.u8[this.pos] = TAG_TYPED;
      this.bytes.u8[this.pos + 1] = kind;
      this.bytes.dv.setUint32(this.pos + 2, byteLength, true);
      this.bytes.u8.set(new Uint8Array(buffer), this.pos + 6);
      this.pos += 6 + byteLength;
      return true;
    }
    if (isSharedMemory(o)) this.sawShared = true;
    return false;
  }

  /** Has an object the plain pass visited an own accessor (so reading it again would run its getter again)? */
  private visitedAccessor(): boolean {
    for (let k = 0; k < this.seenCount; k++) {
      const keys = this.seenKeys[k];
      if (keys === undefined) continue;
      const o = this.seen[k]!;
      for (let i = 0; i < keys.length; i++) {
        const d = Object.getOwnPropertyDescriptor(o, keys[i]!);
        // Gone since it was read: a getter ran and removed it.
        if (d === undefined || d.get !== undefined) return true;
      }
    }
    return false;
  }

  /** An object's tag and keys: a known shape's id, a new shape's definition, or the keys inline. */
  private objectHead(keys: string[]): void {
    const shapes = this.shapes;
    if (shapes !== undefined && keys.length <= MAX_SHAPE_KEYS) {
      const known = shapes.find(keys);
      if (known >= 0) {
        this.room(5);
        this.bytes.u8[this.pos] = TAG_SHAPED;
        this.bytes.dv.setUint32(this.pos + 1, known, true);
        this.pos += 5;
        return;
      }
      const id = shapes.add(keys);
      if (id >= 0) {
        this.room(9);
        this.bytes.u8[this.pos] = TAG_SHAPE_DEF;
        this.bytes.dv.setUint32(this.pos + 1, id, true);
        this.bytes.dv.setUint32(this.pos + 5, keys.length, true);
        this.pos += 9;
        for (let i = 0; i < keys.length; i++) this.string(keys[i]!);
        return;
      }
    }
    this.room(5);
    this.bytes.u8[this.pos] = TAG_OBJECT;
    this.bytes.dv.setUint32(this.pos + 1, keys.length, true);
    this.pos += 5;
    for (let i = 0; i < keys.length; i++) this.string(keys[i]!);
  }

  /** Note `o` as written; false when it was already (shared structure or a cycle). */
  private firstTime(o: object): boolean {
    if (this.seenSet !== undefined) {
      if (this.seenSet.has(o)) return false;
      this.seenSet.add(o);
      this.seen[this.seenCount++] = o; // the visiting order, for snapshotOf
      return true;
    }
    const seen = this.seen;
    for (let i = 0; i < this.seenCount; i++) if (seen[i] === o) return false;
    seen[this.seenCount++] = o;
    if (this.seenCount > SCAN_LIMIT) this.seenSet = new Set(seen.slice(0, this.seenCount));
    return true;
  }

  /** Make sure `n` more bytes fit (past a fixed target's limit: spill). */
  private room(n: number): void {
    if (this.pos + n <= this.limit) return;
    if (!this.growable) {
      this.spill();
      if (this.pos + n <= this.limit) return;
    }
    let size = this.bytes.u8.length * 2;
    while (size < this.pos + n) size *= 2;
    const bigger = new WireBytes(new ArrayBuffer(size));
    bigger.u8.set(this.bytes.u8.subarray(0, this.pos));
    this.bytes = bigger;
    this.scratch = bigger;
    this.limit = size;
  }
}

/** A SharedArrayBuffer, or a view of one: it must arrive shared (postMessage). */
function isSharedMemory(o: object): boolean {
  if (isSharedArrayBuffer(o)) return true;
  if (isTypedArray(o)) return isSharedArrayBuffer(typedArrayBuffer.call(o));
  if (isDataView(o)) return isSharedArrayBuffer(dataViewBuffer.call(o));
  return false;
}
