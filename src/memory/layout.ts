/**
 * The heap's layout in the SharedArrayBuffer: every slot index, in one place.
 *
 * Design (after Seastar's core/memory.cc)
 * ---------------------------------------
 * shardheap is share-nothing: each shard owns one fixed-size region of a
 * single SharedArrayBuffer, and only the thread running that shard writes
 * the region's allocator state. All state lives in the buffer, never in JS
 * objects, so any thread, or a tool reading a saved copy, can read any
 * shard's statistics without that shard's help.
 *
 *   buffer = [heap header: 1 page][shard 0 region][shard 1 region]...
 *   region = [shard header][page records][class map][live/pending bitmap]
 *            [profiler: sites, frames, strings, peak records][timeline][pages]
 *
 * A pointer is a byte offset into the buffer. Page 0 of the buffer is the
 * heap header, so 0 is never a valid pointer and can mean null, as in C.
 * The owning shard is `(ptr - HEAP_HEADER_BYTES) / shardBytes`, like
 * Seastar's object_cpu_id. Offsets are kept below 2^32 (the buffer is at
 * most 4 GiB) so that free-list links fit a Uint32 and `ptr >>> k` is exact.
 *
 * Pages are 4096 bytes. Runs of pages form spans, of any length: a free
 * span sits in one of segregated free lists (exact page counts below 32,
 * 16 lists per power of two above, a bitmap of the non-empty ones) and
 * merges with free neighbours the moment it is freed, so a request is
 * placed in the smallest free span that holds it, in O(1) (TLSF's scheme,
 * page-spans.ts). Large objects (> 16 KiB) are page spans of the exact page
 * count, carved from the high end of the span chosen; small-pool spans
 * from the low end. Small objects come from small pools (see
 * size-classes.ts, small-pool.ts). Power-of-two buddies, Seastar's scheme
 * and ours before heap version 3, needed 1.9x a trace's peak live bytes where
 * this needs 1.25x (bench/fragmentation.ts).
 *
 * Liveness is exact, not probabilistic: a bitmap holds one "live" bit per
 * 8-byte granule, set only at the first granule of a live object, so a
 * double free, an interior pointer or a stale pointer is rejected before
 * anything is written. Beside each live word sits a "pending" word: a shard
 * freeing another shard's object claims it there with Atomics.or before it
 * pushes the object on the owner's inbox, so a second free of the same
 * object, from any thread, is rejected even before the owner drains. The
 * owner writes live words with plain stores (one writer per byte); remote
 * threads touch only pending words, the inbox and the pushed object, and
 * the shared words only through Atomics.
 *
 * What a free *loads* is what it costs once the live set outgrows the
 * cache (a store that misses does not stall; a load does), so the fast
 * path loads only the page's size class from the class map (one byte per
 * page: stays cached) and one live/pending word pair (a compact 128 bytes
 * per page, both words on one line); it never loads from the object. In the
 * churn benchmark at 100k live objects this took a step from ~135 ns (state
 * and bits in a 192-byte page record) to ~72 ns, against a floor of ~44 ns;
 * reading a pending tag from the object instead cost ~165 ns. Cost per
 * 4 KiB page: 32 bytes of page state, 1 byte of class map, 128 bytes of
 * bitmap (4%).
 *
 * Invariants (checked by check.ts):
 *   freePages + usedPages == dataPages
 *   mallocs - frees == number of live bits == liveObjects
 *   a free span: head FREE, its last page's PM_HEAD the head, in the list
 *     of its length, never beside another free span (it would have merged);
 *     a list's bitmap bit set exactly when the list is not empty
 *   a pool span: every page POOL with the same class and head;
 *     used + objects in its own freelist == capacity
 */

export const PAGE_SIZE = 4096;
export const PAGE_SHIFT = 12;
/** Allocation granule: every object starts at a multiple of 8 bytes. */
export const GRANULE_SHIFT = 3;
export const GRANULE = 1 << GRANULE_SHIFT;

/** Buffers are capped at 4 GiB so offsets and links fit 32 bits. */
export const MAX_HEAP_BYTES = 2 ** 32;

