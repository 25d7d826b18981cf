/**
 * The peak and timeline panels:
 * - the peak of the chosen shard, or the heap-wide one for all shards
 *   (GET /v1/heapprof?at=peak): its size and time, and its flamegraph;
 *   "Reset peak" (POST /v1/heapprof/peak/reset);
 * - "Jump to peak": a line at the peak's moment on every memory chart and
 *   the timeline, their legends showing the values then (the cursor set
 *   there), the page brought to the charts;
 * - the largest sites over time (GET /v1/heapprof/timeline): the eight
 *   that held the most at any tick, stacked, and the rest of the profiled
 *   live bytes above them; a window dragged across it shows that window's
 *   peak (the shards' own peak when it falls inside, exact; else the tick
 *   that held the most, its largest sites) or the growth across it (a
 *   differential flamegraph from its first tick to its last).
 * Times on the charts are seconds since the epoch (uPlot's), in the API ms.
 */
import type UPlot from "uplot";
import type { PeakBody, TimelineBody } from "./api.js";
import { loadSvg } from "./flamegraphs.js";
import { $, api, apiJson, chartWidth, clock, frame, input, legendValue, PALETTE, report, shardName, signedSize, size, state, status, timeAxis, timeScale, withShard, type Panel } from "./lib.js";
import { shown } from "./text.js";

const SITES_SHOWN = 8;

type Tick = TimelineBody["samples"][number];

interface PeakPanel {
  /** The last read. */
  peak: { shard: string; peakBytes: number; peakTime: number } | null;
  /** The last GET /v1/heapprof/timeline answer. */
  timeline: TimelineBody | null;
  /** The stacked chart, and the names of its layers it was made for ("\n"-joined). */
  chart: UPlot | null;
  chartKey: string;
  /** Each layer's own bytes at each tick: the legend says these, not the stack's top. */
  own: number[][];
  /** The peak's time on the charts (s), once jumped to. */
  marker: number | null;
  /** The window (ms) chosen on the stacked chart. */
  window: { t0: number; t1: number } | null;
  /** What #window-flame shows. */
  shown: { kind: "peak"; at: "peak" | number } | { kind: "growth"; from: number; at: number } | null;
  setWindow: (t0: number, t1: number) => void;
}

const panel: PeakPanel = { peak: null, timeline: null, chart: null, chartKey: "", own: [], marker: null, window: null, shown: null, setWindow };

function when(t: number): string {
  return new Date(t).toLocaleTimeString() + "." + String(t % 1000).padStart(3, "0");
}

// ---- the peak ----
async function refreshPeak(): Promise<void> {
  if (state.paused) return;
  const body = await apiJson<PeakBody>(withShard("/v1/heapprof?format=json&at=peak"));
  panel.peak = { shard: state.shard, peakBytes: body.peakBytes, peakTime: body.peakTime };
  const info = $("peak-info");
  info.setAttribute("data-peak-bytes", String(body.peakBytes));
  info.setAttribute("data-peak-time", String(body.peakTime));
  info.textContent =
    body.peakTime > 0
      ? size(body.peakBytes) + " profiled live at " + when(body.peakTime) + (state.shard === "all" ? " (all shards' highest sum)" : " (" + shardName(state.shard) + ")")
      : "nothing profiled yet";
  await loadSvg("peak-flame", withShard("/v1/heapprof?format=svg&at=peak"));
}
async function resetPeak(): Promise<void> {
  try {
    await api("/v1/heapprof/peak/reset?shard=" + state.shard, { method: "POST" });
    status("peak of " + (state.shard === "all" ? "all shards" : shardName(state.shard)) + " reset");
    await refreshPeak();
  } catch (e) {
    report(e, "peak: ");
  }
}

