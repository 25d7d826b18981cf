/**
 * The heap profiler's site table, inside the shard's region (Seastar's
 * alloc_sites, but in shared memory): interned frames, interned strings,
 * and one record per distinct stack with live and cumulative counts.
 *
 * One writer: the shard's own thread (SiteTable). Any thread, or a tool
 * reading a saved heap image, reads it with readSites() from the buffer
 * alone. A new site or frame is written completely before the count that
 * makes it visible is published with Atomics.store, so a reader never sees
 * half a record; the Float64 counters may be read mid-update (a reader of
 * a busy shard sees a value a few operations old, never a torn record).
 * JS Maps here are caches only; a SiteTable made for a region that already
 * holds sites rebuilds them from the buffer, so the buffer stays the truth.
 *
 * A full table folds new stacks into site 0, "(other sites)", so totals stay
 * exact; a full frame or string table does the same. Which tables refused
 * an entry is kept in S_PROF_FULL, and site 0's figures are what was
 * folded (readProfilerFill), so a reader can say how much and why.
 */
import { isUtf8 } from "node:buffer";
import {
  FRAME_STRIDE,
  FR_COLUMN,
  FR_LINE,
  FR_NAME,
  FR_NAME_LENGTH,
  FR_URL,
  FR_URL_LENGTH,
  OTHER_SITES,
  PROF_FULL_FRAMES,
  PROF_FULL_SITES,
  PROF_FULL_STRINGS,
  PROF_MAX_DEPTH,
  RATE_EPOCHS,
  SITE_STRIDE,
  SRF_ALLOC_COUNT,
  SRF_ALLOC_SIZE,
  SRF_COUNT,
  SRF_SIZE,
  SR_FRAMES,
  SR_FRAME_COUNT,
  SR_HASH,
  SR_LABELS,
  S_PROF_FRAMES,
  S_PROF_MAX_FRAMES,
  S_PROF_MAX_SITES,
  S_PROF_OFFSET,
  S_PROF_SITES,
  S_PROF_STRING_BYTES,
  S_PROF_STRING_CAPACITY,
  S_PROF_DEPTH,
  S_PROF_EPOCH,
  S_PROF_FULL,
  S_PROF_RATE,
  type RegionLayout,
} from "../layout.js";
import { decodeHeapLabels, type HeapLabelSet } from "./heap-labels.js";
import { PeakBooks, readPeakSlots } from "./peaks.js";
import type { ShardRegion } from "../region.js";
import type { AllocationSite, Frame, ProfilerFill, ProfilerTable } from "../heap-profile.js";
import { frameOf, isOwnFrame, isRuntimeFrame, positionOf } from "./stack-capture.js";

/** The url of the frame record that holds a label set (SR_LABELS): no script has it. */
export const LABELS_URL = "shardheap:labels";

/**
 * The books' grid: every count a site adds or takes off is a multiple of
 * 2^-16 (COUNT_QUANTUM), so every byte figure (count x a whole object
 * size) is one too. Sums and differences of such numbers are exact in a
 * double while below 2^53 quanta: 2^37 objects or bytes (128 GiB), 32
 * times the largest heap's live set. So a free takes off exactly what its
 * allocation added, in any order, and a site whose objects are all freed
 * reads exactly 0. Without the grid a sampled weight (1/(1-exp(-s/R)),
 * any double) left residue: after freeing everything a profile showed
 * totalSize 1.8e-10, tree sites "(0, #0)" and SVG frames at "0 bytes,
 * 90.80%". Rounding a weight to the grid moves it by at most 2^-17 (a
 * relative 7.6e-6, as weights are >= 1), far below the sampling's own
 * spread. Exact mode (weight 1) is on the grid already: integer counts.
 * Rejected: compensated (Kahan) sums need a second float per figure (a
 * layout change) and still leave a residue; snapping figures near 0 to 0
 * would also hide an over-subtraction. Cumulative figures only grow, so
 * past 2^37 they just round as any large double does.
 */
export const COUNT_QUANTUM = 2 ** -16;

