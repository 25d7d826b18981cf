/**
 * The seed's text tree (`scylla heapprof`): a root `All (SIZE, #COUNT)`,
 * children by size descending, ` |-- ` / ` \-- ` branches, ` |   ` /
 * `     ` stems, and single-child chains whose totals equal their parent's
 * folded onto the lines under the parent's label. Callee-first by default
 * (the allocating function at the first level), caller-first with
 * `inverted`; `minSize` drops branches smaller than it. Sizes and counts
 * print as integers, rounded when the profile is sampled.
 */
import type { HeapProfile } from "../memory/heap-profile.js";
import { frameName } from "./frame-name.js";

export interface TreeOptions {
  /** Caller-first (roots at the first level) instead of callee-first. */
  inverted?: boolean;
  /** Drop branches whose live bytes are below this. */
  minSize?: number;
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

export function formatTree(p: HeapProfile, o: TreeOptions = {}): string {
  const root = node("All");
  for (const site of p.sites) {
    if (site.size <= 0) continue; // no live bytes: history only, not in the tree
    const names = site.frames.map(frameName);
    if (o.inverted) names.reverse();
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
  if (Math.round(root.size) >= min) printNode(root, [], min, out);
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

function printNode(n: Node, isLast: boolean[], min: number, out: string[]): void {
  const prefix = isLast.slice(0, -1).map((last) => STEMS[last ? 1 : 0]).join("");
  const label = `${n.name} (${Math.round(n.size)}, #${Math.round(n.count)})`;
  out.push(isLast.length > 0 ? `${prefix}${BRANCHES[isLast[isLast.length - 1]! ? 1 : 0]}${label}\n` : `${label}\n`);
  const stem = isLast.map((last) => STEMS[last ? 1 : 0]).join("");
  for (const line of n.tail) out.push(`${stem}${line}\n`);
  // Largest first; ties keep the order the sites came in (a stable sort).
  const children = [...n.children.values()].filter((c) => Math.round(c.size) >= min).sort((a, b) => b.size - a.size);
  children.forEach((child, i) => printNode(child, [...isLast, i === children.length - 1], min, out));
  const last = isLast.length === 0 || isLast[isLast.length - 1]!;
  if (!last) out.push(`${prefix}${STEMS[0]}\n`);
}
