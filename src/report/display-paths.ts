/**
 * A profile as the reports show it: every frame's `url` through
 * displayPath (frame-path.ts: `src/app.ts`, `shardheap/src/...`, `node:`
 * as is). Every renderer goes through here unless told `fullPaths`: pprof,
 * the .heapprofile and json render a shown copy (withDisplayPaths), and so
 * do the admin API's JSON answers the dashboard draws from; the tree,
 * collapsed stacks and the SVG, which need names only, name each shown
 * frame (frame-name.ts frameNamer). So a name in the tree, the SVG and the
 * dashboard's site rows is the same string (its search finds a row's frame
 * in the flamegraph).
 *
 * The raw profile is not touched: sites and frames are copied where a path
 * changes, shared where none does. Shown frames are kept per raw frame
 * object (a WeakMap, for the working directory in force), so the sites
 * that share a frame (heap-profile.ts) share its shown copy, frame-name.ts
 * names it once, and a server rendering the same profile every second
 * makes no new frames.
 */
import { displayPath, workingDirectory } from "../frame-path.js";
import type { AllocationSite, Frame, HeapProfile } from "../memory/heap-profile.js";

export interface PathOptions {
  /**
   * Frames' files as recorded (absolute `file:` URLs and paths, as the
   * heap keeps them) instead of shown short (frame-path.ts). Default false.
   */
  fullPaths?: boolean;
}

/** Shown frames by raw frame, for `shownBase`; started again when the base changes. */
let shownBase: string | null | undefined;
let shown = new WeakMap<Frame, Frame>();

/** `f` with its url shown relative to `base`; `f` itself when that changes nothing. */
export function displayFrame(f: Frame, base: string | null = workingDirectory()): Frame {
  if (base !== shownBase) {
    shownBase = base;
    shown = new WeakMap();
  }
  let s = shown.get(f);
  if (s === undefined) {
    const url = displayPath(f.url, base);
    s = url === f.url ? f : Object.freeze({ functionName: f.functionName, url, line: f.line, column: f.column });
    shown.set(f, s);
  }
  return s;
}

/** `frames` shown; the same array when no path in it changes. */
export function displayFrames(frames: Frame[], base: string | null = workingDirectory()): Frame[] {
  let out: Frame[] | undefined;
  for (let i = 0; i < frames.length; i++) {
    const f = displayFrame(frames[i]!, base);
    if (f !== frames[i] && out === undefined) out = frames.slice(0, i);
    out?.push(f);
  }
  return out ?? frames;
}

/**
 * `p` with every frame shown relative to `base` (the working directory
 * unless told; null: node_modules paths only). A diff stays a diff (its
 * sides and each site's nextSize are kept), labels and folded figures too.
 * Sites whose frames change nothing are the same objects.
 */
export function withDisplayPaths<P extends HeapProfile>(p: P, base: string | null = workingDirectory()): P {
  let changed = false;
  const sites = p.sites.map((s): AllocationSite => {
    const frames = displayFrames(s.frames, base);
    if (frames === s.frames) return s;
    changed = true;
    return { ...s, frames };
  });
  return changed ? { ...p, sites } : p;
}

/** `p` as a renderer shows it under `o`: shown paths, or as recorded with `fullPaths`. */
export function profileToShow<P extends HeapProfile>(p: P, o: PathOptions = {}): P {
  return o.fullPaths === true ? p : withDisplayPaths(p);
}
