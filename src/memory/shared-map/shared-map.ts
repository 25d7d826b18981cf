/**
 * SharedMap: a hash index in the shared heap that any thread reads without
 * a lock or a message, and every thread that owns a shard writes.
 *
 * What it is for
 * --------------
 * Seastar shares nothing: a read of another shard's data is a message
 * there and back (20 to 65 us between idle shards on these VMs).
 * A shared heap can do better for reads: the data is already in memory
 * every thread can address. A SharedMap is made in one shard's memory and
 * found from any thread by its handle (a number: post it); a lookup takes
 * a reference to the entry, reads its bytes in place, and releases it. The
 * entry is never freed while a reference is held.
 *
 * Shape (offsets in layout.ts)
 * ----------------------------
 *   header      hash seed, descriptor directory, the segments (a table
 *               pointer, a move count, a lock, an entry count and an intent
 *               each), a writer record per shard (its lists, the stacks
 *               other threads push onto)
 *   readers     a record per reading SharedMap object: 15 hazard slots
 *   table       open addressing, linear probing, at most half full; a slot
 *               is (descriptor id << 8) | tag, 0 empty
 *   descriptor  32 bytes: refs, state + generation, hash, payload pointer,
 *               key and value lengths, a list link, its own id
 *   payload     one object per entry: the key's UTF-8 bytes, zero-padded to
 *               8, then the value; the caller fills the value in place
 *               (reserve, then publish) or hands bytes (set)
 *
 * Writers: segments, and each writer's own memory
 * ------------------------------------------------
 * Every change (set, reserve/publish and its conditional forms, delete,
 * unlink, clear, the resizes, reclaim, destroy) runs on any thread that
 * owns a shard of the heap, and what it allocates (the entry's payload,
 * descriptors, a grown table) is made in that shard's memory: the
 * allocator's rule (only a shard's owner allocates in it) holds, and a
 * write needs no message (prepare makes a writer's descriptors ahead of
 * its entries). A thread that owns
 * no shard gets HeapOwnershipError. The keys are split into 2^k segments
 * (Java's ConcurrentHashMap before Java 8), each with its own table, move
 * count, entry count and lock, the segment picked by a second mix of the
 * key's hash (layout.ts segmentIndex); writers of one segment serialise
 * on its lock, writers of different segments never meet, and readers take
 * no lock at all. Inside the lock a change is the single writer's
 * algorithm of before, on that segment (probe, one store to link, the
 * backward shift, the resize), so the argument below is made per segment.
 * Nothing is allocated inside a lock but a grown table: the payload and
 * the descriptor are made first. Each writer has a record (one per shard):
 * its free and retired descriptors, and two stacks other threads push its
 * descriptors onto; a descriptor belongs to the writer whose shard holds
 * its chunk and always goes back there, whoever unlinks or frees it.
 *
 * Why descriptors, and why they are never freed
 * ---------------------------------------------
 * A reader must protect an entry before it knows the entry still exists:
 * it read a slot, and the owner may delete that entry, and its last holder
 * free it, before the reader's protection lands. A count kept in the
 * payload (as memcached's items keep theirs) would then be incremented in
 * freed memory, perhaps already another object's. So what a reader
 * touches is a descriptor, and descriptors are type-stable: they sit in
 * chunks that are never freed while the map lives (Linux's
 * SLAB_TYPESAFE_BY_RCU), so any id a reader ever read still names a
 * descriptor, and what the reader then holds is checked.
 *
 * Two kinds of reference
 * ----------------------
 * A shared count is one word every reader of an entry writes: two threads
 * reading the same keys bounce its cache line between their cores on
 * every lookup (two lock-prefixed writes to a line the other core last
 * wrote), and the lookups of two threads add up to about those of one. So
 * a reader protects what it reads with a hazard slot (Michael's hazard
 * pointers): each reading SharedMap object claims a reader record of 15
 * slots on a cache line of its own, and a lookup writes the descriptor's
 * id there, on its own line, which no other thread writes; the count is
 * not touched. Such a hazard reference is released on the object that
 * took it. When an object's 15 slots are all held, when no record is left,
 * and for references that must travel (retain), the reference is a
 * counted one: the shared count, raised with compareExchange, never from
 * 0, and released on any thread.
 *
 * Freeing: an entry is freed once it is out of the table, its count is 0
 * and no hazard slot names it. Whoever takes the count to 0 (the owner
 * dropping the index's reference, or the last counted reader) retires it
 * (state UNLINKED -> RETIRED by compareExchange: exactly once per entry).
 * A reader thread then looks at every hazard slot and frees it at once if
 * none names it (its payload by heap.free: a cross-shard free, so whoever
 * drops an entry's last reference frees it), else hands it to the owner.
 * The entry's writer keeps what it retired, and what was handed to it, on
 * a retired list and frees those no hazard names in batches (reclaim: one
 * scan of the hazard slots per 32 entries or 64 KiB retired, whenever a
 * new entry needs a descriptor and none is free, and on reclaim()).
 * Descriptors come back to their writer through lock-free stacks only it
 * pops (one at a time, by compareExchange: one popper, so no ABA).
 *
 * The protocol
 * ------------
 * Reader (atomics.ts runs R1-R3 in one WebAssembly call):
 *   R1  the key's segment; T = load(its table), m = load(its move count);
 *       start at the key's home slot
 *   R2  s = load(slot): 0 ends the path: absent if load(M_MOVES) is still
 *       m, else start over. Another tag: next slot. The tag matches:
 *       protect its descriptor: store(hazard, id), or take a count
 *       (c = load(refs), compareExchange(c, c + 1), never from 0: a count
 *       of 0 is a free descriptor: read the slot again)
 *   R3  validate: load(slot) is still s and load(table) still T; if not,
 *       drop the protection and read the slot again (or start over if the
 *       table was replaced)
 *   R4  compare the held descriptor's hash, key length and key bytes (in
 *       its payload) with the key; equal: the reference is the caller's;
 *       else drop it and go on from the next slot
 * Writer (every step below under the segment's lock, taken by
 * compareExchange(lock, 0, token) and given back by store(lock, 0), but
 * the replace without it, last):
 *   intent   before its first store a reader can see, the writer writes
 *            what it is doing in the segment (the descriptor it links, the
 *            one it takes out, a table it is filling); cleared before the
 *            unlock
 *   publish  payload and descriptor fields written, then store(state
 *            RESERVED), store(refs, 1) (before the lock); then state
 *            LINKED, then store(slot) (new key: an empty slot; existing
 *            key: over the old entry's slot, one store)
 *   publishIf (exchangeIf) publish, once the probe under the lock found the
 *            key's entry to be the descriptor the caller holds a reference
 *            to (or no entry, when it expected none); else nothing is stored
 *   unlink   (delete, replace's old entry, clear) store(slot) away from the
 *            descriptor, then state UNLINKED and the index's reference
 *            dropped in one 8-byte compareExchange of (refs, state)
 *            (retired after the unlock if that was the last count)
 *   delete   Knuth's backward shift (no tombstones, so no rebuilds): the
 *            hole is filled from later in its cluster; before each store
 *            that removes the older copy of a moved entry, moves += 1
 *   grow     a table twice the size filled privately, then one store of
 *            the segment's table pointer; the old one is kept until destroy
 *   clear    segment by segment, slots emptied from the end of each
 *            cluster backwards, so no path a present key needs is ever cut
 *   reclaim  take what other threads retired, read every hazard slot,
 *            then free each retired entry whose count is 0 and which no
 *            hazard named
 *   lock     after its compareExchange, the holder loads every writer
 *            record's replacing token and waits for each one that names
 *            its segment to be cleared (a dead one is repaired)
 *   replace without the lock (a set, publish or exchange of a key the
 *            map holds, and publishIf over the entry the caller holds):
 *            the replacer writes its segment and entries in its own
 *            record, store(its token), then load(lock); held: clear the
 *            token and take the lock. Free: probe (the slot it reads its
 *            descriptor through by an atomic load), state LINKED, then
 *            compareExchange(slot, the word it read, the new word); lost
 *            (another replacer of the key swapped first): reserved again,
 *            token cleared, the lock's path. Won: the old entry unlinked
 *            (the pair step), then store(token, 0)
 *
 * Why it is safe (the memory-ordering argument)
 * ---------------------------------------------
 * Every access to a word that another thread may write at the same time is
 * atomic (WebAssembly's or Atomics', sequentially consistent: one order of
 * all of them that every thread agrees on). The plain reads are a writer's
 * of words only the holder of a segment's lock writes (its count, its
 * intent, its old tables, its table's slots), or only its own thread
 * writes (its record's lists), and a reader's of a descriptor's fields and
 * its payload while it protects them: nobody writes those then (a writer
 * rewrites a descriptor only once it is free, and never writes a
 * published payload), and they were written before the atomic store the
 * reader's atomic loads observed (the slot, refs), so they happen before
 * the reader's reads: no data race, no stale value.
 *  - Many writers, one at a time per segment: a writer's stores to its
 *    segment's words come before its store(lock, 0), which comes before
 *    the next holder's compareExchange(lock, 0, token) that saw it (one
 *    SC order), so the next holder reads every word as the last one left
 *    it: within a segment the writers form one sequence, and each step
 *    below is the single writer's of before. Words two segments share are
 *    written by atomics only: the directory (a chunk recorded with one
 *    store, after the compareExchange that claimed its entry, before any
 *    of its ids is handed out), a descriptor's pair (refs, state), and the
 *    writers' stacks. A descriptor is linked in its key's segment only,
 *    so only that segment's lock holder takes it out.
 *  - The pair step: (refs, state) are 8 bytes, changed as one by
 *    i64.atomic.rmw.cmpxchg where the index's reference is dropped, so
 *    "UNLINKED" and "the index let go" are one event; readers' counts
 *    change refs alone (4-byte atomics on half of it: mixed sizes, which
 *    x86 and ARMv8 keep atomic and totally ordered on one cache line).
 *  - No torn read: a payload is complete before the store that links it,
 *    and never written again by the map (a new value is a new payload and
 *    a new descriptor, swapped in with one slot store). A reader that
 *    protects a descriptor still being filled (reached through a stale
 *    slot: a reserved descriptor is in no slot) fails R3 and never reads
 *    its payload.
 *  - No read of freed memory: an entry is freed only after it left the
 *    table, its count reached 0 (and a count never rises from 0 but by
 *    retain, whose caller protects the entry) and a look at every hazard
 *    slot made after that found none naming it. A reader's hazard store
 *    comes before its R3 loads; the freeing thread's unlink store comes
 *    before its hazard loads. In the one order of these four, either the
 *    freeing thread sees the hazard (and keeps the entry), or the unlink
 *    comes before R3, which then fails: a reader never goes on to read an
 *    entry that can be freed under it (Michael, "Hazard pointers", 2004).
 *    A counted reference keeps the count above 0. A stale id still names a
 *    descriptor (chunks are never freed while the map lives), and a stale
 *    table is still a table (old ones are kept), so R1-R3 only ever touch
 *    the map's own memory.
 *  - The right entry (no ABA): once protected, a descriptor cannot be
 *    recycled. R3 then finds it in its slot of the current table, so at
 *    that instant it was an entry of the map, and R4 compares that entry's
 *    key. If it was recycled before the protection landed, R3 fails (the
 *    owner takes a descriptor out of its slot before it can be freed)
 *    unless it was relinked to the same slot, and then it is what that
 *    slot holds now. The table check covers old tables: a frozen slot may
 *    name a descriptor recycled since (even one being filled), and the
 *    moved table pointer sends the reader to the new table.
 *  - Exactly one free: retiring is a compareExchange of the state from
 *    UNLINKED (one winner per entry); after it, only the retiring reader
 *    (no hazard, count still 0) or the owner's reclaim (the entry on its
 *    list) frees, and the owner's list holds what readers did not free.
 *  - Linearizable: a hit is the map's entry at the R3 instant. A miss: an
 *    entry stays where it is in a table, but for the backward shift, which
 *    stores a copy of an entry into the hole before it removes the older
 *    copy; M_MOVES is bumped between the two, so a reader that passed the
 *    hole before the copy and reaches the old place after the removal sees
 *    the count change and starts over. Otherwise an empty slot at the end
 *    of the path, with every slot before it holding another key, means the
 *    key was absent at some instant of the probe (an insert of the key in
 *    between had it absent just before). A table a resize replaced is
 *    frozen at the resize, which came after the reader's R1: a miss there
 *    is a miss at that instant.
 *  - Replaces without the lock: store(token) then load(lock) on the
 *    replacer's side, store(lock) (the compareExchange) then load(token)
 *    on the holder's: in the one order of the four, either the replacer
 *    sees the lock and takes it, or the holder sees the token and waits
 *    for its clearing store, which comes after the replacer's last step.
 *    So while a replacer works, no slot of its segment is moved, copied,
 *    emptied or filled, and no table is replaced: each slot keeps its key,
 *    and the only stores to slots are other replacers' swaps of the same
 *    keys' words. The probe is then exact; a swap succeeds only over the
 *    word it read, so two replacers of one key take turns as two
 *    compareExchanges do, and each descriptor taken out of a slot is
 *    unlinked by the one thread whose swap took it out (reused and swapped
 *    back in meanwhile, it is unlinked in its present state). Readers see
 *    one store of the slot, as with the lock. The holder's stores before
 *    its store(lock, 0) come before a replacer's load(lock) that sees the
 *    lock free, so the replacer reads the segment as the holder left it.
 *  - No lost update: the writers of a key's segment take turns, and a
 *    replace is one store (or one compareExchange), so a key is never
 *    absent in between; readers never write a slot. A conditional publish compares under the lock,
 *    and the entry it compares with is held by the caller (a hazard or a
 *    count), so it cannot have been freed and its descriptor recycled as
 *    another entry of the key since the caller read it (no ABA): the slot
 *    still naming that descriptor means no other write of the key was
 *    linked in between. A read-modify-write that retries until publishIf
 *    answers true is then atomic per key against every writer on every
 *    thread (test/memory/shared-map/shared-map-writers.test.ts: threads incrementing the
 *    same keys lose no increment; adding one key, exactly one wins).
 *  - No leaked reference: every protection R2 takes is returned as a
 *    reference or dropped (R3's, R4's); check() balances the counts and
 *    the hazard slots against the table and the lists.
 *  - Lock-free reads: a reader starts over only when a writer changed the
 *    map under it (a slot, a move, a resize): a writer made progress.
 *    Writers never wait for a reader, only for another writer of their
 *    segment, in a critical section of a probe and a few stores (or a
 *    resize).
 *
 * A writer that dies
 * ------------------
 * A worker terminated in the middle of a change stops between two of its
 * steps: no finally block runs, its lock is never given back. So a waiter
 * that has spun (then slept) a while asks whether the lock's holder still
 * owns a shard: a thread that owns none cannot be inside a change (only a
 * shard's owner writes, and a runtime hands a dead thread's shard to
 * another only once it is gone: ownership.ts adoptShard). Then it takes
 * the lock over by compareExchange from the dead token (one waiter wins)
 * and repairs the segment (repair.ts): the resize whose table was never
 * published is undone; the one anomaly a cut-off backward shift leaves,
 * an entry in two slots, loses its older copy by the rest of the shift
 * (moves bumped first); the entry being linked is kept if a slot names it,
 * else its reservation or link is dropped; the entry being unlinked is
 * unlinked if no slot names it (the pair step: never dropped twice); the
 * count is recounted. Readers see nothing of this but a map that was
 * changed: every state the dead writer left was one a live writer passes
 * through. A writer's own lists change by one store per descriptor taken
 * off or put on, so a death costs at most the descriptor in hand; what is
 * lost that way (that descriptor, a reservation the dead thread made, a
 * chunk it claimed and never recorded) check() names in a sentence that
 * says "lost", and destroy({ force: true }) frees it. A replacer that dies
 * without the lock leaves its token in its record: the segment's next
 * lock holder waits a while, asks whether that thread is alive, and
 * repairs from the record (the entry it linked stays if a slot names it,
 * else is dropped; the one it replaced is unlinked if no slot names it
 * and its state is the one recorded); a thread that takes the dead
 * writer's shard over repairs its record the same way before its first
 * replace. The dead thread's
 * stores are all seen by the waiter: the thread ended before the runtime
 * learned of it and stored the new owner token the waiter loaded.
 *
 * Costs and figures: bench/shared-map.ts (docs/guide/sharedmap.md).
 * Limits: 2^23 entries, keys up to 64 KiB, 1024 reader records, 256
 * segments; tables only grow (what a map once held, it keeps room for).
 *
 * Thread death: a reader that dies holding references leaves those
 * entries allocated (a count that never gets back to 0, a hazard slot that
 * is never cleared, and its record stays claimed) until the map is
 * destroyed with { force: true } or the heap is discarded; nothing else is
 * affected. A thread that takes a dead writer's shard over attaches and
 * writes on with that shard's writer record (a writer's death: above),
 * and must not free the map's objects in it as orphans while other
 * threads read it.
 */
