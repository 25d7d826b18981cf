/**
 * A SharedMap's words in the heap: every offset of its header, its
 * segments, its writer records, its slot tables and its entry descriptors,
 * in one place (shared-map.ts has the design and the memory-ordering
 * argument; this file is the map of bytes). All offsets are in bytes;
 * every word is 4-byte aligned, as the atomics (WebAssembly's trap on
 * anything else) require, and a descriptor's first two words (refs, state)
 * are 8-aligned: one 8-byte compareExchange changes both.
 *
 *   header     one object in the home shard, 64-byte aligned: the map's
 *              constants, the descriptor directory, then one 128-byte
 *              segment per segment and one 128-byte writer record per
 *              shard of the heap
 *   readers    64-byte reader records, 64-aligned: a claim word and 15
 *              hazard slots each (the descriptor ids a reader holds)
 *   table      [64-byte table header][capacity slot words], 64-aligned, in
 *              the shard of the writer that made it
 *   chunk      descriptors of 32 bytes, 64-aligned, in the shard of the
 *              writer that claimed it (its descriptors are that writer's)
 *   payload    one object per entry, in its writer's shard: [key bytes,
 *              zero-padded to 8][value]
 *
 * A slot word: 0 is empty; else (descriptor id << 8) | tag, the tag being
 * the top 8 bits of the key's hash, so a probe passes most other keys'
 * slots without touching their descriptors. Ids are 1 .. 2^24 - 1.
 *
 * Invariants (SharedMap.check verifies them on a quiet map):
 *   a slot of segment s names a LINKED descriptor whose hash picks s and
 *     whose tag it carries, and no EMPTY slot lies between the slot and
 *     its key's home (hash & mask);
 *   per segment, LINKED descriptors of its keys == slots in use ==
 *     SG_COUNT; none named twice; its lock 0 and its intent empty;
 *   refs >= 1 if RESERVED, LINKED or UNLINKED; FREE => refs == 0;
 *   FREE <=> on its writer's free list or returned stack, RETIRED <=> on
 *     its writer's retired list or retired stack, exactly once (its writer:
 *     the shard whose memory holds the descriptor's chunk);
 *   a hazard slot holds 0 or the id of a descriptor that is LINKED,
 *     UNLINKED or RETIRED;
 *   a descriptor's payload, unless FREE, is a live object of its writer's
 *     shard holding align8(keyLength) + valueLength bytes, its key's
 *     padding 0.
 * A writer that dies mid-change may leave one descriptor off every list
 * (check() names it as lost); see shared-map.ts, "A writer that dies".
 */

export const MAP_MAGIC = 0x50414d53; // "SMAP" little-endian
/**
 * Bumped when the layout changes: attach refuses another version.
 * 2: segments, writers on every shard, the pair (refs, state) 8-aligned.
 */
export const MAP_VERSION = 2;

// ---------------------------------------------------------------- header
// Line 0 (bytes 0-63): constants every lookup reads, and two words
// written once in a long while (a chunk claimed, a reader record claimed).
export const M_MAGIC = 0;
export const M_VERSION = 4;
/** The hash seed, chosen at random when the map is made. */
export const M_SEED = 8;
/** The home shard: its memory holds the header and the reader records. */
export const M_SHARD = 12;
/** Segments - 1 (a power of two). */
export const M_SEGMENT_MASK = 16;
/** Byte address of the reader records, and how many there are. */
export const M_READERS = 20;
export const M_READER_RECORDS = 24;
/** Writer records: one per shard of the heap. */
export const M_WRITERS = 28;
/** Directory entries claimed (chunks made, or being made, by some writer). */
export const M_NEXT_CHUNK = 32;
/** Reader records ever claimed: a reclaim scans records below it. */
export const M_READER_HIGH = 36;
/** Segments repaired after a writer died holding their lock (a count). */
export const M_REPAIRS = 40;

// Lines 1-4 (bytes 64-323): where the descriptor chunks are, each entry
// written once, before any of its ids is handed out; read by every lookup.
export const M_DIRECTORY = 64;
/**
 * Chunks come in groups of 4 of one size: group g's are 64 << g
 * descriptors each, so a writer claiming the next chunk gets about a
 * quarter of those made so far (not all of them, as doubling chunks would
 * give the last claimer), and 65 entries cover 2^24 ids. Not 16 a group:
 * a map's chunks past its first capacity then came as 16 KiB objects of
 * the small pools among its entries' pages, and a memcached shard of
 * 8 MiB filled with 100,000 items of 100 B had room for 3 items of
 * 900 KB where it had 5 (test/apps/memcached/memory.test.ts); from groups of
 * 4, a map made for 4,096 entries grows by chunks of 32 KiB and more,
 * page spans taken from the top of the shard.
 */
export const GROUP_SHIFT = 2;
export const CHUNK_COUNT = 65;
/** Ids of the groups before group g: GROUP_IDS * (2^g - 1). */
const GROUP_IDS = 64 << GROUP_SHIFT;
/** Byte offset of the first segment. */
export const SEGMENTS = 384;
export const SEGMENT_BYTES = 128;
export const WRITER_BYTES = 128;
export const MAX_SEGMENTS = 256;

