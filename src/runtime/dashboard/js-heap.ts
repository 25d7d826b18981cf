/**
 * The "whole memory" panel: each shard's own JS heap beside its
 * shared-heap region.
 * - per shard (the main thread's too, with mainShard): the JS heap
 *   profiler's switch and interval (PUT /v1/heapprof?heap=js), what runs
 *   now, the shared-heap region's used bytes beside the JS heap's used and
 *   total, external memory and array buffers, from the history's samples
 *   (`js`, each shard's V8 figures as it last posted them);
 * - the JS heap used per shard over time (uPlot, as the memory charts);
 * - the chosen shard's (or all shards') shared heap and JS heap as two
 *   flamegraphs side by side, each drawn to its half's width, refreshed with the page's other views
 *   (every 5 s while "refresh" is on, on a shard change, on "Refresh now");
 * - downloads: the JS heap's pprof, .heapprofile and SVG, and the whole
 *   memory's pprof, whose samples carry heap=shared|js.
 */
import type UPlot from "uplot";
import type { RateBody } from "./api.js";
import { download } from "./downloads.js";
import { loadSvg } from "./flamegraphs.js";
import { $, apiJson, chartWidth, chosenShards, el, frame, input, latestSample, messageOf, PALETTE, REFRESH_MS, shardName, size, state, status, timeAxis, timeScale, withShard, type Panel } from "./lib.js";

const panel: { made: boolean; chart: UPlot | null; setAt: Record<number, number> } = { made: false, chart: null, setAt: {} };

function cell(row: HTMLTableRowElement, child: string | HTMLElement, attrs?: Record<string, string>): HTMLTableCellElement {
  const td = el("td", attrs);
  if (typeof child === "string") td.textContent = child;
  else td.appendChild(child);
  row.appendChild(td);
  return td;
}
function jsRate(shard: number): number {
  const l = latestSample();
  const js = l ? l.shards[shard]!.js : null;
  return js ? js.sampleRate : 0;
}

function makeRows(): void {
  const body = $("js-heap-rows");
  body.textContent = "";
  for (let s = 0; s < state.shards; s++) {
    const name = shardName(s);
    const row = el("tr", { id: "js-row-" + s });
    cell(row, name);
    cell(row, el("input", { type: "checkbox", id: "js-prof-on-" + s, "aria-label": "JS heap profiler of " + name }));
    cell(row, el("input", { type: "text", id: "js-prof-rate-" + s, size: "10", value: "512K", "aria-label": "JS heap sampling interval of " + name }));
    cell(row, el("button", { id: "js-prof-apply-" + s }, "Apply"));
    cell(row, "", { id: "js-prof-now-" + s });
    cell(row, "", { class: "num", id: "js-shared-used-" + s });
    cell(row, "", { class: "num", id: "js-used-" + s });
    cell(row, "", { class: "num", id: "js-external-" + s });
    cell(row, "", { class: "num", id: "js-array-buffers-" + s });
    body.appendChild(row);
    const shard = s;
    input("js-prof-on-" + shard).addEventListener("change", () => void setRate(shard, input("js-prof-on-" + shard).checked ? input("js-prof-rate-" + shard).value : "0"));
    $("js-prof-apply-" + shard).addEventListener("click", () => void setRate(shard, input("js-prof-rate-" + shard).value));
  }
}
async function setRate(shard: number, rate: string): Promise<void> {
  const name = shardName(shard);
  // Held as set from the click until the server has answered: a sample taken meanwhile, before the
  // shard applied it, would flip the switch back (then only samples taken after the answer count).
  panel.setAt[shard] = Infinity;
  try {
    const applied = (await apiJson<RateBody>("/v1/heapprof?heap=js&shard=" + shard + "&rate=" + encodeURIComponent(rate.trim()), { method: "PUT" })).rate;
    panel.setAt[shard] = Date.now();
    showRate(shard, applied);
    status(name + ": JS heap profiler " + jsRateText(applied));
    void refresh();
  } catch (e) {
    panel.setAt[shard] = 0;
    status(name + ": " + messageOf(e), true);
    showRate(shard, jsRate(shard));
  }
}
function jsRateText(rate: number): string {
  return rate === 0 ? "off" : "one sample per " + size(rate);
}
function showRate(shard: number, rate: number): void {
  input("js-prof-on-" + shard).checked = rate !== 0;
  $("js-prof-now-" + shard).textContent = jsRateText(rate);
  if (rate >= 1 && document.activeElement !== $("js-prof-rate-" + shard)) input("js-prof-rate-" + shard).value = size(rate);
}
function drawRows(): void {
  const l = latestSample();
  if (!l) return;
  for (let s = 0; s < state.shards; s++) {
    const sh = l.shards[s]!;
    const js = sh.js;
    $("js-shared-used-" + s).textContent = size(sh.used);
    $("js-used-" + s).textContent = js ? size(js.used) + " / " + size(js.total) : "-";
    $("js-used-" + s).setAttribute("data-bytes", js ? String(js.used) : "");
    $("js-external-" + s).textContent = js ? size(js.external) : "-";
    $("js-array-buffers-" + s).textContent = js ? size(js.arrayBuffers) : "-";
    // A switch just flipped here stays as set until a sample taken after it arrives.
    if ((panel.setAt[s] || 0) <= l.t) showRate(s, js ? js.sampleRate : 0);
  }
}

