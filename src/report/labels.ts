/**
 * Grouping a profile by one of its labels (withHeapLabels): "who holds
 * the live heap" as one query. groupByLabel gives each value of the label
 * its figures (sites without the label form one group, NO_LABEL; those
 * recorded under the fold set, whose value is not known, one more,
 * OTHER_LABELS);
 * withLabelRoots gives every site one more, outermost frame, `NAME=VALUE`,
 * so the renderers that draw stacks (collapsed stacks, the flamegraph,
 * DevTools' .heapprofile) show the label's values as their roots; the
 * tree puts them at its first level itself (tree.ts `by`).
 */
import { OTHER_LABELS } from "../memory/profiler/heap-labels.js";
import type { AllocationSite, Frame, HeapProfile } from "../memory/heap-profile.js";

/** The value shown for sites without the label. */
export const NO_LABEL = "(none)";

/**
 * Site `s`'s value of label `name`: its own, OTHER_LABELS when its labels
 * are the fold set (a thread's remembered sets were at their bound: which
 * value it had is not known, not that it had none), else undefined.
 */
export function labelValue(s: Pick<AllocationSite, "labels">, name: string): string | undefined {
  const labels = s.labels;
  return labels === undefined ? undefined : (labels[name] ?? labels[OTHER_LABELS]);
}

export interface LabelGroup {
  /** The label's value; undefined for the sites without the label (shown as NO_LABEL). */
  value: string | undefined;
  count: number;
  size: number;
  allocCount: number;
  allocSize: number;
  /** Sites in the group. */
  sites: number;
}

/** The node or frame name of a label's value: `prefix=user`, `prefix=(none)`. */
export function labelNodeName(name: string, value: string | undefined): string {
  return `${name}=${value ?? NO_LABEL}`;
}

/** Each value of label `name` with its sites' figures added up, most live bytes first (ties by value). */
export function groupByLabel(p: HeapProfile, name: string): LabelGroup[] {
  const groups = new Map<string | undefined, LabelGroup>();
  for (const s of p.sites) {
    const value = labelValue(s, name);
    let g = groups.get(value);
    if (g === undefined) groups.set(value, (g = { value, count: 0, size: 0, allocCount: 0, allocSize: 0, sites: 0 }));
    g.count += s.count;
    g.size += s.size;
    g.allocCount += s.allocCount;
    g.allocSize += s.allocSize;
    g.sites++;
  }
  return [...groups.values()].sort((a, b) => b.size - a.size || (a.value ?? "").localeCompare(b.value ?? ""));
}

/** `p` with each site given an outermost frame naming its value of label `name`. */
export function withLabelRoots(p: HeapProfile, name: string): HeapProfile {
  return { ...p, sites: p.sites.map((s): AllocationSite => ({ ...s, frames: [...s.frames, labelFrame(name, labelValue(s, name))] })) };
}

/**
 * Only the sites whose label `name` is `value` (NO_LABEL: those without
 * the label), their totals (a diff's too: its total is its sites' sum).
 * What `label=NAME=VALUE` (the admin API) and `--label` show: the
 * flamegraph of one tenant or prefix, as pprof's -tagfocus. Without the
 * profile's `folded`: "(other sites)" holds no labels, so which of its
 * allocations had this value is not known.
 */
export function filterByLabel(p: HeapProfile, name: string, value: string): HeapProfile {
  const { folded: _unknown, ...rest } = p;
  const sites = p.sites.filter((s) => (labelValue(s, name) ?? NO_LABEL) === value);
  return { ...rest, sites, totalSize: sites.reduce((n, s) => n + s.size, 0), totalCount: sites.reduce((n, s) => n + s.count, 0) };
}

/** `NAME=VALUE` (the first "=" ends the name) as [name, value], or undefined. */
export function parseLabelFilter(text: string): [string, string] | undefined {
  const eq = text.indexOf("=");
  return eq <= 0 ? undefined : [text.slice(0, eq), text.slice(eq + 1)];
}

/** Every label name the profile's sites carry, sorted (a dashboard's choice of groupings). */
export function labelNames(p: HeapProfile): string[] {
  const names = new Set<string>();
  for (const s of p.sites) if (s.labels !== undefined) for (const k of Object.keys(s.labels)) names.add(k);
  return [...names].sort();
}

function labelFrame(name: string, value: string | undefined): Frame {
  return { functionName: labelNodeName(name, value), url: "", line: 0, column: 0 };
}