/** `weight` rounded to the nearest multiple of COUNT_QUANTUM. */
export function onGrid(weight: number): number {
  return Math.round(weight / COUNT_QUANTUM) * COUNT_QUANTUM;
}

/** Name given to the site that collects stacks that no longer fit. */
export const OTHER_SITES_NAME = "(other sites)";

/** Where the three tables of one region are (Int32 / byte offsets into the buffer). */
interface Tables {
  sites: number; // Int32 index of site 0
  frames: number; // Int32 index of frame 0
  strings: number; // byte offset of the string bytes
}

function tablesOf(r: ShardRegion): Tables {
  const base = r.base + r.headerSlot(S_PROF_OFFSET) + RATE_EPOCHS * 8;
  const sitesBytes = r.headerSlot(S_PROF_MAX_SITES) * SITE_STRIDE * 4;
  const framesBytes = r.headerSlot(S_PROF_MAX_FRAMES) * FRAME_STRIDE * 4;
  return { sites: base >>> 2, frames: (base + sitesBytes) >>> 2, strings: base + sitesBytes + framesBytes };
}

/** The sample rate of rate epoch `epoch` (layout.ts RATE_EPOCHS). */
export function epochRate(r: ShardRegion, epoch: number): number {
  return r.f64[(r.base + r.headerSlot(S_PROF_OFFSET)) / 8 + epoch]!;
}

export function setEpochRate(r: ShardRegion, epoch: number, rate: number): void {
  r.f64[(r.base + r.headerSlot(S_PROF_OFFSET)) / 8 + epoch] = rate;
}

/** Lay out an empty profiler section in a fresh region of `layout`; site 0 is "(other sites)". */
export function initSiteTable(r: ShardRegion, layout: RegionLayout): void {
  const i32 = r.i32;
  i32[r.hdr + S_PROF_OFFSET] = layout.profilerOffset;
  i32[r.hdr + S_PROF_MAX_SITES] = layout.profiler.sites;
  i32[r.hdr + S_PROF_MAX_FRAMES] = layout.profiler.frames;
  i32[r.hdr + S_PROF_STRING_CAPACITY] = layout.profiler.stringBytes;
  i32[r.hdr + S_PROF_FRAMES] = 0;
  i32[r.hdr + S_PROF_STRING_BYTES] = 0;
  i32[r.hdr + S_PROF_SITES] = 1; // site 0 exists from the start, with no frames
  i32[r.hdr + S_PROF_RATE] = 0;
  i32[r.hdr + S_PROF_EPOCH] = 0;
  i32[r.hdr + S_PROF_DEPTH] = DEFAULT_PROFILE_DEPTH;
  i32[r.hdr + S_PROF_FULL] = 0;
}

/** Frames a site records unless setHeapProfilingDepth says otherwise. */
export const DEFAULT_PROFILE_DEPTH = 16;

/** The writer side, on the shard's own thread. */
export class SiteTable {
  private readonly r: ShardRegion;
  private readonly t: Tables;
  private readonly maxSites: number;
  private readonly maxFrames: number;
  private readonly stringCapacity: number;
  private readonly siteByStack = new Map<string, number>();
  private readonly frameByKey = new Map<string, number>();
  private readonly stringByText = new Map<string, number>();
  /** Cache: hash of a stack's frame ids -> site id (confirmed against the record). */
  private readonly siteByHash = new Map<number, number>();
  private readonly scratchIds = new Int32Array(PROF_MAX_DEPTH);
  /** Cache: script -> character position -> frame id; null for shardheap's own scripts. */
  private readonly frameByPosition = new Map<string, Map<number, number> | null>();
  /** UTF-8 byte length of each interned string. */
  private readonly lengths = new Map<string, number>();
  /** Cache: a label set's id (heap-labels.ts, this thread's) -> its frame record + 1 (SR_LABELS). */
  private readonly labelSlotBySet = new Map<number, number>();
  /** The peaks' books (peaks.ts): told before a site changes and after; null in a heap made before peaks. */
  private peaks: PeakBooks | null;

