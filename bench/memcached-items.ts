/**
 * The floor of bench/memcached.ts's items target: the design fixes the
 * heap's size classes (Seastar's, 2 fraction bits per power of two, a
 * third from 4 KiB up) and one heap allocation per item (header, key,
 * value, and the index's copy of the key in front of them: SharedMap's
 * payload). So a shardheap server can hold at most limit_maxbytes / (one
 * item's allocation) items: the floor of the target, the bare mechanism
 * with nothing of ours in it. Each item's allocation is measured, not
 * computed: the shards' mem_allocated (the entries' allocated sizes, what
 * the store's budget counts) over curr_items, in this run.
 *
 * A target above the floor (bound x memcached's items > the floor) asks
 * for more than one allocation per item in these classes can give: a
 * calibration error, said on its line with the figures, as the other
 * memcached targets say theirs. With the bench's 64 B keys and 1 KiB
 * values an item asks 1,218 B and gets the 1,280 B class, where
 * memcached's chunk is 1,184 B: the floor is 0.925x memcached's chunks.
 *
 * Also where an item's bytes go, per server: its header, key and value,
 * and the rounding to its class (memcached's chunk_size, the heap's size
 * class).
 */
import { HEADER_BYTES } from "../src/apps/memcached/store/item.js";
import { keyArea } from "../src/memory/shared-map/layout.js";
import { KEY_BYTES, VALUE_BYTES } from "./memcached-loads.js";
import { stat, type Roster, type Server, type Stats } from "./memcached-roster.js";
import type { BenchContext } from "./report.js";

const BENCH = "memcached";
const MIB = 1024 * 1024;
const count = (n: number): string => Math.round(n).toLocaleString("en-US");
const B = (n: number): string => `${count(n)} B`;

/** The sum of a per-shard `stats` field (shardN:field) over the shards; undefined when the server gives none. */
export function shardSum(stats: Stats, field: string): number | undefined {
  const values = [...stats].filter(([name]) => new RegExp(`^shard\\d+:${field}$`).test(name)).map(([, v]) => v);
  return values.length === 0 ? undefined : values.reduce((a, v) => a + v, 0);
}

/** The `stats slabs` class holding the most chunks in use (where the items are): its id, or undefined. */
export function busiestClass(slabs: Stats): string | undefined {
  let busiest: string | undefined;
  for (const [name, v] of slabs) {
    const id = /^(\d+):used_chunks$/.exec(name)?.[1];
    if (id !== undefined && (busiest === undefined || v > slabs.get(`${busiest}:used_chunks`)!)) busiest = id;
  }
  return busiest;
}

export interface ItemsFloor {
  /** Items of `allocation` bytes that fit in the limit: the floor. */
  floor: number;
  /** The candidate's items held / the floor. */
  heldVsFloor: number;
  /** The reference's items held / the floor. */
  referenceVsFloor: number;
  /** The target in items: bound x the reference's. */
  target: number;
  /** The target asks for more items than the floor: a calibration error. */
  aboveFloor: boolean;
}

/**
 * The floor of the items target: `limit` bytes hold limit / allocation
 * items of `allocation` bytes each (one allocation per item), against
 * which the candidate's `held` items and the reference's, and the target
 * (`bound` x the reference's), are placed.
 */
export function itemsFloor(o: { limit: number; allocation: number; held: number; reference: number; bound: number }): ItemsFloor {
  if (!(o.allocation > 0) || !(o.limit > 0)) throw new RangeError(`itemsFloor: limit ${o.limit} and allocation ${o.allocation} must be positive`);
  const floor = Math.floor(o.limit / o.allocation);
  const target = o.bound * o.reference;
  return { floor, heldVsFloor: o.held / floor, referenceVsFloor: o.reference / floor, target, aboveFloor: target > floor };
}

/**
 * Where the bytes of a shardheap item go: the item (`itemBytes`, stats
 * bytes / curr_items: header, key, value, the rest of its VALUE line and
 * its \r\n and END\r\n), the map's copy of the key, and the rounding up to
 * the size class of its allocation (`allocation`).
 */
export function shardheapItemText(itemBytes: number, allocation: number, keyBytes = KEY_BYTES, valueBytes = VALUE_BYTES): string {
  const copy = keyArea(keyBytes);
  return (
    `an item is ${B(itemBytes)} (bytes / curr_items): header ${B(HEADER_BYTES)}, key ${B(keyBytes)}, value ${B(valueBytes)}, ` +
    `${B(itemBytes - HEADER_BYTES - keyBytes - valueBytes)} of the rest of its VALUE line and its \\r\\n, END\\r\\n; ` +
    `+ ${B(copy)} the map's copy of the key (SharedMap keyArea) = ${B(itemBytes + copy)} asked; ` +
    `+ ${B(allocation - itemBytes - copy)} rounding to the heap's size class = ${B(allocation)} allocated (shardN:mem_allocated / curr_items)`
  );
}