import { HeapOwnershipError, SharedMapError } from "../../errors.js";
import { parseInteger, rejectUnknownKeys } from "../../parse.js";
import { describeOwner, ownerToken, THIS_THREAD } from "../ownership.js";
import { liveObjectRegion, objectSizeIn, ownerShardOf } from "../pointers.js";
import type { SharedHeap } from "../shared-heap.js";
import { checkMap, countStates, tablesAndChunks, type SharedMapStats } from "./check.js";
import { descriptorAddress } from "./atomics.js";
import { newChunk, newTable, zeroed } from "./core.js";
import * as L from "./layout.js";
import { MapWriter } from "./writer.js";

export type { SharedMapStats } from "./check.js";

export interface SharedMapOptions {
  /** The home shard: its memory holds the map's header (and its first tables and descriptors); this thread must own it. */
  shard: number;
  /**
   * Entries to make room for (default 64): the tables (each segment's
   * share, at half load) and the descriptors for them are made at once,
   * in the home shard, so a map that stays within it allocates little but
   * its entries later (a segment given more than its share by the hash
   * grows; what other writers write adds descriptors in their shards).
   */
  capacity?: number;
  /**
   * Descriptors made at once for the home shard's writer (default:
   * `capacity`): a map that several shards will fill gives the home its
   * share, and the other writers make theirs with prepare().
   */
  descriptors?: number;
  /**
   * Reader records: how many SharedMap objects (one per thread, usually)
   * may read with hazard references at once (default 64, at most 1024;
   * 64 bytes each). Readers past them use counted references.
   */
  readers?: number;
  /**
   * Segments, a power of two from 1 to 256: each has its own table and
   * writer lock, so writers to keys of different segments never wait for
   * each other. Default: 4 per shard of the heap, at least 16 and at most
   * 64.
   */
  segments?: number;
}

