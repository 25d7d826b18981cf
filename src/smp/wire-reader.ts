/**
 * The decoder (the format: wire-codec.ts and wire-format.ts): WireReader
 * reads values from a ring of the messaging buffer (Incoming.drain,
 * incoming.ts, moves `pos` to each record) or from a side-path message's
 * bytes, building objects of a known shape with the channel's ShapeCache
 * (wire-shapes.ts), and V8-encoded values with V8's deserializer
 * (value-codec.ts). A tag it does not know, or a shape outside a channel,
 * is a corrupt message: a TypeError, never a wrong value.
 */
import { deserializeValue } from "./value-codec.js";
import * as format from "./wire-format.js";
import { defineField, TYPED_ARRAYS, type WireBytes } from "./wire-format.js";
import { ShapeCache } from "./wire-shapes.js";

// The tags as module-private consts: V8 compiles a switch over a module's
// own consts to a jump table, but loads an imported (or exported) binding
// from its cell at every use (a 14-case switch over a steady run of tags:
// 2.0 ns a dispatch against 6-9.6 ns, node 20.20).
const { TAG_ARRAY, TAG_FALSE, TAG_FLOAT64, TAG_INT32, TAG_LATIN1, TAG_NULL, TAG_OBJECT, TAG_SHAPE_DEF, TAG_SHAPED, TAG_TRUE, TAG_TYPED, TAG_UNDEFINED, TAG_UTF16, TAG_V8 } = format;

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