// ---------------------------------------------------------------------------
// Heap header: page 0 of the buffer, Int32 slots.
export const HEAP_HEADER_BYTES = PAGE_SIZE;
export const HEAP_MAGIC0 = 0x44524853; // "SHRD" little-endian
export const HEAP_MAGIC1 = 0x50414548; // "HEAP" little-endian
/**
 * 2: the owner word, the outbox and claimed lists (the races of two frees
 *    of one object, cross-shard.ts "Claims").
 * 3: free spans of any page count in segregated lists (page-spans.ts).
 * 4: the profiler's site capacity is an option, kept in H_PROF_SITES
 *    (heapprofSites); a version 3 heap is read as one of the default capacity
 *    (PRE_CAPACITY_HEAP_VERSION).
 * 5: peaks: a peak record per site after the profiler's strings, and each
 *    region's timeline after them (peaks.ts, timeline.ts); versions 3 and
 *    4 are still read, as heaps without either (PRE_PEAK_HEAP_VERSION).
 */
export const HEAP_VERSION = 5;
/** The last version whose profiler capacity followed from the shard size alone. */
export const PRE_CAPACITY_HEAP_VERSION = 3;
/** The last version without peak records and timelines: its regions end their tables at the strings. */
export const PRE_PEAK_HEAP_VERSION = 4;

/** Whether a heap of format `version` keeps peaks and timelines. */
export function hasPeaks(version: number): boolean {
  return version > PRE_PEAK_HEAP_VERSION;
}

export const H_MAGIC0 = 0;
export const H_MAGIC1 = 1;
export const H_VERSION = 2;
export const H_SHARDS = 3;
/** Region size of one shard, in pages. */
export const H_SHARD_PAGES = 4;
export const H_PAGE_SIZE = 5;
export const H_HEADER_BYTES = 6;
/**
 * Distinct allocation stacks each shard's profiler keeps exactly (the
 * heapprofSites option; its tables are sized from it, profilerCapacity):
 * in the heap header, as every region's layout depends on it.
 */
export const H_PROF_SITES = 7;
/**
 * Modes every thread of the heap follows (HEAP_FLAG_*), set by create: in
 * the header, as a thread attaching must follow the mode the heap was made
 * in. Heaps made before it hold 0 here (the header is a zeroed page), which
 * reads as no flags, so the version did not change.
 */
export const H_FLAGS = 8;
/** Debug pointers (quarantine.ts): freed objects are poisoned and held back from reuse. */
export const HEAP_FLAG_DEBUG_POINTERS = 1;
export const HEAP_FLAGS_KNOWN = HEAP_FLAG_DEBUG_POINTERS;
/**
 * The heap-wide peak (peaks.ts), on a line of its own (bytes 64-127): every
 * shard adds its profiled live bytes' changes to H_PEAK_LIVE (8-byte units,
 * a Uint32 through Atomics.add: 32 GiB of estimates), raises H_PEAK_UNITS
 * (compareExchange) when the sum passes it, then bumps H_PEAK_EPOCH, which
 * each shard's sites compare with to fold in what they held at the peak.
 * Its time and the time it began (Float64 indices into the buffer) follow.
 * Zero in heaps made before peaks, whose header page was zeroed.
 */
export const H_PEAK_LIVE = 16;
export const H_PEAK_UNITS = 17;
export const H_PEAK_EPOCH = 18;
/** Float64 index: ms since the epoch of the heap-wide peak (Int32 slots 20-21). */
export const H_PEAK_TIME_F64 = 10;
/** Float64 index: when the heap-wide peak began to be kept (the heap's making, or its last reset). */
export const H_PEAK_SINCE_F64 = 11;
/** Bytes per unit of H_PEAK_LIVE and H_PEAK_UNITS. */
export const PEAK_UNIT_BYTES = 8;
/**
 * The memory-pressure doorbell (pressure.ts), on a line of its own (bytes
 * 128-191): a shard whose allocated memory reaches a threshold bumps it and
 * notifies; the main thread of an Smp waits on it (Atomics.waitAsync).
 */
export const H_PRESSURE_BELL = 32;

// ---------------------------------------------------------------------------
// Shard header: the start of each region, its slots in address order. Int32
// slot indices are relative to the region start / 4; the Float64 counters
// relative to the region start / 8. SHARD_HEADER_SLOTS below lists every
// section with its cache-line rule, and checkShardHeaderLayout() (run by the
// test suite) fails when two overlap, one overflows SHARD_HEADER_BYTES, or a
// section that must sit alone shares a 64-byte line.
export const SHARD_HEADER_BYTES = 4 * PAGE_SIZE;