  constructor(r: ShardRegion) {
    this.r = r;
    this.t = tablesOf(r);
    this.maxSites = r.headerSlot(S_PROF_MAX_SITES);
    this.maxFrames = r.headerSlot(S_PROF_MAX_FRAMES);
    this.stringCapacity = r.headerSlot(S_PROF_STRING_CAPACITY);
    this.peaks = r.peaksOffset === 0 ? null : new PeakBooks(r);
    this.rebuildCaches();
  }

  /**
   * @internal Keep the peaks' books or not: for bench/profiler.ts, which
   * times the same heap with and without them (what they cost, in one run).
   * Off, the peaks stop where they are and no longer say the truth.
   */
  setPeakBooks(on: boolean): void {
    if (this.peaks === null && on && this.r.peaksOffset !== 0) {
      // Back on: the live figure is recounted, as the sites hold it now.
      let live = 0;
      for (const site of readSites(this.r)) live += site.size;
      this.peaks = new PeakBooks(this.r);
      this.peaks.moved(live - readPeakSlots(this.r).live);
    } else if (!on) {
      this.peaks = null;
    }
  }

  /**
   * The site id of a captured stack, with the labels in force (undefined:
   * none). Frames are looked up by script and position first, so a stack
   * seen before costs a string key and one Map lookup; names, lines and
   * columns are read only for new frames. A label set is one frame record
   * of its own (SR_LABELS), made once per shard and set.
   */
  siteOfCallSites(sites: readonly NodeJS.CallSite[], depth: number, labels?: HeapLabelSet): number {
    let labelSlot = 0;
    if (labels !== undefined) {
      labelSlot = this.labelSlotBySet.get(labels.id) ?? this.labelSlotOf(labels);
      if (labelSlot < 0) return OTHER_SITES;
    }
    const ids = this.scratchIds;
    const max = Math.min(depth, PROF_MAX_DEPTH);
    let n = 0;
    let hash = FNV_OFFSET;
    for (let k = 0; k < sites.length && n < max; k++) {
      const cs = sites[k]!;
      const file = cs.getFileName() ?? "";
      let id: number | undefined;
      if (file === "" && cs.isEval()) {
        // Eval'd code (new Function, eval) has no file name and two evals
        // share positions, so its frames are not cached by position.
        id = this.frameOf(frameOf(cs));
        if (id < 0) return OTHER_SITES;
      } else {
        let byPosition = this.frameByPosition.get(file);
        if (byPosition === undefined) {
          byPosition = isOwnFrame(file) ? null : new Map<number, number>();
          this.frameByPosition.set(file, byPosition);
        }
        if (byPosition === null) continue; // shardheap's own frames are not part of a site
        if (file.startsWith("node:") && isRuntimeFrame(sites, k, file)) continue; // nor the Node frames they bring
        const position = positionOf(cs);
        id = byPosition.get(position);
        if (id === undefined) {
          id = this.frameOf(frameOf(cs));
          if (id < 0) return OTHER_SITES;
          byPosition.set(position, id);
        }
      }
      ids[n++] = id;
      hash = Math.imul(hash ^ id, FNV_PRIME);
    }
    hash = Math.imul(hash ^ labelSlot, FNV_PRIME);
    // A known stack: one numeric Map lookup, confirmed against the record.
    const candidate = this.siteByHash.get(hash);
    if (candidate !== undefined && this.recordHolds(candidate, ids, n, labelSlot)) return candidate;
    const site = this.siteOfIds(ids.slice(0, n).join(","), labelSlot);
    if (site !== OTHER_SITES && candidate === undefined) this.siteByHash.set(hash, site);
    return site;
  }

  /** Whether site `site`'s record holds exactly frames ids[0..n) and label slot `labelSlot`. */
  private recordHolds(site: number, ids: Int32Array, n: number, labelSlot: number): boolean {
    const i32 = this.r.i32;
    const rec = this.t.sites + site * SITE_STRIDE;
    if (i32[rec + SR_FRAME_COUNT] !== n || i32[rec + SR_LABELS] !== labelSlot) return false;
    for (let k = 0; k < n; k++) if (i32[rec + SR_FRAMES + k] !== ids[k]) return false;
    return true;
  }

