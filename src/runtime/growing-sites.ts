/**
 * Which allocation sites keep growing: from a series of a site's live bytes
 * over a window (memory-history.ts samples them once a second from the
 * buffer), a least-squares line y = a + b t. A site is growing when the
 * slope is positive, the line explains the series well (r^2 at least
 * MIN_FIT) and it gained bytes over the window. Ranked by slope, bytes per
 * second: what Materialize's engineers proposed to build on jemalloc's
 * profile dumps (a linear regression per call stack,
 * https://github.com/MaterializeInc/materialize/issues/24457) and
 * bytehound shows as per-backtrace plots, for a live heap. Or by objects:
 * the same fit to the site's live object count, ranked by objects per
 * second. A leak of many small objects (56-byte strings at a
 * few hundred a second) gains fewer bytes than a cache filling up as it
 * should, and ranked by bytes it came below it, shown only by its count.
 *
 * Why r^2 and not the slope alone: a steady live set sampled by the
 * profiler (Poisson by bytes) wanders around its level, and over a short
 * window that wander has a slope of either sign; its fit is poor (r^2
 * near 0), while a leak's estimate climbs step by step, r^2 near 1.
 * Measured on `stress --smp 2 --memory 16MiB --heapprof=4K --leak 128K`
 * (the dashboard test's run), two 10 s windows of 40 samples after the
 * live set had filled: the leak's r^2 0.999 both times (slope 260-267
 * KiB/s for 256 KiB/s leaked), the three steady sites' 0.003 to 0.28.
 */
import type { PathOptions } from "../report/display-paths.js";
import { shownFrames } from "../report/shown-frames.js";
import type { SourceMapCache } from "../report/source-map.js";
import type { Frame } from "../memory/heap-profile.js";
import type { GrowingSite } from "./dashboard/api.js"; // declared once, as the admin API answers it

/** Fewest samples a fit is made from. */
export const MIN_POINTS = 5;
/** Smallest r^2 (coefficient of determination) of a growing site. */
export const MIN_FIT = 0.8;

export interface LineFit {
  /** dy/dt: bytes per second when t is in seconds. */
  slope: number;
  /** Coefficient of determination, 0..1 (0 when y does not vary). */
  r2: number;
}

/** The least-squares line through (t[i], y[i]). */
export function fitLine(t: readonly number[], y: readonly number[]): LineFit {
  const n = Math.min(t.length, y.length);
  if (n < 2) return { slope: 0, r2: 0 };
  let mt = 0;
  let my = 0;
  for (let i = 0; i < n; i++) {
    mt += t[i]!;
    my += y[i]!;
  }
  mt /= n;
  my /= n;
  let stt = 0;
  let syy = 0;
  let sty = 0;
  for (let i = 0; i < n; i++) {
    const dt = t[i]! - mt;
    const dy = y[i]! - my;
    stt += dt * dt;
    syy += dy * dy;
    sty += dt * dy;
  }
  if (stt === 0) return { slope: 0, r2: 0 };
  return { slope: sty / stt, r2: syy === 0 ? 0 : (sty * sty) / (stt * syy) };
}

/** What growing sites are ranked by: live bytes or live objects. */
export type GrowthMeasure = "bytes" | "count";

export interface SiteSeries {
  frames: Frame[];
  labels?: Record<string, string>;
  /** Live bytes at each sample time. */
  y: readonly number[];
  /** Live objects at each sample time (absent: not followed, taken as 0). */
  counts?: readonly number[];
}

/** The growing sites among `series` (all sampled at times `t`, in seconds), fastest first in bytes or in objects (`by`). */
export function rankGrowingSites(t: readonly number[], series: Iterable<SiteSeries>, limit = 20, by: GrowthMeasure = "bytes"): GrowingSite[] {
  if (t.length < MIN_POINTS) return [];
  const out: GrowingSite[] = [];
  for (const s of series) {
    const counts = s.counts ?? s.y.map(() => 0);
    const bytes = fitLine(t, s.y);
    const objects = fitLine(t, counts);
    const growth = s.y[s.y.length - 1]! - s.y[0]!;
    const countGrowth = counts[counts.length - 1]! - counts[0]!;
    const [fit, gained] = by === "bytes" ? [bytes, growth] : [objects, countGrowth];
    if (!(fit.slope > 0 && fit.r2 >= MIN_FIT && gained > 0)) continue;
    out.push({
      frames: s.frames,
      ...(s.labels === undefined ? {} : { labels: s.labels }),
      ...bytes,
      liveBytes: s.y[s.y.length - 1]!,
      growth,
      countSlope: objects.slope,
      countR2: objects.r2,
      liveCount: counts[counts.length - 1]!,
      countGrowth,
    });
  }
  return out.sort((a, b) => (by === "bytes" ? b.slope - a.slope : b.countSlope - a.countSlope)).slice(0, limit);
}

/**
 * `sites` with their frames mapped to the original sources and their files
 * shown short unless `fullPaths` (as every profile the admin API serves: the
 * dashboard's "Find in flamegraphs" looks for a site's frame by the name
 * the SVG gives it).
 */
export async function mapGrowingSites(sites: readonly GrowingSite[], cache: SourceMapCache, o: PathOptions = {}): Promise<GrowingSite[]> {
  const frames = await shownFrames(sites, cache, o);
  return sites.map((g, i) => ({ ...g, frames: frames[i]! }));
}
