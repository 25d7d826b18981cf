/**
 * An item of the memcached store: the value of ONE entry in the cache's
 * SharedMap, in the heap memory of the shard that wrote it (item-cache.ts), laid out so that a `get` hit is answered by writing one
 * view of it to the socket, the bytes never copied into a JS string.
 * (Seastar's memcached keeps the " flags bytes" part of the answer in the
 * item for the same reason; here the whole VALUE line is kept, key
 * included, and the END line after the value: a single-key get is then one
 * write of one view, where separate END and value buffers went through
 * Node's corked writev, measured 15% more CPU per get under memcaslap.)
 *
 *   offset size  field
 *   0      4     accessed    Unix second of the last hit, set when the owner
 *                            links the item and by hits on any shard: meta get's
 *                            l flag, `stats items` age and evicted_time (memcached's
 *                            it->time, the same one field)
 *   4      4     flags       the client's 32-bit flags
 *   8      4     exptime     absolute Unix seconds; 0 = never expires
 *   12     4     length      value bytes, without the trailing \r\n
 *   16     8     cas         two u32 words, low then high (a number < 2^53)
 *   24     2     lineLength  bits 0-10: bytes of the VALUE line, its \r\n included
 *                            (at most 280); bits 11-15: the meta protocol's
 *                            marks, written by the owner only: stale (md I),
 *                            win token sent (mg N/R, a stale item's first
 *                            mg), binary key (b)
 *   26     1     keyLength   1..250
 *   27     1     referenced  bit 0: set by a hit on any shard, cleared when
 *                            eviction passes it over (item-cache.ts: LRU by second
 *                            chance); bit 1: fetched (mg's h flag), set by
 *                            the same hits, never cleared
 *   28     4     allocated   heap bytes of the map entry (SharedMap.entryBytes),
 *                            what the store's memory budget counts
 *   32     4     newer       the LRU order (lru-order.ts): the map's reference
 *   36     4     older       to the item linked next after / before this one
 *                            (0: none), written by the owner only
 *   40     4     handoff     0, reserved: the link of the owner's inbox of items
 *                            other writers replaced (lru-order.ts, "Other
 *                            writers, later"); 4 bytes an item, which moves no
 *                            item of 64 B keys and 1 KiB values out of its size class
 *   44     line  "VALUE <key> <flags> <length>\r\n"
 *   44+line      the value, then "\r\n"
 *
 * Invariants (checked by the store's tests through heap.check() and the
 * counts): HEADER_BYTES + lineLength + length + 2 + 5 <= allocated; the
 * seven bytes after the value are "\r\nEND\r\n" once the item is linked
 * (the END from writeHead, the \r\n from the client's data). Once the
 * entry is published, flags, length, cas, the line and the value never
 * change (a new value, incr's too, is a new entry): readers on other
 * shards read them in place. Some words do change in a published item, by
 * plain stores that readers read as plain loads, which aligned typed-array
 * accesses make tear-free (ECMAScript's memory model): exptime (touch and
 * gat, on the owner), the referenced byte and the accessed word (a hit,
 * anywhere) and the meta marks in lineLength's top bits (the owner; a
 * reader reads the halfword whole and the length bits never change).
 * Writers on different threads never share a byte: the owner's marks and
 * the hits' byte are apart.
 *
 * Who frees: the SharedMap. A reader holds a reference to the entry
 * (SharedMap.acquire on its own thread) from the lookup until the socket
 * has taken the bytes; the owner's store unlinks the entry when the item is
 * replaced, deleted, expired, evicted or flushed, and the map frees it once
 * no reference is left (shared-map/shared-map.ts). Staging copies (an item on its way
 * to another shard's store) are plain heap objects with this layout,
 * freed by the connection that made them.
 */
import type { SharedHeap } from "../../../memory/shared-heap.js";

export const HEADER_BYTES = 44;
// Word indexes (i32/u32) and byte offsets of the header fields.
const W_ACCESSED = 0;
const W_FLAGS = 1;
const W_EXPTIME = 2;
const W_LENGTH = 3;
const W_CAS_LO = 4;
const W_CAS_HI = 5;
const H_LINE_LENGTH = 24; // u16
const B_KEY_LENGTH = 26;
const B_REFERENCED = 27;
const W_ALLOCATED = 7;
const W_NEWER = 8;
const W_OLDER = 9;
const W_HANDOFF = 10;
const LINE_LENGTH_MASK = 0x7ff;
/** The meta marks in lineLength's top bits. */
export const MARK_STALE = 1 << 11;
export const MARK_TOKEN_SENT = 1 << 12;
export const MARK_KEY_BINARY = 1 << 13;
/** The referenced byte's bits. */
const REFERENCED = 1;
const FETCHED = 2;
/** "VALUE " */
const LINE_PREFIX = 6;
/** The value's "\r\n" and the answer's "END\r\n" after it. */
const TRAILER = 2 + 5;
const END = Buffer.from("END\r\n", "latin1");