  /** The site of a stack given as its frame ids joined by commas, with label slot `labelSlot`, interned if new. */
  private siteOfIds(stack: string, labelSlot: number): number {
    const key = siteKeyOf(stack, labelSlot);
    const known = this.siteByStack.get(key);
    if (known !== undefined) return known;
    const ids = stack === "" ? [] : stack.split(",").map(Number);
    const i32 = this.r.i32;
    const count = i32[this.r.hdr + S_PROF_SITES]!;
    if (count >= this.maxSites) {
      this.markFull(PROF_FULL_SITES);
      return OTHER_SITES;
    }
    const rec = this.t.sites + count * SITE_STRIDE;
    i32.fill(0, rec, rec + SITE_STRIDE);
    i32[rec + SR_HASH] = hashIds(ids);
    i32[rec + SR_FRAME_COUNT] = ids.length;
    for (let k = 0; k < ids.length; k++) i32[rec + SR_FRAMES + k] = ids[k]!;
    i32[rec + SR_LABELS] = labelSlot;
    Atomics.store(i32, this.r.hdr + S_PROF_SITES, count + 1);
    this.siteByStack.set(key, count);
    return count;
  }

  /**
   * An allocation of `size` bytes counted `weight` times (1 when exact;
   * 1/p when sampled). The figures are put on the books' grid first
   * (onGrid), so recordFree of the same (weight, size) takes off exactly
   * what this added.
   */
  recordAlloc(site: number, weight: number, size: number): void {
    const f = this.counters(site);
    const f64 = this.r.f64;
    const count = onGrid(weight);
    const peaks = this.peaks;
    if (peaks !== null) peaks.touch(site, f);
    f64[f + SRF_COUNT] += count;
    f64[f + SRF_SIZE] += count * size;
    f64[f + SRF_ALLOC_COUNT] += count;
    f64[f + SRF_ALLOC_SIZE] += count * size;
    if (peaks !== null) peaks.moved(count * size);
  }

  /**
   * The free of an object recorded with recordAlloc(site, weight, size).
   * No clamp at zero: the books are exact, so a figure below zero is an
   * over-subtraction (a bug), and it must show (a negative figure in the
   * profile; a heap image that carries one is refused) rather than be hidden.
   */
  recordFree(site: number, weight: number, size: number): void {
    const f = this.counters(site);
    const f64 = this.r.f64;
    const count = onGrid(weight);
    const peaks = this.peaks;
    if (peaks !== null) peaks.touch(site, f);
    f64[f + SRF_COUNT] -= count;
    f64[f + SRF_SIZE] -= count * size;
    if (peaks !== null) peaks.moved(-count * size);
  }

  /** A sampled object resized in place (realloc shrinking a page span). */
  recordResize(site: number, oldWeight: number, oldSize: number, newWeight: number, newSize: number): void {
    const f = this.counters(site);
    const f64 = this.r.f64;
    const oldCount = onGrid(oldWeight);
    const newCount = onGrid(newWeight);
    const peaks = this.peaks;
    if (peaks !== null) peaks.touch(site, f);
    f64[f + SRF_COUNT] += newCount - oldCount;
    f64[f + SRF_SIZE] += newCount * newSize - oldCount * oldSize;
    if (peaks !== null) peaks.moved(newCount * newSize - oldCount * oldSize);
  }

  /** Float64 index of a site record's counters base (add SRF_*). */
  private counters(site: number): number {
    return (this.t.sites + site * SITE_STRIDE) >>> 1;
  }

  /** A label set's frame record + 1 (made, and cached, if new); -1 when the frame or string table is full. */
  private labelSlotOf(labels: HeapLabelSet): number {
    const id = this.frameOf({ functionName: labels.encoded, url: LABELS_URL, line: 0, column: 0 });
    if (id < 0) return -1;
    this.labelSlotBySet.set(labels.id, id + 1);
    return id + 1;
  }

