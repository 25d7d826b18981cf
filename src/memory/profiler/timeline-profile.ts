/**
 * The timelines (timeline.ts) as data a reader can use: the top sites' live
 * bytes over time, per shard or all shards summed tick by tick (one tick
 * writes every region with the same time), each site named by its frames
 * and labels; and one tick as a HeapProfile (its largest sites and the
 * rest as one site), which every report renders and diffProfiles compares.
 */
import { siteKey, siteWith, type AllocationSite, type Frame, type HeapProfile, type SiteTimeline, type TimelineSample, type TimelineSite } from "../heap-profile.js";
import { profileOfSites } from "./live-profile.js";
import { TIMELINE_SITES } from "../layout.js";
import type { ShardRegion } from "../region.js";
import { readSites, type RawSite } from "./site-table.js";
import { readTimeline, type TimelineEntry } from "./timeline.js";

/** The name of the site that stands for every site below a tick's largest. */
export const SMALLER_SITES_NAME = `(sites below the ${TIMELINE_SITES} largest)`;

const SMALLER_SITES_FRAMES: Frame[] = [{ functionName: SMALLER_SITES_NAME, url: "", line: 0, column: 0 }];

/** Each chosen region's entries with their sites resolved, and the regions' site ids -> sites. */
function readAll(regions: readonly ShardRegion[], shard: number | undefined): Array<{ entries: TimelineEntry[]; byId: Map<number, RawSite> }> {
  const chosen = shard === undefined ? regions : [regions[shard]!];
  return chosen.map((r) => {
    const entries = readTimeline(r);
    return { entries, byId: entries.length === 0 ? new Map() : new Map(readSites(r).map((s) => [s.id, s])) };
  });
}

/** Shard `shard`'s timeline, or every shard's summed per tick when undefined; oldest first. */
export function siteTimelineOf(regions: readonly ShardRegion[], shard?: number): SiteTimeline {
  const sites: TimelineSite[] = [];
  const indexOf = new Map<string, number>();
  const byTime = new Map<number, TimelineSample>();
  for (const { entries, byId } of readAll(regions, shard)) {
    for (const e of entries) {
      let sample = byTime.get(e.t);
      if (sample === undefined) byTime.set(e.t, (sample = { t: e.t, used: 0, live: 0, sites: [] }));
      sample.used += e.used;
      sample.live += e.live;
      for (const s of e.sites) {
        const raw = byId.get(s.id);
        if (raw === undefined) continue;
        const key = siteKey(raw.frames, raw.labels);
        let i = indexOf.get(key);
        if (i === undefined) {
          indexOf.set(key, (i = sites.length));
          sites.push(raw.labels === undefined ? { frames: raw.frames } : { frames: raw.frames, labels: raw.labels });
        }
        const same = sample.sites.find((x) => x[0] === i);
        if (same) {
          same[1] += s.size;
          same[2] += s.count;
        } else sample.sites.push([i, s.size, s.count]);
      }
    }
  }
  const samples = [...byTime.values()].sort((a, b) => a.t - b.t);
  for (const s of samples) s.sites.sort((a, b) => b[1] - a[1]);
  return { shard: shard === undefined ? "all" : shard, sitesPerSample: TIMELINE_SITES, sites, samples };
}

/**
 * The tick at or just before `t` (ms since the epoch) as a HeapProfile of
 * shard `shard` (all shards when undefined): its largest sites with their
 * live bytes and objects (their cumulative figures are those live ones:
 * a tick keeps no more) and one SMALLER_SITES_NAME site for the rest of
 * its profiled live bytes (its objects unknown: 0). Undefined when no tick
 * is that old.
 */
export function timelineProfileAt(regions: readonly ShardRegion[], shard: number | undefined, t: number): (HeapProfile & { t: number }) | undefined {
  const timeline = siteTimelineOf(regions, shard);
  let sample: TimelineSample | undefined;
  for (const s of timeline.samples) if (s.t <= t) sample = s;
  if (sample === undefined) return undefined;
  const sites: AllocationSite[] = sample.sites.map(([i, size, count]) => siteWith(timeline.sites[i]!, { count, size, allocCount: count, allocSize: size }));
  const rest = sample.live - sites.reduce((n, s) => n + s.size, 0);
  if (rest > 0) sites.push({ frames: SMALLER_SITES_FRAMES, count: 0, size: rest, allocCount: 0, allocSize: rest });
  return { ...profileOfSites(shard === undefined ? regions : [regions[shard]!], shard, sites), t: sample.t };
}