/** Where the bytes of a memcached item go: the item (`itemBytes`, bytes / curr_items), its key and value, and the rounding to its slab class's `chunk`. */
export function memcachedItemText(itemBytes: number, chunk: number, keyBytes = KEY_BYTES, valueBytes = VALUE_BYTES): string {
  return (
    `an item is ${B(itemBytes)} (bytes / curr_items): key ${B(keyBytes)}, value ${B(valueBytes)}, ` +
    `${B(itemBytes - keyBytes - valueBytes)} of item header, CAS, the key's NUL and the value's \\r\\n; ` +
    `+ ${B(chunk - itemBytes)} rounding to the slab class = chunk_size ${B(chunk)} (stats slabs, the busiest class)`
  );
}

/** The note of a floor record: the target placed against the floor, then the floor and both servers' items against it. */
export function floorNote(f: ItemsFloor, o: { name: string; reference: string; held: number; referenceHeld: number; allocation: number; limit: number; bound: number; chunk?: number }): string {
  const target = `the target (${o.bound}x ${o.reference}'s ${count(o.referenceHeld)} items = ${count(f.target)})`;
  return (
    (f.aboveFloor
      ? `calibration error: the target lies above the floor measured in this run: ${target} > the floor's ${count(f.floor)} items (${o.bound}x ${o.reference}'s = ${(o.bound * f.referenceVsFloor).toFixed(3)}x the floor); `
      : `${target} lies at or below the floor's ${count(f.floor)} items; `) +
    `floor: ${count(f.floor)} items of ${B(o.allocation)} (one allocation per item in the heap's size classes, shardN:mem_allocated / curr_items) in limit_maxbytes ${(o.limit / MIB).toFixed(0)} MiB; ` +
    `${o.name} holds ${count(o.held)} = ${f.heldVsFloor.toFixed(3)}x the floor; ` +
    `${o.reference} holds ${count(o.referenceHeld)} = ${f.referenceVsFloor.toFixed(3)}x the floor${o.chunk === undefined ? "" : ` (its chunks: ${B(o.chunk)})`}`
  );
}

/**
 * The floor records, after reportItems' own: per memcached and shardheap
 * server where an item's bytes go ("[item bytes]"), and per shardheap
 * server the floor of the items target against memcached with the same
 * threads ("[items floor]": items held / the floor, and whether the
 * target lies above it).
 */
export function reportFloors(ctx: BenchContext, servers: Roster, itemsBound: number, held: (s: Server) => Stats | undefined): void {
  const { m1, m2, s1, s2, sp } = servers;
  const chunkOf = (s: Server): number | undefined => {
    const id = s.finalSlabs === undefined ? undefined : busiestClass(s.finalSlabs);
    return id === undefined ? undefined : s.finalSlabs!.get(`${id}:chunk_size`);
  };
  const allocationOf = (st: Stats): number | undefined => {
    const allocated = shardSum(st, "mem_allocated");
    return allocated === undefined ? undefined : allocated / stat(st, "curr_items");
  };
  for (const s of [m1, m2, s1, s2, sp]) {
    const st = held(s);
    if (st === undefined) continue;
    const itemBytes = stat(st, "bytes") / stat(st, "curr_items");
    const candidate = `${s.name} [item bytes]`;
    const memory = s === m1 || s === m2 ? chunkOf(s) : allocationOf(st);
    if (memory === undefined) {
      ctx.record({ bench: BENCH, candidate, note: `no ${s === m1 || s === m2 ? "stats slabs chunk_size" : "shardN:mem_allocated"} in its stats` });
      continue;
    }
    const note = s === m1 || s === m2 ? memcachedItemText(itemBytes, memory) : shardheapItemText(itemBytes, memory);
    ctx.record({ bench: BENCH, candidate, metric: "bytes of memory an item takes", value: memory, note });
  }
  for (const [a, b] of [
    [s1, m1],
    [s2, m2],
    [sp, m2],
  ] as [Server, Server][]) {
    const candidate = `${a.name} [items floor]`;
    const sa = held(a);
    const sb = held(b);
    const allocation = sa === undefined ? undefined : allocationOf(sa);
    if (sa === undefined || sb === undefined || allocation === undefined) {
      ctx.record({ bench: BENCH, candidate, note: sa === undefined || sb === undefined ? `${(sa === undefined ? a : b).name} has no figures` : `no shardN:mem_allocated in ${a.name}'s stats` });
      continue;
    }
    const limit = stat(sa, "limit_maxbytes");
    const o = { name: a.name, reference: b.name, held: stat(sa, "curr_items"), referenceHeld: stat(sb, "curr_items"), allocation, limit, bound: itemsBound, chunk: chunkOf(b) };
    const f = itemsFloor({ limit, allocation, held: o.held, reference: o.referenceHeld, bound: itemsBound });
    ctx.record({ bench: BENCH, candidate, metric: "items held / floor", value: f.heldVsFloor, note: floorNote(f, o) });
  }
}
