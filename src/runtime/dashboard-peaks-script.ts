/**
 * The dashboard's peak and timeline panels, run in the browser after
 * dashboard-script.ts (plain ES2020, no build step; it uses the helpers
 * that script leaves in window.shardheapDashboard.lib and registers in its
 * panels list):
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
import { ESCAPE_CONTROLS_SCRIPT } from "../display-text.js";

export const DASHBOARD_PEAKS_SCRIPT = String.raw`"use strict";
(function () {
  ${ESCAPE_CONTROLS_SCRIPT}
  var state = window.shardheapDashboard;
  var lib = state.lib;
  var SITES_SHOWN = 8;
  var panel = {
    peak: null,        // { shard, peakBytes, peakTime }: the last read
    timeline: null,    // the last GET /v1/heapprof/timeline answer
    chart: null,       // the stacked chart (uPlot)
    marker: null,      // the peak's time on the charts (s), once jumped to
    window: null,      // { t0, t1 } (ms) chosen on the stacked chart
    shown: null,       // what #window-flame shows: { kind: "peak" | "growth", at, from }
  };
  state.peakPanel = panel;

  function $(id) { return document.getElementById(id); }
  function when(t) { return new Date(t).toLocaleTimeString() + "." + String(t % 1000).padStart(3, "0"); }
  function held(e) { return e && e.message === "unauthorized" ? null : e; }

  // ---- the peak ----
  async function refreshPeak() {
    if (state.paused) return;
    var body = await (await lib.api(lib.withShard("/v1/heapprof?format=json&at=peak"))).json();
    panel.peak = { shard: state.shard, peakBytes: body.peakBytes, peakTime: body.peakTime };
    var info = $("peak-info");
    info.setAttribute("data-peak-bytes", String(body.peakBytes));
    info.setAttribute("data-peak-time", String(body.peakTime));
    info.textContent = body.peakTime > 0
      ? lib.size(body.peakBytes) + " profiled live at " + when(body.peakTime) + (state.shard === "all" ? " (all shards' highest sum)" : " (" + lib.shardName(state.shard) + ")")
      : "nothing profiled yet";
    await lib.loadSvg("peak-flame", lib.withShard("/v1/heapprof?format=svg&at=peak"));
  }
  async function resetPeak() {
    try {
      await lib.api("/v1/heapprof/peak/reset?shard=" + state.shard, { method: "POST" });
      lib.status("peak of " + (state.shard === "all" ? "all shards" : lib.shardName(state.shard)) + " reset");
      await refreshPeak();
    } catch (e) {
      if (held(e)) lib.status("peak: " + e.message, true);
    }
  }

  // ---- jump to peak: a line at its moment on every chart, the legends at it ----
  function drawMarker(u) {
    if (panel.marker === null) return;
    var x = Math.round(u.valToPos(panel.marker, "x", true));
    if (!(x >= u.bbox.left && x <= u.bbox.left + u.bbox.width)) return;
    var ctx = u.ctx;
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
  function withMarker(u) {
    if (u.shardheapMarker) return;
    u.shardheapMarker = true;
    u.hooks.draw = (u.hooks.draw || []).concat([drawMarker]);
  }
  function allCharts() { return state.charts.concat(panel.chart ? [panel.chart] : []); }
  async function jumpToPeak() {
    try {
      await refreshPeak();
    } catch (e) {
      if (held(e)) lib.status("peak: " + e.message, true);
      return;
    }
    var p = panel.peak;
    if (!p || !(p.peakTime > 0)) {
      lib.status("no peak yet: nothing was profiled", true);
      return;
    }
    panel.marker = p.peakTime / 1000;
    var oldest = state.samples.length ? state.samples[0].t : Infinity;
    allCharts().forEach(function (u) {
      withMarker(u);
      u.redraw(false);
      var x = u.valToPos(panel.marker, "x");
      if (x >= 0 && x <= u.over.clientWidth) u.setCursor({ left: x, top: u.over.clientHeight / 2 });
    });
    $("jump-to-peak").setAttribute("data-jumped", String(p.peakTime));
    lib.status("peak: " + lib.size(p.peakBytes) + " at " + when(p.peakTime) + (p.peakTime < oldest ? " (before the charts' history: its flamegraph is below)" : ""));
    $("memory-section").scrollIntoView();
  }

  // ---- the largest sites over time, stacked ----
  async function refreshTimeline() {
    var body = await (await lib.api(lib.withShard("/v1/heapprof/timeline"))).json();
    panel.timeline = body;
    drawTimeline();
  }
  /** The SITES_SHOWN sites that held the most at any tick, in that order. */
  function shownSites(t) {
    var most = {};
    t.samples.forEach(function (s) { s.sites.forEach(function (x) { most[x[0]] = Math.max(most[x[0]] || 0, x[1]); }); });
    return Object.keys(most).map(Number).sort(function (a, b) { return most[b] - most[a]; }).slice(0, SITES_SHOWN);
  }
  function siteName(site) {
    var f = site.frames[0];
    if (!f) return "(no frames)";
    var file = f.url ? " (" + f.url.slice(f.url.lastIndexOf("/") + 1) + ":" + f.line + ")" : "";
    var labels = site.labels ? " [" + Object.keys(site.labels).sort().map(function (k) { return k + "=" + site.labels[k]; }).join(", ") + "]" : "";
    return shown((f.functionName || "(anonymous)") + file + labels);
  }
  function drawTimeline() {
    var t = panel.timeline;
    if (!t) return;
    var sites = shownSites(t);
    var xs = t.samples.map(function (s) { return s.t / 1000; });
    // Each layer's own bytes; then the stack: series k is layers 0..k summed, drawn from the top down so each fills to 0.
    var own = sites.map(function (i) { return t.samples.map(function (s) { var x = s.sites.find(function (y) { return y[0] === i; }); return x ? x[1] : 0; }); });
    var named = t.samples.map(function (_, j) { return own.reduce(function (n, layer) { return n + layer[j]; }, 0); });
    own.push(t.samples.map(function (s, j) { return Math.max(0, s.live - named[j]); }));
    var names = sites.map(function (i) { return siteName(t.sites[i]); }).concat(["other profiled bytes"]);
    var stacked = [];
    own.forEach(function (layer, k) { stacked.push(layer.map(function (v, j) { return v + (k > 0 ? stacked[k - 1][j] : 0); })); });
    var key = names.join("\n");
    if (!panel.chart || panel.chartKey !== key) makeTimelineChart(names, own, key);
    panel.own = own;
    panel.chart.setData([xs].concat(stacked.slice().reverse()));
    $("chart-sites").setAttribute("data-samples", String(t.samples.length));
    $("chart-sites").setAttribute("data-sites", JSON.stringify(names));
  }
  function makeTimelineChart(names, own, key) {
    if (panel.chart) panel.chart.destroy();
    panel.chartKey = key;
    var series = [{ value: lib.legendValue(lib.clock) }];
    for (var k = names.length - 1; k >= 0; k--) {
      (function (layer) {
        var color = layer === names.length - 1 ? "#bdbdbd" : lib.palette[layer % lib.palette.length];
        series.push({
          label: names[layer],
          stroke: color,
          fill: color + "99",
          width: 1,
          // The legend says the layer's own bytes, not the stack's top.
          value: function (u, v, sidx, idx) {
            var column = panel.own && panel.own[layer];
            if (!column || !column.length) return "-";
            return lib.size(column[idx == null ? column.length - 1 : idx]);
          },
        });
      })(k);
    }
    panel.chart = new uPlot({
      title: "Largest sites' live bytes (stacked; the rest of the profiled bytes on top)",
      width: lib.chartWidth("chart-sites"),
      height: 220,
      series: series,
      scales: { x: lib.timeScale() },
      axes: [lib.timeAxis(), { values: function (u, vals) { return vals.map(lib.size); }, size: 60 }],
      legend: { live: true },
      cursor: { drag: { x: true, y: false, setScale: false } },
      hooks: { setSelect: [chooseWindow], draw: [drawMarker] },
    }, [[]].concat(series.slice(1).map(function () { return []; })), $("chart-sites"));
    panel.chart.shardheapMarker = true;
  }

  // ---- a window on the timeline: its peak, or the growth across it ----
  function chooseWindow(u) {
    if (u.select.width < 2) return;
    var t0 = Math.round(u.posToVal(u.select.left, "x") * 1000);
    var t1 = Math.round(u.posToVal(u.select.left + u.select.width, "x") * 1000);
    setWindow(t0, t1);
  }
  function setWindow(t0, t1) {
    panel.window = { t0: t0, t1: t1 };
    $("window-box").hidden = false;
    $("window-info").textContent = when(t0) + " to " + when(t1);
    $("window-box").setAttribute("data-t0", String(t0));
    $("window-box").setAttribute("data-t1", String(t1));
  }
  function ticksIn(w) { return (panel.timeline ? panel.timeline.samples : []).filter(function (s) { return s.t >= w.t0 && s.t <= w.t1; }); }
  async function showWindow(kind) {
    var w = panel.window;
    if (!w) return;
    var ticks = ticksIn(w);
    if (!ticks.length) {
      lib.status("no timeline tick in that window", true);
      return;
    }
    var path, text;
    if (kind === "peak") {
      var top = ticks.reduce(function (a, b) { return b.live > a.live ? b : a; });
      var p = panel.peak;
      // The shards' own peak, exact, when it falls in the window and no tick there held more.
      if (p && p.shard === state.shard && p.peakTime >= w.t0 && p.peakTime <= w.t1 && p.peakBytes >= top.live) {
        path = "/v1/heapprof?format=svg&at=peak";
        panel.shown = { kind: "peak", at: "peak" };
        text = "the window's peak is the peak itself: " + lib.size(p.peakBytes) + " at " + when(p.peakTime) + " (every site)";
      } else {
        path = "/v1/heapprof?format=svg&at=" + top.t;
        panel.shown = { kind: "peak", at: top.t };
        text = "the window's highest tick: " + lib.size(top.live) + " at " + when(top.t) + " (its largest sites)";
      }
    } else {
      var first = ticks[0], last = ticks[ticks.length - 1];
      path = "/v1/heapprof?format=svg&from=" + first.t + "&at=" + last.t;
      panel.shown = { kind: "growth", from: first.t, at: last.t };
      text = "growth from " + when(first.t) + " to " + when(last.t) + ": " + lib.signedSize(last.live - first.live) + " (red grew, blue shrank)";
    }
    var frame = $("window-flame");
    frame.hidden = false;
    $("window-shown").hidden = false;
    $("window-shown").textContent = text;
    try {
      await lib.loadSvg("window-flame", lib.withShard(path));
    } catch (e) {
      if (held(e)) lib.status("window: " + e.message, true);
    }
  }
  function clearWindow() {
    panel.window = null;
    panel.shown = null;
    $("window-box").hidden = true;
    $("window-shown").hidden = true;
    $("window-flame").hidden = true;
    if (panel.chart) panel.chart.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
  }

  state.panels.push({
    start: function () { return Promise.all([refreshPeak(), refreshTimeline()]); },
    refresh: function () { return $("auto").checked ? Promise.all([refreshPeak(), refreshTimeline()]) : undefined; },
    shardChanged: function () {
      panel.marker = null;
      clearWindow();
      return Promise.all([refreshPeak(), refreshTimeline()]);
    },
    polled: function () { allCharts().forEach(withMarker); },
  });
  panel.setWindow = setWindow;

  window.addEventListener("DOMContentLoaded", function () {
    $("jump-to-peak").addEventListener("click", jumpToPeak);
    $("reset-peak").addEventListener("click", resetPeak);
    $("window-peak").addEventListener("click", function () { showWindow("peak"); });
    $("window-growth").addEventListener("click", function () { showWindow("growth"); });
    $("window-clear").addEventListener("click", clearWindow);
    window.addEventListener("resize", function () { if (panel.chart) panel.chart.setSize({ width: lib.chartWidth("chart-sites"), height: 220 }); });
  });
})();
`;
