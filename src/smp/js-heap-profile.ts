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
 * heap's), and the samples themselves, each its (scaled) bytes and its node.
 * One site per node with samples: its frames the path from the node up to
 * the root, leaf first, lines and columns made 1-based (V8's are 0-based).
 *
 * Estimates: a sampled object of s bytes at a mean interval of `rate`
 * bytes stands for round(1 / (1 - exp(-s / rate))) objects (V8 scales by
 * the weight the shared heap's sampler uses, Go/pprof's), and V8's
 * inspector gives each sample already scaled, s times that count: a site's
 * size is the sum of its samples' (V8's own selfSize), its count a rough
 * estimate of the objects they stand for (sampleCount says why rough). V8
 * keeps only live samples: a JS heap profile's cumulative figures
 * (allocCount, allocSize) are its live ones.
 *
 * Frames are shown as the shared heap's are (stack-capture.ts): a task's
 * stack ends rootward in the runtime that ran it (piscina, shardheap's
 * messaging, the Node event loop below them), which is left out, so the
 * task is its root; inside a stack, the runtime's own frames go as they
 * do from a shared-heap site's (keptFrames). A stack that is the
 * runtime's alone (its own messaging, the inspector's replies) keeps every
 * frame: that memory is the shard's too.
 */
import type { Protocol } from "devtools-protocol";
import { frameKey, sitesByFrames, type AllocationSite, type HeapProfile, type Frame } from "../memory/heap-profile.js";
import { isOwnFrame } from "../memory/profiler/stack-capture.js";

export type SamplingHeapProfile = Protocol.HeapProfiler.SamplingHeapProfile;
type ProfileNode = Protocol.HeapProfiler.SamplingHeapProfileNode;

/**
 * The JS heap profiler's interval when none is given (true, a bare
 * --jsheapprof): 512 KiB, Go's MemProfileRate. Not V8's own 32 KiB (what
 * DevTools starts with): V8 walks the stack at every sample, and
 * `shardheap memcached --smp 2` under memcaslap -T 2 -c 16 paid 4% to 15%
 * more CPU per request at 32 KiB (three runs of the JS heap bench, medians
 * of 4 to 8 rounds, on a 2-core machine at load average 8 to 20), 3.4% at
 * 128 KiB (one run), 512 KiB 0.99x off's (6 rounds): the profiler may cost
 * 3%. On a loop that only allocates small objects, 32 KiB took 1.13-1.14x
 * the CPU and 512 KiB 0.997-1.006x (25 interleaved rounds, two runs).
 */
export const DEFAULT_JS_HEAP_SAMPLE_RATE = 512 * 1024;

/** A profile with nothing in it: the thread's JS heap profiler never ran. */
export function emptyJsHeapProfile(shard: number, sampleRate = 0): HeapProfile {
  return { shard, sampleRate, sites: [], totalSize: 0, totalCount: 0 };
}

/**
 * The objects a sample of the inspector's stands for, roughly. Its `size`
 * is V8's scaled figure, the sampled object's size s times
 * round(1 / (1 - exp(-s / rate))) (V8's inspector multiplies them: samples
 * of 40-byte objects at 4 KiB read ~4,300 bytes each), and s itself is not
 * given. The count here is size / s for the s that solves
 * size = s / (1 - exp(-s / rate)) without V8's rounding. Rough: V8's
 * rounding leaves several (s, count) pairs that give one scaled size (at
 * 4 KiB, 9 objects of 456 bytes and 342 of 12 both read 4,104 bytes): for
 * objects far smaller than the interval this reads from half the true
 * count to many times it (an exact search among the pairs that fit did
 * no better); from the interval up it is exact. Sizes, V8's own
 * estimates, are unaffected: 0.96x to 1.01x the heapUsed growth on the
 * JS heap bench's known objects.
 */
export function sampleCount(scaled: number, rate: number): number {
  if (rate <= 1 || scaled <= 0) return 1;
  // s / (1 - exp(-s / rate)) grows with s, from `rate` as s -> 0: bisect.
  let lo = 0;
  let hi = scaled;
  for (let i = 0; i < 50; i++) {
    const mid = (lo + hi) / 2;
    if (mid / -Math.expm1(-mid / rate) < scaled) lo = mid;
    else hi = mid;
  }
  return hi > 0 ? scaled / hi : 1;
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
    const n = sampleCount(s.size, rate);
    const f = figures.get(s.nodeId);
    if (f) {
      f.count += n;
      f.size += s.size;
    } else figures.set(s.nodeId, { count: n, size: s.size });
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