/** The default segment count for a heap of `shards` shards. */
function defaultSegments(shards: number): number {
  let n = 16;
  while (n < 64 && n < 4 * shards) n *= 2;
  return n;
}

export class SharedMap extends MapWriter {
  private constructor(heap: SharedHeap, handle: number) {
    super(heap, handle);
  }

  /**
   * A new, empty map whose home is shard `o.shard`, on the thread that
   * owns that shard (HeapOwnershipError elsewhere). Bad options:
   * InvalidValueError; no memory for it: OutOfMemoryError, nothing left
   * allocated.
   */
  static create(heap: SharedHeap, o: SharedMapOptions): SharedMap {
    if (o === null || typeof o !== "object") throw new TypeError("SharedMap.create: options must be an object");
    rejectUnknownKeys(o, ["shard", "capacity", "descriptors", "readers", "segments"], "SharedMap.create: options");
    const shard = parseInteger(o.shard, "SharedMap.create: options.shard", 0, heap.shards - 1);
    const capacity = o.capacity === undefined ? 64 : parseInteger(o.capacity, "SharedMap.create: options.capacity", 0, L.MAX_ENTRIES);
    const descriptors = o.descriptors === undefined ? capacity : parseInteger(o.descriptors, "SharedMap.create: options.descriptors", 0, L.MAX_ENTRIES);
    const readers = o.readers === undefined ? L.DEFAULT_READER_RECORDS : parseInteger(o.readers, "SharedMap.create: options.readers", 0, L.MAX_READER_RECORDS);
    const segments = o.segments === undefined ? defaultSegments(heap.shards) : parseInteger(o.segments, "SharedMap.create: options.segments", 1, L.MAX_SEGMENTS);
    if ((segments & (segments - 1)) !== 0) throw new RangeError(`SharedMap.create: options.segments must be a power of two, got ${segments}`);
    const a = heap.shard(shard);
    if (!a.owned) {
      throw new HeapOwnershipError(
        `SharedMap.create of a map whose home is shard ${shard} from ${describeOwner(THIS_THREAD)}: the shard belongs to ${describeOwner(ownerToken(heap.regions[shard]!))}. ` +
          "Make the map on the thread that owns its home shard (with Smp, submitTo the shard).",
        shard,
      );
    }
    // Each segment's table holds its share of `capacity` at half load (the
    // power of two above it leaves most some room for the spread of a
    // random split). Not three standard deviations more: that doubled the
    // tables of a 1 MiB memcached shard's index, and its full shard then
    // failed 102 mallocs where it failed 4 (test/apps/memcached/memory.test.ts).
    const share = capacity / segments;
    let slots = L.MIN_CAPACITY;
    while (slots * L.MAX_LOAD < share) slots *= 2;
    const made: number[] = [];
    try {
      const bytes = L.headerBytes(segments, heap.shards);
      const hdr = zeroed(heap, a.allocateAligned(64, bytes), bytes);
      made.push(hdr);
      const i32 = new Int32Array(heap.buffer);
      const w = hdr >>> 2;
      for (let s = 0; s < segments; s++) {
        const table = newTable(heap, a, slots);
        made.push(table);
        i32[(hdr + L.SEGMENTS + s * L.SEGMENT_BYTES + L.SG_TABLE) >>> 2] = table;
      }
      // The descriptors for `capacity` entries (or `descriptors`), now, on the home writer's
      // free list: a map that stays within it allocates no structure
      // later, so its objects sit together where an empty region put them
      // instead of pinning pages among the entries (with chunks made as
      // they were needed, a 1 MiB memcached shard emptied of its 329 items
      // had 840 KiB free and no run over 344 KiB).
      let e = 0;
      let last = -1;
      do {
        const chunk = newChunk(heap, a, e);
        made.push(chunk);
        i32[w + (L.M_DIRECTORY >>> 2) + e] = chunk;
        if (last >= 0) i32[(last >>> 2) + L.W_NEXT] = L.chunkFirstId(e);
        last = chunk + (L.chunkSize(e) - 1) * L.DESCRIPTOR_BYTES;
        e++;
      } while (e < L.CHUNK_COUNT && L.chunkFirstId(e) <= descriptors);
      const records = zeroed(heap, a.allocateAligned(64, Math.max(1, readers) * L.READER_BYTES), Math.max(1, readers) * L.READER_BYTES);
      made.push(records);
      i32[w + (L.M_NEXT_CHUNK >>> 2)] = e;
      i32[(hdr + L.writerOffset(segments, shard) + L.WR_FREE) >>> 2] = 1; // id 0 is never handed out: a slot of 0 is empty
      i32[w + (L.M_READERS >>> 2)] = records;
      i32[w + (L.M_READER_RECORDS >>> 2)] = readers;
      i32[w + (L.M_WRITERS >>> 2)] = heap.shards;
      i32[w + (L.M_SEGMENT_MASK >>> 2)] = segments - 1;
      i32[w + (L.M_SEED >>> 2)] = crypto.getRandomValues(new Int32Array(1))[0]!;
      i32[w + (L.M_SHARD >>> 2)] = shard;
      i32[w + (L.M_VERSION >>> 2)] = L.MAP_VERSION;
      Atomics.store(i32, w + (L.M_MAGIC >>> 2), L.MAP_MAGIC);
      return new SharedMap(heap, hdr);
    } catch (e) {
      for (const p of made) a.free(p);
      throw e;
    }
  }

