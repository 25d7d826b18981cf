/**
 * The dashboard's page and style sheet (dashboard.ts serves them): one
 * page, every script and style from this server (uPlot's files from the
 * installed package, the page's own script from dashboard-script.ts), the
 * favicon a data: URL so the browser asks nothing else. The body says
 * whether the server needs a token, so the page asks for it before its
 * first request instead of after a refused one. The whole-memory panel's
 * section and style come from dashboard-js-heap.ts.
 */
import { JS_HEAP_CSS, JS_HEAP_SECTION_HTML } from "./dashboard-js-heap.js";

/** The page; `tokenRequired` marks the body so the page asks for the token first. */
export function dashboardHtml(tokenRequired: boolean): string {
  return DASHBOARD_HTML.replace("TOKEN_STATE", tokenRequired ? "required" : "none").replace("<!--JS_HEAP_SECTION-->", JS_HEAP_SECTION_HTML);
}

const DASHBOARD_HTML = String.raw`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>shardheap dashboard</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/vendor/uPlot.min.css">
<link rel="stylesheet" href="/dashboard.css">
<script src="/vendor/uPlot.iife.min.js"></script>
<script src="/dashboard.js"></script>
<script src="/dashboard-peaks.js"></script>
<script src="/dashboard-js-heap.js"></script>
</head>
<body data-token="TOKEN_STATE">
<header>
  <h1>shardheap</h1>
  <label>Shard <select id="shard"><option value="all">all shards</option></select></label>
  <label><input type="checkbox" id="auto" checked> refresh every 5 s</label>
  <button id="refresh">Refresh now</button>
  <span id="status"></span>
</header>
<div id="token-box" hidden>
  <p>This admin server needs its bearer token. <span id="token-why"></span></p>
  <input type="password" id="token" autocomplete="off" aria-label="bearer token"> <button id="token-ok">Use token</button>
  <p class="hint">The page keeps it in memory and sends it as an Authorization header; it never goes into a URL.</p>
</div>
<main>
<section id="memory-section">
  <h2>Memory per shard <button id="jump-to-peak" title="show the moment of the chosen shards' peak on the charts, and its flamegraph">Jump to peak</button></h2>
  <p class="hint" id="sampling"></p>
  <p class="alert" id="failed-note" hidden></p>
  <div class="charts">
    <div class="chart" id="chart-used"></div>
    <div class="chart" id="chart-free"></div>
    <div class="chart" id="chart-live"></div>
    <div class="chart" id="chart-cross"></div>
    <div class="chart" id="chart-failed"></div>
    <div class="chart" id="chart-largest-free"></div>
  </div>
  <h3>Largest sites over time <span class="hint">(profiled live bytes, stacked, from each shard's timeline: drag across the chart to choose a window)</span></h3>
  <div class="chart" id="chart-sites"></div>
  <p id="window-box" hidden>Window <span id="window-info"></span>: <button id="window-peak">Its peak</button> <button id="window-growth">Growth across it</button> <button id="window-clear">Clear</button></p>
  <p class="hint" id="window-shown" hidden></p>
  <iframe id="window-flame" title="the chosen window's peak or growth" hidden></iframe>
</section>
<section id="app-section" hidden>
  <h2>App <span class="hint">(figures the program publishes: smp.publishAppStats)</span></h2>
  <div id="app-panels"></div>
</section>
<section id="profiler-section">
  <h2>Heap profiler</h2>
  <table class="profiler">
    <thead><tr><th>Shard</th><th>On</th><th>Sample rate (every allocation, or one sample per 64K, 1M... bytes)</th><th></th><th>Now</th></tr></thead>
    <tbody id="profiler-rows"></tbody>
  </table>
  <datalist id="rate-choices"><option value="every allocation"></option><option value="4K"></option><option value="64K"></option><option value="512K"></option><option value="1M"></option></datalist>
</section>
<!--JS_HEAP_SECTION-->
<section id="growing-section">
  <h2>Growing sites <span class="hint">(live <span id="growing-what">bytes</span> rising steadily over the last <span id="growing-window"></span>: least-squares slope, fit r&sup2; &ge; 0.8)</span>
    <label class="search">Rank by <select id="growing-by" aria-label="rank growing sites by"><option value="bytes">bytes</option><option value="count">objects</option></select></label></h2>
  <ol id="growing-list"></ol>
</section>
<section id="labels-section">
  <h2>Memory by label <label class="search">Label <select id="label-name" aria-label="heap label to group by" disabled></select></label></h2>
  <p id="no-labels" class="hint">No labels in this profile: allocations made inside <code>withHeapLabels({ tenant: "a" }, fn)</code> carry them (<code>shardheap memcached</code> labels each item with its <code>prefix</code>).</p>
  <table class="by-label" id="label-table" hidden><thead><tr><th>Value <span class="hint">(click for its flamegraph)</span></th><th>Live bytes</th><th>Objects</th><th>Share</th></tr></thead><tbody id="label-rows"></tbody></table>
</section>
<section id="flame-section">
  <h2>Live heap <label class="search">Search <input type="search" id="search" placeholder="regular expression, e.g. ^allocate"></label></h2>
  <p id="label-filter" class="filter" role="status" hidden>Only <span class="name" id="label-filter-name"></span> <button id="label-filter-clear">Show all</button></p>
  <p id="folded-warning" class="warning" role="status" hidden></p>
  <iframe id="flame" title="live heap flamegraph"></iframe>
</section>
<section id="peak-section">
  <h2>Peak <span id="peak-info" class="hint"></span> <button id="reset-peak" title="start the chosen shards' peak again from now">Reset peak</button></h2>
  <p class="hint">What held the memory at the moment the profiled live bytes were highest (one shard's own peak, or, for all shards, the moment their sum was).</p>
  <iframe id="peak-flame" title="the peak's flamegraph"></iframe>
</section>
<section id="growth-section">
  <h2>Growth since baseline
    <select id="baseline-select" aria-label="baseline to compare with"></select>
    <button id="delete-baseline" title="forget the chosen baseline (every shard's)">Delete</button>
    <span class="baseline-new"><input type="text" id="baseline-name" size="12" placeholder="new name" aria-label="name of a new baseline"> <button id="set-baseline" title="take every chosen shard's profile now, under the name typed (or again under the chosen one)">Set baseline</button></span>
    <span id="baseline-info" class="hint"></span></h2>
  <p id="no-baseline" class="hint">No baseline of this name for this selection yet: set one (give a name to keep several), let the program run, and the growth since shows here (red grew, blue shrank).</p>
  <div id="growth" hidden>
    <iframe id="growth-flame" title="growth since the baseline"></iframe>
    <h3>Grew most <span id="growth-total" class="hint"></span>
      <label class="search">Rank by <select id="grown-by" aria-label="rank the sites that grew by"><option value="bytes">bytes</option><option value="count">objects</option></select></label></h3>
    <table class="grown"><thead><tr><th>Allocation site <span class="hint">(leaf first, callers as far as needed to tell sites apart; open for the whole stack)</span></th><th>Bytes</th><th>Objects</th></tr></thead><tbody id="grown-rows"></tbody></table>
  </div>
</section>
<section id="downloads-section">
  <h2>Downloads <span class="hint">(of the selected shard, or all)</span></h2>
  <div id="downloads"></div>
</section>
</main>
</body>
</html>
`;

