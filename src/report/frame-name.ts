/**
 * How a frame is named in every report: `functionName (url:line:column)`,
 * as the README's trees show it; an anonymous function is named by its position
 * alone, as `(anonymous) (url:line:column)`. frameName takes the url the
 * frame holds; frameNamer, what the tree, collapsed stacks and the SVG
 * name frames with, shows it short first (display-paths.ts: `src/app.ts`,
 * `shardheap/src/x.ts`) unless asked for full paths. Why not absolute
 * paths: `file:///tmp/.../node_modules/shardheap/src/...` leaves no room
 * for the file and line in a flamegraph's box (docs/decisions.md).
 */
import { OTHER_SITES_NAME } from "../memory/profiler/site-table.js";
import { workingDirectory } from "../frame-path.js";
import { displayFrame, type PathOptions } from "./display-paths.js";
import type { Frame } from "../memory/heap-profile.js";

/**
 * Names by frame object: a profile's sites share frame objects (a region's
 * reader decodes each frame once, site-table.ts readSites), so a report of
 * 50,000 sites of 13 frames names a few hundred frames, not 650,000, and
 * every use of a name is the same string (hashed once as a Map key).
 * Frames are values nobody changes once made (readSites freezes its own).
 */
const names = new WeakMap<Frame, string>();

export function frameName(f: Frame): string {
  let known = names.get(f);
  if (known === undefined) names.set(f, (known = nameOf(f)));
  return known;
}

/**
 * How the renderers that need names only name a frame under `o`. It shows
 * each frame rather than a copy of the profile (profileToShow): on a
 * synthetic 50,000 sites of 13 frames (a loaded 2-core machine), copying
 * the sites and frame lists took a tree from 25-70 ms to 108-171 ms;
 * looking each shown frame up, to 52-116 ms against 32-63 ms.
 */
export function frameNamer(o: PathOptions = {}): (f: Frame) => string {
  if (o.fullPaths === true) return frameName;
  const base = workingDirectory();
  return (f) => frameName(displayFrame(f, base));
}

function nameOf(f: Frame): string {
  if (f.functionName === OTHER_SITES_NAME && f.url === "") return OTHER_SITES_NAME;
  const name = f.functionName || "(anonymous)";
  return f.url ? `${name} (${f.url}:${f.line}:${f.column})` : name;
}
