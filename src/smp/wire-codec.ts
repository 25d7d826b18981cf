/**
 * Values on the wire between shards: task arguments and results written
 * straight into a ring of the messaging buffer (or a scratch buffer), with
 * the meaning of a structured clone (what postMessage delivers).
 *
 * Two encodings, chosen per value:
 *   - plain: a tag byte per value, for the data calls carry most often:
 *     numbers, strings, booleans, null, undefined, and plain objects,
 *     arrays and whole-buffer typed arrays of them. Each is read once
 *     (getters run once, as in a structured clone); object identity is
 *     kept (an object met twice, or a cycle, sends the value down the
 *     second path).
 *   - v8: V8's own structured-clone wire format (value-codec.ts) for
 *     everything else: Map, Set, Date, RegExp, BigInt, errors, class
 *     instances, sparse arrays and arrays with fields of their own, typed
 *     arrays over part of a buffer, shared structure. Exactly what
 *     postMessage would deliver, and the same DataCloneError for what it
 *     refuses.
 * Objects: a plain object's keys (Object.keys order) form a shape; the
 * first object of a shape on a channel (an ordered pair of threads)
 * carries the keys with a new id, later ones only the id and their values
 * (ShapeTable on the sending side, ShapeCache on the receiving side, which
 * builds objects of a shape in use with a compiled object literal). A
 * 4-field object's encode + decode: 480 ns with shapes, 910 ns with its
 * keys inline (min of 20 runs, 2 cores, loaded).
 *
 * A value that refers to a SharedArrayBuffer cannot be carried as bytes
 * (it must arrive shared): encoding throws SHARED_MEMORY and the caller
 * sends it through postMessage instead (endpoint.ts, the side path).
 *
 * Why a hand-written plain encoding, measured here (2 cores, loaded, per
 * encode + decode round trip on one thread): a number 31 ns (v8.Serializer
 * 5,451 ns, JSON + TextEncoder 1,065, structuredClone 539, msgpackr 2.1
 * with structuredClone 870, plain msgpackr 1,094); a 4-field object
 * 1,295 ns (v8 12,839, JSON 3,435, structuredClone 2,417, msgpackr
 * structuredClone 2,324, plain msgpackr 1,787). The plain form also writes
 * into the shared ring in place, where every library returns a fresh
 * buffer to copy. msgpackr would still need the v8 path beside it for
 * exact postMessage semantics (sparse arrays, array fields, -0 in keys,
 * SharedArrayBuffer), so it would not remove code either.
 */
import { types } from "node:util";
import { deserializeValue, serializeValue } from "./value-codec.js";

const { isProxy } = types;

// Tags. Only the plain encoding's tags appear inside a value; TAG_V8 only
// at the top.
const TAG_UNDEFINED = 0;
const TAG_NULL = 1;
const TAG_FALSE = 2;
const TAG_TRUE = 3;
const TAG_INT32 = 4;
const TAG_FLOAT64 = 5;
const TAG_LATIN1 = 6;
const TAG_UTF16 = 7;
const TAG_ARRAY = 8;
const TAG_OBJECT = 9;
const TAG_TYPED = 10;
const TAG_V8 = 11;
/** An object whose keys are a shape the receiver knows: the shape id, then the values. */
const TAG_SHAPED = 12;
/** A new shape (id, key count, keys), then an object of that shape's values. */
const TAG_SHAPE_DEF = 13;

/** Thrown by a non-growing target that runs out of room: encode again elsewhere. */
export const OUT_OF_ROOM: unique symbol = Symbol("shardheap.wire.outOfRoom");
/** Thrown for a value holding a SharedArrayBuffer: send it by postMessage. */
export const SHARED_MEMORY: unique symbol = Symbol("shardheap.wire.sharedMemory");

/** Nesting the plain encoding follows before handing the value to V8's serializer. */
const MAX_PLAIN_DEPTH = 64;
/** Objects the plain encoding tracks by array scan before switching to a Set. */
const SCAN_LIMIT = 16;
/** Strings up to this length are copied by a loop; longer ones by Buffer's native copies. */
const SHORT_STRING = 24;
const NON_LATIN1 = /[^\x00-\xff]/;

