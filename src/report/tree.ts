/**
 * The seed's text tree (`scylla heapprof`): a root `All (SIZE, #COUNT)`,
 * children by size descending, ` |-- ` / ` \-- ` branches, ` |   ` /
 * `     ` stems, and single-child chains whose totals equal their parent's
 * folded onto the lines under the parent's label. Callee-first by default
 * (the allocating function at the first level), caller-first with
 * `inverted`; `minSize` drops branches smaller than it. Sizes and counts
 * print as integers, rounded when the profile is sampled.
 *
 * When the profiler's tables filled, the tree ends with a blank line and
 * folded-note.ts's sentence: how much went to "(other sites)" and how to
 * raise the capacity.
 *
 * A diff (diff.ts) prints the same tree of signed differences: each node
 * `NAME (+1.5M +1572864, #+12)`, a short size with its sign beside the
 * exact integer; sites that did not change are left out, children go from
 * most grown to most shrunk, and `minSize` drops branches whose change is
 * smaller in either direction.
 *
 * `by` groups by a label (withHeapLabels): one first-level node per value
 * of the label, the sites' stacks under them.
 *
 * Frames' files are shown short (display-paths.ts: `src/app.ts:12:5`,
 * `shardheap/src/...`), as recorded with `fullPaths`. A name's control
 * characters (a label value's line break, a terminal's escape sequence)
 * print as visible escapes (display-text.ts): a value can neither forge a
 * line of the tree nor drive the terminal that reads it.
 */
import type { HeapProfile } from "../memory/heap-profile.js";
import { isProfileDiff } from "./diff.js";
import { foldedNote } from "./folded-note.js";
import type { PathOptions } from "./display-paths.js";
import { frameNamer } from "./frame-name.js";
import { labelNodeName, labelValue } from "./labels.js";
import { escapeControls } from "../display-text.js";
import { formatSize } from "../units.js";

export interface TreeOptions extends PathOptions {
  /** Caller-first (roots at the first level) instead of callee-first. */
  inverted?: boolean;
  /** Drop branches whose live bytes are below this. */
  minSize?: number;
  /** Group by this label: its values (`prefix=user`, `prefix=(none)`) at the first level, each site's stack under its value. */
  by?: string;
}

/**
 * A node of the call tree. Children sit in an array searched by name, and
 * get a Map only past INDEXED_CHILDREN: most nodes have one child (a call
 * chain) or a few. A Map and a tail array for every node made a tree of
 * 50,000 sites (266,000 nodes) spend most of its 0.5 s collecting garbage.
 */
interface Node {
  name: string;
  size: number;
  count: number;
  /** Names of the single children folded into this node, in order (undefined: none). */
  tail: string[] | undefined;
  children: Node[];
  /** Children by name, once there are more than INDEXED_CHILDREN. */
  index: Map<string, Node> | undefined;
}

const INDEXED_CHILDREN = 8;

const node = (name: string): Node => ({ name, size: 0, count: 0, tail: undefined, children: [], index: undefined });

/** `n`'s child named `name`, made if new. */
function childOf(n: Node, name: string): Node {
  let child = n.index?.get(name);
  if (child === undefined && n.index === undefined) {
    for (const c of n.children) {
      if (c.name === name) return c;
    }
  }
  if (child === undefined) {
    child = node(name);
    n.children.push(child);
    if (n.index) n.index.set(name, child);
    else if (n.children.length > INDEXED_CHILDREN) n.index = new Map(n.children.map((c) => [c.name, c]));
  }
  return child;
}

const STEMS = [" |   ", "     "] as const; // [not last, last]
const BRANCHES = [" |-- ", " \\-- "] as const;

/** How one kind of profile prints: which sites enter the tree and how a node's figures read. */
interface TreeStyle {
  keeps(size: number): boolean;
  /** Whether a branch of this (rounded) size stays under `minSize`. */
  shown(size: number, min: number): boolean;
  label(size: number, count: number): string;
}

const LIVE: TreeStyle = {
  keeps: (size) => Math.round(size) > 0, // no live bytes (or less than one, printed as 0): history only, not in the tree
  shown: (size, min) => size >= min,
  label: (size, count) => `${size}, #${count}`,
};

const signed = (n: number): string => (n > 0 ? `+${n}` : String(n));
const signedSize = (n: number): string => (n < 0 ? `-${formatSize(-n)}` : `+${formatSize(n)}`);

const DIFFERENCE: TreeStyle = {
  // As LIVE: a change that prints as 0 bytes is not one (a sampled site's
  // figures after an allocation and its free are x + w - w, off by ~1e-12).
  keeps: (size) => Math.round(size) !== 0,
  shown: (size, min) => Math.abs(size) >= min,
  label: (size, count) => `${signedSize(size)} ${signed(size)}, #${signed(count)}`,
};

export function formatTree(p: HeapProfile, o: TreeOptions = {}): string {
  const nameFrame = frameNamer(o);
  const style = isProfileDiff(p) ? DIFFERENCE : LIVE;
  const root = node("All");
  for (const site of p.sites) {
    if (!style.keeps(site.size)) continue;
    const names = site.frames.map(nameFrame);
    if (o.inverted) names.reverse();
    if (o.by !== undefined) names.unshift(labelNodeName(o.by, labelValue(site, o.by)));
    root.size += site.size;
    root.count += site.count;
    let n = root;
    for (const name of names) {
      const child = childOf(n, name);
      child.size += site.size;
      child.count += site.count;
      n = child;
    }
  }
  collapseSimilar(root);
  const min = o.minSize ?? 0;
  const out: string[] = [];
  // A diff's root always prints: growth and shrinkage can cancel out in it.
  if (style === DIFFERENCE || style.shown(Math.round(root.size), min)) printNode(root, [], min, style, out);
  const note = style === LIVE ? foldedNote(p) : undefined;
  if (note !== undefined) out.push(`\n${note}\n`);
  return out.join("");
}

/** Fold a single child into its parent while their (rounded) totals are equal. */
function collapseSimilar(n: Node): void {
  while (n.children.length === 1) {
    const child = n.children[0]!;
    if (Math.round(child.size) !== Math.round(n.size) || Math.round(child.count) !== Math.round(n.count)) break;
    (n.tail ??= []).push(child.name, ...(child.tail ?? []));
    n.children = child.children;
    n.index = child.index;
  }
  for (const child of n.children) collapseSimilar(child);
}

function printNode(n: Node, isLast: boolean[], min: number, style: TreeStyle, out: string[]): void {
  const prefix = isLast.slice(0, -1).map((last) => STEMS[last ? 1 : 0]).join("");
  const label = `${escapeControls(n.name)} (${style.label(Math.round(n.size), Math.round(n.count))})`;
  out.push(isLast.length > 0 ? `${prefix}${BRANCHES[isLast[isLast.length - 1]! ? 1 : 0]}${label}\n` : `${label}\n`);
  const stem = isLast.map((last) => STEMS[last ? 1 : 0]).join("");
  for (const line of n.tail ?? []) out.push(`${stem}${escapeControls(line)}\n`);
  // Largest first; ties keep the order the sites came in (a stable sort).
  const children = n.children.filter((c) => style.shown(Math.round(c.size), min)).sort((a, b) => b.size - a.size);
  children.forEach((child, i) => printNode(child, [...isLast, i === children.length - 1], min, style, out));
  const last = isLast.length === 0 || isLast[isLast.length - 1]!;
  if (!last) out.push(`${prefix}${STEMS[0]}\n`);
}