// Line 0 (bytes 0-63): written by the owner, rarely; read by every reader.
export const S_ID = 0;
/** Pages available for objects in this region. */
export const S_DATA_PAGES = 1;
/** Byte offsets, relative to the region start, of the sections. */
export const S_META_OFFSET = 2;
/** Byte offset of the class map: one byte per page, size class + 1 for pool pages, 0 otherwise. */
export const S_CLASS_MAP_OFFSET = 3;
export const S_DATA_OFFSET = 4;
/** Pages currently in free spans. */
export const S_FREE_PAGES = 5;
export const S_BITMAP_OFFSET = 7;
/** Heap profiler (site-table.ts): where its section is, its capacities and fill. */
export const S_PROF_OFFSET = 8;
export const S_PROF_MAX_SITES = 9;
export const S_PROF_MAX_FRAMES = 10;
export const S_PROF_STRING_CAPACITY = 11;
export const S_PROF_SITES = 12;
export const S_PROF_FRAMES = 13;
export const S_PROF_STRING_BYTES = 14;
/** Sample rate in bytes (0 off, 1 every allocation). */
export const S_PROF_RATE = 15;

/**
 * Line 1 (bytes 64-127), the inbox: head of this shard's cross-shard free
 * list (a Uint32 pointer, 0 = empty) and the doorbell word other shards
 * bump and notify when they push onto an empty inbox. The only header words
 * other threads write; alone on their line so remote pushes do not bounce
 * the owner's hot state.
 */
export const S_INBOX = 16;
export const S_DOORBELL = 17;

/**
 * Line 2: which free-span lists (page-spans.ts) are not empty: bit i of
 * word S_SPAN_BITMAP + (i >> 5) for list i, and bit w of S_SPAN_SUMMARY
 * when bitmap word w is not 0, so the first non-empty list from any list
 * on is two word reads away.
 */
export const S_SPAN_SUMMARY = 32;
export const S_SPAN_BITMAP = 33;
/** Free-span lists: exact page counts below 32, then 16 lists per power of two up to 2^20 pages. */
export const SPAN_LIST_COUNT = 288;
export const SPAN_BITMAP_WORDS = SPAN_LIST_COUNT / 32;

// Line 4 (bytes 256-319): the owner's cold settings.
/** Frames recorded per allocation site. */
export const S_PROF_DEPTH = 64;
/** The current rate epoch (see RATE_EPOCHS). */
export const S_PROF_EPOCH = 65;
/**
 * The thread that owns this shard: its worker_threads threadId + 1, 0 when
 * no thread has taken it (shared-heap.ts). Taken with compareExchange.
 */
export const S_OWNER = 66;
/**
 * Which profiler tables have refused an entry (PROF_FULL_* bits), so a
 * reader can say why stacks were folded into "(other sites)". Set by the
 * owner, never cleared (the tables only grow).
 */
export const S_PROF_FULL = 67;
export const PROF_FULL_SITES = 1;
export const PROF_FULL_FRAMES = 2;
export const PROF_FULL_STRINGS = 4;
/**
 * Debug pointers' quarantine (quarantine.ts), the owner's: a FIFO chain of
 * freed objects held back from reuse, linked through their first two
 * words (the link, then the link XOR LINK_CHECK). Oldest (Uint32 pointer,
 * 0 = empty), newest, and how many objects and bytes it holds;
 * S_QUARANTINE_WRITTEN counts the objects found written after their free
 * (as they left, or when their link words were next needed). All 0 in a
 * heap without the mode.
 */
export const S_QUARANTINE_HEAD = 68;
export const S_QUARANTINE_TAIL = 69;
export const S_QUARANTINE_OBJECTS = 70;
export const S_QUARANTINE_BYTES = 71;
export const S_QUARANTINE_WRITTEN = 72;
/** What this shard has added to the heap header's H_PEAK_LIVE, in PEAK_UNIT_BYTES units (peaks.ts). */
export const S_PROF_HEAP_UNITS = 73;

/**
 * Float64 counters (index relative to region start / 8), bytes 512-575.
 * Small objects are counted per size class in their pool record (the cache
 * line malloc and free already touch); these count page-span objects, and
 * the totals are sums (memory-stats.ts).
 */
export const C_BASE = 64; // byte 512
export const C_MALLOCS = 0; // large objects only
export const C_FREES = 1; // large objects only
/** Frees this shard sent to other shards (Seastar's cross_cpu_frees). */
export const C_CROSS_SHARD_FREES = 2;
export const C_BYTES_ALLOCATED = 3; // large objects only
export const C_RECLAIMS = 4;
export const C_LARGE_ALLOCATIONS = 5;
export const C_FAILED_ALLOCATIONS = 6;
/** Objects other shards freed into this shard's inbox and it drained. */
export const C_CROSS_SHARD_RECEIVED = 7;
export const C_COUNT = 8;