  /**
   * The map whose handle is `handle`, from any thread (the heap attached
   * there). SharedMapError (ERR_SHARDHEAP_MAP_HANDLE) when `handle` is not
   * a live map's: the check reads the object's first words, so a handle
   * kept past its map's destroy is caught until its memory is reused.
   */
  static attach(heap: SharedHeap, handle: number): SharedMap {
    let size: number;
    try {
      size = objectSizeIn(liveObjectRegion(heap, handle, "SharedMap.attach"), handle);
    } catch (e) {
      throw new SharedMapError("ERR_SHARDHEAP_MAP_HANDLE", `SharedMap.attach(${String(handle)}): not a SharedMap: ${(e as Error).message}`);
    }
    const i32 = new Int32Array(heap.buffer);
    const w = handle >>> 2;
    const segments = i32[w + (L.M_SEGMENT_MASK >>> 2)]! + 1;
    const problem =
      size < L.SEGMENTS || Atomics.load(i32, w) !== L.MAP_MAGIC
        ? "the object there is not a SharedMap (or it was destroyed)"
        : i32[w + (L.M_VERSION >>> 2)] !== L.MAP_VERSION
          ? `its layout version is ${i32[w + (L.M_VERSION >>> 2)]}, this is ${L.MAP_VERSION} (a map made by another version of shardheap)`
          : i32[w + (L.M_SHARD >>> 2)] !== heap.ownerOf(handle)
            ? "its header names another shard"
            : !(segments >= 1 && segments <= L.MAX_SEGMENTS && (segments & (segments - 1)) === 0) || i32[w + (L.M_WRITERS >>> 2)] !== heap.shards || size < L.headerBytes(segments, heap.shards)
              ? "its header does not fit this heap (segments or writer records)"
              : undefined;
    if (problem !== undefined) throw new SharedMapError("ERR_SHARDHEAP_MAP_HANDLE", `SharedMap.attach(${handle}): ${problem}`);
    return new SharedMap(heap, handle);
  }