// ---- jump to peak: a line at its moment on every chart, the legends at it ----
function drawMarker(u: UPlot): void {
  if (panel.marker === null) return;
  const x = Math.round(u.valToPos(panel.marker, "x", true));
  if (!(x >= u.bbox.left && x <= u.bbox.left + u.bbox.width)) return;
  const ctx = u.ctx;
  ctx.save();
  ctx.strokeStyle = "#d84315";
  ctx.lineWidth = 2 * devicePixelRatio;
  ctx.setLineDash([6 * devicePixelRatio, 4 * devicePixelRatio]);
  ctx.beginPath();
  ctx.moveTo(x, u.bbox.top);
  ctx.lineTo(x, u.bbox.top + u.bbox.height);
  ctx.stroke();
  ctx.restore();
}
/** The charts that draw the marker already. */
const marked = new WeakSet<UPlot>();
function withMarker(u: UPlot): void {
  if (marked.has(u)) return;
  marked.add(u);
  u.hooks.draw = (u.hooks.draw || []).concat([drawMarker]);
}
function allCharts(): UPlot[] {
  return state.charts.concat(panel.chart ? [panel.chart] : []);
}
async function jumpToPeak(): Promise<void> {
  try {
    await refreshPeak();
  } catch (e) {
    report(e, "peak: ");
    return;
  }
  const p = panel.peak;
  if (!p || !(p.peakTime > 0)) {
    status("no peak yet: nothing was profiled", true);
    return;
  }
  const marker = (panel.marker = p.peakTime / 1000);
  const oldest = state.samples.length ? state.samples[0]!.t : Infinity;
  allCharts().forEach((u) => {
    withMarker(u);
    u.redraw(false);
    const x = u.valToPos(marker, "x");
    if (x >= 0 && x <= u.over.clientWidth) u.setCursor({ left: x, top: u.over.clientHeight / 2 });
  });
  $("jump-to-peak").setAttribute("data-jumped", String(p.peakTime));
  status("peak: " + size(p.peakBytes) + " at " + when(p.peakTime) + (p.peakTime < oldest ? " (before the charts' history: its flamegraph is below)" : ""));
  $("memory-section").scrollIntoView();
}

// ---- the largest sites over time, stacked ----
async function refreshTimeline(): Promise<void> {
  panel.timeline = await apiJson<TimelineBody>(withShard("/v1/heapprof/timeline"));
  drawTimeline();
}
/** The SITES_SHOWN sites that held the most at any tick, in that order. */
function shownSites(t: TimelineBody): number[] {
  const most: Record<number, number> = {};
  t.samples.forEach((s) => s.sites.forEach((x) => (most[x[0]] = Math.max(most[x[0]] || 0, x[1]))));
  return Object.keys(most)
    .map(Number)
    .sort((a, b) => most[b]! - most[a]!)
    .slice(0, SITES_SHOWN);
}
function siteName(site: TimelineBody["sites"][number]): string {
  const f = site.frames[0];
  if (!f) return "(no frames)";
  const file = f.url ? " (" + f.url.slice(f.url.lastIndexOf("/") + 1) + ":" + f.line + ")" : "";
  const siteLabels = site.labels;
  const labels = siteLabels
    ? " [" +
      Object.keys(siteLabels)
        .sort()
        .map((k) => k + "=" + siteLabels[k])
        .join(", ") +
      "]"
    : "";
  return shown((f.functionName || "(anonymous)") + file + labels);
}
function drawTimeline(): void {
  const t = panel.timeline;
  if (!t) return;
  const sites = shownSites(t);
  const xs = t.samples.map((s) => s.t / 1000);
  // Each layer's own bytes; then the stack: series k is layers 0..k summed, drawn from the top down so each fills to 0.
  const own = sites.map((i) =>
    t.samples.map((s) => {
      const x = s.sites.find((y) => y[0] === i);
      return x ? x[1] : 0;
    }),
  );
  const named = t.samples.map((_, j) => own.reduce((n, layer) => n + layer[j]!, 0));
  own.push(t.samples.map((s, j) => Math.max(0, s.live - named[j]!)));
  const names = sites.map((i) => siteName(t.sites[i]!)).concat(["other profiled bytes"]);
  const stacked: number[][] = [];
  own.forEach((layer, k) => stacked.push(layer.map((v, j) => v + (k > 0 ? stacked[k - 1]![j]! : 0))));
  const key = names.join("\n");
  if (!panel.chart || panel.chartKey !== key) makeTimelineChart(names, key);
  panel.own = own;
  panel.chart!.setData([xs, ...stacked.slice().reverse()]);
  $("chart-sites").setAttribute("data-samples", String(t.samples.length));
  $("chart-sites").setAttribute("data-sites", JSON.stringify(names));
}
function makeTimelineChart(names: string[], key: string): void {
  if (panel.chart) panel.chart.destroy();
  panel.chartKey = key;
  const series: UPlot.Series[] = [{ value: legendValue(clock) }];
  for (let k = names.length - 1; k >= 0; k--) {
    const layer = k;
    const color = layer === names.length - 1 ? "#bdbdbd" : PALETTE[layer % PALETTE.length]!;
    series.push({
      label: names[layer]!,
      stroke: color,
      fill: color + "99",
      width: 1,
      // The legend says the layer's own bytes, not the stack's top.
      value: (_u, _v, _sidx, idx) => {
        const column = panel.own[layer];
        if (!column || !column.length) return "-";
        return size(column[idx == null ? column.length - 1 : idx]!);
      },
    });
  }
  panel.chart = new uPlot(
    {
      title: "Largest sites' live bytes (stacked; the rest of the profiled bytes on top)",
      width: chartWidth("chart-sites"),
      height: 220,
      series: series,
      scales: { x: timeScale() },
      axes: [timeAxis(), { values: (_u: UPlot, vals: number[]) => vals.map(size), size: 60 }],
      legend: { live: true },
      cursor: { drag: { x: true, y: false, setScale: false } },
      hooks: { setSelect: [chooseWindow], draw: [drawMarker] },
    },
    [[], ...series.slice(1).map(() => [])] as UPlot.AlignedData,
    $("chart-sites"),
  );
  marked.add(panel.chart);
}

