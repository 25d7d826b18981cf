/**
 * What memcached's -m means here: the items' memory, as in memcached,
 * whose -m counts its slab pages and leaves its hash table and buffers
 * outside. A shard's share of -m is what its items may take (their heap
 * objects, size-class rounding included: the item cache's budget), and
 * its heap region is made that much bigger for the rest: its part of the
 * index made at start (one SharedMap for the whole cache: a 32-byte
 * descriptor an entry in the shard that writes it, and on the home shard
 * the tables, at most half full: indexBytesByShard), room for the small
 * pools' partly used spans, and the region's own page records and
 * profiler tables (layout.ts). Every region is made as big as the home's,
 * which holds the tables too (8-16 bytes an entry of every shard).
 *
 * --memory (shardheap's own flag) stays the region itself, items and all:
 * the items then get 90% of its pages less the index (item-cache.ts).
 *
 * Where the bytes of an item go, 64 B keys and 1 KiB values (memcaslap's,
 * flags 0), -m 256 -t 1, per item:
 *
 *                           shardheap before   shardheap now   memcached
 *   key, in the map          64                 64              65 (key + 0)
 *   header                   32                 44 (LRU, hand-  56 (cas in)
 *                                              off words)
 *   "VALUE <key> 0 1024\r\n" 79 (key again)    79              (built at send)
 *   value and "\r\n"         1,026              1,026           1,026
 *   "END\r\n"                5                  5               -
 *   object (size class)      1,206 -> 1,280     1,218 -> 1,280  1,147 -> 1,184
 *   index: descriptor 32 B, 8-16 B of table: inside -m before (11.5 MB
 *     for 171,107 items), beside it now (10.5 MB, made for 261,887);
 *     memcached's hash table is outside its -m too
 *   region's own tables      12.3 MB inside     14.0 MB beside
 *   budget's 10% and slack   25.5 MB inside     8.6 MB beside
 *   items held               171,107 (0.76x)    209,715 (0.93x) 226,560
 *
 * What is left of the gap is the size class: 1,218 bytes take 1,280,
 * where memcached's chunk of 1,184 fits its 1,147. Closing it needs the
 * entry at or below 1,152 in a class of that size: the key stored once
 * (the VALUE line without it, 1,148 bytes: a get then writes "VALUE ",
 * the key and the rest as three pieces, measured 10% more server CPU per
 * request under memcaslap's 90% gets) and a third fraction bit from
 * 1 KiB (size-classes.ts: 1,152 between 1,024 and 1,280; the
 * fragmentation bench moved from 1.391 / 1.182 / 1.217 / 1.577 / 1.211 to
 * 1.426 / 1.174 / 1.211 / 1.694 / 1.223 on its stress, size-classes,
 * large, shifting and trickle traces), a change of the heap's contract
 * left to be decided.
 */
import { PAGE_SIZE, dataPagesFor, defaultProfilerSites } from "../../../memory/layout.js";
import { MAX_SMALL_SIZE, classAlignment, classOf, classSize } from "../../../memory/size-classes.js";
import {
  CHUNK_COUNT,
  DEFAULT_READER_RECORDS,
  DESCRIPTOR_BYTES,
  MAX_LOAD,
  MIN_CAPACITY,
  READER_BYTES,
  TABLE_HEADER_BYTES,
  chunkFirstId,
  chunkSize,
  headerBytes,
} from "../../../memory/shared-map/layout.js";
import type { SharedHeap } from "../../../memory/shared-heap.js";
import { SharedMap } from "../../../memory/shared-map/shared-map.js";

/**
 * The index is made at start for an entry per this many bytes of the
 * items' memory (items of 1 KiB on average): smaller items grow it, into
 * the region's slack and then at the items' expense (the cache finds the
 * heap full before its budget, and evicts: item-cache.ts makeRoom).
 */
const ITEM_BYTES_PER_ENTRY = 1024;
/**
 * Under --memory, the index is made for an entry per this many bytes of a
 * shard's memory (items of 2 KB on average), its table and descriptors at
 * once: ~3% of the shard (the descriptor chunks double, so up to 64 B an
 * entry), and no index structure allocated among the items later unless
 * they are smaller. Made as needed instead, the index's chunks pinned
 * pages all over a shard: a 1 MiB shard emptied of its 329 items of 2 KB
 * had no 384 KiB in one piece.
 */
const INDEX_BYTES_PER_ENTRY = 2048;
/**
 * Room beside the items for the small pools' partly used spans and
 * cached objects: a share of the items' memory, and at least a few
 * spans of every class. The budget counts objects at their class's size,
 * so what a class's spans hold free is not in it.
 */
const SLACK_SHARE = 1 / 32;
const MIN_SLACK = 1 << 20;

/**
 * The index's segments (SharedMap.create's `segments`), as SharedMap's own
 * default: 4 a shard of the heap, 16 to 64. Given, not left to the
 * default, so that indexBytes counts the tables the map makes.
 */
export function indexSegments(shards: number): number {
  let n = 16;
  while (n < 64 && n < 4 * shards) n *= 2;
  return n;
}

