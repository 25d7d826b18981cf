/**
 * A SharedMap's words in the heap: every offset of its header, its slot
 * tables and its entry descriptors, in one place (shared-map.ts has the
 * design and the memory-ordering argument; this file is the map of bytes).
 * All offsets are in bytes; every word is 4-byte aligned, as the atomics
 * (WebAssembly's trap on anything else) require.
 *
 *   header     one 320-byte object, 64-byte aligned, in the owner's shard
 *   readers    64-byte reader records, 64-aligned: a claim word and 15
 *              hazard slots each (the descriptor ids a reader holds)
 *   table      [64-byte table header][capacity slot words], 64-aligned
 *   chunk k    64 << k descriptors of 32 bytes, 64-aligned (k = 0..18)
 *   payload    one object per entry: [key bytes, zero-padded to 8][value]
 *
 * A slot word: 0 is empty; else (descriptor id << 8) | tag, the tag being
 * the top 8 bits of the key's hash, so a probe passes most other keys'
 * slots without touching their descriptors. Ids are 1 .. 2^24 - 1.
 *
 * Invariants (SharedMap.check verifies them on a quiet map):
 *   a slot names a LINKED descriptor, whose tag it carries, and no EMPTY
 *     slot lies between the slot and its key's home (hash & mask);
 *   LINKED descriptors == slots in use == M_COUNT; none named twice;
 *   refs >= 1 if RESERVED, LINKED or UNLINKED; FREE => refs == 0;
 *   FREE <=> on the owner's free list or the returned stack, RETIRED <=>
 *     on the owner's retired list or the retired stack, exactly once;
 *   FREE + RESERVED + LINKED + UNLINKED + RETIRED == M_NEXT_ID - 1 (id 0
 *     unused);
 *   a hazard slot holds 0 or the id of a descriptor that is LINKED,
 *     UNLINKED or RETIRED;
 *   a descriptor's payload, unless FREE, is a live object of the shard
 *     holding align8(keyLength) + valueLength bytes, its key's padding 0.
 */

export const MAP_MAGIC = 0x50414d53; // "SMAP" little-endian
/** Bumped when the layout changes: attach refuses another version. */
export const MAP_VERSION = 1;

// ---------------------------------------------------------------- header
export const MAP_HEADER_BYTES = 320;
// Line 0 (bytes 0-63): read by every lookup, written by the owner only on
// a resize (M_TABLE) or a delete that moves entries (M_MOVES).
export const M_MAGIC = 0;
/** Byte address of the current table; 0 once the map is destroyed. */
export const M_TABLE = 4;
/** Bumped by the owner before each store that moves an entry (the delete's backward shift). */
export const M_MOVES = 8;
/** The hash seed, chosen at random when the map is made. */
export const M_SEED = 12;
export const M_SHARD = 16;
export const M_VERSION = 20;
/** Byte address of the reader records, and how many there are. */
export const M_READERS = 24;
export const M_READER_RECORDS = 28;
// Lines 1-2 (bytes 64-139): where the descriptor chunks are, written once
// per chunk before any of its descriptors is used; read by every lookup.
export const M_DIRECTORY = 64;
export const CHUNK_COUNT = 19;
// Line 3 (bytes 192-255): the owner's own state.
/** Linked entries (size; read from any thread as an approximate figure). */
export const M_COUNT = 192;
/** The next id never handed out (ids below it are in some state). */
export const M_NEXT_ID = 196;
/** The owner's free descriptors (a list through D_NEXT, by id; 0 = empty). */
export const M_FREE = 200;
/** The tables a resize replaced, newest first, through T_NEXT_OLD (kept until destroy). */
export const M_OLD_TABLES = 204;
/** Entries reserved and neither published nor given up. */
export const M_RESERVED = 208;
/**
 * The owner's retired descriptors (through D_NEXT): out of the map, no
 * count left, waiting for the next reclaim to find no hazard naming them;
 * how many, and their payloads' bytes.
 */
export const M_RETIRED_LIST = 212;
export const M_RETIRED_COUNT = 216;
export const M_RETIRED_BYTES = 220;
// Line 4 (bytes 256-319): the only header words other threads write.
/**
 * Descriptors freed on other threads, handed back to the owner: a
 * lock-free stack through D_NEXT (by id; 0 = empty) that any thread pushes
 * onto with compareExchange and the owner takes whole with one exchange
 * (the inbox pattern of cross-shard.ts: no single pop, so no ABA).
 */
export const M_RETURNED = 256;
/** Descriptors other threads retired (a stack as M_RETURNED's), for the owner's reclaim. */
export const M_RETIRED_STACK = 260;
/** Reader records ever claimed: a reclaim scans records below it. */
export const M_READER_HIGH = 264;

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
/** The next older table in M_OLD_TABLES' list. */
export const T_NEXT_OLD = 4;
export const MIN_CAPACITY = 16;
/** Slots a table may have: ids and tags share a 32-bit slot word (24 + 8 bits). */
export const MAX_CAPACITY = 1 << 24;
/** A table grows (to twice its size) before it is more than half full. */
export const MAX_LOAD = 0.5;

// ------------------------------------------------------------ descriptors
export const DESCRIPTOR_BYTES = 32;
export const DESCRIPTOR_SHIFT = 5;
/** References: the index holds one while the entry is linked, the writer one while it is reserved, each reader one. */
export const D_REFS = 0;
/** The state (low 2 bits) and the generation (bits 24-29), as a reference carries it. */
export const D_STATE = 4;
/** The key's full 32-bit hash. */
export const D_HASH = 8;
/** Byte address of the payload object. */
export const D_PAYLOAD = 12;
export const D_KEY_LENGTH = 16;
export const D_VALUE_LENGTH = 20;
/** Link in the owner's free list or the returned stack (an id). */
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
/** Not in use: refs 0, on the free list or the returned stack. */
export const FREE = 0;
/** Made by reserve(): the writer's, not in the table yet. */
export const RESERVED = 1;
/** In the table. */
export const LINKED = 2;
/** Taken out of the table, still counted. */
export const UNLINKED = 3;
/** Out of the table, no count left: freed by a reclaim that finds no hazard naming it. */
export const RETIRED = 4;
/**
 * A reference: bit 29 says which kind. A counted one (bit clear) carries
 * the descriptor's generation (5 bits, 24-28) and its id; a hazard one
 * (bit set) the hazard slot (24-28) and the id. Below 2^30: a small
 * integer to V8, never a heap number.
 */
export const HAZARD_REF = 1 << 29;
export const GENERATION_SHIFT = 24;
export const GENERATION_MASK = 0x1f << GENERATION_SHIFT;
export const ID_MASK = 0xffffff;
export const MAX_ID = ID_MASK;

/** Descriptors chunk k holds: 64, 128, 256, ... (chunk 18 ends past id 2^24). */
export function chunkSize(k: number): number {
  return 64 << k;
}

/** The first id of chunk k: 64 * (2^k - 1). */
export function chunkFirstId(k: number): number {
  return (64 << k) - 64;
}

/** The chunk holding id `id`. */
export function chunkOf(id: number): number {
  return 31 - Math.clz32((id >>> 6) + 1);
}

/** Bytes the key takes at the start of a payload (the value follows, 8-aligned). */
export function keyArea(keyLength: number): number {
  return (keyLength + 7) & ~7;
}

/** The longest key: 64 KiB (memcached's keys are at most 250 bytes). */
export const MAX_KEY_BYTES = 65536;
