/**
 * A site as the lists show it: by its leaf and as many callers as it takes
 * to tell it from the other sites listed beside it (two stacks through one
 * `allocate` read differently), its labels when it has them, opening to
 * the whole stack (also its tooltip). Labels and frames as text, via shown().
 */
import type { Frame, Labels } from "./api.js";
import { el, frameName, shortFrame } from "./lib.js";
import { shown } from "./text.js";

export interface ListedSite {
  frames: Frame[];
  labels?: Labels;
}

function labelsOf(site: ListedSite): string[] {
  const labels = site.labels || {};
  return Object.keys(labels)
    .sort()
    .map((k) => shown(k + "=" + labels[k]));
}
function samePrefix(a: ListedSite, b: ListedSite): number {
  let n = 0;
  while (n < a.frames.length && n < b.frames.length && frameName(a.frames[n]!) === frameName(b.frames[n]!)) n++;
  return n;
}
/**
 * Per site, how many frames (leaf first) its short form shows: the leaf
 * and its caller, or more where another site of the list shares them
 * (and its labels: labels tell sites apart too), up to the frame where
 * the stacks part.
 */
export function distinguishingDepths(sites: readonly ListedSite[]): number[] {
  return sites.map((s, i) => {
    let depth = 2;
    const labels = labelsOf(s).join(",");
    sites.forEach((o, j) => {
      if (i !== j && labelsOf(o).join(",") === labels) depth = Math.max(depth, samePrefix(s, o) + 1);
    });
    return Math.min(depth, s.frames.length);
  });
}
/** A site's cell content: its short form (leaf, callers as far as depth, labels) opening to every frame; the tooltip has them all too. */
export function siteStack(site: ListedSite, depth: number): HTMLDetailsElement {
  const details = el("details", { class: "stack" });
  const summary = el("summary");
  const names = site.frames.map(shortFrame);
  const short = depth > 3 ? [names[0], "\u2026", names[depth - 2], names[depth - 1]] : names.slice(0, Math.max(1, depth));
  summary.appendChild(el("span", { class: "name" }, site.frames.length ? short.join(" \u2190 ") : "(no frames)"));
  const hidden = site.frames.length - depth;
  if (hidden > 0) summary.appendChild(el("span", { class: "more" }, " +" + hidden + (hidden === 1 ? " frame" : " frames")));
  const labels = labelsOf(site);
  if (labels.length) {
    const chips = el("span", { class: "labels" });
    labels.forEach((l) => chips.appendChild(el("span", null, l)));
    summary.appendChild(chips);
  }
  details.appendChild(summary);
  const stack = el("ol", { class: "frames" });
  site.frames.forEach((f) => stack.appendChild(el("li", null, frameName(f))));
  details.appendChild(stack);
  details.setAttribute("title", site.frames.map(frameName).concat(labels).join("\n"));
  return details;
}
