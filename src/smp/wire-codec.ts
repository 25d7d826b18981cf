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
 * sends `sideValue` through postMessage instead (endpoint.ts, the side
 * path).
 *
 * A value is read once, as structuredClone reads it: each getter runs once
 * whatever path the value takes (issue 18 item 4: they ran 2 to 4 times).
 *   - A fixed target (the ring, an overflow chunk) that runs out of room is
 *     left for the writer's own scratch buffer with what was written so far
 *     (spill), never encoded again; so is one that a nested call needs
 *     (a getter that calls submitTo to the same peer: endpoint.ts).
 *   - When the plain encoding gives up part way (a Map, a Date, an object
 *     met twice...), the objects it has visited have had their getters
 *     run. If none of them has an accessor (one descriptor look-up per key
 *     they have, on this slow path only: about what V8's serializer takes
 *     for them), V8's serializer (or postMessage) reads the value itself,
 *     as before. Otherwise it reads a copy in which each visited object is
 *     replaced by the values already read (snapshotOf), identity kept
 *     among them; what the plain pass never reached is read there, once.
 *   - A value that holds shared memory where the plain pass saw it goes to
 *     postMessage without V8's serializer reading it first.
 * What is still read twice, each a corner no ordinary value reaches: an
 * array index defined as an accessor (Object.defineProperty(array, 3,
 * { get })) when the value falls back (telling one apart costs a
 * descriptor per element, 30x the encoding); shared memory that only
 * V8's serializer finds (inside a Map, a Set or a class instance: the
 * getters it read are read again by postMessage); and a visited object
 * with an accessor that the slow path also reaches through a class
 * instance or an error (it arrives there as a second object).
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

const { isProxy, isSharedArrayBuffer, isDataView, isTypedArray } = types;
/** The views' own getters, so no accessor a value defines on a view runs (structuredClone reads the internal slots). */
const typedArrayBuffer = getterOf(Object.getPrototypeOf(Int8Array.prototype) as object, "buffer") as (this: ArrayBufferView) => ArrayBufferLike;
const typedArrayByteOffset = getterOf(Object.getPrototypeOf(Int8Array.prototype) as object, "byteOffset") as (this: ArrayBufferView) => number;
const typedArrayByteLength = getterOf(Object.getPrototypeOf(Int8Array.prototype) as object, "byteLength") as (this: ArrayBufferView) => number;
const dataViewBuffer = getterOf(DataView.prototype, "buffer") as (this: DataView) => ArrayBufferLike;

function getterOf(o: object, key: string): (this: unknown) => unknown {
  return Object.getOwnPropertyDescriptor(o, key)!.get!;
}

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

/** Thrown for a value holding a SharedArrayBuffer: send the writer's sideValue by postMessage. */
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

/**
 * `value` as the slow path must read it once the plain pass has run some
 * of its getters: every object the plain pass visited becomes a copy built
 * from the values it read (an object visited twice, or a cycle, one copy),
 * an array it visited a copy of its items (read again: they are data), and
 * everything it never reached stays itself, for the slow path to read.
 */
function snapshotOf(
  value: unknown,
  seen: readonly object[],
  keysOf: ReadonlyArray<string[] | undefined>,
  valuesOf: ReadonlyArray<unknown[] | undefined>,
  count: number,
): unknown {
  const visited = new Map<object, number>();
  for (let k = 0; k < count; k++) if (keysOf[k] !== undefined || Array.isArray(seen[k])) visited.set(seen[k]!, k);
  const copies = new Map<object, unknown>();
  const copy = (v: unknown): unknown => {
    if (typeof v !== "object" || v === null) return v;
    const k = visited.get(v);
    if (k === undefined) return v;
    const done = copies.get(v);
    if (done !== undefined) return done;
    const keys = keysOf[k];
    if (keys === undefined) {
      const a = v as unknown[];
      const out: unknown[] = [];
      copies.set(v, out);
      for (const key of Object.keys(a)) defineField(out, key, copy((a as unknown as Record<string, unknown>)[key]));
      out.length = a.length;
      return out;
    }
    const values = valuesOf[k]!;
    const out: Record<string, unknown> = {};
    copies.set(v, out);
    for (let i = 0; i < keys.length; i++) defineField(out, keys[i]!, copy(values[i]));
    return out;
  };
  return copy(value);
}

/** o[key] = value, "__proto__" included (a plain assignment to it would set the prototype). */
function defineField(o: object, key: string, value: unknown): void {
  if (key === "__proto__") Object.defineProperty(o, key, { value, enumerable: true, writable: true, configurable: true });
  else (o as Record<string, unknown>)[key] = value;
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
    for (let i = 0; i < keys.length; i++) defineField(o, keys[i]!, this.readValue());
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
