/**
 * Allocation-site capture for the heap profiler: the JS call stack of an
 * allocation as V8 structured frames (CallSite objects), leaf first,
 * starting at the code that called shardheap. Only raw positions are read
 * here (function name, file, line, column); mapping them to TypeScript
 * sources through source maps happens at report time, off the allocation
 * path. A capture costs a few microseconds, which is why profiling samples.
 */
import { createRequire } from "node:module";
import { dirname } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import type { Frame } from "../heap-profile.js";

/**
 * Where shardheap's own runtime modules live (dist/ or src/: memory, smp,
 * runtime): their frames are dropped. Other parts of the package, like the
 * stress workload, are user code as far as a profile is concerned.
 */
const OWN_URLS = [
  ...["../../memory/", "../../smp/", "../../runtime/"].map((dir) => new URL(dir, import.meta.url).href),
  // piscina runs every shard task: its frames would root every stack of a shard. Its folder (dist/,
  // where both its entries are) found through require: import.meta.resolve needs Node 20.6.
  pathToFileURL(dirname(createRequire(import.meta.url).resolve("piscina")) + "/").href,
];
const OWN_PATHS = OWN_URLS.map((url) => fileURLToPath(url));

/** Script name -> whether it is one of shardheap's (a Map hit is cheaper than two prefix tests). */
const ownScripts = new Map<string, boolean>();

export function isOwnFrame(file: string): boolean {
  let own = ownScripts.get(file);
  if (own === undefined) {
    own = OWN_URLS.some((u) => file.startsWith(u)) || OWN_PATHS.some((p) => file.startsWith(p));
    if (ownScripts.size < 10_000) ownScripts.set(file, own);
  }
  return own;
}

/**
 * Whether frame `k` of `sites`, a Node frame (its `file` begins "node:"),
 * is one that shardheap's machinery put there, which a site leaves out as
 * it leaves out shardheap's own frames:
 * - a run of Node frames that leads (rootward) into shardheap's own: what
 *   shardheap called on its way to the user's code. withHeapLabels runs its
 *   callback through AsyncLocalStorage.run, so every labeled stack read
 *   `callback <- run (node:async_hooks) <- caller` (the dashboard showed
 *   `(anonymous) <- run (node:async_hooks) +3 frames`);
 * - node:internal/async_hooks (callbackTrampoline): once an
 *   AsyncLocalStorage has enabled async hooks, Node enters every callback
 *   through it, so a shard's stack grew a frame at its first withHeapLabels
 *   and the same allocation counted as two sites, before and after.
 * The user's own Node frames stay (an EventEmitter's emit, their own
 * AsyncLocalStorage's run): those lead to the user's frames, not to ours.
 */
export function isRuntimeFrame(sites: readonly NodeJS.CallSite[], k: number, file: string): boolean {
  if (file === "node:internal/async_hooks") return true;
  for (let j = k + 1; j < sites.length; j++) {
    const next = sites[j]!.getFileName() ?? "";
    if (!next.startsWith("node:")) return isOwnFrame(next);
  }
  return false;
}

const asCallSites = (_error: Error, sites: NodeJS.CallSite[]): NodeJS.CallSite[] => sites;

/** A frame's name and position, read from its CallSite (the costly part of a capture). */
export function frameOf(site: NodeJS.CallSite): Frame {
  return {
    functionName: site.getFunctionName() ?? site.getMethodName() ?? "",
    url: site.getFileName() ?? site.getEvalOrigin() ?? "",
    line: site.getLineNumber() ?? 0,
    column: site.getColumnNumber() ?? 0,
  };
}

/** A frame's character position in its script: with the file name, a cheap identity for caching. */
export function positionOf(site: NodeJS.CallSite): number {
  return (site as unknown as { getPosition(): number }).getPosition();
}

/**
 * The stack below `entry` (the shardheap function the user called; V8
 * leaves it and everything it called out, so the capture costs only the
 * user's frames) as V8 CallSites, leaf first, at most `limit` of them,
 * unfiltered: the caller drops shardheap's own frames with isOwnFrame (and
 * the Node frames they bring, isRuntimeFrame) while it reads each frame's
 * file anyway (one getFileName per frame, not two).
 */
export function captureRawCallSites(limit: number, entry: (...args: never[]) => unknown): NodeJS.CallSite[] {
  const previousPrepare = Error.prepareStackTrace;
  const previousLimit = Error.stackTraceLimit;
  const holder: { stack?: unknown } = {};
  let sites: NodeJS.CallSite[];
  try {
    Error.prepareStackTrace = asCallSites;
    Error.stackTraceLimit = limit;
    Error.captureStackTrace(holder, entry);
    // V8 formats `stack` lazily, with the prepareStackTrace in force when it
    // is first read: read it before putting the previous one back.
    sites = holder.stack as NodeJS.CallSite[];
  } finally {
    Error.prepareStackTrace = previousPrepare;
    Error.stackTraceLimit = previousLimit;
  }
  return sites;
}
