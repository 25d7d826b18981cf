/**
 * memcached's slab classes over shardheap's size classes, for `stats
 * slabs`, `stats items` and `stats cachedump`.
 *
 * memcached cuts items from pages split into chunks of one size per
 * class: with its defaults (-n 48, -f 1.25, slab_chunk_max 512 KiB) 39
 * classes of 96, 120, 152 ... 394840 and 524288 bytes; bigger items are
 * chunked into the last. Here an item is the value of a SharedMap entry,
 * one heap object of one of the allocator's size classes (size-classes.ts:
 * 8 B .. 16 KiB, finer than memcached's) or a page span. Each memcached
 * class id stands for the heap objects whose size falls in its range
 * (above the class before's chunk size, up to its own): so an item gets
 * the id it would get in memcached (give or take their different headers),
 * and tools that walk `stats items` ids, or ask `stats cachedump 1` for
 * small items, find them. Items past 394840 bytes are all in class 39.
 * An item's class comes from its entry's allocated size (what the store's
 * budget counts): the memory that really holds it.
 *
 * Each shard counts its own items per class (number, bytes, evictions...)
 * in its row of the statistics block (stats.ts), so any shard reads every
 * shard's figures without a message.
 */
import { GRANULE_SHIFT } from "../../../memory/layout.js";
import { CLASS_COUNT, MAX_SMALL_SIZE, classOf, classSize } from "../../../memory/size-classes.js";

/** memcached 1.6's default chunk sizes (slabs_init: 48 + item header, x1.25, 8-aligned, then slab_chunk_max). */
function memcachedChunkSizes(): number[] {
  const max = 512 * 1024;
  const sizes: number[] = [];
  for (let size = 96; size <= max / 1.25; size = Math.ceil((size * 1.25) / 8) * 8) sizes.push(size);
  sizes.push(max);
  return sizes;
}
const CHUNK_SIZES = memcachedChunkSizes();
/** Item classes: memcached's ids 1..ITEM_CLASSES (39). */
export const ITEM_CLASSES = CHUNK_SIZES.length;

/** The class id of each heap size class (by class index). */
const ID_OF_HEAP_CLASS = Uint8Array.from({ length: CLASS_COUNT }, (_, c) => idOfSize(classSize[c]!));

function idOfSize(bytes: number): number {
  let lo = 0;
  let hi = CHUNK_SIZES.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (CHUNK_SIZES[mid]! >= bytes) hi = mid;
    else lo = mid + 1;
  }
  return lo + 1;
}

/** The class id of an object of `allocated` bytes (a size class's size, or a page span's bytes). Allocates nothing. */
export function itemClass(allocated: number): number {
  if (allocated <= MAX_SMALL_SIZE) return ID_OF_HEAP_CLASS[classOf[(allocated + 7) >>> GRANULE_SHIFT]!]!;
  return idOfSize(allocated);
}

/** memcached's chunk_size of class `id`: the largest object it stands for. */
export function classChunkSize(id: number): number {
  return CHUNK_SIZES[id - 1]!;
}

const HEAP_CLASSES_OF: readonly (readonly number[])[] = Array.from({ length: ITEM_CLASSES + 1 }, (_, id) =>
  [...Array(CLASS_COUNT).keys()].filter((c) => ID_OF_HEAP_CLASS[c] === id),
);

/** The heap's size classes (indexes) that class `id` stands for: none for a class of page spans only. */
export function heapClassesOf(id: number): readonly number[] {
  return HEAP_CLASSES_OF[id]!;
}

/** Per-class counters: each one's slot in a class's block, as `stats items` names them. */
export const CLASS_STAT = {
  number: 0,
  mem_requested: 1,
  evicted: 2,
  evicted_nonzero: 3,
  /** Seconds the last evicted item had been unused when it was evicted. */
  evicted_time: 4,
  outofmemory: 5,
  reclaimed: 6,
  /** Expired items taken back that no hit had fetched. */
  expired_unfetched: 7,
  /** Items evicted that no hit had fetched. */
  evicted_unfetched: 8,
} as const;
export type ClassStatName = keyof typeof CLASS_STAT;
export const CLASS_STAT_NAMES = Object.keys(CLASS_STAT) as ClassStatName[];
/** Float64 slots of one shard's class block: slot id * fields + field (id 0 unused, as memcached's class 0). */
export const CLASS_BLOCK_SLOTS = (ITEM_CLASSES + 1) * CLASS_STAT_NAMES.length;
/** Figures of the present, which `stats reset` leaves alone. */
export const CLASS_GAUGES: ReadonlySet<ClassStatName> = new Set(["number", "mem_requested"]);

/** The slot of class `id`'s counter `name` in a class block. */
export function classSlot(id: number, name: ClassStatName): number {
  return id * CLASS_STAT_NAMES.length + CLASS_STAT[name];
}
