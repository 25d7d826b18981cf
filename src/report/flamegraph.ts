/**
 * A self-contained SVG flamegraph of the live heap, with flamegraph.pl's
 * look (its "mem" palette, 16 px frames, the title and the details line)
 * and its interactions, written here: click a frame to zoom into it, "Reset
 * Zoom" to go back, "Search" for a regular expression (matches turn
 * purple and the matched share of the heap is shown), hover for a frame's
 * bytes and share. Root at the bottom, callers below callees; widths are
 * live bytes. No network access is needed to view it.
 *
 * A diff (diff.ts) draws a differential flamegraph, as Brendan Gregg's
 * difffolded.pl | flamegraph.pl: widths are the next profile's live bytes,
 * a frame is red where it grew and blue where it shrank, deeper the larger
 * its change against the largest change of any frame (white: unchanged),
 * and the hover details give the change. A frame that shrank to nothing
 * has no width (as in Gregg's); its change still counts in its callers.
 *
 * Frames' files are shown short (display-paths.ts), so a box's text ends
 * in a file and line one can read (`shardheap/src/x.ts:100:3`, not
 * `file:///tmp/...` cut off); as recorded with `fullPaths`. Names (a label
 * value's root frame among them) may hold any character: their control
 * characters show as visible escapes (escapeXml).
 */
import type { HeapProfile } from "../memory/heap-profile.js";
import { isProfileDiff } from "./diff.js";
import type { PathOptions } from "./display-paths.js";
import { frameNamer } from "./frame-name.js";
import { escapeControls } from "../display-text.js";

export interface FlamegraphOptions extends PathOptions {
  title?: string;
}

interface FlameNode {
  name: string;
  /** Width: live bytes (in a diff, the next profile's). */
  value: number;
  /** A diff's change of live bytes under this frame; 0 otherwise. */
  delta: number;
  children: Map<string, FlameNode>;
}

const WIDTH = 1200;
const FRAME_HEIGHT = 16;
const FONT_SIZE = 12;
const PAD_TOP = FONT_SIZE * 3;
const PAD_BOTTOM = FONT_SIZE * 2 + 10;
const PAD_SIDE = 10;
const MIN_WIDTH_PX = 0.1;

/**
 * XML text and attribute escaping, of any string: its control characters
 * first, as visible escapes (display-text.ts), since XML 1.0 has no
 * character U+0001 (or U+FFFE, or a lone surrogate) even as a reference.
 */