function makeChart(): UPlot {
  const series: UPlot.Series[] = [{}];
  for (let s = 0; s < state.shards; s++) series.push({ label: shardName(s), stroke: PALETTE[s % PALETTE.length]!, width: 1.5 });
  return new uPlot(
    {
      title: "JS heap used per shard (each thread's own V8 heap)",
      width: chartWidth("chart-js-used"),
      height: 180,
      series: series,
      scales: { x: timeScale() },
      axes: [timeAxis(), { values: (_u: UPlot, vals: number[]) => vals.map(size), size: 60 }],
    },
    chartData(),
    $("chart-js-used"),
  );
}
function chartData(): UPlot.AlignedData {
  const xs: number[] = [];
  const ys: Array<Array<number | null>> = [];
  for (let s = 0; s < state.shards; s++) ys.push([]);
  state.samples.forEach((sample) => {
    xs.push(sample.t / 1000);
    for (let s = 0; s < state.shards; s++) {
      const js = sample.shards[s]!.js;
      ys[s]!.push(js ? js.used : null);
    }
  });
  return [xs, ...ys];
}

/** The chosen shard's (or all shards') two heaps, side by side. */
async function refresh(): Promise<void> {
  if (!panel.made) return;
  const shard = state.shard;
  const what = shard === "all" ? "(all shards)" : "(" + shardName(shard) + ")";
  $("both-shared-what").textContent = what;
  $("both-js-what").textContent = what;
  const on = chosenShards(shard).some((s) => jsRate(s) !== 0 || panel.setAt[s]);
  $("js-heap-off").hidden = on;
  try {
    await loadSvg("both-shared", withShard("/v1/heapprof?format=svg"));
    await loadSvg("both-js", withShard("/v1/heapprof?format=svg&heap=js"));
  } catch (e) {
    status("whole memory: " + messageOf(e), true);
  }
}

/** A flamegraph drawn as wide as its half of the panel (its viewBox keeps the proportions), the frame as tall as the drawing. */
function fit(f: HTMLIFrameElement): void {
  const svg = f.contentDocument && f.contentDocument.documentElement;
  if (!svg || svg.tagName.toLowerCase() !== "svg") return;
  const box = (svg.getAttribute("viewBox") || "").split(/\s+/).map(Number);
  const width = f.clientWidth - 24;
  if (box.length !== 4 || !(box[2]! > 0) || !(width > 0)) return;
  const height = Math.ceil((width * box[3]!) / box[2]!);
  svg.setAttribute("width", String(width));
  svg.setAttribute("height", String(height));
  f.style.height = height + 24 + "px";
}

/** [button, file name, path]. */
const DOWNLOADS: ReadonlyArray<readonly [string, string, string]> = [
  ["JS heap pprof", "jsheapprof.pb.gz", "/v1/heapprof?format=pprof&heap=js"],
  ["JS heap .heapprofile", "jsheapprof.heapprofile", "/v1/heapprof?format=heapprofile&heap=js"],
  ["JS heap SVG", "jsheapprof.svg", "/v1/heapprof?format=svg&heap=js"],
  ["whole memory pprof (label heap=shared|js)", "memory.pb.gz", "/v1/heapprof?format=pprof&heap=all"],
];
function makeDownloads(): void {
  const box = $("js-heap-downloads");
  box.textContent = "";
  DOWNLOADS.forEach(([label, file, path]) => {
    const b = el("button", { "data-file": file }, label);
    b.addEventListener("click", () => void download(file, withShard(path)));
    box.appendChild(b);
  });
}

function onPoll(): void {
  if (!panel.made) {
    panel.made = true;
    makeRows();
    panel.chart = makeChart();
    makeDownloads();
    void refresh();
  }
  panel.chart!.setData(chartData());
  drawRows();
}

/** Hears of each poll (main.ts calls it first among the panels, as the samples arrive). */
export const jsHeapPanel: Panel = { polled: onPoll };

/** Its refreshes (on a shard change, "Refresh now", every REFRESH_MS while "refresh" is on) and its frames' hover and fit. */
export function wireJsHeap(): void {
  $("shard").addEventListener("change", () => void refresh());
  $("refresh").addEventListener("click", () => void refresh());
  setInterval(() => {
    if (input("auto").checked && !state.paused) void refresh();
  }, REFRESH_MS);
  ["both-shared", "both-js"].forEach((id) => {
    $(id).addEventListener("mouseenter", () => (state.paused = true));
    $(id).addEventListener("mouseleave", () => (state.paused = false));
    $(id).addEventListener("load", () => setTimeout(() => fit(frame(id)), 0));
  });
  window.addEventListener("resize", () => {
    if (panel.chart) panel.chart.setSize({ width: chartWidth("chart-js-used"), height: 180 });
  });
}