/**
 * Entries the index is made for when the items may take `itemBytes`: an
 * entry per ITEM_BYTES_PER_ENTRY, rounded to the nearer end of a
 * descriptor chunk (shared-map/layout.ts: chunks come in groups of four of
 * one size, each group's twice the last's): made for 262,144 entries, the
 * map would make room for 327,423; made for 261,887, for as many.
 */
export function indexCapacity(itemBytes: number): number {
  const wanted = Math.max(64, Math.floor(itemBytes / ITEM_BYTES_PER_ENTRY));
  let e = 0;
  while (chunkFirstId(e + 1) <= wanted) e++;
  const low = chunkFirstId(e) - 1;
  const high = chunkFirstId(e + 1) - 1;
  return Math.max(64, wanted - low < high - wanted ? low : high);
}

/**
 * Bytes of the index each shard's memory holds, by shard, for `capacity`
 * entries a shard in a heap of `shards` shards: the home (shard 0) makes
 * the header, the reader records, every segment's table (its share of
 * `capacity` x `shards` at half load) and its own descriptors; then each
 * other shard in turn claims chunks of descriptors for its `capacity`
 * (attachIndex: one after another, so the chunks' sizes follow that
 * order); each a 64-aligned object.
 */
export function indexBytesByShard(capacity: number, shards: number): number[] {
  const segments = indexSegments(shards);
  let slots = MIN_CAPACITY;
  while (slots * MAX_LOAD < (capacity * shards) / segments) slots *= 2;
  const out = new Array<number>(shards).fill(0);
  out[0] = aligned64(headerBytes(segments, shards)) + aligned64(DEFAULT_READER_RECORDS * READER_BYTES) + segments * aligned64(TABLE_HEADER_BYTES + 4 * slots);
  let e = 0;
  do out[0]! += aligned64(chunkSize(e++) * DESCRIPTOR_BYTES);
  while (e < CHUNK_COUNT && chunkFirstId(e) <= capacity);
  for (let s = 1; s < shards; s++) {
    for (let made = 0; made < capacity && e < CHUNK_COUNT; e++) {
      out[s]! += aligned64(chunkSize(e) * DESCRIPTOR_BYTES);
      made += chunkSize(e);
    }
  }
  return out;
}

/** The most index bytes one shard's memory holds (indexBytesByShard): what every region is made bigger by. */
export function indexBytes(capacity: number, shards: number): number {
  return Math.max(...indexBytesByShard(capacity, shards));
}

/**
 * The entries a shard's part of the index is made for: under -m, an entry
 * per ITEM_BYTES_PER_ENTRY of its items' share (`itemBytes`: indexCapacity);
 * under --memory (`itemBytes` 0), an entry per INDEX_BYTES_PER_ENTRY of its
 * region's object pages (`totalMemory`).
 */
export function indexShare(itemBytes: number, totalMemory: number): number {
  return itemBytes === 0 ? Math.max(64, Math.floor(totalMemory / INDEX_BYTES_PER_ENTRY)) : indexCapacity(itemBytes);
}

/**
 * The cache's one index, made on its home shard's thread (shard `shard`
 * of `heap`): tables for `share` entries a shard, descriptors for the
 * home's share. Every shard reads and writes it (item-cache.ts): one map,
 * so a key is found in one probe whichever shard wrote it, and a
 * conditional write of a key compares in one place (its slot, swapped by
 * compareExchange; an insert under its segment's lock); its segments
 * (indexSegments) let writers of different keys go on at once.
 */
export function createIndex(heap: SharedHeap, shard: number, share: number): SharedMap {
  return SharedMap.create(heap, { shard, capacity: share * heap.shards, descriptors: share, segments: indexSegments(heap.shards) });
}

/** The index made by createIndex, on another shard's thread: attached, and this shard's descriptors for `share` entries made now, before its items. */
export function attachIndex(heap: SharedHeap, handle: number, share: number): SharedMap {
  const map = SharedMap.attach(heap, handle);
  map.prepare(share);
  return map;
}

/** What allocateAligned(64, bytes) takes: the first size class that holds it with 64-aligned objects, else whole pages. */
function aligned64(bytes: number): number {
  if (bytes > MAX_SMALL_SIZE) return Math.ceil(bytes / PAGE_SIZE) * PAGE_SIZE;
  let cls = classOf[(bytes + 7) >>> 3]!;
  while (classAlignment[cls]! < 64) cls++;
  return classSize[cls]!;
}

/**
 * The region a shard of a heap of `shards` needs for `itemBytes` of items
 * (its share of -m): the items, the index's most (the home's), the slack
 * in its object pages, and its own tables (for `profilerSites` stacks;
 * default: what a region of that size keeps). Whole pages.
 */
export function shardBytesForItems(itemBytes: number, shards: number, profilerSites?: number): number {
  const objects = itemBytes + indexBytes(indexCapacity(itemBytes), shards) + Math.max(MIN_SLACK, Math.ceil(itemBytes * SLACK_SHARE));
  let bytes = Math.ceil(objects / PAGE_SIZE) * PAGE_SIZE;
  for (;;) {
    const pages = dataPagesFor(bytes, profilerSites ?? defaultProfilerSites(bytes));
    if (pages * PAGE_SIZE >= objects) return bytes;
    bytes += Math.ceil((objects - pages * PAGE_SIZE) / PAGE_SIZE) * PAGE_SIZE;
  }
}
