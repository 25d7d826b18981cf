/**
 * The floors of the profiler benchmark (bench/profiler.ts): V8's stack
 * capture, the one mechanism a profiled allocation cannot do without,
 * with nothing of the profiler's in it.
 *
 *   captureStackTrace  a bare Error.captureStackTrace, stackTraceLimit 16,
 *                      its CallSites read (prepareStackTrace returning the
 *                      array, `.stack` read), called in a loop of its own:
 *                      the exact target's baseline.
 *   capture floor      the churn of a heap whose profiler was never
 *                      touched, with that bare capture made before a
 *                      malloc whenever the bytes malloc'd since the last
 *                      one reach `bytesPerCapture` (counted as the sampler
 *                      counts them, in size-class bytes; a fixed interval
 *                      where the sampler's is random with the same mean):
 *                      every 2 MiB is what sampling at 2 MiB cannot cost
 *                      less than; every malloc (0), what exact mode cannot.
 *
 * A floor does less than the profiler does, never more: the frames are
 * captured and not read. Reading each one's script and position (the two
 * reads a site cannot do without) made the 2 MiB floor cost more than
 * sampling itself (1.28x never against 1.16x, three runs): a rare capture
 * from the churn's loop costs ~20 us against ~5 us for the same capture
 * made at every step (no deopt among them: --trace-deopt shows 8 in a
 * whole run), and how much more depends on the caller's shape.
 */
import { classOf, classSize } from "../src/memory/size-classes.js";
import { shardheapCandidate, type Workload } from "./churn.js";
import type { Candidate } from "./timing.js";

/** Frames recorded by a capture (the exact mode's depth, and the sampler's default). */
export const CAPTURE_DEPTH = 16;

const asCallSites = (_e: Error, sites: NodeJS.CallSite[]): NodeJS.CallSite[] => sites;

// The capture's shape: caller -> captureOuter -> captureMiddle -> captureInner,
// as malloc -> mallocSampled -> recordSample -> (captureRawCallSites).
function captureInner(): number {
  const holder: { stack?: unknown } = {};
  Error.captureStackTrace(holder);
  return (holder.stack as NodeJS.CallSite[]).length;
}
function captureMiddle(): number {
  return captureInner();
}
function captureOuter(): number {
  return captureMiddle();
}

/** Run `fn` with the captures' stackTraceLimit and prepareStackTrace in force, then put the previous ones back. */
function capturing<T>(limit: number, fn: () => T): T {
  const previousLimit = Error.stackTraceLimit;
  const previousPrepare = Error.prepareStackTrace;
  try {
    Error.stackTraceLimit = limit;
    Error.prepareStackTrace = asCallSites;
    return fn();
  } finally {
    Error.stackTraceLimit = previousLimit;
    Error.prepareStackTrace = previousPrepare;
  }
}

/** Stack frames (leaf first) the bare capture sees at the current depth, with no limit. */
export function stackDepthHere(): number {
  return capturing(Infinity, captureOuter);
}

/** The bare capture in a loop of its own (ns per capture). */
export function bareCaptureCandidate(): Candidate {
  return {
    name: "captureStackTrace",
    run(n) {
      return capturing(CAPTURE_DEPTH, () => {
        let acc = 0;
        for (let i = 0; i < n; i++) acc += captureOuter();
        return acc;
      });
    },
  };
}

/**
 * The capture a profiled malloc makes, from the churn: the frames below
 * `captureFloorEntry` (as the profiler's capture leaves out malloc and
 * what it called, captureRawCallSites's `entry`).
 */
function captureFloorEntry(): number {
  return captureFromEntry();
}
function captureFromEntry(): number {
  const holder: { stack?: unknown } = {};
  Error.captureStackTrace(holder, captureFloorEntry);
  return (holder.stack as NodeJS.CallSite[]).length;
}

/**
 * The churn of bench/churn.ts on a never-profiled heap of its own, with a
 * bare capture every `bytesPerCapture` size-class bytes malloc'd (0: before
 * every malloc). The step loop is churn.ts's, copied for the same reason
 * its candidates each have their own (one shared loop goes polymorphic).
 */
export function captureFloorCandidate(w: Workload, bytesPerCapture: number, o: { name: string; shardBytes: number }): Candidate & { captures(): number; verify(): void } {
  // churn.ts's candidate for the heap, its live set, its warm-up and its checks; the loop below is this floor's.
  const churn = shardheapCandidate(w, o);
  const { sizes, victims } = w;
  const mask = sizes.length - 1;
  const classBytes = Uint32Array.from(sizes, (size) => classSize[classOf[(size + 7) >>> 3]!]!);
  const a = churn.shard;
  const live = churn.live;
  const u8 = new Uint8Array(churn.heap.buffer);
  let step = 0;
  let left = bytesPerCapture;
  let captures = 0;
  return {
    name: o.name,
    captures: () => captures,
    verify: churn.verify,
    prepare: churn.prepare,
    run(n) {
      return capturing(CAPTURE_DEPTH, () => {
        let acc = 0;
        let s = step;
        for (const end = s + n; s < end; s++) {
          const j = s & mask;
          const i = victims[j]!;
          a.free(live[i]!);
          if ((left -= classBytes[j]!) <= 0) {
            left += bytesPerCapture;
            captures++;
            acc += captureFloorEntry();
          }
          const p = a.malloc(sizes[j]!);
          u8[p] = 1;
          live[i] = p;
          acc ^= p;
        }
        step = s;
        return acc;
      });
    },
  };
}