  private frameOf(f: Frame): number {
    const key = `${f.url}\0${f.line}\0${f.column}\0${f.functionName}`;
    const known = this.frameByKey.get(key);
    if (known !== undefined) return known;
    const i32 = this.r.i32;
    const count = i32[this.r.hdr + S_PROF_FRAMES]!;
    if (count >= this.maxFrames) {
      this.markFull(PROF_FULL_FRAMES);
      return -1;
    }
    const name = this.stringOf(f.functionName);
    const url = this.stringOf(f.url);
    if (name < 0 || url < 0) return -1;
    const rec = this.t.frames + count * FRAME_STRIDE;
    i32[rec + FR_NAME] = name;
    i32[rec + FR_NAME_LENGTH] = this.stringLength(f.functionName);
    i32[rec + FR_URL] = url;
    i32[rec + FR_URL_LENGTH] = this.stringLength(f.url);
    i32[rec + FR_LINE] = f.line;
    i32[rec + FR_COLUMN] = f.column;
    Atomics.store(i32, this.r.hdr + S_PROF_FRAMES, count + 1);
    this.frameByKey.set(key, count);
    return count;
  }

  /** Note that table `bit` (PROF_FULL_*) refused an entry: its stack goes to (other sites). */
  private markFull(bit: number): void {
    const i32 = this.r.i32;
    const slot = this.r.hdr + S_PROF_FULL;
    if ((i32[slot]! & bit) === 0) Atomics.store(i32, slot, i32[slot]! | bit);
  }

  private stringLength(text: string): number {
    return this.lengths.get(text)!;
  }

  /** Byte offset (within the string area) of `text` as UTF-8, or -1 when full. */
  private stringOf(text: string): number {
    const known = this.stringByText.get(text);
    if (known !== undefined) return known;
    const bytes = Buffer.from(text, "utf8");
    const used = this.r.i32[this.r.hdr + S_PROF_STRING_BYTES]!;
    if (used + bytes.length > this.stringCapacity) {
      this.markFull(PROF_FULL_STRINGS);
      return -1;
    }
    this.r.u8.set(bytes, this.t.strings + used);
    Atomics.store(this.r.i32, this.r.hdr + S_PROF_STRING_BYTES, used + bytes.length);
    this.stringByText.set(text, used);
    this.lengths.set(text, bytes.length);
    return used;
  }

  private rebuildCaches(): void {
    const i32 = this.r.i32;
    const frames = readFrames(this.r, this.t);
    frames.forEach((f, id) => {
      this.frameByKey.set(`${f.url}\0${f.line}\0${f.column}\0${f.functionName}`, id);
      const rec = this.t.frames + id * FRAME_STRIDE;
      this.stringByText.set(f.functionName, i32[rec + FR_NAME]!);
      this.lengths.set(f.functionName, i32[rec + FR_NAME_LENGTH]!);
      this.stringByText.set(f.url, i32[rec + FR_URL]!);
      this.lengths.set(f.url, i32[rec + FR_URL_LENGTH]!);
    });
    const sites = Atomics.load(i32, this.r.hdr + S_PROF_SITES);
    for (let s = 1; s < sites; s++) {
      const rec = this.t.sites + s * SITE_STRIDE;
      const ids = Array.from({ length: i32[rec + SR_FRAME_COUNT]! }, (_, k) => i32[rec + SR_FRAMES + k]!);
      this.siteByStack.set(siteKeyOf(ids.join(","), i32[rec + SR_LABELS]!), s);
    }
  }
}

/** A site's key in siteByStack: its frame ids, and its label slot when it has one. */
function siteKeyOf(stack: string, labelSlot: number): string {
  return labelSlot === 0 ? stack : `${stack}|${labelSlot}`;
}

/** Float64 index of site `site`'s counters in region `r` (add SRF_*): for the peaks' readers. */
export function siteCounters(r: ShardRegion, site: number): number {
  return (tablesOf(r).sites + site * SITE_STRIDE) >>> 1;
}

/** One site as read from the buffer, with its id: an AllocationSite whose counters are raw (unscaled, unrounded). */
export interface RawSite extends AllocationSite {
  id: number;
}

