/**
 * Chrome DevTools' `.heapprofile` (HeapProfiler.SamplingHeapProfile, as V8's
 * sampling heap profiler writes it): a call tree from "(root)" down,
 * root first, with each site's live bytes as the self size of its leaf, and
 * one sample per site. Positions are 0-based, as V8 writes them (our frames
 * are 1-based). Node ids are unique; self sizes are integers that add up to
 * the profile's rounded total. Loadable in the Memory panel and in VS Code.
 * A call frame's `url` is the frame's file shown short (display-paths.ts),
 * as recorded with `fullPaths`.
 */
import type { Protocol } from "devtools-protocol";
import { frameKey, type HeapProfile, type Frame } from "../memory/heap-profile.js";
import { roundPreservingSum } from "./collapsed.js";
import { profileToShow, type PathOptions } from "./display-paths.js";

/** DevTools' SamplingHeapProfile, from the devtools-protocol package. */
export type Heapprofile = Protocol.HeapProfiler.SamplingHeapProfile;
type HeapprofileNode = Protocol.HeapProfiler.SamplingHeapProfileNode;
type HeapprofileSample = Protocol.HeapProfiler.SamplingHeapProfileSample;

export function toHeapprofile(profile: HeapProfile, o: PathOptions = {}): Heapprofile {
  const p = profileToShow(profile, o);
  let nextId = 1;
  const scriptIds = new Map<string, string>();
  const nodeFor = (f: Frame | undefined): HeapprofileNode => {
    const url = f?.url ?? "";
    if (!scriptIds.has(url)) scriptIds.set(url, String(scriptIds.size));
    return {
      callFrame: {
        functionName: f ? f.functionName : "(root)",
        scriptId: f ? scriptIds.get(url)! : "0",
        url,
        lineNumber: f ? Math.max(0, f.line - 1) : -1,
        columnNumber: f ? Math.max(0, f.column - 1) : -1,
      },
      selfSize: 0,
      id: nextId++,
      children: [],
    };
  };
  const head = nodeFor(undefined);
  const index = new Map<HeapprofileNode, Map<string, HeapprofileNode>>();
  const sites = p.sites.filter((s) => s.size > 0);
  const bytes = roundPreservingSum(sites.map((s) => s.size));
  const samples: HeapprofileSample[] = [];
  sites.forEach((site, i) => {
    let n = head;
    for (const f of [...site.frames].reverse()) {
      const key = frameKey(f);
      let children = index.get(n);
      if (!children) index.set(n, (children = new Map()));
      let child = children.get(key);
      if (!child) {
        child = nodeFor(f);
        children.set(key, child);
        n.children.push(child);
      }
      n = child;
    }
    n.selfSize += bytes[i]!;
    samples.push({ size: bytes[i]!, nodeId: n.id, ordinal: i + 1 });
  });
  return { head, samples };
}
