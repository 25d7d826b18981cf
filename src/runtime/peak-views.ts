/**
 * The admin API's views of the past (and `shardheap report --peak`): a
 * shard's peak or the heap-wide one (`at=peak`), one tick of the timelines
 * (`at=T`, ms since the epoch: the tick at or just before it), the growth
 * between two ticks (`from=T0&at=T1`: a diff), each with the title its
 * flamegraph shows; and the timelines themselves as JSON, their sites'
 * frames mapped and shown as every profile's are.
 */
import { HttpError, InvalidValueError, UsageError } from "../errors.js";
import type { HeapProfile, PeakProfile, SiteTimeline } from "../memory/heap-profile.js";
import type { SharedHeap } from "../memory/shared-heap.js";
import { parseInteger } from "../parse.js";
import { diffProfiles } from "../report/diff.js";
import type { PathOptions } from "../report/display-paths.js";
import { shownFrames } from "../report/shown-frames.js";
import type { SourceMapCache } from "../report/source-map.js";
import { formatSize } from "../units.js";

/** What a profile of the past is of: a shard, or all shards. */
const whose = (shard: number | undefined): string => (shard === undefined ? "all shards" : `shard ${shard}`);

/** A moment as the titles print it: ISO 8601 in UTC, to the millisecond. */
export const moment = (t: number): string => (t > 0 ? new Date(t).toISOString() : "never");

/** The title of a peak's flamegraph (and report): whose, how much, when. */
export function peakTitle(p: PeakProfile): string {
  const which = p.shard === "all" ? "Heap-wide peak (the shards' highest sum)" : `Peak of shard ${p.shard}`;
  return `${which}: ${formatSize(Math.round(p.peakBytes))} profiled live at ${moment(p.peakTime)}`;
}

/** `at` as the query gives it: "peak", or a moment in ms since the epoch. */
export function parseAt(text: string, what: string): "peak" | number {
  if (text === "peak") return "peak";
  if (!/^\d+$/.test(text)) throw new InvalidValueError(what, `${what} must be "peak" or a time in ms since the epoch (a timeline tick's t), got ${JSON.stringify(text)}`);
  return parseInteger(text, what, 0, Number.MAX_SAFE_INTEGER);
}

/** The profile the query's `at` (and `from`) name, with its title; HttpError 404 when no tick is that old. */
export function profileInThePast(heap: SharedHeap, shard: number | undefined, at: "peak" | number, from: number | undefined): { profile: HeapProfile; title: string } {
  if (at === "peak") {
    if (from !== undefined) throw new UsageError("from=T names the start of a growth between two timeline ticks: give at=T (a time), not at=peak");
    const peak = heap.peakProfile(shard);
    return { profile: peak, title: peakTitle(peak) };
  }
  const tick = (t: number, what: string): HeapProfile & { t: number } => {
    const p = heap.timelineProfile(t, shard);
    if (p === undefined) throw new HttpError("ERR_SHARDHEAP_NOT_FOUND", `no timeline tick of ${whose(shard)} at or before ${what}=${t}`);
    return p;
  };
  const next = tick(at, "at");
  if (from === undefined) return { profile: next, title: `${whose(shard)} at ${moment(next.t)}: the timeline's largest sites` };
  const base = tick(from, "from");
  return {
    profile: diffProfiles(base, next),
    title: `Growth of ${whose(shard)} from ${moment(base.t)} to ${moment(next.t)}: the timeline's largest sites (red grew, blue shrank)`,
  };
}

/** A timeline with its sites' frames mapped to sources and shown short (unless fullPaths), as the profiles the API serves. */
export async function shownTimeline(timeline: SiteTimeline, cache: SourceMapCache, o: PathOptions = {}): Promise<SiteTimeline> {
  const frames = await shownFrames(timeline.sites, cache, o);
  return { ...timeline, sites: timeline.sites.map((s, i) => ({ ...s, frames: frames[i]! })) };
}
