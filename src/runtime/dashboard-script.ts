/**
 * The dashboard's script, run in the browser (plain ES2020, no build step;
 * the browser test drives it in Chromium). What it does:
 * - polls GET /v1/memory/history?since=T every sample interval and draws
 *   used, free, live objects, cross-shard frees per second, failed
 *   allocations and the largest free span per shard with uPlot (vendored:
 *   served from the installed package), each legend showing the latest
 *   values until the mouse picks another point; failed allocations also
 *   raise a note above the charts;
 * - the app panel: the figures the program publishes (the history's
 *   `apps`), counters with their rate per second; hidden when none;
 * - a profiler switch and rate per shard (PUT /v1/heapprof), shown from
 *   the samples' rates, a switch just flipped held until a newer sample;
 *   the rate box and "Now" say a rate the same way ("every allocation",
 *   or the bytes per sample as sizes print);
 * - the live flamegraph (our SVG, format=svg) of the chosen shard or all,
 *   in an iframe from a blob: URL, refreshed every 5 s except while the
 *   mouse is on it, searched through the SVG's own search();
 * - named baselines (POST, DELETE /v1/heapprof/baseline?name=), one chosen
 *   to compare with (the newest until the user chooses), and the growth
 *   since as a differential flamegraph with a table of the sites that grew
 *   most, by bytes or by objects;
 * - growing sites (GET /v1/heapprof/growing, by=bytes or count), each
 *   opening to its frames and a button that searches the flamegraphs for
 *   it;
 * - a site is shown by its leaf and as many callers as it takes to tell
 *   it from the other sites listed beside it (two stacks through one
 *   `allocate` read differently), its labels when it has them, and opens
 *   to the whole stack (also its tooltip);
 * - downloads through fetch + blob, so the token stays a header;
 * - a warning over the flamegraph while the chosen shards' profilers fold
 *   allocations into "(other sites)" (their site tables are full);
 * - memory by label (GET /v1/heapprof/labels): the label names the profile
 *   carries (the first chosen until another is), the chosen label's values
 *   with live bytes, objects and share, largest first, NO_LABEL for the
 *   sites without it; a value's click shows the flamegraph of its sites
 *   only (label=NAME=VALUE, by=NAME so its root names the value), until
 *   "Show all".
 * The main thread's own region (Smp.start({ mainShard: true }): the
 * history's mainShard) is one more shard everywhere, named "main thread
 * (shard N)".
 * With a token (the body says so) it asks first; the token lives in a
 * variable, goes only into an Authorization header, never into a URL.
 * Errors show in the status line, never as console errors; labels and frames as text, via shown().
 */
import { ESCAPE_CONTROLS_SCRIPT } from "../display-text.js";
import { NO_LABEL } from "../report/labels.js";

