/**
 * Which allocation sites keep growing: from a series of a site's live bytes
 * over a window (memory-history.ts samples them once a second from the
 * buffer), a least-squares line y = a + b t. A site is growing when the
 * slope is positive, the line explains the series well (r^2 at least
 * MIN_FIT) and it gained bytes over the window. Ranked by slope, bytes per
 * second: what Materialize's engineers asked jemalloc for (issue 24457)
 * and bytehound shows as per-backtrace plots, for a live heap.
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

export interface GrowingSite extends LineFit {
  frames: Frame[];
  /** The site's labels (withHeapLabels), when it has any. */
  labels?: Record<string, string>;
  /** Live bytes at the last sample. */
  liveBytes: number;
  /** Live bytes gained from the window's first sample to its last. */
  growth: number;
}

export interface SiteSeries {
  frames: Frame[];
  labels?: Record<string, string>;
  /** Live bytes at each sample time. */
  y: readonly number[];
}

/** The growing sites among `series` (all sampled at times `t`, in seconds), fastest first. */
export function rankGrowingSites(t: readonly number[], series: Iterable<SiteSeries>, limit = 20): GrowingSite[] {
  if (t.length < MIN_POINTS) return [];
  const out: GrowingSite[] = [];
  for (const s of series) {
    const fit = fitLine(t, s.y);
    const growth = s.y[s.y.length - 1]! - s.y[0]!;
    if (fit.slope > 0 && fit.r2 >= MIN_FIT && growth > 0) out.push({ frames: s.frames, ...(s.labels === undefined ? {} : { labels: s.labels }), ...fit, liveBytes: s.y[s.y.length - 1]!, growth });
  }
  return out.sort((a, b) => b.slope - a.slope).slice(0, limit);
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