/**
 * What one thread has decoded of a region's tables: its frames and each
 * site's frame list, frozen, so every profile read from the region shares
 * them. Both tables only grow and a record never changes once its count
 * publishes it, so a reader decodes only what is new since its last read.
 * Without it, a profile of 50,000 sites decoded every frame's strings and
 * built every frame list each time (the dashboard reads every shard's
 * profile once a second), and the reports could not tell a frame seen
 * before from a new one by identity (frame-name.ts, heap-profile.ts).
 */
interface DecodedTables {
  frames: Frame[];
  siteFrames: (readonly Frame[])[];
  /** Each label set's labels by its SR_LABELS slot (undefined: a slot that names no label set). */
  labelsBySlot: Map<number, Readonly<Record<string, string>> | undefined>;
}

const decoded = new WeakMap<ShardRegion, DecodedTables>();

const OTHER_SITES_FRAMES: readonly Frame[] = Object.freeze([Object.freeze({ functionName: OTHER_SITES_NAME, url: "", line: 0, column: 0 })]);

/**
 * Every site of a region with live objects or history, read from the
 * buffer alone (any thread, or a saved image). Site 0 appears, with the
 * single frame "(other sites)", only when something was folded into it.
 * Frames and frame lists are shared between reads, and frozen; sites of
 * one label set share one labels object.
 */
export function readSites(r: ShardRegion): RawSite[] {
  const t = tablesOf(r);
  let cache = decoded.get(r);
  if (cache === undefined) decoded.set(r, (cache = { frames: [], siteFrames: [], labelsBySlot: new Map() }));
  const i32 = r.i32;
  const f64 = r.f64;
  const labelsBySlot = cache.labelsBySlot;
  // Sites before frames: a site's frames are published before it, so every
  // frame a site counted here names is among the frames counted after.
  const sites = Atomics.load(i32, r.hdr + S_PROF_SITES);
  const frameCount = Atomics.load(i32, r.hdr + S_PROF_FRAMES);
  const frames = cache.frames;
  if (frames.length < frameCount) for (const f of readFrames(r, t, frames.length, frameCount)) frames.push(Object.freeze(f));
  const out: RawSite[] = [];
  for (let s = 0; s < sites; s++) {
    const rec = t.sites + s * SITE_STRIDE;
    const f = rec >>> 1;
    const allocCount = f64[f + SRF_ALLOC_COUNT]!;
    if (allocCount === 0) continue;
    let siteFrames = cache.siteFrames[s];
    if (siteFrames === undefined) {
      siteFrames = s === OTHER_SITES ? OTHER_SITES_FRAMES : Object.freeze(Array.from({ length: i32[rec + SR_FRAME_COUNT]! }, (_, k) => frames[i32[rec + SR_FRAMES + k]!]!));
      cache.siteFrames[s] = siteFrames;
    }
    const site: RawSite = {
      id: s,
      frames: siteFrames as Frame[],
      count: f64[f + SRF_COUNT]!,
      size: f64[f + SRF_SIZE]!,
      allocCount,
      allocSize: f64[f + SRF_ALLOC_SIZE]!,
    };
    const labelSlot = i32[rec + SR_LABELS]!;
    if (labelSlot > 0) {
      let labels = labelsBySlot.get(labelSlot);
      if (!labelsBySlot.has(labelSlot)) {
        const decodedLabels = labelsOfFrame(frames[labelSlot - 1]);
        labels = decodedLabels === undefined ? undefined : Object.freeze(decodedLabels);
        labelsBySlot.set(labelSlot, labels);
      }
      if (labels !== undefined) site.labels = labels;
    }
    out.push(site);
  }
  return out;
}

/** The labels a label-set frame record holds (SR_LABELS), or undefined when it is not one. */
function labelsOfFrame(f: Frame | undefined): Record<string, string> | undefined {
  return f === undefined || f.url !== LABELS_URL ? undefined : decodeHeapLabels(f.functionName);
}

const TABLE_BITS: ReadonlyArray<[ProfilerTable, number]> = [
  ["sites", PROF_FULL_SITES],
  ["frames", PROF_FULL_FRAMES],
  ["strings", PROF_FULL_STRINGS],
];

