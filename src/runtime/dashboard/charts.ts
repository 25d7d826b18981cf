/**
 * Memory per shard over time: used, free, live objects, cross-shard frees
 * per second, failed allocations and the largest free span, one uPlot chart
 * each (uPlot is served from the installed package), each legend showing the
 * latest values until the mouse picks another point; failed allocations
 * also raise a note above the charts.
 */
import type UPlot from "uplot";
import type { ShardSample } from "./api.js";
import { $, PALETTE, chartWidth, clock, count, exact, latestSample, legendValue, shardName, size, state, timeAxis, timeScale } from "./lib.js";

interface Metric {
  id: string;
  title: string;
  /** A shard's figure in a sample: drawn as it is, or per second when `perSecond` (a cumulative count). */
  figure: (s: ShardSample) => number;
  perSecond?: true;
  bytes: boolean;
}

export const METRICS: readonly Metric[] = [
  { id: "chart-used", title: "Used memory", figure: (s) => s.used, bytes: true },
  { id: "chart-free", title: "Free memory", figure: (s) => s.free, bytes: true },
  { id: "chart-live", title: "Live objects", figure: (s) => s.liveObjects, bytes: false },
  { id: "chart-cross", title: "Cross-shard frees per second", figure: (s) => s.crossShardFrees, perSecond: true, bytes: false },
  { id: "chart-failed", title: "Failed allocations (since the start)", figure: (s) => s.failedAllocations, bytes: false },
  { id: "chart-largest-free", title: "Largest free span (the largest allocation that fits)", figure: (s) => s.largestFreeSpan, bytes: true },
];

export function makeCharts(): void {
  state.charts.forEach((c) => c.destroy());
  state.charts = METRICS.map((m) => {
    const series: UPlot.Series[] = [{ value: legendValue(clock) }];
    for (let s = 0; s < state.shards; s++) series.push({ label: shardName(s), stroke: PALETTE[s % PALETTE.length]!, width: 1.5, value: legendValue(m.bytes ? size : count) });
    const axisValues = m.bytes ? (_u: UPlot, vals: number[]): string[] => vals.map(size) : (_u: UPlot, vals: number[]): string[] => vals.map(count);
    return new uPlot(
      {
        title: m.title,
        width: chartWidth(m.id),
        height: 180,
        series: series,
        scales: { x: timeScale() },
        axes: [timeAxis(), { values: axisValues, size: 60 }],
        legend: { live: true },
      },
      emptyData(),
      $(m.id),
    );
  });
}
function emptyData(): UPlot.AlignedData {
  const d: number[][] = [[]];
  for (let s = 0; s < state.shards; s++) d.push([]);
  return d as UPlot.AlignedData;
}
function chartData(m: Metric): UPlot.AlignedData {
  const xs: number[] = [];
  const ys: Array<Array<number | null>> = [];
  for (let s = 0; s < state.shards; s++) ys.push([]);
  state.samples.forEach((sample, i) => {
    if (m.perSecond && i === 0) return;
    xs.push(sample.t / 1000);
    for (let s = 0; s < state.shards; s++) {
      const now = sample.shards[s]!;
      if (m.perSecond) {
        const before = state.samples[i - 1]!;
        const dt = (sample.t - before.t) / 1000;
        ys[s]!.push(dt > 0 ? Math.max(0, (m.figure(now) - m.figure(before.shards[s]!)) / dt) : null);
      } else {
        ys[s]!.push(m.figure(now));
      }
    }
  });
  return [xs, ...ys];
}
export function drawCharts(): void {
  state.charts.forEach((c, i) => c.setData(chartData(METRICS[i]!)));
}
export function resizeCharts(): void {
  state.charts.forEach((c, i) => c.setSize({ width: chartWidth(METRICS[i]!.id), height: 180 }));
}

/** Failed allocations are rare and decisive: a note says so, with each shard's largest free span against its free memory. */
export function drawFailures(): void {
  const latest = latestSample();
  const note = $("failed-note");
  const failed = latest ? latest.shards.reduce((n, s) => n + s.failedAllocations, 0) : 0;
  note.hidden = failed === 0;
  if (failed === 0 || !latest) return;
  note.textContent =
    exact(failed) +
    " allocations failed (OutOfMemoryError) since the start: " +
    latest.shards.map((s, i) => shardName(i) + " " + exact(s.failedAllocations) + " (largest free span " + size(s.largestFreeSpan) + " of " + size(s.free) + " free)").join(", ");
}