export const DASHBOARD_SCRIPT = String.raw`"use strict";
(function () {
  var NO_LABEL = ${JSON.stringify(NO_LABEL)}; ${ESCAPE_CONTROLS_SCRIPT}
  var PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
  var REFRESH_MS = 5000;
  var token = null;
  var state = {
    shards: 0,
    mainShard: null,
    intervalMs: 1000,
    historySeconds: 900,
    growthWindowSeconds: 300,
    heapImage: false,
    samples: [],
    lastT: 0,
    baselines: [],
    baselineName: "default",
    /** Whether the page's user chose the baseline (set one, or picked one): until then the newest is shown. */
    baselineChosen: false,
    apps: [],
    appsBefore: {},
    shard: "all",
    labelName: null,
    labelFilter: null,
    rateSetAt: {},
    charts: [],
    paused: false,
    started: false,
  };
  window.shardheapDashboard = state;
  /*
   * The panels in scripts of their own borrow these (state.lib). The
   * whole-memory panel (dashboard-js-heap.ts) hears of each poll by the
   * "shardheap:poll" event; the peak and timeline panels
   * (dashboard-peaks-script.ts) register in state.panels: each may have
   * start, refresh (every REFRESH_MS), polled (after each history sample)
   * and shardChanged; a panel's failure is its own, in the status line.
   */
  state.lib = {
    api: api, loadSvg: loadSvg, download: download, shardName: shardName, size: size, status: status,
    signedSize: signedSize, clock: clock, timeAxis: timeAxis, timeScale: timeScale, el: el, withShard: withShard, legendValue: legendValue, chartWidth: chartWidth, palette: PALETTE, refreshMs: REFRESH_MS,
  };
  state.panels = [];
  async function extensions(event) {
    for (var i = 0; i < state.panels.length; i++) {
      var panel = state.panels[i];
      if (typeof panel[event] !== "function") continue;
      try { await panel[event](); } catch (e) { if (e.message !== "unauthorized") status(e.message, true); }
    }
  }

  function $(id) { return document.getElementById(id); }
  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    if (attrs) Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function status(text, bad) {
    var s = $("status");
    s.textContent = text;
    s.className = bad ? "bad" : "";
  }

  /** Every request: same origin, the token (when there is one) as a bearer header, never in the URL. */
  async function api(path, init) {
    init = init || {};
    var headers = new Headers(init.headers || {});
    if (token !== null) headers.set("Authorization", "Bearer " + token);
    init.headers = headers;
    var r = await fetch(path, init);
    if (r.status === 401) {
      askToken("the token was refused");
      throw new Error("unauthorized");
    }
    if (!r.ok) {
      var text = await r.text();
      var message = text;
      try { message = JSON.parse(text).error; } catch (e) { /* not JSON: the text itself */ }
      throw new Error(message || r.statusText);
    }
    return r;
  }

  function askToken(why) {
    $("token-box").hidden = false;
    $("token-why").textContent = why || "";
    $("token").focus();
  }
  function useToken() {
    token = $("token").value;
    $("token").value = "";
    $("token-box").hidden = true;
    start();
  }

  // ---- formatting, as the reports print ----
  function size(n) {
    var units = ["B", "K", "M", "G", "T"];
    var v = Math.abs(n), u = 0;
    while (v >= 1024 && u < units.length - 1) { v /= 1024; u++; }
    var text = u === 0 || Number.isInteger(v) || v >= 100 ? String(Math.round(v)) : v.toFixed(1).replace(/\.0$/, "");
    return (n < 0 ? "-" : "") + text + units[u];
  }
  function signedSize(n) { return (n > 0 ? "+" : "") + size(n); }
  function count(n) {
    var v = Math.abs(n), units = ["", "k", "M", "G"], u = 0;
    while (v >= 10000 && u < units.length - 1) { v /= 1000; u++; }
    return (n < 0 ? "-" : "") + Math.round(v) + units[u];
  }
  function frameName(f) {
    var name = f.functionName || "(anonymous)";
    return shown(f.url ? name + " (" + f.url + ":" + f.line + ":" + f.column + ")" : name);
  }
  function exact(n) { return n.toLocaleString("en-US", { maximumFractionDigits: 2 }); }
  /** A frame as the tables' short form reads it: the function and the file's last part with the line. */
  function shortFrame(f) {
    var name = shown(f.functionName || "(anonymous)");
    if (!f.url) return name;
    var file = shown(f.url.slice(f.url.lastIndexOf("/") + 1));
    return name + " (" + file + ":" + f.line + ")";
  }
  // A rate reads the same in the box and in "Now": "every allocation", or the bytes per sample as size() prints them.
  function rateBoxText(rate) { return rate === 1 ? "every allocation" : size(rate); }
  function rateText(rate) {
    return rate === 0 ? "off" : rate === 1 ? "every allocation" : rate < 0 ? "mixed" : "1 sample per " + rateBoxText(rate);
  }
  /** What the box says, as the API's rate parameter: "every allocation" (or "every", "exact") is 1. */
  function rateFromBox(text) {
    var t = text.trim();
    return /^(every( allocation)?|exact)$/i.test(t) ? "1" : t;
  }
  function shardQuery() { return state.shard === "all" ? "" : "shard=" + state.shard; }
  function withShard(path) {
    var q = shardQuery();
    return q ? path + (path.indexOf("?") < 0 ? "?" : "&") + q : path;
  }

  // ---- memory per shard over time (uPlot) ----
  var METRICS = [
    { id: "chart-used", title: "Used memory", value: function (s) { return s.used; }, bytes: true },
    { id: "chart-free", title: "Free memory", value: function (s) { return s.free; }, bytes: true },
    { id: "chart-live", title: "Live objects", value: function (s) { return s.liveObjects; }, bytes: false },
    { id: "chart-cross", title: "Cross-shard frees per second", rate: function (s) { return s.crossShardFrees; }, bytes: false },
    { id: "chart-failed", title: "Failed allocations (since the start)", value: function (s) { return s.failedAllocations; }, bytes: false },
    { id: "chart-largest-free", title: "Largest free span (the largest allocation that fits)", value: function (s) { return s.largestFreeSpan; }, bytes: true },
  ];

  /**
   * A legend value: the point under the mouse, else the latest one (uPlot
   * asks with idx null when the mouse is off the chart: it showed "-").
   */
  function legendValue(format) {
    return function (u, v, sidx, idx) {
      if (idx == null) {
        var column = u.data[sidx];
        v = column && column.length ? column[column.length - 1] : null;
      }
      return v == null ? "-" : format(v);
    };
  }
  /** How a shard is named: the main thread's own region says so. */
  function shardName(s) { return Number(s) === state.mainShard ? "main thread (shard " + s + ")" : "shard " + s; }
  function clock(t) { return new Date(t * 1000).toLocaleTimeString(); }
  /*
   * Every chart's time axis (the panels' too: state.lib): one row per
   * label, the time of day (14:52:10), ticks whole seconds apart and 70 px
   * apart at least (a label is ~52 px at the axis font). uPlot's own choice
   * crowded the first seconds of a page: sub-second ticks (":04.000",
   * ":04.500", ...) 56 px apart on a 600 px chart, the labels touching,
   * and a date row under the first.
   */
  function timeOfDay(t) {
    var d = new Date(t * 1000);
    return [d.getHours(), d.getMinutes(), d.getSeconds()].map(function (n) { return (n < 10 ? "0" : "") + n; }).join(":");
  }
  function timeAxis() {
    return { space: 70, incrs: [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 43200, 86400], values: function (u, splits) { return splits.map(timeOfDay); } };
  }
  /** The time scale: one sample alone spans 2 s (uPlot's own range for it was years). */
  function timeScale() {
    return { time: true, range: function (u, min, max) { return min != null && min === max ? [min - 1, max + 1] : [min, max]; } };
  }

  function chartWidth(id) { return Math.max(280, $(id).clientWidth - 8); }

  function makeCharts() {
    state.charts.forEach(function (c) { c.destroy(); });
    state.charts = METRICS.map(function (m) {
      var series = [{ value: legendValue(clock) }];
      for (var s = 0; s < state.shards; s++) series.push({ label: shardName(s), stroke: PALETTE[s % PALETTE.length], width: 1.5, value: legendValue(m.bytes ? size : count) });
      var axisValues = m.bytes ? function (u, vals) { return vals.map(size); } : function (u, vals) { return vals.map(count); };
      return new uPlot({
        title: m.title,
        width: chartWidth(m.id),
        height: 180,
        series: series,
        scales: { x: timeScale() },
        axes: [timeAxis(), { values: axisValues, size: 60 }],
        legend: { live: true },
      }, emptyData(), $(m.id));
    });
  }
  function emptyData() {
    var d = [[]];
    for (var s = 0; s < state.shards; s++) d.push([]);
    return d;
  }
  function chartData(m) {
    var xs = [], ys = [];
    for (var s = 0; s < state.shards; s++) ys.push([]);
    state.samples.forEach(function (sample, i) {
      if (m.rate && i === 0) return;
      xs.push(sample.t / 1000);
      for (var s = 0; s < state.shards; s++) {
        var now = sample.shards[s];
        if (m.rate) {
          var before = state.samples[i - 1];
          var dt = (sample.t - before.t) / 1000;
          ys[s].push(dt > 0 ? Math.max(0, (m.rate(now) - m.rate(before.shards[s])) / dt) : null);
        } else {
          ys[s].push(m.value(now));
        }
      }
    });
    return [xs].concat(ys);
  }
  function drawCharts() {
    state.charts.forEach(function (c, i) { c.setData(chartData(METRICS[i])); });
  }

  // ---- profiler switches ----
  function makeProfilerTable() {
    var body = $("profiler-rows");
    body.textContent = "";
    for (var s = 0; s < state.shards; s++) {
      var row = el("tr", { id: "prof-row-" + s });
      row.appendChild(el("td", null, shardName(s)));
      var on = el("input", { type: "checkbox", id: "prof-on-" + s, "aria-label": "profiler of " + shardName(s) });
      var onCell = el("td");
      onCell.appendChild(on);
      row.appendChild(onCell);
      var rate = el("input", { type: "text", id: "prof-rate-" + s, size: "14", value: "64K", list: "rate-choices", "aria-label": "sample rate of " + shardName(s) });
      var rateCell = el("td");
      rateCell.appendChild(rate);
      row.appendChild(rateCell);
      var apply = el("button", { id: "prof-apply-" + s }, "Apply");
      var applyCell = el("td");
      applyCell.appendChild(apply);
      row.appendChild(applyCell);
      row.appendChild(el("td", { id: "prof-now-" + s }, ""));
      body.appendChild(row);
      (function (shard) {
        // Its own checkbox by id: "on" is the last row's once the loop has run.
        on.addEventListener("change", function () { setRate(shard, $("prof-on-" + shard).checked ? rateFromBox($("prof-rate-" + shard).value) : "0"); });
        apply.addEventListener("click", function () { setRate(shard, rateFromBox($("prof-rate-" + shard).value)); });
      })(s);
    }
  }
  async function setRate(shard, rate) {
    // The switch holds as clicked until the server answers: a sample taken before the shard applied it would flip it back.
    state.rateSetAt[shard] = Infinity;
    try {
      var r = await api("/v1/heapprof?shard=" + shard + "&rate=" + encodeURIComponent(rate.trim()), { method: "PUT" });
      var applied = (await r.json()).rate;
      state.rateSetAt[shard] = Date.now();
      showRate(shard, applied);
      status(shardName(shard) + ": profiler " + rateText(applied));
    } catch (e) {
      state.rateSetAt[shard] = 0;
      status(shardName(shard) + ": " + e.message, true);
      var latest = state.samples[state.samples.length - 1];
      if (latest) showRate(shard, latest.shards[shard].sampleRate);
    }
  }
  function showRate(shard, rate) {
    $("prof-on-" + shard).checked = rate !== 0;
    $("prof-now-" + shard).textContent = rateText(rate);
    // Off keeps the box as it is: the rate the switch turns on with.
    if (rate >= 1 && document.activeElement !== $("prof-rate-" + shard)) $("prof-rate-" + shard).value = rateBoxText(rate);
  }
  function drawRates() {
    var latest = state.samples[state.samples.length - 1];
    if (!latest) return;
    for (var s = 0; s < state.shards; s++) {
      // A switch just flipped here stays as set until a sample taken after it arrives.
      if ((state.rateSetAt[s] || 0) > latest.t) continue;
      showRate(s, latest.shards[s].sampleRate);
    }
  }

  // ---- the folded-sites warning: a full site table hides stacks in "(other sites)" ----
  function drawFolded() {
    var latest = state.samples[state.samples.length - 1];
    if (!latest) return;
    var shards = state.shard === "all" ? latest.shards.map(function (_, i) { return i; }) : [Number(state.shard)];
    var folding = shards.filter(function (s) { return latest.shards[s].foldedAllocations > 0; });
    var warning = $("folded-warning");
    warning.hidden = folding.length === 0;
    if (!folding.length) return;
    var n = folding.reduce(function (sum, s) { return sum + latest.shards[s].foldedAllocations; }, 0);
    warning.textContent = count(n) + " allocations went to \"(other sites)\" on " + (folding.length > 1 ? "shards " : "shard ") + folding.join(", ") +
      ": the profiler's site table is full (" + latest.shards[folding[0]].siteCapacity + (latest.shards[folding[0]].siteCapacity === 1 ? " site" : " sites") + " a shard), so their stacks are not told apart. Start with --heapprof-sites N (heapprofSites) for more.";
  }

  // ---- flamegraphs: our SVG renderer, in frames, searchable ----
  async function loadSvg(frameId, path) {
    var frame = $(frameId);
    var r = await api(path);
    var blob = new Blob([await r.text()], { type: "image/svg+xml" });
    var url = URL.createObjectURL(blob);
    var old = frame.getAttribute("data-url");
    frame.onload = function () {
      if (old) URL.revokeObjectURL(old);
      // As tall as the graph: the SVG says its height.
      var svg = frame.contentDocument && frame.contentDocument.documentElement;
      var height = svg ? Number(svg.getAttribute("height")) : 0;
      if (height > 0) frame.style.height = (height + 24) + "px";
      applySearch(frame);
      frame.setAttribute("data-loaded", String(Date.now()));
    };
    frame.setAttribute("data-url", url);
    frame.src = url;
  }
  function applySearch(frame) {
    var term = $("search").value;
    var w = frame.contentWindow;
    if (!w || typeof w.search !== "function") return;
    try { new RegExp(term); } catch (e) { status("search: " + e.message, true); return; }
    w.search(term);
  }
  function searchAll() {
    Array.from(document.querySelectorAll("iframe")).forEach(applySearch);
  }
  /** The live flamegraph's query: all sites, or one label value's (its root frame then names the value). */
  function flamePath() {
    var f = state.labelFilter;
    var only = f ? "&by=" + encodeURIComponent(f.name) + "&label=" + encodeURIComponent(f.name + "=" + f.value) : "";
    return withShard("/v1/heapprof?format=svg" + only);
  }
  async function refreshFlame() {
    try {
      await loadSvg("flame", flamePath());
    } catch (e) {
      status("flamegraph: " + e.message, true);
    }
  }

  // ---- memory by label: the chosen label's values, each opening the flamegraph of its sites ----
  function drawLabelChoice(names) {
    if (names.indexOf(state.labelName) < 0) state.labelName = names.length ? names[0] : null;
    var select = $("label-name");
    if (Array.from(select.options).map(function (o) { return o.value; }).join("\n") !== names.join("\n")) {
      select.textContent = "";
      names.forEach(function (n) { select.appendChild(el("option", { value: n }, shown(n))); });
    }
    if (state.labelName !== null) select.value = state.labelName;
    select.disabled = names.length === 0;
    $("no-labels").hidden = names.length > 0;
    $("label-table").hidden = names.length === 0;
  }
  function drawLabelFilter() {
    var f = state.labelFilter;
    $("label-filter").hidden = !f;
    $("label-filter-name").textContent = f ? shown(f.name + "=" + f.value) : "";
    Array.from($("label-rows").rows).forEach(function (row) {
      row.classList.toggle("chosen", !!f && f.name === state.labelName && f.value === row.getAttribute("data-value"));
    });
  }
  function showLabelValue(name, value) {
    state.labelFilter = value === null ? null : { name: name, value: value };
    drawLabelFilter();
    refreshFlame();
    if (value !== null) $("flame-section").scrollIntoView();
  }
  function drawLabelTable(body) {
    var rows = $("label-rows");
    rows.textContent = "";
    body.groups.forEach(function (g) {
      var value = g.value === undefined ? NO_LABEL : g.value;
      var row = el("tr", { "data-value": value });
      var cell = el("td", { class: "name" });
      var pick = el("button", { class: "value", title: "the flamegraph of " + shown(body.by + "=" + value) + " only" }, shown(value));
      pick.addEventListener("click", function () { showLabelValue(body.by, value); });
      cell.appendChild(pick);
      row.appendChild(cell);
      row.appendChild(el("td", { class: "num bytes", "data-bytes": String(g.size), title: exact(g.size) + " bytes" }, size(g.size)));
      row.appendChild(el("td", { class: "num objects", "data-count": String(g.count), title: exact(g.count) + " objects in " + exact(g.sites) + (g.sites === 1 ? " site" : " sites") }, count(g.count)));
      row.appendChild(el("td", { class: "num share" }, body.totalSize > 0 ? (100 * g.size / body.totalSize).toFixed(1) + "%" : "-"));
      rows.appendChild(row);
    });
    drawLabelFilter();
  }
  async function refreshLabels() {
    try {
      // A second ask when the names say the chosen label is not the one asked for (the first view, or it went away).
      for (var attempt = 0; attempt < 2; attempt++) {
        var asked = state.labelName;
        var body = await (await api(withShard("/v1/heapprof/labels" + (asked === null ? "" : "?by=" + encodeURIComponent(asked))))).json();
        drawLabelChoice(body.names);
        if (state.labelName === null) { $("label-rows").textContent = ""; return; }
        if (body.by === state.labelName) { drawLabelTable(body); return; }
      }
    } catch (e) {
      status("labels: " + e.message, true);
    }
  }

  // ---- sites: as many frames as tell them apart, labels, the whole stack on opening ----
  function labelsOf(site) {
    var labels = site.labels || {};
    return Object.keys(labels).sort().map(function (k) { return shown(k + "=" + labels[k]); });
  }
  function samePrefix(a, b) {
    var n = 0;
    while (n < a.frames.length && n < b.frames.length && frameName(a.frames[n]) === frameName(b.frames[n])) n++;
    return n;
  }
  /**
   * Per site, how many frames (leaf first) its short form shows: the leaf
   * and its caller, or more where another site of the list shares them
   * (and its labels: labels tell sites apart too), up to the frame where
   * the stacks part.
   */
  function distinguishingDepths(sites) {
    return sites.map(function (s, i) {
      var depth = 2;
      var labels = labelsOf(s).join(",");
      sites.forEach(function (o, j) {
        if (i !== j && labelsOf(o).join(",") === labels) depth = Math.max(depth, samePrefix(s, o) + 1);
      });
      return Math.min(depth, s.frames.length);
    });
  }
  /** A site's cell content: its short form (leaf, callers as far as depth, labels) opening to every frame; the tooltip has them all too. */
  function siteStack(site, depth) {
    var details = el("details", { class: "stack" });
    var summary = el("summary");
    var names = site.frames.map(shortFrame);
    var shown = depth > 3 ? [names[0], "\u2026", names[depth - 2], names[depth - 1]] : names.slice(0, Math.max(1, depth));
    summary.appendChild(el("span", { class: "name" }, site.frames.length ? shown.join(" \u2190 ") : "(no frames)"));
    var hidden = site.frames.length - depth;
    if (hidden > 0) summary.appendChild(el("span", { class: "more" }, " +" + hidden + (hidden === 1 ? " frame" : " frames")));
    var labels = labelsOf(site);
    if (labels.length) {
      var chips = el("span", { class: "labels" });
      labels.forEach(function (l) { chips.appendChild(el("span", null, l)); });
      summary.appendChild(chips);
    }
    details.appendChild(summary);
    var stack = el("ol", { class: "frames" });
    site.frames.forEach(function (f) { stack.appendChild(el("li", null, frameName(f))); });
    details.appendChild(stack);
    details.setAttribute("title", site.frames.map(frameName).concat(labels).join("\n"));
    return details;
  }

  // ---- named baselines and the growth since ----
  function baselineNames() {
    var names = [];
    state.baselines.forEach(function (b) { if (names.indexOf(b.name) < 0) names.push(b.name); });
    return names;
  }
  /** The baselines of the chosen name for the selected shard(s), or null when a shard has none. */
  function baselineFor(shard) {
    var shards = shard === "all" ? Array.from({ length: state.shards }, function (_, i) { return i; }) : [Number(shard)];
    var found = shards.map(function (s) { return state.baselines.find(function (b) { return b.shard === s && b.name === state.baselineName; }); });
    return found.every(Boolean) ? found : null;
  }
  function baselineQuery() { return "&baseline=" + encodeURIComponent(state.baselineName); }
  /** The name of the baseline taken last (of any shard). */
  function newestBaselineName() {
    var newest = null;
    state.baselines.forEach(function (b) { if (newest === null || b.takenAt >= newest.takenAt) newest = b; });
    return newest === null ? state.baselineName : newest.name;
  }
  /**
   * The chooser lists the server's names. The growth is shown since the
   * newest baseline until the user chooses (it was the first, the oldest,
   * so a baseline taken just now compared with one from long before); a
   * chosen name that went away gives way to the newest left.
   */
  function drawBaselineChoice() {
    var names = baselineNames();
    if (names.length && names.indexOf(state.baselineName) < 0) state.baselineChosen = false;
    if (names.length && !state.baselineChosen) state.baselineName = newestBaselineName();
    var select = $("baseline-select");
    var wanted = names.length ? names : [state.baselineName];
    if (Array.from(select.options).map(function (o) { return o.value; }).join("\n") !== wanted.join("\n")) {
      select.textContent = "";
      wanted.forEach(function (n) { select.appendChild(el("option", { value: n }, n)); });
    }
    select.value = state.baselineName;
    $("delete-baseline").disabled = names.length === 0;
  }
  /*
   * Baseline changes and growth reads take turns: a growth read in flight
   * when its baseline is deleted would ask for a name the server no longer
   * has (a 409, which the browser logs however the page handles it). And a
   * history answer that was in flight across a change lists the baselines
   * of before it, so poll() drops it (baselineEpoch moves on both sides of
   * every change).
   */
  var growthTurn = Promise.resolve();
  var baselineEpoch = 0;
  function inGrowthTurn(fn) {
    var turn = growthTurn.then(fn, fn);
    growthTurn = turn.catch(function () { /* reported by fn itself */ });
    return turn;
  }
  async function changeBaselines(fn) {
    baselineEpoch++;
    try { return await fn(); } finally { baselineEpoch++; }
  }
  function setBaseline() {
    var name = $("baseline-name").value.trim() || state.baselineName;
    return inGrowthTurn(async function () {
      try {
        var r = await changeBaselines(function () {
          return api("/v1/heapprof/baseline?shard=" + state.shard + "&name=" + encodeURIComponent(name), { method: "POST" });
        });
        var set = (await r.json()).baselines;
        state.baselines = state.baselines.filter(function (o) { return !set.some(function (b) { return b.name === o.name && b.shard === o.shard; }); }).concat(set);
        state.baselineName = name;
        state.baselineChosen = true;
        $("baseline-name").value = "";
        drawBaselineChoice();
        status("baseline " + name + " set for " + (state.shard === "all" ? "all shards" : shardName(state.shard)));
        await refreshGrowthNow();
      } catch (e) {
        status("baseline: " + e.message, true);
      }
    });
  }
  function deleteBaseline() {
    var name = state.baselineName;
    return inGrowthTurn(async function () {
      try {
        await changeBaselines(function () {
          return api("/v1/heapprof/baseline?name=" + encodeURIComponent(name), { method: "DELETE" });
        });
        state.baselines = state.baselines.filter(function (b) { return b.name !== name; });
        drawBaselineChoice();
        status("baseline " + name + " deleted");
        await refreshGrowthNow();
      } catch (e) {
        status("baseline: " + e.message, true);
      }
    });
  }
  function refreshGrowth() { return inGrowthTurn(refreshGrowthNow); }
  async function refreshGrowthNow() {
    var base = baselineFor(state.shard);
    $("growth").hidden = !base;
    $("no-baseline").hidden = !!base;
    if (!base) {
      $("baseline-info").textContent = "";
      return;
    }
    var oldest = Math.min.apply(null, base.map(function (b) { return b.takenAt; }));
    $("baseline-info").textContent = "since " + new Date(oldest).toLocaleTimeString() + " (" + size(base.reduce(function (n, b) { return n + b.totalSize; }, 0)) + " live then)";
    try {
      await loadSvg("growth-flame", withShard("/v1/heapprof?format=svg&diff=baseline" + baselineQuery()));
      var diff = await (await api(withShard("/v1/heapprof?format=json&diff=baseline" + baselineQuery()))).json();
      var body = $("grown-rows");
      body.textContent = "";
      // By bytes (the diff's own order) or by objects: many small objects gain few bytes.
      var byCount = $("grown-by").value === "count";
      var grown = diff.sites.filter(function (s) { return byCount ? s.count > 0 : s.size > 0; });
      if (byCount) grown.sort(function (a, b) { return b.count - a.count || b.size - a.size; });
      grown = grown.slice(0, 10);
      var depths = distinguishingDepths(grown);
      grown.forEach(function (s, i) {
        var row = el("tr", { class: "grown" });
        var cell = el("td", { class: "name" });
        cell.appendChild(siteStack(s, depths[i]));
        row.appendChild(cell);
        row.appendChild(el("td", { class: "num" }, signedSize(s.size)));
        row.appendChild(el("td", { class: "num" }, (s.count > 0 ? "+" : "") + count(s.count)));
        body.appendChild(row);
      });
      $("growth-total").textContent = signedSize(diff.totalSize) + " in all";
    } catch (e) {
      status("growth: " + e.message, true);
    }
  }

  // ---- growing sites (least-squares over the growth window) ----
  function findInFlamegraphs(name) {
    $("search").value = "^" + name.replace(/[.*+?^$(){}|[\]\\]/g, "\\$&");
    searchAll();
    $("flame-section").scrollIntoView();
  }
  async function refreshGrowing() {
    try {
      var byCount = $("growing-by").value === "count";
      var body = await (await api(withShard("/v1/heapprof/growing?by=" + (byCount ? "count" : "bytes")))).json();
      $("growing-window").textContent = body.windowSeconds + " s";
      $("growing-what").textContent = byCount ? "objects" : "bytes";
      var list = $("growing-list");
      list.textContent = "";
      if (body.sites.length === 0) list.appendChild(el("li", { class: "none" }, "nothing grows steadily"));
      var depths = distinguishingDepths(body.sites);
      body.sites.forEach(function (g, i) {
        var item = el("li", { class: "growing-site" });
        var details = siteStack(g, depths[i]);
        var figures = byCount
          ? " +" + count(g.countSlope) + " objects/s, fit " + g.countR2.toFixed(2) + ", " + count(g.liveCount) + " live (" + size(g.liveBytes) + "), +" + count(g.countGrowth) + " in the window"
          : " " + signedSize(g.slope) + "/s, fit " + g.r2.toFixed(2) + ", " + size(g.liveBytes) + " live, " + signedSize(g.growth) + " in the window";
        details.querySelector("summary").appendChild(el("span", { class: "num" }, figures));
        var find = el("button", null, "Find in flamegraphs");
        find.addEventListener("click", function () { findInFlamegraphs(frameName(g.frames[0] || { functionName: "", url: "" })); });
        details.appendChild(find);
        item.appendChild(details);
        list.appendChild(item);
      });
    } catch (e) {
      status("growing sites: " + e.message, true);
    }
  }

  // ---- the app's own figures ----
  function figureText(f) {
    return f.unit === "ratio" ? (f.value * 100).toFixed(1) + "%" : f.unit === "bytes" ? size(f.value) : exact(f.value);
  }
  /** One panel per app that publishes; counters also show their rate since the previous poll. */
  function drawApps(apps) {
    $("app-section").hidden = apps.length === 0;
    var box = $("app-panels");
    box.textContent = "";
    var before = state.appsBefore;
    state.appsBefore = {};
    apps.forEach(function (a) {
      var panel = el("div", { class: "app-panel", "data-app": a.app });
      panel.appendChild(el("h3", null, a.app));
      if (a.error) panel.appendChild(el("p", { class: "error" }, a.error));
      var table = el("table");
      a.figures.forEach(function (f) {
        var row = el("tr", { "data-figure": f.name });
        row.appendChild(el("th", f.help ? { title: f.help } : null, f.name));
        row.appendChild(el("td", { class: "num value" }, figureText(f)));
        var rate = "";
        var prev = before[a.app + "\n" + f.name];
        if (f.kind === "counter" && prev && a.t > prev.t) {
          var perSecond = ((f.value - prev.value) * 1000) / (a.t - prev.t);
          rate = (perSecond >= 0 ? "+" : "") + (f.unit === "bytes" ? size(perSecond) : exact(Math.round(perSecond * 10) / 10)) + "/s";
        }
        row.appendChild(el("td", { class: "num rate" }, rate));
        table.appendChild(row);
        state.appsBefore[a.app + "\n" + f.name] = { value: f.value, t: a.t };
      });
      panel.appendChild(table);
      box.appendChild(panel);
    });
  }

  /** Failed allocations are rare and decisive: a note says so, with each shard's largest free span against its free memory. */
  function drawFailures() {
    var latest = state.samples[state.samples.length - 1];
    var note = $("failed-note");
    var failed = latest ? latest.shards.reduce(function (n, s) { return n + s.failedAllocations; }, 0) : 0;
    note.hidden = failed === 0;
    if (failed === 0) return;
    note.textContent = exact(failed) + " allocations failed (OutOfMemoryError) since the start: " +
      latest.shards.map(function (s, i) { return shardName(i) + " " + exact(s.failedAllocations) + " (largest free span " + size(s.largestFreeSpan) + " of " + size(s.free) + " free)"; }).join(", ");
  }

  // ---- downloads ----
  var DOWNLOADS = [
    ["pprof", "heapprof.pb.gz", "/v1/heapprof?format=pprof"],
    ["heapprofile", "heapprof.heapprofile", "/v1/heapprof?format=heapprofile"],
    ["collapsed", "heapprof.collapsed", "/v1/heapprof?format=collapsed"],
    ["SVG", "heapprof.svg", "/v1/heapprof?format=svg"],
    ["tree", "heapprof.txt", "/v1/heapprof?format=tree"],
    ["growth pprof", "growth.pb.gz", "/v1/heapprof?format=pprof&diff=baseline"],
    ["growth SVG", "growth.svg", "/v1/heapprof?format=svg&diff=baseline"],
    ["heap image", "heap.img", "/v1/heap/image"],
  ];
  function makeDownloads() {
    var box = $("downloads");
    box.textContent = "";
    DOWNLOADS.forEach(function (d) {
      if (d[2] === "/v1/heap/image" && !state.heapImage) return;
      var b = el("button", { "data-file": d[1] }, d[0]);
      b.addEventListener("click", function () {
        var path = d[2].indexOf("diff=baseline") < 0 ? d[2] : d[2] + baselineQuery();
        download(d[1], path === "/v1/heap/image" ? path : withShard(path));
      });
      box.appendChild(b);
    });
  }
  async function download(name, path) {
    try {
      var blob = await (await api(path)).blob();
      var a = el("a", { download: (state.shard === "all" ? "" : "shard" + state.shard + "-") + name });
      a.href = URL.createObjectURL(blob);
      document.body.appendChild(a);
      a.click();
      a.remove();
      setTimeout(function () { URL.revokeObjectURL(a.href); }, 10000);
    } catch (e) {
      status(name + ": " + e.message, true);
    }
  }

  // ---- polling ----
  async function poll() {
    var epoch = baselineEpoch;
    var body = await (await api("/v1/memory/history?since=" + state.lastT)).json();
    if (!state.started) {
      state.started = true;
      state.shards = body.shards;
      state.mainShard = body.mainShard == null ? null : body.mainShard;
      state.intervalMs = body.sampleIntervalMs;
      state.historySeconds = body.historySeconds;
      state.growthWindowSeconds = body.growthWindowSeconds;
      state.heapImage = body.heapImage;
      var select = $("shard");
      for (var s = 0; s < state.shards; s++) select.appendChild(el("option", { value: String(s) }, shardName(s)));
      makeCharts();
      makeProfilerTable();
      makeDownloads();
    }
    if (epoch === baselineEpoch) {
      state.baselines = body.baselines;
      drawBaselineChoice();
    }
    drawApps(body.apps);
    state.samples = state.samples.concat(body.samples).filter(function (s) { return s.t > Date.now() - state.historySeconds * 1000; });
    if (body.samples.length) state.lastT = body.samples[body.samples.length - 1].t;
    $("sampling").textContent = "sampled every " + (state.intervalMs / 1000) + " s from the shared buffer (last sample took " + body.lastSampleMs.toFixed(2) + " ms on the server)";
    drawCharts();
    drawRates();
    drawFailures();
    drawFolded();
    window.dispatchEvent(new Event("shardheap:poll"));
    extensions("polled");
  }
  var timers = [];
  function every(ms, fn) {
    var running = false;
    timers.push(setInterval(async function () {
      if (running) return;
      running = true;
      try { await fn(); } catch (e) { if (e.message !== "unauthorized") status(e.message, true); } finally { running = false; }
    }, ms));
  }
  async function refreshViews() {
    if ($("auto").checked && !state.paused) {
      await refreshFlame();
      await refreshLabels();
      await refreshGrowth();
    }
    await refreshGrowing();
    await extensions("refresh");
  }
  async function start() {
    timers.forEach(clearInterval);
    timers = [];
    try {
      await poll();
    } catch (e) {
      if (e.message !== "unauthorized") status(e.message, true);
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


  window.addEventListener("DOMContentLoaded", function () {
    $("token-ok").addEventListener("click", useToken);
    $("token").addEventListener("keydown", function (e) { if (e.key === "Enter") useToken(); });
    $("shard").addEventListener("change", function () {
      state.shard = $("shard").value;
      drawFolded();
      refreshFlame();
      refreshLabels();
      refreshGrowth();
      refreshGrowing();
      extensions("shardChanged");
    });
    $("search").addEventListener("input", searchAll);
    $("refresh").addEventListener("click", function () { refreshFlame(); refreshLabels(); refreshGrowth(); refreshGrowing(); });
    $("label-name").addEventListener("change", function () {
      state.labelName = $("label-name").value;
      refreshLabels();
    });
    $("label-filter-clear").addEventListener("click", function () { showLabelValue(null, null); });
    $("set-baseline").addEventListener("click", setBaseline);
    $("baseline-name").addEventListener("keydown", function (e) { if (e.key === "Enter") setBaseline(); });
    $("delete-baseline").addEventListener("click", deleteBaseline);
    $("growing-by").addEventListener("change", refreshGrowing);
    $("grown-by").addEventListener("change", refreshGrowth);
    $("baseline-select").addEventListener("change", function () {
      state.baselineName = $("baseline-select").value;
      state.baselineChosen = true;
      refreshGrowth();
    });
    // Hovering a flamegraph (to zoom or read) holds its refresh, so the view does not move under the mouse.
    ["flame", "growth-flame", "peak-flame", "window-flame"].forEach(function (id) {
      $(id).addEventListener("mouseenter", function () { state.paused = true; });
      $(id).addEventListener("mouseleave", function () { state.paused = false; });
    });
    window.addEventListener("resize", function () {
      state.charts.forEach(function (c, i) { c.setSize({ width: chartWidth(METRICS[i].id), height: 180 }); });
    });
    if (document.body.getAttribute("data-token") === "required") askToken("this server needs its bearer token");
    else start();
  });
})();
`;