/**
 * A region's ProfilerFill, from the buffer alone: a few loads, so /metrics
 * reads it at every scrape without reading the sites.
 */
export function readProfilerFill(r: ShardRegion): ProfilerFill {
  const f = (tablesOf(r).sites + OTHER_SITES * SITE_STRIDE) >>> 1;
  const bits = Atomics.load(r.i32, r.hdr + S_PROF_FULL);
  return {
    sites: Atomics.load(r.i32, r.hdr + S_PROF_SITES) - 1,
    siteCapacity: r.headerSlot(S_PROF_MAX_SITES) - 1,
    full: TABLE_BITS.filter(([, bit]) => (bits & bit) !== 0).map(([name]) => name),
    folded: { count: r.f64[f + SRF_COUNT]!, size: r.f64[f + SRF_SIZE]!, allocCount: r.f64[f + SRF_ALLOC_COUNT]!, allocSize: r.f64[f + SRF_ALLOC_SIZE]! },
  };
}

/** Frames `from` to `to` (all that are published, by default) of a region, decoded. */
function readFrames(r: ShardRegion, t: Tables, from = 0, to = Atomics.load(r.i32, r.hdr + S_PROF_FRAMES)): Frame[] {
  const i32 = r.i32;
  const text = (offset: number, length: number): string =>
    Buffer.from(r.u8.buffer, t.strings + offset, length).toString("utf8");
  const frames: Frame[] = [];
  for (let id = from; id < to; id++) {
    const rec = t.frames + id * FRAME_STRIDE;
    frames.push({
      functionName: text(i32[rec + FR_NAME]!, i32[rec + FR_NAME_LENGTH]!),
      url: text(i32[rec + FR_URL]!, i32[rec + FR_URL_LENGTH]!),
      line: i32[rec + FR_LINE]!,
      column: i32[rec + FR_COLUMN]!,
    });
  }
  return frames;
}

/**
 * Largest figure a site counter may hold: a count or byte total beyond
 * 2^53 is no longer an exact integer, and no heap of at most 4 GiB gets
 * there (2^53 bytes is 2 million times the largest heap, allocated over).
 */
export const MAX_SITE_FIGURE = Number.MAX_SAFE_INTEGER;

/**
 * What is wrong with a region's profiler tables, or undefined when a reader
 * (readSites, the renderers) can follow them safely: the tables where the
 * layout puts them, every count within its table's capacity, every frame's
 * strings inside the used string bytes and valid UTF-8, every site's frames
 * recorded ones, every figure a finite, non-negative number. For buffers
 * from outside (heap images); the shard's own writer keeps these by
 * construction. Cost: linear in the used tables (a few ms at 4096 sites).
 */
