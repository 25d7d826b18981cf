/**
 * A thread's JavaScript heap as a HeapProfile: V8's sampling heap profile
 * (HeapProfiler.getSamplingProfile over node:inspector, js-heap-profiler.ts)
 * turned into the sites every report, diff and viewer reads, so a shard's
 * JS heap renders as its shared-heap region does (tree, collapsed, SVG,
 * pprof, .heapprofile, json; source-mapped and shown short at report time).
 *
 * What V8 gives: a call tree from "(root)" whose nodes hold the sampled
 * objects allocated there and still live (V8 drops a sample when its
 * object is collected, so the profile is live memory, like the shared
 * heap's), and the samples themselves, each an object's size and its node.
 * One site per node with samples: its frames the path from the node up to
 * the root, leaf first, lines and columns made 1-based (V8's are 0-based).
 *
 * Estimates: a sample of an object of `size` bytes at a mean interval of
 * `rate` bytes stands for 1 / (1 - exp(-size / rate)) objects, the weight
 * V8 itself scales by and the shared heap's sampler uses (Go/pprof's
 * unbiased weight), so count and size are fractional estimates whose
 * scale matches V8's own selfSize. V8 keeps only live samples: a JS heap
 * profile's cumulative figures (allocCount, allocSize) are its live ones.
 *
 * Frames are kept as the shared heap keeps them (stack-capture.ts): the
 * runtime's own frames (shardheap's, piscina's) and the Node frames that
 * lead rootward into them are left out, so a task's allocations root at
 * the task; a stack that is the runtime's alone (its own messaging, the
 * inspector's replies) keeps every frame, as it is memory the shard holds.
 */
import type { Protocol } from "devtools-protocol";
import { frameKey, sitesByFrames, type AllocationSite, type HeapProfile } from "../memory/heap-profile.js";
import { isOwnFrame, type Frame } from "../memory/stack-capture.js";

export type SamplingHeapProfile = Protocol.HeapProfiler.SamplingHeapProfile;
type ProfileNode = Protocol.HeapProfiler.SamplingHeapProfileNode;

/** V8's default mean sampling interval (HeapProfiler.startSampling without one): 32 KiB. */
export const DEFAULT_JS_HEAP_SAMPLE_RATE = 32 * 1024;

/** A profile with nothing in it: the thread's JS heap profiler never ran. */
export function emptyJsHeapProfile(shard: number, sampleRate = 0): HeapProfile {
  return { shard, sampleRate, sites: [], totalSize: 0, totalCount: 0 };
}

/** How many objects one sample of `size` bytes stands for at a mean interval of `rate` bytes. */
export function sampleWeight(size: number, rate: number): number {
  return rate <= 1 ? 1 : 1 / -Math.expm1(-size / rate);
}

/**
 * Which of a stack's frames (leaf first) a site keeps. Rootward, a task's
 * stack ends in the runtime that ran it (piscina, shardheap's messaging)
 * and the Node event-loop frames below that: that tail goes, from its
 * leaf-most runtime frame on. Inside, the rules of the shared heap's
 * stacks: the runtime's own frames go, and so do Node frames ("node:...")
 * whose run leads rootward into them, and node:internal/async_hooks
 * (Node's callback trampoline once async hooks are on). A stack that is
 * the runtime's alone keeps every frame.
 */
function keptFrames(frames: readonly Frame[]): Frame[] {
  const own = (f: Frame): boolean => isOwnFrame(f.url);
  const node = (f: Frame): boolean => f.url.startsWith("node:");
  let end = frames.length;
  let tailIsRuntime = false;
  while (end > 0 && (own(frames[end - 1]!) || node(frames[end - 1]!))) {
    end--;
    if (own(frames[end]!)) tailIsRuntime = true;
  }
  const body = frames.slice(0, tailIsRuntime ? end : frames.length);
  const kept = body.filter((f, k) => {
    if (own(f)) return false;
    if (!node(f)) return true;
    if (f.url === "node:internal/async_hooks") return false;
    const next = body.slice(k + 1).find((g) => !node(g));
    return next === undefined || !own(next);
  });
  return kept.length > 0 ? kept : [...frames];
}

/**
 * V8's sampling heap profile of `shard`'s JS heap, taken at a mean
 * interval of `rate` bytes, as a HeapProfile (sites largest first).
 */
export function jsHeapProfileOf(v8: SamplingHeapProfile, shard: number, rate: number): HeapProfile {
  // Per node: its samples' weighted count and bytes.
  const figures = new Map<number, { count: number; size: number }>();
  for (const s of v8.samples) {
    const w = sampleWeight(s.size, rate);
    const f = figures.get(s.nodeId);
    if (f) {
      f.count += w;
      f.size += s.size * w;
    } else figures.set(s.nodeId, { count: w, size: s.size * w });
  }
  // One site a node; merged below by the frames they keep (two nodes may differ only in runtime frames left out).
  const sites: AllocationSite[] = [];
  const frameObjects = new Map<string, Frame>();
  const frameOf = (node: ProfileNode): Frame => {
    const c = node.callFrame;
    const f: Frame = { functionName: c.functionName, url: c.url, line: c.lineNumber + 1, column: c.columnNumber + 1 };
    const key = frameKey(f);
    let shared = frameObjects.get(key);
    if (shared === undefined) frameObjects.set(key, (shared = f));
    return shared;
  };
  // Depth first, the path from the root's child down held in `path` (root first); an explicit stack: trees run deep.
  const path: Frame[] = [];
  const stack: Array<{ node: ProfileNode; depth: number }> = v8.head.children.map((node) => ({ node, depth: 0 }));
  stack.reverse();
  while (stack.length > 0) {
    const { node, depth } = stack.pop()!;
    path.length = depth;
    path.push(frameOf(node));
    const f = figures.get(node.id);
    if (f !== undefined) sites.push({ frames: keptFrames([...path].reverse()), count: f.count, size: f.size, allocCount: f.count, allocSize: f.size });
    for (let i = node.children.length - 1; i >= 0; i--) stack.push({ node: node.children[i]!, depth: depth + 1 });
  }
  const list = [...sitesByFrames(sites).values()].sort((a, b) => b.size - a.size);
  return {
    shard,
    sampleRate: rate,
    sites: list,
    totalSize: list.reduce((n, s) => n + s.size, 0),
    totalCount: list.reduce((n, s) => n + s.count, 0),
  };
}