/**
 * The shard's peak (peaks.ts), Float64 slots relative to the region start
 * / 8, bytes 576-615, beside the counters: written by the owner at every
 * profiled allocation and free, read by anyone.
 */
export const PK_BASE = 72; // byte 576
/** Profiled live bytes now: the sum of the sites' live bytes. */
export const PK_LIVE = 0;
/** The most PK_LIVE has been since profiling began or the last reset, and when (ms since the epoch; 0: never). */
export const PK_PEAK = 1;
export const PK_TIME = 2;
/** Bumped at every new peak and reset: a site whose peak record holds another epoch holds at the peak what it holds now. */
export const PK_EPOCH = 3;
/** When the peak began to be kept: profiling's first start, or the last resetPeak (ms since the epoch). */
export const PK_SINCE = 4;
export const PK_COUNT = 5;

/**
 * Memory pressure (pressure.ts), Int32 slots, bytes 640-755. The owner
 * compares its free pages with S_PRESSURE_RISE whenever it takes pages and
 * looks further only when they fall below it (0: no threshold left to
 * reach); S_PRESSURE_LEVEL thresholds are reached now. Set up by
 * setPressureThresholds before the shard runs; counted by the owner.
 */
export const S_PRESSURE_COUNT = 160;
export const S_PRESSURE_LEVEL = 161;
export const S_PRESSURE_RISE = 162;
/** Up to MAX_PRESSURE_THRESHOLDS thresholds, ascending: in used pages, and as given in millionths of the shard. */
export const S_PRESSURE_PAGES = 164;
export const S_PRESSURE_PPM = 172;
/** Upward crossings of each threshold, counted by the owner (Atomics.store), read by the main thread and /metrics. */
export const S_PRESSURE_CROSSINGS = 180;
export const MAX_PRESSURE_THRESHOLDS = 8;

/**
 * The timeline's ring (timeline.ts), Int32 slots, bytes 768-779: written by
 * the one thread that samples it (an Smp's main thread), not the owner. A
 * sequence word odd while an entry is written, the next entry's index, the
 * entries held.
 */
export const S_TIMELINE_SEQ = 192;
export const S_TIMELINE_NEXT = 193;
export const S_TIMELINE_COUNT = 194;

/** Small-pool records, one 64-byte cache line per pool, bytes 1024-7167 (96 pools). */
export const S_POOLS = 256; // byte 1024
export const POOL_STRIDE = 16;
/**
 * Head of the pool's clean free list (Uint32 pointer, 0 = empty): free
 * objects whose pending bit is clear, what malloc pops. P_FREE_COUNT counts
 * the objects of both lists, clean and claimed (one count for free() to
 * keep: it is what trimming compares with maxFree).
 */
export const P_FREE_HEAD = 0;
export const P_FREE_COUNT = 1;
/** First span (page index, -1 = none) whose own freelist is not empty. */
export const P_SPAN_LIST = 2;
export const P_PAGES_IN_USE = 3;
/** Objects the pool's spans can hold in all. */
export const P_CAPACITY = 4;
/** Objects sitting in the spans' own freelists (not the pool's lists). */
export const P_SPAN_FREE = 5;
/** The class's maxFree (size-classes.ts), copied here so free() reads one cache line. */
export const P_MAX_FREE = 6;
/**
 * Head of the pool's claimed list (Uint32 pointer, 0 = empty): objects this
 * shard freed whose pending bit it still holds (small-pool.ts, "claims").
 */
export const P_CLAIMED_HEAD = 7;
/**
 * The class's malloc and free counts, each a uint32 low word and a carry
 * word (count = lo + hi * 2^32): an Int32 increment with a rarely taken
 * carry branch measured ~0.3 ns a pair cheaper than a Float64 increment.
 */
export const P_MALLOCS_LO = 8;
export const P_MALLOCS_HI = 9;
export const P_FREES_LO = 10;
export const P_FREES_HI = 11;

/**
 * The outbox, bytes 8192-12287: for each destination shard, the head of a
 * chain of that shard's objects this shard has freed and not yet pushed
 * (cross-shard.ts, "batches"); 0 = none. Kept in the buffer, not in the
 * thread, so a thread that dies with a batch does not lose it: the next
 * owner of the shard pushes it (SharedHeap.adoptShard).
 */