export function siteTableProblem(r: ShardRegion, layout: RegionLayout): string | undefined {
  const slots: Array<[string, number, number]> = [
    ["profiler offset", S_PROF_OFFSET, layout.profilerOffset],
    ["site capacity", S_PROF_MAX_SITES, layout.profiler.sites],
    ["frame capacity", S_PROF_MAX_FRAMES, layout.profiler.frames],
    ["string capacity", S_PROF_STRING_CAPACITY, layout.profiler.stringBytes],
  ];
  for (const [what, slot, expected] of slots) {
    if (r.headerSlot(slot) !== expected) return `profiler ${what} is ${r.headerSlot(slot)}, the layout says ${expected}`;
  }
  const sites = r.headerSlot(S_PROF_SITES);
  const frames = r.headerSlot(S_PROF_FRAMES);
  const stringBytes = r.headerSlot(S_PROF_STRING_BYTES);
  if (sites < 1 || sites > layout.profiler.sites) return `${sites} profiler sites (1 to ${layout.profiler.sites})`;
  if (frames < 0 || frames > layout.profiler.frames) return `${frames} profiler frames (0 to ${layout.profiler.frames})`;
  if (stringBytes < 0 || stringBytes > layout.profiler.stringBytes) return `${stringBytes} profiler string bytes (0 to ${layout.profiler.stringBytes})`;
  const rate = r.headerSlot(S_PROF_RATE);
  if (rate < 0) return `sample rate ${rate}`;
  const epoch = r.headerSlot(S_PROF_EPOCH);
  if (epoch < 0 || epoch >= RATE_EPOCHS) return `rate epoch ${epoch} (0 to ${RATE_EPOCHS - 1})`;
  const depth = r.headerSlot(S_PROF_DEPTH);
  if (depth < 1 || depth > PROF_MAX_DEPTH) return `profile depth ${depth} (1 to ${PROF_MAX_DEPTH})`;
  const full = r.headerSlot(S_PROF_FULL);
  if ((full & ~(PROF_FULL_SITES | PROF_FULL_FRAMES | PROF_FULL_STRINGS)) !== 0) return `full-table bits ${full} name no profiler table`;
  for (let e = 0; e < RATE_EPOCHS; e++) {
    const rateOfEpoch = epochRate(r, e);
    if (!Number.isInteger(rateOfEpoch) || rateOfEpoch < 0 || rateOfEpoch > 0x7fffffff) return `rate epoch ${e} has rate ${rateOfEpoch}`;
  }
  const t = tablesOf(r);
  const i32 = r.i32;
  for (let id = 0; id < frames; id++) {
    const rec = t.frames + id * FRAME_STRIDE;
    for (const [what, offset, length] of [
      ["name", i32[rec + FR_NAME]!, i32[rec + FR_NAME_LENGTH]!],
      ["url", i32[rec + FR_URL]!, i32[rec + FR_URL_LENGTH]!],
    ] as const) {
      if (offset < 0 || length < 0 || offset + length > stringBytes) return `frame ${id}'s ${what} (bytes ${offset}+${length}) is outside the ${stringBytes} string bytes`;
      if (!isUtf8(r.u8.subarray(t.strings + offset, t.strings + offset + length))) return `frame ${id}'s ${what} is not UTF-8`;
    }
    if (i32[rec + FR_LINE]! < 0 || i32[rec + FR_COLUMN]! < 0) return `frame ${id} has line ${i32[rec + FR_LINE]}, column ${i32[rec + FR_COLUMN]}`;
  }
  for (let s = 0; s < sites; s++) {
    const rec = t.sites + s * SITE_STRIDE;
    const n = i32[rec + SR_FRAME_COUNT]!;
    if (n < 0 || n > PROF_MAX_DEPTH) return `site ${s} has ${n} frames (0 to ${PROF_MAX_DEPTH})`;
    for (let k = 0; k < n; k++) {
      const id = i32[rec + SR_FRAMES + k]!;
      if (id < 0 || id >= frames) return `site ${s} names frame ${id}, of ${frames}`;
    }
    const labelSlot = i32[rec + SR_LABELS]!;
    if (labelSlot !== 0) {
      if (labelSlot < 0 || labelSlot > frames) return `site ${s} names label set ${labelSlot - 1}, of ${frames} frames`;
      // Its frame's strings were checked above: decoding it is safe.
      if (labelsOfFrame(readFrames(r, t, labelSlot - 1, labelSlot)[0]) === undefined) return `site ${s}'s label set (frame ${labelSlot - 1}) is not one`;
    }
    const f = rec >>> 1;
    for (const [what, field] of [["count", SRF_COUNT], ["size", SRF_SIZE], ["allocCount", SRF_ALLOC_COUNT], ["allocSize", SRF_ALLOC_SIZE]] as const) {
      const v = r.f64[f + field]!;
      if (!(v >= 0 && v <= MAX_SITE_FIGURE)) return `site ${s}'s ${what} is ${v}`;
    }
  }
  return undefined;
}

const FNV_OFFSET = 0x811c9dc5 | 0;
const FNV_PRIME = 0x01000193;

/** FNV-1a over the frame ids: a stable hash of the stack, kept with the record for tools. */
function hashIds(ids: readonly number[]): number {
  let h = FNV_OFFSET;
  for (const id of ids) h = Math.imul(h ^ id, FNV_PRIME);
  return h | 0;
}