// ---- a window on the timeline: its peak, or the growth across it ----
function chooseWindow(u: UPlot): void {
  if (u.select.width < 2) return;
  const t0 = Math.round(u.posToVal(u.select.left, "x") * 1000);
  const t1 = Math.round(u.posToVal(u.select.left + u.select.width, "x") * 1000);
  setWindow(t0, t1);
}
function setWindow(t0: number, t1: number): void {
  panel.window = { t0: t0, t1: t1 };
  $("window-box").hidden = false;
  $("window-info").textContent = when(t0) + " to " + when(t1);
  $("window-box").setAttribute("data-t0", String(t0));
  $("window-box").setAttribute("data-t1", String(t1));
}
function ticksIn(w: { t0: number; t1: number }): Tick[] {
  return (panel.timeline ? panel.timeline.samples : []).filter((s) => s.t >= w.t0 && s.t <= w.t1);
}
async function showWindow(kind: "peak" | "growth"): Promise<void> {
  const w = panel.window;
  if (!w) return;
  const ticks = ticksIn(w);
  if (!ticks.length) {
    status("no timeline tick in that window", true);
    return;
  }
  let path: string;
  let text: string;
  if (kind === "peak") {
    const top = ticks.reduce((a, b) => (b.live > a.live ? b : a));
    const p = panel.peak;
    // The shards' own peak, exact, when it falls in the window and no tick there held more.
    if (p && p.shard === state.shard && p.peakTime >= w.t0 && p.peakTime <= w.t1 && p.peakBytes >= top.live) {
      path = "/v1/heapprof?format=svg&at=peak";
      panel.shown = { kind: "peak", at: "peak" };
      text = "the window's peak is the peak itself: " + size(p.peakBytes) + " at " + when(p.peakTime) + " (every site)";
    } else {
      path = "/v1/heapprof?format=svg&at=" + top.t;
      panel.shown = { kind: "peak", at: top.t };
      text = "the window's highest tick: " + size(top.live) + " at " + when(top.t) + " (its largest sites)";
    }
  } else {
    const first = ticks[0]!;
    const last = ticks[ticks.length - 1]!;
    path = "/v1/heapprof?format=svg&from=" + first.t + "&at=" + last.t;
    panel.shown = { kind: "growth", from: first.t, at: last.t };
    text = "growth from " + when(first.t) + " to " + when(last.t) + ": " + signedSize(last.live - first.live) + " (red grew, blue shrank)";
  }
  frame("window-flame").hidden = false;
  $("window-shown").hidden = false;
  $("window-shown").textContent = text;
  try {
    await loadSvg("window-flame", withShard(path));
  } catch (e) {
    report(e, "window: ");
  }
}
function clearWindow(): void {
  panel.window = null;
  panel.shown = null;
  $("window-box").hidden = true;
  $("window-shown").hidden = true;
  $("window-flame").hidden = true;
  if (panel.chart) panel.chart.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
}

export const peaksPanel: Panel = {
  start: () => Promise.all([refreshPeak(), refreshTimeline()]),
  refresh: () => (input("auto").checked ? Promise.all([refreshPeak(), refreshTimeline()]) : undefined),
  shardChanged: () => {
    panel.marker = null;
    clearWindow();
    return Promise.all([refreshPeak(), refreshTimeline()]);
  },
  polled: () => allCharts().forEach(withMarker),
};

/** The panel's buttons and the chart's width; its state where the tests read it (state.peakPanel). */
export function wirePeaks(): void {
  state.peakPanel = panel;
  $("jump-to-peak").addEventListener("click", () => void jumpToPeak());
  $("reset-peak").addEventListener("click", () => void resetPeak());
  $("window-peak").addEventListener("click", () => void showWindow("peak"));
  $("window-growth").addEventListener("click", () => void showWindow("growth"));
  $("window-clear").addEventListener("click", clearWindow);
  window.addEventListener("resize", () => {
    if (panel.chart) panel.chart.setSize({ width: chartWidth("chart-sites"), height: 220 });
  });
}