export const S_OUTBOX = 2048; // byte 8192
/** Shards a heap may have: one outbox slot each. */
export const MAX_SHARDS = 1024;

/**
 * Heads (page index, -1 = empty) of the free-span lists, bytes 12288-13439,
 * after the outbox: the pool records of 48 size classes end at byte 7167,
 * too near the outbox for the lists to fit between them.
 */
export const S_SPAN_LISTS = 3072; // byte 12288

/** One section of the shard header: where it is and whether it must sit alone on its cache lines. */
export interface HeaderSection {
  readonly name: string;
  /** First byte, relative to the region start. */
  readonly byte: number;
  readonly bytes: number;
  /** Shares no 64-byte line with another section (written by other threads, or hot). */
  readonly alone: boolean;
}

/** Every section of the shard header, in address order. */
export const SHARD_HEADER_SECTIONS: readonly HeaderSection[] = [
  { name: "config and page accounting (S_ID..S_PROF_RATE)", byte: 0, bytes: (S_PROF_RATE + 1) * 4, alone: false },
  { name: "inbox and doorbell (S_INBOX, S_DOORBELL)", byte: S_INBOX * 4, bytes: 8, alone: true },
  { name: "free-span bitmap (S_SPAN_SUMMARY, S_SPAN_BITMAP)", byte: S_SPAN_SUMMARY * 4, bytes: (1 + SPAN_BITMAP_WORDS) * 4, alone: false },
  { name: "profiler settings and owner (S_PROF_DEPTH..S_PROF_FULL)", byte: S_PROF_DEPTH * 4, bytes: (S_PROF_FULL - S_PROF_DEPTH + 1) * 4, alone: false },
  { name: "debug pointers' quarantine (S_QUARANTINE_HEAD..S_QUARANTINE_WRITTEN)", byte: S_QUARANTINE_HEAD * 4, bytes: (S_QUARANTINE_WRITTEN - S_QUARANTINE_HEAD + 1) * 4, alone: false },
  { name: "heap-wide peak share (S_PROF_HEAP_UNITS)", byte: S_PROF_HEAP_UNITS * 4, bytes: 4, alone: false },
  { name: "counters (C_BASE)", byte: C_BASE * 8, bytes: C_COUNT * 8, alone: false },
  { name: "peak (PK_BASE)", byte: PK_BASE * 8, bytes: PK_COUNT * 8, alone: false },
  { name: "memory pressure (S_PRESSURE_COUNT..S_PRESSURE_CROSSINGS)", byte: S_PRESSURE_COUNT * 4, bytes: (S_PRESSURE_CROSSINGS + MAX_PRESSURE_THRESHOLDS - S_PRESSURE_COUNT) * 4, alone: false },
  { name: "timeline ring (S_TIMELINE_SEQ..S_TIMELINE_COUNT)", byte: S_TIMELINE_SEQ * 4, bytes: (S_TIMELINE_COUNT - S_TIMELINE_SEQ + 1) * 4, alone: false },
  { name: "pool records (S_POOLS)", byte: S_POOLS * 4, bytes: 0 /* set by checkShardHeaderLayout */, alone: true },
  { name: "outbox (S_OUTBOX)", byte: S_OUTBOX * 4, bytes: 0 /* set by checkShardHeaderLayout */, alone: true },
  { name: "free-span lists (S_SPAN_LISTS)", byte: S_SPAN_LISTS * 4, bytes: SPAN_LIST_COUNT * 4, alone: false },
];

/**
 * The header's rules as sentences ([] when they hold): sections in order,
 * not overlapping, inside SHARD_HEADER_BYTES, `alone` ones on lines of
 * their own. The pool count lives in size-classes.ts, which imports this
 * file, so the caller passes it.
 */
export function checkShardHeaderLayout(poolCount: number): string[] {
  const sized = SHARD_HEADER_SECTIONS.map((s) =>
    s.byte === S_POOLS * 4 ? { ...s, bytes: poolCount * POOL_STRIDE * 4 } : s.byte === S_OUTBOX * 4 ? { ...s, bytes: MAX_SHARDS * 4 } : s,
  );
  const problems: string[] = [];
  const line = (byte: number): number => Math.floor(byte / 64);
  for (let i = 0; i < sized.length; i++) {
    const s = sized[i]!;
    if (s.byte + s.bytes > SHARD_HEADER_BYTES) problems.push(`${s.name} ends at byte ${s.byte + s.bytes}, past SHARD_HEADER_BYTES (${SHARD_HEADER_BYTES})`);
    const prev = sized[i - 1];
    if (prev === undefined) continue;
    const prevEnd = prev.byte + prev.bytes;
    if (s.byte < prevEnd) problems.push(`${s.name} (byte ${s.byte}) overlaps or precedes ${prev.name} (ends at byte ${prevEnd})`);
    else if ((s.alone || prev.alone) && line(s.byte) === line(prevEnd - 1)) {
      problems.push(`${s.name} shares cache line ${line(s.byte)} with ${prev.name}`);
    }
  }
  return problems;
}