  /**
   * Heap bytes of the map's own objects (header, reader records, tables,
   * descriptor chunks: stats().structureBytes) without a walk: read from
   * the heap when first asked, then kept up to date by the changes this
   * object makes (tables and descriptors only grow). So it is exact on
   * the object of a map's only writer, such as a memory budget's
   * (memcached's store.ts); with other writers, it leaves out what they
   * added since it was first asked.
   */
  get structureBytes(): number {
    if (this.ownBytes < 0) this.ownBytes = this.stats().structureBytes;
    return this.ownBytes;
  }

  /**
   * Whether entries this thread's writer retired, or other threads handed
   * back to it, wait for a reclaim: a writer that goes quiet calls
   * reclaim() while this says so, as the automatic reclaim waits for 32
   * of them. A few loads; false on a thread that owns no shard.
   */
  get reclaimPending(): boolean {
    let rec = this.writerRecord;
    if (rec === 0) {
      const regions = this.heap.regions;
      const s = regions.findIndex((r) => ownerToken(r) === THIS_THREAD);
      if (s < 0) return false;
      rec = this.hdr + L.writerOffset(this.segmentMask + 1, ownerToken(regions[this.shard]!) === THIS_THREAD ? this.shard : s);
    }
    return this.i32[(rec + L.WR_RETIRED_LIST) >>> 2] !== 0 || Atomics.load(this.i32, (rec + L.WR_RETIRED_STACK) >>> 2) !== 0;
  }

