/**
 * The dashboard page's script (the page loads it as a module; the other
 * files of this folder are its parts). It polls GET /v1/memory/history?since=T
 * every sample interval and hands each answer to the views that draw it;
 * every REFRESH_MS it refreshes the views read apart (flamegraphs, labels,
 * growth, growing sites, the panels), except while the mouse is on a
 * flamegraph or "refresh" is off.
 *
 * The main thread's own region (Smp.start({ mainShard: true }): the
 * history's mainShard) is one more shard everywhere, named "main thread
 * (shard N)". With a token (the body says so) the page asks for it first.
 * This is the one module that acts as it loads: it starts the page.
 */
import type { HistoryBody } from "./api.js";
import { drawApps } from "./apps.js";
import { baselineEpoch, deleteBaseline, drawBaselineChoice, refreshGrowth, setBaseline } from "./baselines.js";
import { drawCharts, drawFailures, makeCharts, resizeCharts } from "./charts.js";
import { makeDownloads } from "./downloads.js";
import { refreshFlame, searchAll } from "./flamegraphs.js";
import { refreshGrowing } from "./growing.js";
import { jsHeapPanel, wireJsHeap } from "./js-heap.js";
import { showLabelValue, refreshLabels } from "./labels.js";
import { $, apiJson, askToken, el, input, REFRESH_MS, report, select, shardName, state, status, takeToken, type Panel } from "./lib.js";
import { peaksPanel, wirePeaks } from "./peaks.js";
import { drawFolded, drawRates, makeProfilerTable } from "./profiler.js";

/** Calls `event` of every panel that has it, in turn. */
async function extensions(event: keyof Panel): Promise<void> {
  for (const panel of state.panels) {
    const hook = panel[event];
    if (typeof hook !== "function") continue;
    try {
      await hook.call(panel);
    } catch (e) {
      report(e);
    }
  }
}

// ---- polling ----
async function poll(): Promise<void> {
  const epoch = baselineEpoch();
  const body = await apiJson<HistoryBody>("/v1/memory/history?since=" + state.lastT);
  if (!state.started) {
    state.started = true;
    state.shards = body.shards;
    state.mainShard = body.mainShard == null ? null : body.mainShard;
    state.intervalMs = body.sampleIntervalMs;
    state.historySeconds = body.historySeconds;
    state.growthWindowSeconds = body.growthWindowSeconds;
    state.heapImage = body.heapImage;
    const chooser = select("shard");
    for (let s = 0; s < state.shards; s++) chooser.appendChild(el("option", { value: String(s) }, shardName(s)));
    makeCharts();
    makeProfilerTable();
    makeDownloads();
  }
  if (epoch === baselineEpoch()) {
    state.baselines = body.baselines;
    drawBaselineChoice();
  }
  drawApps(body.apps);
  state.samples = state.samples.concat(body.samples).filter((s) => s.t > Date.now() - state.historySeconds * 1000);
  if (body.samples.length) state.lastT = body.samples[body.samples.length - 1]!.t;
  $("sampling").textContent = "sampled every " + state.intervalMs / 1000 + " s from the shared buffer (last sample took " + body.lastSampleMs.toFixed(2) + " ms on the server)";
  drawCharts();
  drawRates();
  drawFailures();
  drawFolded();
  void extensions("polled");
}
let timers: ReturnType<typeof setInterval>[] = [];
function every(ms: number, fn: () => Promise<void>): void {
  let running = false;
  timers.push(
    setInterval(async () => {
      if (running) return;
      running = true;
      try {
        await fn();
      } catch (e) {
        report(e);
      } finally {
        running = false;
      }
    }, ms),
  );
}
async function refreshViews(): Promise<void> {
  if (input("auto").checked && !state.paused) {
    await refreshFlame();
    await refreshLabels();
    await refreshGrowth();
  }
  await refreshGrowing();
  await extensions("refresh");
}
async function start(): Promise<void> {
  timers.forEach(clearInterval);
  timers = [];
  try {
    await poll();
  } catch (e) {
    report(e);
    return;
  }
  status("connected");
  await refreshFlame();
  await refreshLabels();
  await refreshGrowth();
  await refreshGrowing();
  await extensions("start");
  every(state.intervalMs, poll);
  every(REFRESH_MS, refreshViews);
}
function useToken(): void {
  takeToken();
  void start();
}

function wire(): void {
  $("token-ok").addEventListener("click", useToken);
  $("token").addEventListener("keydown", (e) => {
    if (e.key === "Enter") useToken();
  });
  $("shard").addEventListener("change", () => {
    state.shard = select("shard").value;
    drawFolded();
    void refreshFlame();
    void refreshLabels();
    void refreshGrowth();
    void refreshGrowing();
    void extensions("shardChanged");
  });
  $("search").addEventListener("input", searchAll);
  $("refresh").addEventListener("click", () => {
    void refreshFlame();
    void refreshLabels();
    void refreshGrowth();
    void refreshGrowing();
  });
  $("label-name").addEventListener("change", () => {
    state.labelName = select("label-name").value;
    void refreshLabels();
  });
  $("label-filter-clear").addEventListener("click", () => showLabelValue(null, null));
  $("set-baseline").addEventListener("click", () => void setBaseline());
  $("baseline-name").addEventListener("keydown", (e) => {
    if (e.key === "Enter") void setBaseline();
  });
  $("delete-baseline").addEventListener("click", () => void deleteBaseline());
  $("growing-by").addEventListener("change", () => void refreshGrowing());
  $("grown-by").addEventListener("change", () => void refreshGrowth());
  $("baseline-select").addEventListener("change", () => {
    state.baselineName = select("baseline-select").value;
    state.baselineChosen = true;
    void refreshGrowth();
  });
  // Hovering a flamegraph (to zoom or read) holds its refresh, so the view does not move under the mouse.
  ["flame", "growth-flame", "peak-flame", "window-flame"].forEach((id) => {
    $(id).addEventListener("mouseenter", () => (state.paused = true));
    $(id).addEventListener("mouseleave", () => (state.paused = false));
  });
  window.addEventListener("resize", resizeCharts);
}

window.shardheapDashboard = state;
// The whole memory's panel hears of a poll first, as its own script did when it listened for each poll's event.
state.panels = [jsHeapPanel, peaksPanel];
// A module runs once the page is parsed, before DOMContentLoaded: every element is there.
window.addEventListener("DOMContentLoaded", () => {
  wire();
  wirePeaks();
  wireJsHeap();
  if (document.body.getAttribute("data-token") === "required") askToken("this server needs its bearer token");
  else void start();
});