// ---------------------------------------------------------------------------
// Page metadata: PM_STRIDE Int32 slots per data page.
export const PM_STRIDE = 8;
export const PM_STATE = 0;
/** Span length in pages; meaningful on span heads. */
export const PM_SPAN_PAGES = 1;
/** List links (page indices, -1 = none): free-span lists, pool span lists. */
export const PM_NEXT = 2;
export const PM_PREV = 3;
/**
 * Head page of the pool span this page belongs to; on the last page of a
 * free span, that span's head (the boundary tag a merge from the right reads).
 */
export const PM_HEAD = 4;
/** Pool span head: the span's own free-object list (Uint32 pointer). */
export const PM_FREELIST = 5;
/** Pool span head: objects taken out of the span's own freelist. */
export const PM_USED = 6;
/**
 * Heap-profiler site of a page-span object (0 = not profiled), and on the
 * head of a span of a sampled pool that keeps tags in page records
 * (size-classes.ts), its object's.
 */
export const PM_SITE = 7;

/**
 * Bitmap words per page: for each 32 granules (256 bytes) a live word then
 * a pending word. Live word of `ptr`: bitmap + (((ptr - dataStart) >>> 8) << 1).
 */
export const BITMAP_WORDS_PER_PAGE = 2 * (PAGE_SIZE >>> (GRANULE_SHIFT + 5));

// ---------------------------------------------------------------------------
// Heap profiler section: [rate epochs][site records][frame records][string bytes][peak records],
// then the timeline (from version 5: PRE_PEAK_HEAP_VERSION's regions end at the strings).
/**
 * Each sample rate the shard has used gets an epoch; a sampled object's
 * tag names its site and the epoch it was sampled in, so its free subtracts
 * exactly the weight its allocation added even after the rate changed.
 * Float64 rates, RATE_EPOCHS of them, reused round-robin.
 */
export const RATE_EPOCHS = 256;
/** A site tag: (epoch << 24) | (site + 1); 0 = not sampled. */
export const TAG_SITE_MASK = 0xffffff;
/** Deepest stack a site records. */
export const PROF_MAX_DEPTH = 32;
/**
 * Site record, Int32 slots: a stack hash, the frame count, the frame ids
 * (leaf first), the site's label set (slot 34: its frame id + 1, 0 for
 * none), then four Float64 counters at Int32 slots 36..43.
 */
export const SITE_STRIDE = 44;
export const SR_HASH = 0;
export const SR_FRAME_COUNT = 1;
export const SR_FRAMES = 2;
/**
 * The label set (withHeapLabels) of a site, as a frame record whose name is
 * the set's encoded text (heap-labels.ts) and whose url is LABELS_URL, +1
 * (0: no labels). In what was the counters' alignment padding: heaps
 * written before labels read as unlabeled, and the record's size is the same.
 */
export const SR_LABELS = 2 + PROF_MAX_DEPTH;
/** Float64 counters: index (record's Int32 index >> 1) + these. */
export const SRF_COUNT = 18;
export const SRF_SIZE = 19;
export const SRF_ALLOC_COUNT = 20;
export const SRF_ALLOC_SIZE = 21;
/** Site 0 collects what no longer fits: "(other sites)". */
export const OTHER_SITES = 0;
/** Frame record, Int32 slots: name and url as (offset, length) into the string bytes, line, column. */
export const FRAME_STRIDE = 6;
export const FR_NAME = 0;
export const FR_NAME_LENGTH = 1;
export const FR_URL = 2;
export const FR_URL_LENGTH = 3;
export const FR_LINE = 4;
export const FR_COLUMN = 5;

export interface ProfilerCapacity {
  /** Site records: one per stack kept exactly, plus site 0, "(other sites)". */
  readonly sites: number;
  readonly frames: number;
  readonly stringBytes: number;
}