  /**
   * Free the map and everything in it, from any thread that owns a shard
   * (what lives in other shards' memory goes back by cross-shard frees),
   * and only once no thread will use the map again (a reader still probing
   * it would touch freed memory: tell the readers, and wait for their
   * answer, first). Refused (SharedMapError, ERR_SHARDHEAP_MAP_IN_USE,
   * nothing changed) while references are held or reservations open,
   * unless `force`: then entries are freed whoever holds them (for holders
   * known to be gone, such as a dead thread's).
   */
  destroy(o?: { force?: boolean }): void {
    this.writer("destroy");
    if (o !== undefined) rejectUnknownKeys(o, ["force"], "SharedMap.destroy: options");
    const stats = this.stats();
    if (o?.force !== true && (stats.held > 0 || stats.reserved > 0)) {
      throw new SharedMapError(
        "ERR_SHARDHEAP_MAP_IN_USE",
        `SharedMap.destroy: ${stats.held} references held and ${stats.reserved} reservations open; release them first (or destroy({ force: true }) if their holders are gone)`,
      );
    }
    const i32 = this.i32;
    const own = this.ownObjects();
    const payloads: number[] = [];
    for (const [, d] of this.descriptors()) if ((i32[(d >>> 2) + L.W_STATE]! & L.STATE_MASK) !== L.FREE) payloads.push(i32[(d >>> 2) + L.W_PAYLOAD]! >>> 0);
    for (let s = 0; s <= this.segmentMask; s++) this.store(this.hdr + L.SEGMENTS + s * L.SEGMENT_BYTES + L.SG_TABLE, 0);
    this.store(this.hdr + L.M_MAGIC, 0);
    this.ended = "destroyed";
    for (const p of payloads) this.heap.free(p);
    for (const p of own) this.heap.free(p);
  }

