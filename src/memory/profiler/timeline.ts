/**
 * A shard's timeline: a bounded ring in its region (layout.ts TE_*, after
 * the peak records) of what it held over time: at each tick, its allocated
 * memory, its profiled live bytes and its TIMELINE_SITES largest sites'
 * live bytes and objects. In the buffer, so a heap image carries when the
 * memory began to grow, as it carries the peak.
 *
 * One writer: the thread that ticks it (an Smp's main thread, which reads
 * every region from the buffer, so a busy or stuck shard is sampled all
 * the same), not the shard's owner; a region's timeline bytes are written
 * by no one else. A tick scans the site table once (the largest sites
 * kept in fixed arrays: nothing is allocated): 4 us at 2048 sites. Readers
 * (any thread, an image) follow a seqlock (S_TIMELINE_SEQ odd while an
 * entry is written, as the Linux seqlock): they read again when it moved.
 */
import {
  PAGE_SIZE,
  PK_LIVE,
  S_PROF_MAX_SITES,
  S_PROF_SITES,
  S_TIMELINE_COUNT,
  S_TIMELINE_NEXT,
  S_TIMELINE_SEQ,
  SITE_STRIDE,
  SRF_COUNT,
  SRF_SIZE,
  TE_COUNTS,
  TE_IDS,
  TE_LIVE,
  TE_SIZES,
  TE_TIME,
  TE_USED,
  TIMELINE_ENTRY_BYTES,
  TIMELINE_SITES,
} from "../layout.js";
import type { ShardRegion } from "../region.js";
import { siteCounters } from "./site-table.js";

/** Writes entries into regions' timelines; holds the scratch arrays a tick sorts in. */
export class TimelineWriter {
  private readonly ids = new Int32Array(TIMELINE_SITES);
  private readonly sizes = new Float64Array(TIMELINE_SITES);
  private readonly counts = new Float64Array(TIMELINE_SITES);

  /** Write one entry at time `now` (ms since the epoch) into `r`'s timeline: nothing when the heap has none. */
  record(r: ShardRegion, now: number): void {
    if (r.timelineOffset === 0) return;
    const n = this.largestSites(r);
    const i32 = r.i32;
    const f64 = r.f64;
    const seq = r.hdr + S_TIMELINE_SEQ;
    const next = i32[r.hdr + S_TIMELINE_NEXT]!;
    const at = r.timelineOffset + next * TIMELINE_ENTRY_BYTES;
    const e = at >>> 3;
    Atomics.add(i32, seq, 1); // odd: an entry is being written
    f64[e + TE_TIME] = now;
    f64[e + TE_USED] = (r.dataPages - r.freePages()) * PAGE_SIZE;
    f64[e + TE_LIVE] = f64[r.peak + PK_LIVE]!;
    for (let k = 0; k < TIMELINE_SITES; k++) {
      const used = k < n;
      f64[e + TE_SIZES + k] = used ? this.sizes[k]! : 0;
      f64[e + TE_COUNTS + k] = used ? this.counts[k]! : 0;
      i32[(at >>> 2) + TE_IDS + k] = used ? this.ids[k]! + 1 : 0;
    }
    i32[r.hdr + S_TIMELINE_NEXT] = (next + 1) % r.timelineEntries;
    i32[r.hdr + S_TIMELINE_COUNT] = Math.min(r.timelineEntries, i32[r.hdr + S_TIMELINE_COUNT]! + 1);
    Atomics.add(i32, seq, 1); // even: done
  }

  /** The largest sites by live bytes into ids/sizes/counts, largest first; returns how many (sites holding nothing are left out). */
  private largestSites(r: ShardRegion): number {
    const { ids, sizes, counts } = this;
    const f64 = r.f64;
    const base = siteCounters(r, 0);
    const sites = Math.min(Atomics.load(r.i32, r.hdr + S_PROF_SITES), r.headerSlot(S_PROF_MAX_SITES));
    let n = 0;
    for (let s = 0; s < sites; s++) {
      const f = base + s * (SITE_STRIDE >>> 1);
      const size = f64[f + SRF_SIZE]!;
      if (!(size > 0) || (n === TIMELINE_SITES && size <= sizes[n - 1]!)) continue;
      // Insert in order, the smallest dropping off the end when full.
      let k = n < TIMELINE_SITES ? n++ : n - 1;
      for (; k > 0 && sizes[k - 1]! < size; k--) {
        sizes[k] = sizes[k - 1]!;
        counts[k] = counts[k - 1]!;
        ids[k] = ids[k - 1]!;
      }
      sizes[k] = size;
      counts[k] = f64[f + SRF_COUNT]!;
      ids[k] = s;
    }
    return n;
  }
}