/**
 * A site's peak record (peaks.ts), Float64 slots, in a table after the
 * string bytes with one record per site record: the site's four figures
 * as they were at the shard's peak and the peak epoch they belong to, then
 * the same for the heap-wide peak. 80 bytes a site.
 */
export const PEAK_STRIDE = 10;
export const PR_COUNT = 0;
export const PR_SIZE = 1;
export const PR_ALLOC_COUNT = 2;
export const PR_ALLOC_SIZE = 3;
export const PR_EPOCH = 4;
/** The heap-wide peak's figures start here (PR_HEAP + PR_COUNT...), its epoch at PR_HEAP + PR_EPOCH. */
export const PR_HEAP = 5;

/**
 * The timeline (timeline.ts): a ring of entries, each the time, the
 * shard's allocated memory, its profiled live bytes, then its
 * TIMELINE_SITES largest sites' live bytes and live objects (Float64),
 * then those sites' ids + 1 (Int32, 0 for none). 344 bytes an entry.
 */
export const TIMELINE_SITES = 16;
export const TE_TIME = 0;
export const TE_USED = 1;
export const TE_LIVE = 2;
/** Float64 slots of the first site's bytes and of its objects. */
export const TE_SIZES = 3;
export const TE_COUNTS = TE_SIZES + TIMELINE_SITES;
/** Int32 slot (from the entry's start) of the first site's id + 1. */
export const TE_IDS = 2 * (TE_COUNTS + TIMELINE_SITES);
export const TIMELINE_ENTRY_BYTES = 4 * TE_IDS + 4 * TIMELINE_SITES;

/**
 * Timeline entries a shard of `shardBytes` keeps: one per 32 KiB, 32 to
 * 600 (10 minutes at the Smp's default tick of a second; 1% of a shard
 * of 1 to 4 MiB, 0.3% of 64 MiB). 0 in heaps made before peaks.
 */
export function timelineEntries(shardBytes: number, version: number = HEAP_VERSION): number {
  return hasPeaks(version) ? Math.min(600, Math.max(32, Math.floor(shardBytes / 32768))) : 0;
}

/**
 * Stacks a shard keeps exactly unless told (heapprofSites): one per 32 KiB
 * of shard, between 64 and 4096 (2048 in a 64 MiB shard; its tables then
 * take 1.9% of it). Kept from before the option existed: a program with
 * more stacks raises it (measured: 8,000 stacks at 4,096 folded 49% of
 * the allocations into "(other sites)").
 */
export function defaultProfilerSites(shardBytes: number): number {
  return Math.min(4096, Math.max(64, Math.floor(shardBytes / 32768)));
}

/**
 * The tables for `stacks` distinct stacks: a record each plus site 0, four
 * frames a record, 64 string bytes a frame, a peak record a site (608
 * bytes a stack: 176 of site record, 96 of frames, 256 of strings, 80 of
 * peak record). Frames and strings grow with the sites, so raising the one
 * option raises every table that can fill; a full one folds new stacks
 * into (other sites).
 */
export function profilerCapacity(stacks: number): ProfilerCapacity {
  const sites = stacks + 1;
  return { sites, frames: 4 * sites, stringBytes: 256 * sites };
}

/** The profiler section's bytes in a heap of format `version` (peak records from version 5 on). */
export function profilerBytes(c: ProfilerCapacity, version: number = HEAP_VERSION): number {
  const peaks = hasPeaks(version) ? c.sites * PEAK_STRIDE * 8 : 0;
  return RATE_EPOCHS * 8 + c.sites * SITE_STRIDE * 4 + c.frames * FRAME_STRIDE * 4 + c.stringBytes + peaks;
}

/** What one more stack adds to the tables (profilerCapacity): 608 bytes. */
export const PROFILER_BYTES_PER_SITE = profilerBytes(profilerCapacity(1)) - profilerBytes(profilerCapacity(0));

/** The profiler section and the timeline after it. */
function tablesBytes(shardBytes: number, c: ProfilerCapacity, version: number): number {
  return profilerBytes(c, version) + timelineEntries(shardBytes, version) * TIMELINE_ENTRY_BYTES;
}

/**
 * The most stacks a shard of `shardBytes` may keep: tables of at most a
 * quarter of the shard, so three quarters or more stay for objects (and a
 * heap image, which holds the tables, stays under 1.3 GiB: one read), or
 * the default where that is more (shards under 142 KiB, whose 64 default
 * sites take up to 26% of 128 KiB). 65,536 stacks need 38 MiB: shards of
 * 153 MiB or more. Tags name a site in 24 bits (TAG_SITE_MASK), far above
 * this. `version`: the heap's format (each version's tables take their own bytes).
 */