  /** Every descriptor of a recorded chunk: [id, address]. */
  private descriptors(): Array<[number, number]> {
    const out: Array<[number, number]> = [];
    const next = this.atomics.load(this.hdr + L.M_NEXT_CHUNK);
    for (let e = 0; e < next; e++) {
      if (this.i32[this.hdrWord + (L.M_DIRECTORY >>> 2) + e] === 0) continue;
      const first = L.chunkFirstId(e);
      for (let j = first === 0 ? 1 : 0; j < L.chunkSize(e); j++) out.push([first + j, descriptorAddress(this.i32, this.hdr, first + j)]);
    }
    return out;
  }

  /** The map's own heap objects: the descriptor chunks, every segment's tables (current and replaced), the reader records, and last the header. */
  private ownObjects(): number[] {
    return [...tablesAndChunks(this.i32, this.hdr), this.i32[this.hdrWord + (L.M_READERS >>> 2)]! >>> 0, this.hdr];
  }

  /** Counts of the map's entries, references and descriptors, read from the heap (any thread; a walk over every descriptor). */
  stats(): SharedMapStats {
    this.checkLive("stats");
    const s = countStates(this.i32, this.hdr);
    s.structureBytesByShard = new Array<number>(this.heap.shards).fill(0);
    s.structureObjectsByShard = new Array<number>(this.heap.shards).fill(0);
    for (const p of this.ownObjects()) {
      const bytes = objectSizeIn(liveObjectRegion(this.heap, p, "SharedMap.stats"), p);
      const shard = ownerShardOf(this.heap, p);
      s.structureObjects++;
      s.structureBytes += bytes;
      s.structureBytesByShard[shard]! += bytes;
      s.structureObjectsByShard[shard]!++;
    }
    return s;
  }

  /**
   * The map's invariants (layout.ts) as sentences, [] when they hold: on
   * a quiet map (no thread changing it or taking references meanwhile),
   * from any thread. What a writer that died mid-change left is named in
   * sentences that say "lost" (shared-map.ts, "A writer that dies").
   */
  check(): string[] {
    this.checkLive("check");
    return checkMap(this.heap, this.i32, this.hdr);
  }
}
