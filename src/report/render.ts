/**
 * One table of report formats, shared by `shardheap report` and the admin
 * API: name -> what it renders and what type of file it is. A diff
 * (diff.ts) renders through the same table: each renderer prints it signed.
 * Every format shows frames' files short (display-paths.ts), json too (the
 * HeapProfile's shape, each `url` as the other formats show it: the
 * dashboard finds a json site's frame in the SVG by its name), unless
 * `fullPaths`.
 */
import { InvalidValueError } from "../errors.js";
import type { HeapProfile } from "../memory/heap-profile.js";
import { toCollapsed } from "./collapsed.js";
import { isProfileDiff, siteChanged } from "./diff.js";
import { profileToShow, type PathOptions } from "./display-paths.js";
import { toFlamegraphSvg } from "./flamegraph.js";
import { toHeapprofile } from "./heapprofile.js";
import { toPprof, type PprofOptions } from "./pprof.js";
import { filterByLabel, groupByLabel, withLabelRoots } from "./labels.js";
import { formatTree } from "./tree.js";

export const REPORT_FORMATS = ["tree", "collapsed", "svg", "pprof", "heapprofile", "json"] as const;
export type ReportFormat = (typeof REPORT_FORMATS)[number];
/** `shardheap diff`'s formats: DevTools' .heapprofile has no negative sizes (a diff's heapprofile holds its growth only). */
export const DIFF_FORMATS = ["tree", "collapsed", "svg", "pprof", "json"] as const satisfies readonly ReportFormat[];

export interface RenderOptions extends PathOptions {
  inverted?: boolean;
  minSize?: number;
  /**
   * Group by this label: the tree's first level, the outermost frame of
   * collapsed stacks, the flamegraph and .heapprofile, and `groups` in
   * json (label-by-label figures); pprof carries every label as a tag
   * already (go tool pprof -tags, -tagfocus).
   */
  by?: string;
  /** Only the sites whose label is this value ([name, value]; NO_LABEL: without it), as pprof's -tagfocus. */
  label?: readonly [string, string];
  title?: string;
  pprof?: PprofOptions;
}

export interface Rendered {
  body: string | Uint8Array;
  contentType: string;
  /** Binary output (pprof): not for a terminal. */
  binary: boolean;
}

/** A format name as given on the command line or in a query; InvalidValueError naming `what` otherwise. */
export function parseReportFormat(s: string, what: string, allowed: readonly ReportFormat[] = REPORT_FORMATS): ReportFormat {
  if ((allowed as readonly string[]).includes(s)) return s as ReportFormat;
  throw new InvalidValueError(what, `${what} must be one of ${allowed.join(", ")}, got ${JSON.stringify(s)}`);
}

export function renderProfile(whole: HeapProfile, format: ReportFormat, o: RenderOptions = {}): Rendered {
  const p = o.label === undefined ? whole : filterByLabel(whole, o.label[0], o.label[1]);
  const by = o.by;
  const paths: PathOptions = { fullPaths: o.fullPaths === true };
  // Stack renderers draw the label's values as roots; the diff flag (base, next) goes along.
  const rooted = (): HeapProfile => (by === undefined ? p : withLabelRoots(p, by));
  switch (format) {
    case "tree":
      return { body: formatTree(p, { inverted: o.inverted ?? false, minSize: o.minSize ?? 0, ...(by === undefined ? {} : { by }), ...paths }), contentType: "text/plain; charset=utf-8", binary: false };
    case "collapsed":
      return { body: toCollapsed(rooted(), paths), contentType: "text/plain; charset=utf-8", binary: false };
    case "svg":
      return { body: toFlamegraphSvg(rooted(), { ...(o.title === undefined ? {} : { title: o.title }), ...paths }), contentType: "image/svg+xml", binary: false };
    case "pprof":
      return { body: toPprof(p, { ...o.pprof, ...paths }), contentType: "application/octet-stream", binary: true };
    case "heapprofile":
      return { body: JSON.stringify(toHeapprofile(rooted(), paths)), contentType: "application/json", binary: false };
    case "json": {
      const changed = isProfileDiff(p) ? { ...p, sites: p.sites.filter(siteChanged) } : p;
      const shown = profileToShow(changed, paths);
      return { body: JSON.stringify(by === undefined ? shown : { ...shown, by, groups: groupByLabel(p, by) }, null, 2) + "\n", contentType: "application/json", binary: false };
    }
  }
}