export function escapeXml(s: string): string {
  return escapeControls(s).replace(/[<>&"']/g, (c) => ({ "<": "&lt;", ">": "&gt;", "&": "&amp;", '"': "&quot;", "'": "&#39;" })[c]!);
}

/** flamegraph.pl's "mem" palette, hashed from the name so a frame keeps its colour across graphs. */
function memColour(name: string): string {
  let h1 = 0;
  let h2 = 0;
  for (let i = 0; i < name.length; i++) {
    h1 = (Math.imul(h1, 31) + name.charCodeAt(i)) >>> 0;
    h2 = (Math.imul(h2, 17) + name.charCodeAt(name.length - 1 - i)) >>> 0;
  }
  const v1 = (h1 % 1000) / 1000;
  const v2 = (h2 % 1000) / 1000;
  return `rgb(0,${190 + Math.floor(50 * v2)},${Math.floor(210 * v1)})`;
}

/**
 * flamegraph.pl's differential colours: white for no change, towards pure
 * red (grew) or blue (shrank) as |delta| nears the largest change.
 */
function deltaColour(delta: number, maxDelta: number): string {
  if (delta === 0 || maxDelta === 0) return "rgb(255,255,255)";
  const fade = Math.round(210 * (1 - Math.min(1, Math.abs(delta) / maxDelta)));
  return delta > 0 ? `rgb(255,${fade},${fade})` : `rgb(${fade},${fade},255)`;
}

function formatBytes(n: number): string {
  return `${Math.round(n).toLocaleString("en-US")} bytes`;
}

function formatChange(n: number): string {
  const rounded = Math.round(n);
  return `${rounded > 0 ? "+" : ""}${rounded.toLocaleString("en-US")} bytes`;
}

/**
 * The flamegraph's own script (zoom, search, details), one constant so a
 * page that embeds the SVG can allow exactly it in its Content Security
 * Policy by hash (the dashboard does), with the `init(evt)` onload handler.
 */
export const FLAMEGRAPH_SCRIPT = `
"use strict";
var frames, details, matchedText, resetButton, total, usable, side, zoomed = null, lastSearch = null;
function init() {
  var g = document.getElementById("frames");
  frames = Array.prototype.slice.call(g.querySelectorAll("g.frame"));
  total = +g.getAttribute("data-total"); usable = +g.getAttribute("data-usable"); side = +g.getAttribute("data-side");
  details = document.getElementById("details"); matchedText = document.getElementById("matched");
  resetButton = document.getElementById("reset");
  frames.forEach(function (f) {
    f.addEventListener("click", function () { zoom(f); });
    f.addEventListener("mouseover", function () { details.textContent = "Function: " + f.querySelector("title").textContent; });
    f.addEventListener("mouseout", function () { details.textContent = " "; });
  });
  resetButton.addEventListener("click", unzoom);
  document.getElementById("search").addEventListener("click", function () {
    var term = prompt("Enter a search term (regexp allowed, eg: ^make)", lastSearch || "");
    if (term !== null) search(term);
  });
  matchedText.addEventListener("click", function () { search(""); });
  layout(0, 1, -1);
}
function layout(x0, w0, minDepth) {
  frames.forEach(function (f) {
    var x = +f.getAttribute("data-x"), w = +f.getAttribute("data-w"), d = +f.getAttribute("data-depth");
    var inside = x + w > x0 + 1e-9 && x < x0 + w0 - 1e-9;
    var nx, nw;
    if (d < minDepth && inside) { nx = 0; nw = 1; }            // ancestors span the width
    else if (inside) { nx = (x - x0) / w0; nw = w / w0; }      // the zoomed subtree
    else { f.classList.add("hidden"); return; }
    f.classList.remove("hidden");
    var rect = f.querySelector("rect"), text = f.querySelector("text");
    var px = side + nx * usable, pw = nw * usable;
    rect.setAttribute("x", px.toFixed(2)); rect.setAttribute("width", Math.max(0, pw - 0.5).toFixed(2));
    text.setAttribute("x", (px + 3).toFixed(2));
    var name = f.getAttribute("data-name"), fit = Math.floor((pw - 6) / 7);
    text.textContent = fit < 3 ? "" : name.length <= fit ? name : name.slice(0, fit - 2) + "..";
  });
}
function zoom(f) {
  zoomed = f;
  layout(+f.getAttribute("data-x"), +f.getAttribute("data-w"), +f.getAttribute("data-depth"));
  resetButton.classList.remove("hidden");
}
function unzoom() { zoomed = null; layout(0, 1, -1); resetButton.classList.add("hidden"); }
function search(term) {
  lastSearch = term;
  var re = term ? new RegExp(term) : null, matched = [];
  frames.forEach(function (f) {
    var rect = f.querySelector("rect");
    if (!rect.hasAttribute("data-fill")) rect.setAttribute("data-fill", rect.getAttribute("fill"));
    var hit = re !== null && re.test(f.getAttribute("data-name"));
    rect.setAttribute("fill", hit ? "rgb(230,0,230)" : rect.getAttribute("data-fill"));
    if (hit) matched.push(f);
  });
  // Count each matched stretch once: skip matches inside an already counted match.
  var counted = 0, covered = [];
  matched.sort(function (a, b) { return +a.getAttribute("data-depth") - +b.getAttribute("data-depth"); });
  matched.forEach(function (f) {
    var x = +f.getAttribute("data-x"), w = +f.getAttribute("data-w");
    if (covered.some(function (c) { return x >= c[0] - 1e-12 && x + w <= c[1] + 1e-12; })) return;
    covered.push([x, x + w]); counted += +f.getAttribute("data-value");
  });
  matchedText.textContent = re === null ? " " : "Matched: " + (total > 0 ? (100 * counted / total).toFixed(1) : "0.0") + "%";
}
`;
export const FLAMEGRAPH_ONLOAD = "init(evt)";

export function toFlamegraphSvg(p: HeapProfile, o: FlamegraphOptions = {}): string {
  const nameFrame = frameNamer(o);
  const diff = isProfileDiff(p);
  const stacks = isProfileDiff(p)
    ? p.sites.map((s) => ({ frames: s.frames, width: s.nextSize, delta: s.size }))
    : p.sites.map((s) => ({ frames: s.frames, width: s.size, delta: 0 }));
  const root: FlameNode = { name: "all", value: 0, delta: 0, children: new Map() };
  let depthMax = 0;
  for (const { frames: siteFrames, width, delta } of stacks) {
    if (width <= 0 && delta === 0) continue;
    root.value += Math.max(0, width);
    root.delta += delta;
    let n = root;
    const stack = siteFrames.map(nameFrame).reverse(); // root first
    depthMax = Math.max(depthMax, stack.length);
    for (const name of stack) {
      let child = n.children.get(name);
      if (!child) n.children.set(name, (child = { name, value: 0, delta: 0, children: new Map() }));
      child.value += Math.max(0, width);
      child.delta += delta;
      n = child;
    }
  }
  let maxDelta = 0;
  const findMaxDelta = (n: FlameNode): void => {
    for (const c of n.children.values()) {
      maxDelta = Math.max(maxDelta, Math.abs(c.delta));
      findMaxDelta(c);
    }
  };
  if (diff) findMaxDelta(root);
  const colour = (n: FlameNode, depth: number): string =>
    diff ? deltaColour(n.delta, Math.max(maxDelta, Math.abs(n.delta))) : depth === 0 ? "rgb(0,200,150)" : memColour(n.name);
  const title = o.title ?? (diff ? "Heap growth (widths: live bytes now; red grew, blue shrank)" : "Heap profile (live bytes)");
  const height = PAD_TOP + (depthMax + 1) * FRAME_HEIGHT + PAD_BOTTOM;
  const usable = WIDTH - 2 * PAD_SIDE;
  const frames: string[] = [];
  const total = root.value;
  const emit = (n: FlameNode, depth: number, x: number): void => {
    const w = total > 0 ? (n.value / total) * usable : depth === 0 ? usable : 0;
    // No frame for what prints as 0 bytes, however wide its share of a near-zero total.
    if (depth > 0 && (w < MIN_WIDTH_PX || Math.round(n.value) <= 0)) return;
    const y = height - PAD_BOTTOM - (depth + 1) * FRAME_HEIGHT;
    const share = total > 0 ? ((100 * n.value) / total).toFixed(2) : "100.00";
    const info = `${n.name} (${formatBytes(n.value)}, ${share}%${diff ? `; ${formatChange(n.delta)}` : ""})`;
    frames.push(
      `<g class="frame" data-x="${(x - PAD_SIDE) / usable}" data-w="${w / usable}" data-depth="${depth}" data-name="${escapeXml(n.name)}" data-value="${n.value}"${diff ? ` data-delta="${n.delta}"` : ""}>` +
        `<title>${escapeXml(info)}</title>` +
        `<rect x="${x.toFixed(2)}" y="${y}" width="${Math.max(0, w - 0.5).toFixed(2)}" height="${FRAME_HEIGHT - 1}" fill="${colour(n, depth)}" rx="2" ry="2"/>` +
        `<text x="${(x + 3).toFixed(2)}" y="${y + FRAME_HEIGHT - 4}"></text></g>`,
    );
    let cx = x;
    for (const child of [...n.children.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
      emit(child, depth + 1, cx);
      cx += total > 0 ? (child.value / total) * usable : 0;
    }
  };
  emit(root, 0, PAD_SIDE);
  return `<?xml version="1.0" standalone="no"?>
<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" "http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">
<svg version="1.1" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" xmlns="http://www.w3.org/2000/svg" onload="${FLAMEGRAPH_ONLOAD}">
<defs><linearGradient id="background" y1="0" y2="1" x1="0" x2="0"><stop stop-color="#eeeeee" offset="5%"/><stop stop-color="#e0e0ff" offset="95%"/></linearGradient></defs>
<style type="text/css">
text { font-family: Verdana, sans-serif; font-size: ${FONT_SIZE}px; fill: rgb(0,0,0); }
#title { text-anchor: middle; font-size: ${FONT_SIZE + 5}px; }
#search, #reset, #matched { cursor: pointer; }
.frame:hover rect { stroke: black; stroke-width: 0.5; cursor: pointer; }
.hidden { display: none; }
</style>
<rect x="0" y="0" width="${WIDTH}" height="${height}" fill="url(#background)"/>
<text id="title" x="${WIDTH / 2}" y="${FONT_SIZE * 2}">${escapeXml(title)}</text>
<text id="details" x="${PAD_SIDE}" y="${height - FONT_SIZE / 2 - 4}"> </text>
<text id="reset" class="hidden" x="${PAD_SIDE}" y="${FONT_SIZE * 2}">Reset Zoom</text>
<text id="search" x="${WIDTH - PAD_SIDE - 100}" y="${FONT_SIZE * 2}">Search</text>
<text id="matched" x="${WIDTH - PAD_SIDE - 100}" y="${height - FONT_SIZE / 2 - 4}"> </text>
<g id="frames" data-total="${total}" data-usable="${usable}" data-side="${PAD_SIDE}">
${frames.join("\n")}
</g>
<script type="text/ecmascript"><![CDATA[${FLAMEGRAPH_SCRIPT}]]></script>
</svg>
`;
}