/** Views of the heap's buffer, made once per thread. */
export class ItemViews {
  readonly i32: Int32Array;
  readonly u32: Uint32Array;
  readonly u16: Uint16Array;
  /** The whole heap as a Buffer (no copy): slices of it go to sockets. */
  readonly bytes: Buffer;

  constructor(heap: SharedHeap) {
    this.i32 = new Int32Array(heap.buffer);
    this.u32 = new Uint32Array(heap.buffer);
    this.u16 = new Uint16Array(heap.buffer);
    this.bytes = Buffer.from(heap.buffer);
  }

  flags(ptr: number): number {
    return this.u32[(ptr >>> 2) + W_FLAGS]!;
  }
  exptime(ptr: number): number {
    return this.u32[(ptr >>> 2) + W_EXPTIME]!;
  }
  setExptime(ptr: number, exptime: number): void {
    this.u32[(ptr >>> 2) + W_EXPTIME] = exptime;
  }
  length(ptr: number): number {
    return this.u32[(ptr >>> 2) + W_LENGTH]!;
  }
  cas(ptr: number): number {
    const w = ptr >>> 2;
    return this.u32[w + W_CAS_HI]! * 2 ** 32 + this.u32[w + W_CAS_LO]!;
  }
  setCas(ptr: number, cas: number): void {
    const w = ptr >>> 2;
    this.u32[w + W_CAS_LO] = cas >>> 0;
    this.u32[w + W_CAS_HI] = Math.floor(cas / 2 ** 32);
  }
  lineLength(ptr: number): number {
    return this.u16[(ptr + H_LINE_LENGTH) >>> 1]! & LINE_LENGTH_MASK;
  }
  /** The meta marks (MARK_*) set on the item. */
  marks(ptr: number): number {
    return this.u16[(ptr + H_LINE_LENGTH) >>> 1]! & ~LINE_LENGTH_MASK;
  }
  /** Set the meta marks of an item not yet published (in a published one: addMarks). */
  setMarks(ptr: number, marks: number): void {
    const at = (ptr + H_LINE_LENGTH) >>> 1;
    this.u16[at] = (this.u16[at]! & LINE_LENGTH_MASK) | (marks & ~LINE_LENGTH_MASK);
  }
  /**
   * Add meta marks to a published item, from any shard, atomically: the
   * marks it had before (so of two shards marking the win token sent at
   * once, exactly one sees it was not).
   */
  addMarks(ptr: number, marks: number): number {
    return Atomics.or(this.u16, (ptr + H_LINE_LENGTH) >>> 1, marks & ~LINE_LENGTH_MASK) & ~LINE_LENGTH_MASK;
  }
  accessed(ptr: number): number {
    return this.u32[(ptr >>> 2) + W_ACCESSED]!;
  }
  setAccessed(ptr: number, now: number): void {
    this.u32[(ptr >>> 2) + W_ACCESSED] = now;
  }
  /** Whether a hit has fetched the item since it was stored. */
  fetched(ptr: number): boolean {
    return (this.bytes[ptr + B_REFERENCED]! & FETCHED) !== 0;
  }
  keyLength(ptr: number): number {
    return this.bytes[ptr + B_KEY_LENGTH]!;
  }
  /** Whether a hit has used the item since eviction last passed it over (read by the owner, written by hits on every shard). */
  referenced(ptr: number): boolean {
    return (this.bytes[ptr + B_REFERENCED]! & REFERENCED) !== 0;
  }
  /** A use that is no fetch (a failed add): referenced, fetched as it was. */
  markReferenced(ptr: number): void {
    this.bytes[ptr + B_REFERENCED]! |= REFERENCED;
  }
  /** A new item that takes the place of a fetched one as memcached's in-place change would (incr): fetched too. */
  setFetched(ptr: number): void {
    this.bytes[ptr + B_REFERENCED]! |= FETCHED;
  }
  /** A hit (`used`: marks it referenced and fetched), or eviction passing it over (clears referenced, keeps fetched). */
  setReferenced(ptr: number, used: boolean): void {
    this.bytes[ptr + B_REFERENCED] = used ? REFERENCED | FETCHED : this.bytes[ptr + B_REFERENCED]! & FETCHED;
  }
  allocated(ptr: number): number {
    return this.u32[(ptr >>> 2) + W_ALLOCATED]!;
  }
  setAllocated(ptr: number, bytes: number): void {
    this.u32[(ptr >>> 2) + W_ALLOCATED] = bytes;
  }
  /** The LRU order's links (item-cache.ts): the map's references to the items linked after and before this one, 0 at the ends. */
  newer(ptr: number): number {
    return this.u32[(ptr >>> 2) + W_NEWER]!;
  }
  older(ptr: number): number {
    return this.u32[(ptr >>> 2) + W_OLDER]!;
  }
  setNewer(ptr: number, ref: number): void {
    this.u32[(ptr >>> 2) + W_NEWER] = ref;
  }
  setOlder(ptr: number, ref: number): void {
    this.u32[(ptr >>> 2) + W_OLDER] = ref;
  }
  /** The next item's reference in the inbox this item is in (hand-over.ts), 0 for the last. */
  handoff(ptr: number): number {
    return this.u32[(ptr >>> 2) + W_HANDOFF]!;
  }
  setHandoff(ptr: number, ref: number): void {
    this.u32[(ptr >>> 2) + W_HANDOFF] = ref;
  }
  /** Byte offset of the value. */
  dataStart(ptr: number): number {
    return ptr + HEADER_BYTES + this.lineLength(ptr);
  }
  /** Bytes the item occupies: header, line, value, its \r\n and END\r\n. */
  itemBytes(ptr: number): number {
    return HEADER_BYTES + this.lineLength(ptr) + this.length(ptr) + TRAILER;
  }
  /** The key as the store's map holds it (latin1: one char per byte). */
  key(ptr: number): string {
    const start = ptr + HEADER_BYTES + LINE_PREFIX;
    return this.bytes.toString("latin1", start, start + this.keyLength(ptr));
  }
  /** The value's bytes (a view; valid while a reference is held). */
  value(ptr: number): Buffer {
    const start = this.dataStart(ptr);
    return this.bytes.subarray(start, start + this.length(ptr));
  }
  /** Whether the value is followed by \r\n (memcached's "bad data chunk" check). */
  terminated(ptr: number): boolean {
    const end = this.dataStart(ptr) + this.length(ptr);
    return this.bytes[end] === 0x0d && this.bytes[end + 1] === 0x0a;
  }

