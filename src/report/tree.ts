/**
 * The seed's text tree (`scylla heapprof`): a root `All (SIZE, #COUNT)`,
 * children by size descending, ` |-- ` / ` \-- ` branches, ` |   ` /
 * `     ` stems, and single-child chains whose totals equal their parent's
 * folded onto the lines under the parent's label. Callee-first by default
 * (the allocating function at the first level), caller-first with
 * `inverted`; `minSize` drops branches smaller than it. Sizes and counts
 * print as integers, rounded when the profile is sampled.
 *
 * A diff (diff.ts) prints the same tree of signed differences: each node
 * `NAME (+1.5M +1572864, #+12)`, a short size with its sign beside the
 * exact integer; sites that did not change are left out, children go from
 * most grown to most shrunk, and `minSize` drops branches whose change is
 * smaller in either direction.
 *
 * `by` groups by a label (withHeapLabels): one first-level node per value
 * of the label, the sites' stacks under them.
 */
import type { HeapProfile } from "../memory/heap-profile.js";
import { isProfileDiff } from "./diff.js";
import { frameName } from "./frame-name.js";
import { labelNodeName } from "./labels.js";
import { formatSize } from "../units.js";

export interface TreeOptions {
  /** Caller-first (roots at the first level) instead of callee-first. */
  inverted?: boolean;
  /** Drop branches whose live bytes are below this. */
  minSize?: number;
  /** Group by this label: its values (`prefix=user`, `prefix=(none)`) at the first level, each site's stack under its value. */
  by?: string;
}

interface Node {
  name: string;
  size: number;
  count: number;
  /** Names of the single children folded into this node, in order. */
  tail: string[];
  children: Map<string, Node>;
}

const node = (name: string): Node => ({ name, size: 0, count: 0, tail: [], children: new Map() });

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
  const style = isProfileDiff(p) ? DIFFERENCE : LIVE;
  const root = node("All");
  for (const site of p.sites) {
    if (!style.keeps(site.size)) continue;
    const names = site.frames.map(frameName);
    if (o.inverted) names.reverse();
    if (o.by !== undefined) names.unshift(labelNodeName(o.by, site.labels?.[o.by]));
    root.size += site.size;
    root.count += site.count;
    let n = root;
    for (const name of names) {
      let child = n.children.get(name);
      if (!child) n.children.set(name, (child = node(name)));
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
  return out.join("");
}

/** Fold a single child into its parent while their (rounded) totals are equal. */
function collapseSimilar(n: Node): void {
  while (n.children.size === 1) {
    const child = n.children.values().next().value as Node;
    if (Math.round(child.size) !== Math.round(n.size) || Math.round(child.count) !== Math.round(n.count)) break;
    n.tail.push(child.name, ...child.tail);
    n.children = child.children;
  }
  for (const child of n.children.values()) collapseSimilar(child);
}

function printNode(n: Node, isLast: boolean[], min: number, style: TreeStyle, out: string[]): void {
  const prefix = isLast.slice(0, -1).map((last) => STEMS[last ? 1 : 0]).join("");
  const label = `${n.name} (${style.label(Math.round(n.size), Math.round(n.count))})`;
  out.push(isLast.length > 0 ? `${prefix}${BRANCHES[isLast[isLast.length - 1]! ? 1 : 0]}${label}\n` : `${label}\n`);
  const stem = isLast.map((last) => STEMS[last ? 1 : 0]).join("");
  for (const line of n.tail) out.push(`${stem}${line}\n`);
  // Largest first; ties keep the order the sites came in (a stable sort).
  const children = [...n.children.values()].filter((c) => style.shown(Math.round(c.size), min)).sort((a, b) => b.size - a.size);
  children.forEach((child, i) => printNode(child, [...isLast, i === children.length - 1], min, style, out));
  const last = isLast.length === 0 || isLast[isLast.length - 1]!;
  if (!last) out.push(`${prefix}${STEMS[0]}\n`);
}