/** One entry as read: when, the shard's allocated memory and profiled live bytes, its largest sites then. */
export interface TimelineEntry {
  t: number;
  used: number;
  live: number;
  /** Site ids (site-table.ts) with their live bytes and objects, largest first. */
  sites: Array<{ id: number; size: number; count: number }>;
}

/** Reads of a timeline that saw its writer move before giving up and taking the last one (an image's odd sequence never settles). */
const READ_TRIES = 8;

/** Region `r`'s timeline, oldest entry first ([] in a heap made before timelines, or before the first tick). */
export function readTimeline(r: ShardRegion): TimelineEntry[] {
  if (r.timelineOffset === 0) return [];
  let entries: TimelineEntry[] = [];
  for (let attempt = 0; attempt < READ_TRIES; attempt++) {
    const before = Atomics.load(r.i32, r.hdr + S_TIMELINE_SEQ);
    entries = readEntries(r);
    if ((before & 1) === 0 && Atomics.load(r.i32, r.hdr + S_TIMELINE_SEQ) === before) break;
  }
  return entries;
}

function readEntries(r: ShardRegion): TimelineEntry[] {
  const capacity = r.timelineEntries;
  const count = Math.min(capacity, Math.max(0, r.headerSlot(S_TIMELINE_COUNT)));
  const next = r.headerSlot(S_TIMELINE_NEXT);
  const f64 = r.f64;
  const i32 = r.i32;
  const out: TimelineEntry[] = [];
  for (let k = 0; k < count; k++) {
    const index = (((next - count + k) % capacity) + capacity) % capacity;
    const at = r.timelineOffset + index * TIMELINE_ENTRY_BYTES;
    const e = at >>> 3;
    const sites: TimelineEntry["sites"] = [];
    for (let j = 0; j < TIMELINE_SITES; j++) {
      const id = i32[(at >>> 2) + TE_IDS + j]!;
      if (id > 0) sites.push({ id: id - 1, size: f64[e + TE_SIZES + j]!, count: f64[e + TE_COUNTS + j]! });
    }
    out.push({ t: f64[e + TE_TIME]!, used: f64[e + TE_USED]!, live: f64[e + TE_LIVE]!, sites });
  }
  return out;
}

const isFigure = (v: number): boolean => v >= 0 && v <= Number.MAX_SAFE_INTEGER;

/**
 * What is wrong with a region's timeline, or undefined: its ring's place
 * and fill within its capacity, every entry's time and figures finite and
 * non-negative, every site id one of the table's. For images.
 */
export function timelineProblem(r: ShardRegion): string | undefined {
  if (r.timelineOffset === 0) return undefined;
  const next = r.headerSlot(S_TIMELINE_NEXT);
  const count = r.headerSlot(S_TIMELINE_COUNT);
  if (next < 0 || next >= r.timelineEntries || count < 0 || count > r.timelineEntries) {
    return `timeline at entry ${next} holding ${count} (of ${r.timelineEntries})`;
  }
  const sites = r.headerSlot(S_PROF_MAX_SITES);
  for (const entry of readEntries(r)) {
    if (!(Number.isFinite(entry.t) && entry.t >= 0) || !isFigure(entry.used) || !isFigure(entry.live)) {
      return `a timeline entry holds time ${entry.t}, used ${entry.used}, live ${entry.live}`;
    }
    for (const s of entry.sites) {
      if (s.id >= sites || !isFigure(s.size) || !isFigure(s.count)) return `a timeline entry names site ${s.id} with ${s.size} bytes, ${s.count} objects`;
    }
  }
  return undefined;
}