export const DASHBOARD_CSS = String.raw`body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #222; background: #fafafa; }
header { display: flex; gap: 1em; align-items: center; flex-wrap: wrap; padding: 0.5em 1em; background: #263238; color: #eee; position: sticky; top: 0; z-index: 10; }
header h1 { font-size: 1.2em; margin: 0 1em 0 0; }
header select, header button { font: inherit; }
#status { margin-left: auto; font-size: 0.9em; color: #b2dfdb; }
#status.bad { color: #ffab91; }
main { padding: 0 1em 2em; }
section { background: #fff; border: 1px solid #ddd; border-radius: 4px; margin: 1em 0; padding: 0.5em 1em 1em; }
h2 { font-size: 1.05em; margin: 0.5em 0; display: flex; gap: 1em; align-items: center; flex-wrap: wrap; }
h3 { font-size: 1em; margin: 0.8em 0 0.3em; }
.hint { color: #666; font-weight: normal; font-size: 0.9em; }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(420px, 1fr)); gap: 0.5em; }
.chart { min-height: 240px; }
table { border-collapse: collapse; }
th, td { text-align: left; padding: 0.2em 0.6em; border-bottom: 1px solid #eee; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.name, span.name { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 0.9em; word-break: break-all; }
iframe { width: 100%; height: 240px; border: 1px solid #ddd; background: #fff; }
#growing-list li { margin: 0.3em 0; }
.alert { color: #b71c1c; background: #ffebee; border: 1px solid #ef9a9a; border-radius: 4px; padding: 0.4em 0.8em; }
.stack summary { cursor: pointer; }
.stack .more { color: #888; }
.labels span { display: inline-block; margin-left: 0.4em; padding: 0 0.4em; border-radius: 3px; background: #e3f2fd; color: #0d47a1; font-size: 0.85em; }
.app-panel table td.num { min-width: 6em; }
.app-panel .error { color: #b71c1c; }
.baseline-new { font-weight: normal; }
#growing-list li.none { color: #666; list-style: none; }
ol.frames { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 0.85em; color: #444; }
#downloads button, #token-box button { margin: 0 0.4em 0.4em 0; }
#token-box { margin: 1em; padding: 1em; border: 2px solid #ff7043; background: #fff3e0; border-radius: 4px; }
label.search { font-weight: normal; }
table.by-label button.value { font: inherit; font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 0.9em; background: none; border: none; padding: 0; color: #0d47a1; cursor: pointer; text-decoration: underline; text-align: left; }
table.by-label tr.chosen { background: #e3f2fd; }
table.by-label tr.chosen button.value { font-weight: bold; text-decoration: none; }
.filter { margin: 0.3em 0; padding: 0.3em 0.6em; border-left: 4px solid #1e88e5; background: #e3f2fd; }
#chart-sites { min-height: 260px; }
#window-box button { margin-left: 0.3em; }
.warning { margin: 0.3em 0; padding: 0.3em 0.6em; border-left: 4px solid #ff7043; background: #fff3e0; }
${JS_HEAP_CSS}`;