export function maxProfilerSites(shardBytes: number, version: number = HEAP_VERSION): number {
  const perSite = profilerBytes(profilerCapacity(1), version) - profilerBytes(profilerCapacity(0), version);
  const quarter = Math.floor((shardBytes / 4 - tablesBytes(shardBytes, profilerCapacity(0), version)) / perSite);
  return Math.min(TAG_SITE_MASK - 1, Math.max(defaultProfilerSites(shardBytes), quarter));
}

/** Page states. Zero-filled memory reads as INNER, which is what fresh pages are. */
export const PAGE_INNER = 0; // not a span head (inside a free or large span)
export const PAGE_FREE = 1; // head of a free span
export const PAGE_LARGE = 2; // head of a large (page-span) object
export const PAGE_POOL = 3; // any page of a small-pool span


/** Where the sections of one region sit, derived from the region's size, the profiler's capacity and the heap's format. */
export interface RegionLayout {
  /** Byte offset of the region in the buffer. */
  readonly base: number;
  readonly metaOffset: number;
  readonly classMapOffset: number;
  readonly bitmapOffset: number;
  readonly profilerOffset: number;
  readonly profiler: ProfilerCapacity;
  /** Byte offsets, relative to the region, of the peak records and the timeline (0 in a heap made before peaks). */
  readonly peaksOffset: number;
  readonly timelineOffset: number;
  readonly timelineEntries: number;
  readonly dataOffset: number;
  readonly dataPages: number;
}

/** Pages left for objects once a region of `shardBytes` holds its own metadata and tables for `profilerSites` stacks. */
export function dataPagesFor(shardBytes: number, profilerSites: number, version: number = HEAP_VERSION): number {
  const perPage = PAGE_SIZE + METADATA_BYTES_PER_PAGE;
  const tables = tablesBytes(shardBytes, profilerCapacity(profilerSites), version);
  let pages = Math.floor((shardBytes - SHARD_HEADER_BYTES - tables) / perPage);
  while (pages > 0 && metadataBytes(pages, tables) + pages * PAGE_SIZE > shardBytes) pages--;
  return Math.max(0, pages);
}

/** Page record, class-map byte, live and pending words. */
const METADATA_BYTES_PER_PAGE = PM_STRIDE * 4 + 1 + BITMAP_WORDS_PER_PAGE * 4;

/** Header + page metadata + the tables, rounded up to whole pages. */
function metadataBytes(dataPages: number, tables: number): number {
  const raw = SHARD_HEADER_BYTES + dataPages * METADATA_BYTES_PER_PAGE + 64 + 8 + tables;
  return Math.ceil(raw / PAGE_SIZE) * PAGE_SIZE;
}

/**
 * Region `shardId`'s layout in a heap of `shardBytes` regions whose
 * profilers keep `profilerSites` stacks, in format `version` (the heap
 * header's H_VERSION; a heap made before peaks has neither peak records
 * nor a timeline, and its pages start earlier).
 */
export function regionLayout(shardId: number, shardBytes: number, profilerSites: number, version: number = HEAP_VERSION): RegionLayout {
  const dataPages = dataPagesFor(shardBytes, profilerSites, version);
  const metaOffset = SHARD_HEADER_BYTES;
  const classMapOffset = metaOffset + dataPages * PM_STRIDE * 4;
  const bitmapOffset = Math.ceil((classMapOffset + dataPages) / 64) * 64;
  const profiler = profilerCapacity(profilerSites);
  const profilerOffset = bitmapOffset + dataPages * BITMAP_WORDS_PER_PAGE * 4;
  const peaks = hasPeaks(version);
  const peaksOffset = peaks ? profilerOffset + profilerBytes(profiler, PRE_PEAK_HEAP_VERSION) : 0;
  return {
    base: HEAP_HEADER_BYTES + shardId * shardBytes,
    metaOffset,
    classMapOffset,
    bitmapOffset,
    profilerOffset,
    profiler,
    peaksOffset,
    timelineOffset: peaks ? peaksOffset + profiler.sites * PEAK_STRIDE * 8 : 0,
    timelineEntries: timelineEntries(shardBytes, version),
    dataOffset: metadataBytes(dataPages, tablesBytes(shardBytes, profiler, version)),
    dataPages,
  };
}
