/**
 * Collapsed stacks (Brendan Gregg's folded format): `root;...;leaf BYTES`,
 * one line per site with live bytes, readable by flamegraph.pl, inferno and
 * speedscope. Bytes are integers that add up exactly to the profile's
 * total, rounded (largest remainder), since sampled estimates are
 * fractional. `;` and line breaks are removed from names: they would split
 * a frame or a line; other control characters (a tab, an escape sequence,
 * U+2028) show as visible escapes (display-text.ts).
 *
 * A diff (diff.ts) prints signed integers: each line the site's change,
 * the lines adding up to next's total minus base's; unchanged sites are
 * left out.
 *
 * Frames' files are shown short (display-paths.ts), as recorded with
 * `fullPaths`.
 */
import type { Frame, HeapProfile } from "../memory/heap-profile.js";
import { isProfileDiff } from "./diff.js";
import type { PathOptions } from "./display-paths.js";
import { frameNamer } from "./frame-name.js";
import { escapeControls } from "../display-text.js";

export function cleanFrameName(name: string): string {
  return escapeControls(name.replace(/[;\r\n]/g, ""));
}

/** Round `values` to integers whose sum is the rounded sum (largest remainder). */
export function roundPreservingSum(values: readonly number[]): number[] {
  const floors = values.map(Math.floor);
  let missing = Math.round(values.reduce((a, b) => a + b, 0)) - floors.reduce((a, b) => a + b, 0);
  const order = values.map((v, i) => [v - floors[i]!, i] as const).sort((a, b) => b[0] - a[0]);
  for (const [, i] of order) {
    if (missing <= 0) break;
    floors[i]!++;
    missing--;
  }
  return floors;
}

export function toCollapsed(p: HeapProfile, o: PathOptions = {}): string {
  const nameFrame = frameNamer(o);
  const sites = isProfileDiff(p) ? p.sites.filter((s) => s.size !== 0) : p.sites.filter((s) => s.size > 0);
  const bytes = roundPreservingSum(sites.map((s) => s.size));
  const names = new Map<string, string>(); // nameFrame gives one string per frame: clean each once
  const clean = (f: Frame): string => {
    const name = nameFrame(f);
    let cleaned = names.get(name);
    if (cleaned === undefined) names.set(name, (cleaned = cleanFrameName(name)));
    return cleaned;
  };
  return sites
    .map((s, i) => ({ stack: s.frames.map(clean).reverse().join(";"), bytes: bytes[i]! }))
    .filter((line) => line.bytes !== 0)
    .map((line) => `${line.stack || "(no frames)"} ${line.bytes}\n`)
    .join("");
}
