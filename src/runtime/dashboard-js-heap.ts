/**
 * The dashboard's "whole memory" panel: each shard's own JS heap beside its
 * shared-heap region. Its section of the page (JS_HEAP_SECTION_HTML), its
 * style (JS_HEAP_CSS) and its script (JS_HEAP_SCRIPT, served as
 * /dashboard-js-heap.js after the page's own script, plain ES2020 run in
 * the browser) live here, apart from the page's main script
 * (dashboard-script.ts), which lends it its helpers (`shardheapDashboard.lib`:
 * the API call with the token, the flamegraph loader, sizes, rates, names)
 * and says when a poll has brought new samples (the `shardheap:poll` event).
 * What it shows:
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

export const JS_HEAP_SECTION_HTML = String.raw`<section id="js-heap-section">
  <h2>Whole memory per shard <span class="hint">(each shard's shared-heap region beside its own JS heap: V8's sampling heap profiler in the shard's thread, live sampled objects)</span></h2>
  <table class="js-heap">
    <thead><tr><th>Shard</th><th>JS heap profiler</th><th>Interval (one sample per 32K, 128K, 512K... bytes)</th><th></th><th>Now</th><th>Shared heap used</th><th>JS heap used / total</th><th>External</th><th>Array buffers</th></tr></thead>
    <tbody id="js-heap-rows"></tbody>
  </table>
  <div class="chart" id="chart-js-used"></div>
  <div class="both-heaps">
    <div><h3>Shared heap <span class="hint" id="both-shared-what"></span></h3><iframe id="both-shared" title="shared heap flamegraph"></iframe></div>
    <div><h3>JS heap <span class="hint" id="both-js-what"></span></h3><p class="hint" id="js-heap-off">The JS heap profiler is off for this selection: switch it on above, and the sampled live objects show here.</p><iframe id="both-js" title="JS heap flamegraph"></iframe></div>
  </div>
  <div id="js-heap-downloads"></div>
</section>
`;

export const JS_HEAP_CSS = String.raw`.both-heaps { display: grid; grid-template-columns: repeat(auto-fit, minmax(420px, 1fr)); gap: 0.5em; }
table.js-heap td.num { min-width: 5em; }
#js-heap-downloads button { margin: 0.4em 0.4em 0 0; }
`;

export const JS_HEAP_SCRIPT = String.raw`"use strict";
(function () {
  var REFRESH_MS = 5000;
  var PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
  var panel = { made: false, chart: null, setAt: {} };
  function $(id) { return document.getElementById(id); }
  function dash() { return window.shardheapDashboard; }
  function lib() { return dash().lib; }
  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    if (attrs) Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function cell(row, child, attrs) {
    var td = el("td", attrs);
    if (typeof child === "string") td.textContent = child; else if (child) td.appendChild(child);
    row.appendChild(td);
    return td;
  }
  function latest() { var s = dash().samples; return s[s.length - 1]; }
  function jsRate(shard) {
    var l = latest();
    return l && l.shards[shard].js ? l.shards[shard].js.sampleRate : 0;
  }

  function makeRows() {
    var body = $("js-heap-rows");
    body.textContent = "";
    for (var s = 0; s < dash().shards; s++) {
      var name = lib().shardName(s);
      var row = el("tr", { id: "js-row-" + s });
      cell(row, name);
      var on = el("input", { type: "checkbox", id: "js-prof-on-" + s, "aria-label": "JS heap profiler of " + name });
      cell(row, on);
      var rate = el("input", { type: "text", id: "js-prof-rate-" + s, size: "10", value: "512K", "aria-label": "JS heap sampling interval of " + name });
      cell(row, rate);
      var apply = el("button", { id: "js-prof-apply-" + s }, "Apply");
      cell(row, apply);
      cell(row, "", { id: "js-prof-now-" + s });
      cell(row, "", { class: "num", id: "js-shared-used-" + s });
      cell(row, "", { class: "num", id: "js-used-" + s });
      cell(row, "", { class: "num", id: "js-external-" + s });
      cell(row, "", { class: "num", id: "js-array-buffers-" + s });
      body.appendChild(row);
      (function (shard) {
        // By id: "on" is the last row's checkbox once the loop has run.
        $("js-prof-on-" + shard).addEventListener("change", function () { setRate(shard, $("js-prof-on-" + shard).checked ? $("js-prof-rate-" + shard).value : "0"); });
        $("js-prof-apply-" + shard).addEventListener("click", function () { setRate(shard, $("js-prof-rate-" + shard).value); });
      })(s);
    }
  }
  async function setRate(shard, rate) {
    var name = lib().shardName(shard);
    // Held as set from the click until the server has answered: a sample taken meanwhile, before the
    // shard applied it, would flip the switch back (then only samples taken after the answer count).
    panel.setAt[shard] = Infinity;
    try {
      var r = await lib().api("/v1/heapprof?heap=js&shard=" + shard + "&rate=" + encodeURIComponent(String(rate).trim()), { method: "PUT" });
      var applied = (await r.json()).rate;
      panel.setAt[shard] = Date.now();
      showRate(shard, applied);
      lib().status(name + ": JS heap profiler " + jsRateText(applied));
      refresh();
    } catch (e) {
      panel.setAt[shard] = 0;
      lib().status(name + ": " + e.message, true);
      showRate(shard, jsRate(shard));
    }
  }
  function jsRateText(rate) { return rate === 0 ? "off" : "one sample per " + lib().size(rate); }
  function showRate(shard, rate) {
    $("js-prof-on-" + shard).checked = rate !== 0;
    $("js-prof-now-" + shard).textContent = jsRateText(rate);
    if (rate >= 1 && document.activeElement !== $("js-prof-rate-" + shard)) $("js-prof-rate-" + shard).value = lib().size(rate);
  }
  function drawRows() {
    var l = latest();
    if (!l) return;
    var size = lib().size;
    for (var s = 0; s < dash().shards; s++) {
      var sh = l.shards[s];
      $("js-shared-used-" + s).textContent = size(sh.used);
      $("js-used-" + s).textContent = sh.js ? size(sh.js.used) + " / " + size(sh.js.total) : "-";
      $("js-used-" + s).setAttribute("data-bytes", sh.js ? String(sh.js.used) : "");
      $("js-external-" + s).textContent = sh.js ? size(sh.js.external) : "-";
      $("js-array-buffers-" + s).textContent = sh.js ? size(sh.js.arrayBuffers) : "-";
      // A switch just flipped here stays as set until a sample taken after it arrives.
      if ((panel.setAt[s] || 0) <= l.t) showRate(s, sh.js ? sh.js.sampleRate : 0);
    }
  }

  function chartWidth() { return Math.max(280, $("chart-js-used").clientWidth - 8); }
  function makeChart() {
    var series = [{}];
    for (var s = 0; s < dash().shards; s++) series.push({ label: lib().shardName(s), stroke: PALETTE[s % PALETTE.length], width: 1.5 });
    panel.chart = new uPlot({
      title: "JS heap used per shard (each thread's own V8 heap)",
      width: chartWidth(),
      height: 180,
      series: series,
      scales: { x: lib().timeScale() },
      axes: [lib().timeAxis(), { values: function (u, vals) { return vals.map(lib().size); }, size: 60 }],
    }, chartData(), $("chart-js-used"));
  }
  function chartData() {
    var xs = [], ys = [];
    for (var s = 0; s < dash().shards; s++) ys.push([]);
    dash().samples.forEach(function (sample) {
      xs.push(sample.t / 1000);
      for (var s = 0; s < dash().shards; s++) ys[s].push(sample.shards[s].js ? sample.shards[s].js.used : null);
    });
    return [xs].concat(ys);
  }

  function withShard(path) {
    var shard = dash().shard;
    return shard === "all" ? path : path + (path.indexOf("?") < 0 ? "?" : "&") + "shard=" + shard;
  }
  /** The chosen shard's (or all shards') two heaps, side by side. */
  async function refresh() {
    if (!panel.made) return;
    var shard = dash().shard;
    var what = shard === "all" ? "(all shards)" : "(" + lib().shardName(shard) + ")";
    $("both-shared-what").textContent = what;
    $("both-js-what").textContent = what;
    var shards = shard === "all" ? Array.from({ length: dash().shards }, function (_, i) { return i; }) : [Number(shard)];
    var on = shards.some(function (s) { return jsRate(s) !== 0 || panel.setAt[s]; });
    $("js-heap-off").hidden = on;
    try {
      await lib().loadSvg("both-shared", withShard("/v1/heapprof?format=svg"));
      await lib().loadSvg("both-js", withShard("/v1/heapprof?format=svg&heap=js"));
    } catch (e) {
      lib().status("whole memory: " + e.message, true);
    }
  }

  /** A flamegraph drawn as wide as its half of the panel (its viewBox keeps the proportions), the frame as tall as the drawing. */
  function fit(frame) {
    var svg = frame.contentDocument && frame.contentDocument.documentElement;
    if (!svg || svg.tagName.toLowerCase() !== "svg") return;
    var box = (svg.getAttribute("viewBox") || "").split(/\s+/).map(Number);
    var width = frame.clientWidth - 24;
    if (box.length !== 4 || !(box[2] > 0) || !(width > 0)) return;
    var height = Math.ceil((width * box[3]) / box[2]);
    svg.setAttribute("width", String(width));
    svg.setAttribute("height", String(height));
    frame.style.height = (height + 24) + "px";
  }

  var DOWNLOADS = [
    ["JS heap pprof", "jsheapprof.pb.gz", "/v1/heapprof?format=pprof&heap=js"],
    ["JS heap .heapprofile", "jsheapprof.heapprofile", "/v1/heapprof?format=heapprofile&heap=js"],
    ["JS heap SVG", "jsheapprof.svg", "/v1/heapprof?format=svg&heap=js"],
    ["whole memory pprof (label heap=shared|js)", "memory.pb.gz", "/v1/heapprof?format=pprof&heap=all"],
  ];
  function makeDownloads() {
    var box = $("js-heap-downloads");
    box.textContent = "";
    DOWNLOADS.forEach(function (d) {
      var b = el("button", { "data-file": d[1] }, d[0]);
      b.addEventListener("click", function () { lib().download(d[1], withShard(d[2])); });
      box.appendChild(b);
    });
  }

  function onPoll() {
    if (!panel.made) {
      panel.made = true;
      makeRows();
      makeChart();
      makeDownloads();
      refresh();
    }
    panel.chart.setData(chartData());
    drawRows();
  }

  window.addEventListener("shardheap:poll", onPoll);
  window.addEventListener("DOMContentLoaded", function () {
    $("shard").addEventListener("change", refresh);
    $("refresh").addEventListener("click", refresh);
    setInterval(function () { if ($("auto").checked && !dash().paused) refresh(); }, REFRESH_MS);
    ["both-shared", "both-js"].forEach(function (id) {
      $(id).addEventListener("mouseenter", function () { dash().paused = true; });
      $(id).addEventListener("mouseleave", function () { dash().paused = false; });
      $(id).addEventListener("load", function () { setTimeout(function () { fit($(id)); }, 0); });
    });
    window.addEventListener("resize", function () { if (panel.chart) panel.chart.setSize({ width: chartWidth(), height: 180 }); });
  });
})();
`;