/** Bytes of the header of a map with `segments` segments in a heap of `shards` shards. */
export function headerBytes(segments: number, shards: number): number {
  return SEGMENTS + segments * SEGMENT_BYTES + shards * WRITER_BYTES;
}

/** Byte offset of the writer record of `shard` in a header of `segments` segments. */
export function writerOffset(segments: number, shard: number): number {
  return SEGMENTS + segments * SEGMENT_BYTES + shard * WRITER_BYTES;
}

/**
 * The segment of a key: bits 16-23 of its hash times an odd constant, as
 * many as there are segments. Independent of the home slot for tables of
 * up to 2^16 slots (x -> x * C is a bijection mod 2^24, so each segment's
 * hashes take every value of their low 16 bits equally often) and of the
 * tag (the hash's top 8 bits). The probe (atomics.ts) computes the same.
 */
export const SEGMENT_MULTIPLIER = 0x9e3779b1;
export function segmentIndex(hash: number, segmentMask: number): number {
  return (Math.imul(hash, SEGMENT_MULTIPLIER) >>> 16) & segmentMask;
}

// -------------------------------------------------------------- segments
// Line A (bytes 0-63): read by every lookup of the segment's keys; written
// by its writers only on a resize or a delete that moves entries.
/** Byte address of the segment's current table (0 once the map is destroyed). */
export const SG_TABLE = 0;
/** Bumped before each store that removes an older copy of a moved entry (the backward shift). */
export const SG_MOVES = 4;
// Line B (bytes 64-127): the writers' own words, read and written under the lock.
/** The lock: 0, or the owner token (ownership.ts) of the thread that holds it. */
export const SG_LOCK = 64;
/** Entries linked in the segment. */
export const SG_COUNT = 68;
/** The tables a resize replaced, newest first, through T_NEXT_OLD (kept until destroy). */
export const SG_OLD_TABLES = 72;
/**
 * The intent: what the lock's holder is doing, written before it changes
 * anything a reader sees, cleared before it unlocks; a writer that breaks
 * the lock of a dead holder finishes or undoes it from here (repair.ts).
 * The descriptor being linked (its id and its state word then), the one
 * being taken out, and a table being filled by a resize.
 */
export const SG_LINKING = 76;
export const SG_LINKING_STATE = 80;
export const SG_UNLINKING = 84;
export const SG_UNLINKING_STATE = 88;
export const SG_GROWING = 92;

// --------------------------------------------------------------- writers
// One per shard of the heap, used by the thread that owns that shard.
// Line A (bytes 0-63): that thread's alone.
/** Free descriptors of this writer's chunks (a list through D_NEXT, by id; 0 = empty). */
export const WR_FREE = 0;
/**
 * This writer's retired descriptors (through D_NEXT): out of the map, no
 * count left, waiting for a reclaim to find no hazard naming them; how
 * many, and their payloads' bytes (when to reclaim).
 */
export const WR_RETIRED_LIST = 4;
export const WR_RETIRED_COUNT = 8;
export const WR_RETIRED_BYTES = 12;
/**
 * A replace made without the segment's lock (writer.ts, replaceUnlocked):
 * the replacing thread's owner token while it is at it (0: none; stored
 * last, after the words below, and cleared when it is done), the segment,
 * and what a repair needs if the thread dies in between: the descriptor
 * being linked and the one being replaced, with their states then. Zero in
 * a map made before these words were used, which is such a map's right
 * value: the layout version did not change.
 */
export const WR_REPLACING = 16;
export const WR_REPLACING_SEGMENT = 20;
export const WR_LINKING = 24;
export const WR_LINKING_STATE = 28;
export const WR_UNLINKING = 32;
export const WR_UNLINKING_STATE = 36;
// Line B (bytes 64-127): the only words other threads write.
/**
 * This writer's descriptors freed on other threads: a lock-free stack
 * through D_NEXT (by id; 0 = empty) that any thread pushes onto with
 * compareExchange and only the writer pops (one at a time, by
 * compareExchange: a single popper makes it ABA-free, and a writer cut
 * off between two steps loses at most the one descriptor it held).
 */
export const WR_RETURNED = 64;
/** This writer's descriptors other threads retired (a stack as WR_RETURNED's). */
export const WR_RETIRED_STACK = 68;

// ---------------------------------------------------------------- readers
export const READER_BYTES = 64;
/** The claim word: 0 free, else the claiming thread's owner token (ownership.ts). */
export const R_CLAIM = 0;
/** Hazard slots from byte 4: a descriptor id each, 0 = none. */
export const R_HAZARDS = 4;
export const HAZARDS_PER_READER = 15;
export const DEFAULT_READER_RECORDS = 64;
export const MAX_READER_RECORDS = 1024;
/** A reclaim runs once this many descriptors, or this many payload bytes, are retired. */
export const RECLAIM_COUNT = 32;
export const RECLAIM_BYTES = 65536;