const TYPED_ARRAYS = [
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
type TypedArrayClass = (typeof TYPED_ARRAYS)[number];
const TYPED_INDEX = new Map<object, number>(TYPED_ARRAYS.map((c, i) => [c.prototype, i]));

/** Shapes per channel, at most (further key sets travel inline). */
const MAX_SHAPES = 4096;
/** Objects with more keys than this travel with their keys inline. */
const MAX_SHAPE_KEYS = 32;
/** A shape's object builder is compiled on its second use (a one-off key set is not worth ~20 us of compiling). */
const COMPILE_AFTER_USES = 2;

/**
 * The sender's half of a channel's object shapes: each distinct list of
 * keys (Object.keys order) gets an id the first time an object with those
 * keys is sent, with its definition inline; afterwards objects of that
 * shape carry only the id and their values. Per ordered pair of threads,
 * in the same order as the records, so the receiver's ShapeCache always
 * has a definition before its first use. Keys are compared by identity
 * first: Object.keys of objects built by the same code returns the same
 * internalized strings.
 */
export class ShapeTable {
  private readonly byFirstKey = new Map<string, number[]>();
  private readonly shapes: string[][] = [];

  /** The shape found last (objects come in runs of one shape). */
  private lastId = -1;

  /** The id of `keys`' shape, or -1. */
  find(keys: readonly string[]): number {
    if (this.lastId >= 0 && sameKeys(this.shapes[this.lastId]!, keys)) return this.lastId;
    const candidates = this.byFirstKey.get(keys[0] ?? "");
    if (candidates === undefined) return -1;
    for (const id of candidates) {
      if (sameKeys(this.shapes[id]!, keys)) {
        this.lastId = id;
        return id;
      }
    }
    return -1;
  }

  /** A new id for `keys`, or -1 when the table is full. */
  add(keys: string[]): number {
    if (this.shapes.length >= MAX_SHAPES) return -1;
    const id = this.shapes.length;
    this.shapes.push(keys);
    const first = keys[0] ?? "";
    const list = this.byFirstKey.get(first);
    if (list === undefined) this.byFirstKey.set(first, [id]);
    else list.push(id);
    return id;
  }

  /** Forget every shape from `id` on (added by an encoding that was not sent). */
  truncate(id: number): void {
    if (this.lastId >= id) this.lastId = -1;
    while (this.shapes.length > id) {
      const keys = this.shapes.pop()!;
      const first = keys[0] ?? "";
      const list = this.byFirstKey.get(first)!;
      list.pop();
      if (list.length === 0) this.byFirstKey.delete(first);
    }
  }

  get size(): number {
    return this.shapes.length;
  }
}

function sameKeys(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

type ObjectBuilder = (r: WireReader) => Record<string, unknown>;

/** The receiver's half: each shape's keys, and a compiled builder for shapes in use. */
export class ShapeCache {
  private keys: string[][] = [];
  private uses: number[] = [];
  private builders: Array<ObjectBuilder | null | undefined> = [];

  define(id: number, keys: string[]): void {
    this.keys[id] = keys;
    this.uses[id] = 0;
    this.builders[id] = undefined;
  }

  keysOf(id: number): string[] {
    const keys = this.keys[id];
    if (keys === undefined) throw new TypeError(`shardheap: corrupt message (unknown shape ${id})`);
    return keys;
  }

  /**
   * The compiled builder for shape `id` once it has been used enough, else
   * undefined. A literal with the keys in order makes the object with its
   * final hidden class at once: 34 ns for four fields, where assigning
   * them one by one to {} costs 178 ns (a keyed store each).
   */
  builder(id: number): ObjectBuilder | undefined {
    const b = this.builders[id];
    if (b !== undefined) return b ?? undefined;
    if (++this.uses[id]! < COMPILE_AFTER_USES) return undefined;
    const keys = this.keysOf(id);
    let built: ObjectBuilder | null = null;
    // "__proto__" in a literal would set the prototype; such shapes stay uncompiled.
    if (!keys.includes("__proto__")) {
      try {
        const fields = keys.map((k) => `${JSON.stringify(k)}: r.readValue()`).join(", ");
        built = new Function("r", `return { ${fields} };`) as ObjectBuilder;
      } catch {
        built = null; // code generation disallowed (--disallow-code-generation-from-strings)
      }
    }
    this.builders[id] = built;
    return built ?? undefined;
  }
}

/** Bytes with the three views the codec uses. */
export class WireBytes {
  readonly u8: Uint8Array;
  readonly dv: DataView;
  readonly buf: Buffer;
  /** Whole words, for the 4-aligned record headers (endpoint.ts). */
  readonly i32: Int32Array;
  constructor(readonly buffer: ArrayBuffer | SharedArrayBuffer) {
    this.u8 = new Uint8Array(buffer);
    this.dv = new DataView(buffer);
    this.buf = Buffer.from(buffer);
    this.i32 = new Int32Array(buffer, 0, buffer.byteLength >>> 2);
  }
}

export class WireWriter {
  /** Where the next byte goes. */
  pos = 0;
  private bytes: WireBytes;
  private limit = 0;
  private growable = false;
  /** Objects already written in this value (identity must survive). */
  private seen: object[] = [];
  private seenCount = 0;
  private seenSet: Set<object> | undefined;
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

  /** Write into `bytes` from `pos` up to `limit` (exclusive); OUT_OF_ROOM past it. */
  into(bytes: WireBytes, pos: number, limit: number): void {
    this.dropShapes();
    this.bytes = bytes;
    this.pos = pos;
    this.limit = limit;
    this.growable = false;
  }

  /** Write into this writer's own growing scratch buffer, from `pos`. */
  intoScratch(pos: number): void {
    this.dropShapes();
    if (this.growable === false) this.bytes = this.scratch;
    this.pos = pos;
    this.limit = this.bytes.u8.length;
    this.growable = true;
  }

  /** The scratch buffer (valid until the next intoScratch that grows it). */
  get target(): WireBytes {
    return this.bytes;
  }

  private scratch = new WireBytes(new ArrayBuffer(1024));

  /**
   * Encode `value`. Throws a DataCloneError (a DOMException) for what a
   * structured clone refuses, SHARED_MEMORY for a value holding shared
   * memory, OUT_OF_ROOM when a fixed target is too small.
   */
  writeValue(value: unknown): void {
    const start = this.pos;
    const shapes = this.shapes?.size ?? 0;
    let plain: boolean;
    try {
      plain = this.plain(value, 0);
    } finally {
      // Drop the references (no user object is kept alive by the writer).
      for (let i = 0; i < this.seenCount; i++) this.seen[i] = undefined as unknown as object;
      this.seenCount = 0;
      this.seenSet = undefined;
    }
    if (plain) return;
    this.pos = start;
    if (this.shapes !== undefined && this.shapes.size > shapes) this.shapes.truncate(shapes);
    const encoded = serializeValue(value);
    if (encoded === undefined) throw SHARED_MEMORY;
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
  private utf16(s: string, at: number): void {
    const n = s.length;
    this.pos = at;
    this.room(5 + 2 * n);
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
      const keys = Object.keys(o);
      // One builtin call for the values (in keys' order, each getter read
      // once) instead of a keyed load per key, which goes megamorphic.
      const values = Object.values(o);
      if (values.length !== keys.length) return false; // a getter changed the object: let V8's serializer decide
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
      const { buffer, byteOffset, byteLength } = view;
      if (!(buffer instanceof ArrayBuffer) || byteOffset !== 0 || byteLength !== buffer.byteLength || !this.firstTime(buffer)) return false;
      this.room(6 + byteLength);
      this.bytes.u8[this.pos] = TAG_TYPED;
      this.bytes.u8[this.pos + 1] = kind;
      this.bytes.dv.setUint32(this.pos + 2, byteLength, true);
      this.bytes.u8.set(new Uint8Array(buffer), this.pos + 6);
      this.pos += 6 + byteLength;
      return true;
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
      return true;
    }
    const seen = this.seen;
    for (let i = 0; i < this.seenCount; i++) if (seen[i] === o) return false;
    seen[this.seenCount++] = o;
    if (this.seenCount > SCAN_LIMIT) this.seenSet = new Set(seen.slice(0, this.seenCount));
    return true;
  }

  /** Make sure `n` more bytes fit. */
  private room(n: number): void {
    if (this.pos + n <= this.limit) return;
    if (!this.growable) throw OUT_OF_ROOM;
    let size = this.bytes.u8.length * 2;
    while (size < this.pos + n) size *= 2;
    const bigger = new WireBytes(new ArrayBuffer(size));
    bigger.u8.set(this.bytes.u8.subarray(0, this.pos));
    this.bytes = bigger;
    this.scratch = bigger;
    this.limit = size;
  }
}

/** Size of the direct-mapped cache of short decoded strings (object keys, mostly). */
const STRING_CACHE = 1024;
const CACHED_STRING = 16;

export class WireReader {
  pos = 0;
  /** The channel's shapes (set by the endpoint per record). */
  shapes: ShapeCache | undefined;
  private bytes: WireBytes;
  /** Short latin1 strings decoded before: keys repeat, and a cached string costs no allocation. */
  private readonly cache: Array<string | undefined> = new Array<string | undefined>(STRING_CACHE).fill(undefined);

  constructor(bytes: WireBytes) {
    this.bytes = bytes;
  }

  /** Read from `bytes` at `pos` (the side path's own buffers). */
  from(bytes: WireBytes, pos: number): void {
    this.bytes = bytes;
    this.pos = pos;
  }

  readValue(): unknown {
    const { u8, dv } = this.bytes;
    const tag = u8[this.pos++];
    switch (tag) {
      case TAG_UNDEFINED:
        return undefined;
      case TAG_NULL:
        return null;
      case TAG_FALSE:
        return false;
      case TAG_TRUE:
        return true;
      case TAG_INT32: {
        const v = dv.getInt32(this.pos, true);
        this.pos += 4;
        return v;
      }
      case TAG_FLOAT64: {
        const v = dv.getFloat64(this.pos, true);
        this.pos += 8;
        return v;
      }
      case TAG_LATIN1:
      case TAG_UTF16:
        this.pos--;
        return this.readString();
      case TAG_ARRAY: {
        const n = dv.getUint32(this.pos, true);
        this.pos += 4;
        const a: unknown[] = [];
        for (let i = 0; i < n; i++) a.push(this.readValue());
        return a;
      }
      case TAG_OBJECT: {
        const n = dv.getUint32(this.pos, true);
        this.pos += 4;
        const keys: string[] = [];
        for (let i = 0; i < n; i++) keys.push(this.readString());
        return this.readFields(keys);
      }
      case TAG_SHAPE_DEF: {
        const id = dv.getUint32(this.pos, true);
        const n = dv.getUint32(this.pos + 4, true);
        this.pos += 8;
        const keys: string[] = [];
        for (let i = 0; i < n; i++) keys.push(this.readString());
        this.shapeCache().define(id, keys);
        return this.readFields(keys);
      }
      case TAG_SHAPED: {
        const id = dv.getUint32(this.pos, true);
        this.pos += 4;
        const shapes = this.shapeCache();
        const build = shapes.builder(id);
        return build !== undefined ? build(this) : this.readFields(shapes.keysOf(id));
      }
      case TAG_TYPED: {
        const Cls = TYPED_ARRAYS[u8[this.pos]!]!;
        const byteLength = dv.getUint32(this.pos + 1, true);
        const start = this.pos + 5;
        this.pos = start + byteLength;
        const copy = new ArrayBuffer(byteLength);
        new Uint8Array(copy).set(u8.subarray(start, start + byteLength));
        return new Cls(copy);
      }
      case TAG_V8: {
        const n = dv.getUint32(this.pos, true);
        const start = this.pos + 4;
        this.pos = start + n;
        return deserializeValue(u8.subarray(start, start + n));
      }
      default:
        throw new TypeError(`shardheap: corrupt message (tag ${String(tag)} at ${this.pos - 1})`);
    }
  }

  /** The values of an object with `keys`, in order. */
  private readFields(keys: readonly string[]): Record<string, unknown> {
    const o: Record<string, unknown> = {};
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i]!;
      const value = this.readValue();
      // A plain assignment to "__proto__" would set the prototype.
      if (key === "__proto__") Object.defineProperty(o, key, { value, enumerable: true, writable: true, configurable: true });
      else o[key] = value;
    }
    return o;
  }

  private shapeCache(): ShapeCache {
    if (this.shapes === undefined) throw new TypeError("shardheap: corrupt message (a shape outside a channel)");
    return this.shapes;
  }

  /** A string written by WireWriter.writeString (or as a value). */
  readString(): string {
    const { u8, dv, buf } = this.bytes;
    const tag = u8[this.pos];
    const n = dv.getUint32(this.pos + 1, true);
    const start = this.pos + 5;
    if (tag === TAG_UTF16) {
      this.pos = start + 2 * n;
      return buf.toString("utf16le", start, start + 2 * n);
    }
    if (tag !== TAG_LATIN1) throw new TypeError(`shardheap: corrupt message (expected a string at ${this.pos})`);
    this.pos = start + n;
    if (n > CACHED_STRING) return buf.toString("latin1", start, start + n);
    let h = n;
    for (let i = start; i < start + n; i++) h = (Math.imul(h, 31) + u8[i]!) | 0;
    h &= STRING_CACHE - 1;
    const cached = this.cache[h];
    if (cached !== undefined && cached.length === n) {
      let same = true;
      for (let i = 0; i < n; i++) {
        if (cached.charCodeAt(i) !== u8[start + i]) {
          same = false;
          break;
        }
      }
      if (same) return cached;
    }
    let s = "";
    for (let i = start; i < start + n; i++) s += String.fromCharCode(u8[i]!);
    this.cache[h] = s;
    return s;
  }
}