  /** This item's part of a get's answer, its VALUE line, value and \r\n, as one view; `end`: with the END line after it. */
  getView(ptr: number, end: boolean): Buffer {
    const start = ptr + HEADER_BYTES;
    return this.bytes.subarray(start, start + this.lineLength(ptr) + this.length(ptr) + (end ? TRAILER : 2));
  }
  /** A gets answer in three parts: the line without its \r\n, then " <cas>\r\n" (the caller's), then value and \r\n (and END). */
  getsLineView(ptr: number): Buffer {
    const start = ptr + HEADER_BYTES;
    return this.bytes.subarray(start, start + this.lineLength(ptr) - 2);
  }
  getsValueView(ptr: number, end: boolean): Buffer {
    const start = this.dataStart(ptr);
    return this.bytes.subarray(start, start + this.length(ptr) + (end ? TRAILER : 2));
  }

  /**
   * Fill a new item's header, VALUE line and END line (cas 0) in
   * an object of `allocated` bytes at `ptr`; the value and its \r\n go at
   * dataStart(ptr). `key` is latin1 (one char per byte), at most
   * MAX_KEY_LENGTH chars.
   */
  writeHead(ptr: number, allocated: number, key: string, flags: number, exptime: number, length: number): void {
    const w = ptr >>> 2;
    const line = `VALUE ${key} ${flags} ${length}\r\n`;
    this.u32[w + W_ACCESSED] = 0;
    this.u32[w + W_FLAGS] = flags;
    this.u32[w + W_EXPTIME] = exptime;
    this.u32[w + W_LENGTH] = length;
    this.u32[w + W_CAS_LO] = 0;
    this.u32[w + W_CAS_HI] = 0;
    this.u16[(ptr + H_LINE_LENGTH) >>> 1] = line.length;
    this.bytes[ptr + B_KEY_LENGTH] = key.length;
    this.bytes[ptr + B_REFERENCED] = 0;
    this.u32[w + W_ALLOCATED] = allocated;
    this.u32[w + W_NEWER] = 0;
    this.u32[w + W_OLDER] = 0;
    this.u32[w + W_HANDOFF] = 0;
    this.bytes.write(line, ptr + HEADER_BYTES, line.length, "latin1");
    END.copy(this.bytes, ptr + HEADER_BYTES + line.length + length + 2);
  }

  /** Write the \r\n after the value (items the server builds itself: append, incr). */
  terminate(ptr: number): void {
    const end = this.dataStart(ptr) + this.length(ptr);
    this.bytes[end] = 0x0d;
    this.bytes[end + 1] = 0x0a;
  }
}

/** Digits of a non-negative integer below 2^32. */
function digits(n: number): number {
  let d = 1;
  while (n >= 10) {
    n = Math.floor(n / 10);
    d++;
  }
  return d;
}

/** Bytes an item with this key, flags and value length needs. */
export function itemSize(keyLength: number, flags: number, length: number): number {
  const line = LINE_PREFIX + keyLength + 1 + digits(flags) + 1 + digits(length) + 2;
  return HEADER_BYTES + line + length + TRAILER;
}