// ---------------------------------------------------------------- tables
export const TABLE_HEADER_BYTES = 64;
/** capacity - 1 (capacity a power of two). */
export const T_MASK = 0;
/** The next older table in SG_OLD_TABLES' list. */
export const T_NEXT_OLD = 4;
export const MIN_CAPACITY = 16;
/** Slots a segment's table may have. */
export const MAX_CAPACITY = 1 << 24;
/** A table grows (to twice its size) before it is more than half full. */
export const MAX_LOAD = 0.5;
/** Entries a map may hold: ids are 24 bits (a slot word is id << 8 | tag). */
export const MAX_ENTRIES = 1 << 23;

// ------------------------------------------------------------ descriptors
export const DESCRIPTOR_BYTES = 32;
export const DESCRIPTOR_SHIFT = 5;
/** References: the index holds one while the entry is linked, the writer one while it is reserved, each counted reader one. */
export const D_REFS = 0;
/** The kind (low 3 bits) and the generation (bits 3-31, +1 per reservation), read and changed with refs as one 8-byte word where it matters. */
export const D_STATE = 4;
/** The key's full 32-bit hash. */
export const D_HASH = 8;
/** Byte address of the payload object. */
export const D_PAYLOAD = 12;
export const D_KEY_LENGTH = 16;
export const D_VALUE_LENGTH = 20;
/** Link in its writer's free or retired list or stack (an id); while RESERVED, the reserving thread's owner token. */
export const D_NEXT = 24;
/** This descriptor's own id (constant: written when its chunk is made). */
export const D_ID = 28;

/** The same fields as word indexes from the descriptor's first word (d >>> 2). */
export const W_REFS = D_REFS >>> 2;
export const W_STATE = D_STATE >>> 2;
export const W_HASH = D_HASH >>> 2;
export const W_PAYLOAD = D_PAYLOAD >>> 2;
export const W_KEY_LENGTH = D_KEY_LENGTH >>> 2;
export const W_VALUE_LENGTH = D_VALUE_LENGTH >>> 2;
export const W_NEXT = D_NEXT >>> 2;
export const W_ID = D_ID >>> 2;

export const STATE_MASK = 7;
/** Not in use: refs 0, on its writer's free list or returned stack. */
export const FREE = 0;
/** Made by reserve(): the writer's, not in the table yet. */
export const RESERVED = 1;
/** In the table. */
export const LINKED = 2;
/** Taken out of the table, still counted. */
export const UNLINKED = 3;
/** Out of the table, no count left: freed by a reclaim that finds no hazard naming it. */
export const RETIRED = 4;
/** One generation in a state word. */
export const GENERATION_STEP = 8;
/**
 * A reference: bit 29 says which kind. A counted one (bit clear) carries
 * the low 5 bits of the descriptor's generation (24-28) and its id; a
 * hazard one (bit set) the hazard slot (24-28) and the id. Below 2^30: a
 * small integer to V8, never a heap number.
 */
export const HAZARD_REF = 1 << 29;
export const GENERATION_MASK = 0x1f << 24;
export const ID_MASK = 0xffffff;
export const MAX_ID = ID_MASK;

/** The generation bits a counted reference carries, from a state word (its bits 3-7 to 24-28). */
export function refGeneration(state: number): number {
  return (state << 21) & GENERATION_MASK;
}

/** Descriptors chunk e holds: 64 << (e / 4), the last one cut at id 2^24 - 1. */
export function chunkSize(e: number): number {
  return Math.min(64 << (e >>> GROUP_SHIFT), MAX_ID + 1 - chunkFirstId(e));
}

/** The first id of chunk e. */
export function chunkFirstId(e: number): number {
  const g = e >>> GROUP_SHIFT;
  return (GROUP_IDS << g) - GROUP_IDS + (e & ((1 << GROUP_SHIFT) - 1)) * (64 << g);
}

/**
 * The byte address of descriptor `id` from a directory at word index `dir`
 * of `i32` (the probe computes the same, in atomics.ts): its group g, its
 * offset o in the group, the chunk (g << 2) | (o >> (6 + g)) and its place
 * in the chunk.
 */
export function descriptorAt(i32: Int32Array, dir: number, id: number): number {
  const g = 31 - Math.clz32((id >>> (6 + GROUP_SHIFT)) + 1);
  const o = id - ((GROUP_IDS << g) - GROUP_IDS);
  const chunk = i32[dir + ((g << GROUP_SHIFT) | (o >>> (6 + g)))]! >>> 0;
  return chunk === 0 ? 0 : chunk + ((o & ((64 << g) - 1)) << 5);
}

/** Bytes the key takes at the start of a payload (the value follows, 8-aligned). */
export function keyArea(keyLength: number): number {
  return (keyLength + 7) & ~7;
}

/** The longest key: 64 KiB (memcached's keys are at most 250 bytes). */
export const MAX_KEY_BYTES = 65536;
