/**
 * Allocation-site capture for the heap profiler: the JS call stack of an
 * allocation as V8 structured frames (CallSite objects), leaf first,
 * starting at the code that called shardheap. Only raw positions are read
 * here (function name, file, line, column); mapping them to TypeScript
 * sources through source maps happens at report time, off the allocation
 * path. A capture costs a few microseconds, which is why profiling samples.
 */
import { fileURLToPath } from "node:url";

/** One stack frame, 1-based line and column, as DESIGN.md's Frame. */
export interface Frame {
  functionName: string;
  url: string;
  line: number;
  column: number;
}

/** Where shardheap's own modules live (dist/ or src/): their frames are dropped. */
const OWN_URL = new URL("../", import.meta.url).href;
const OWN_PATH = fileURLToPath(OWN_URL);

function isOwnFrame(file: string): boolean {
  return file.startsWith(OWN_URL) || file.startsWith(OWN_PATH);
}

/** V8 formats at most this many frames past the ones we drop. */
const OWN_FRAMES_ALLOWANCE = 12;

const asCallSites = (_error: Error, sites: NodeJS.CallSite[]): NodeJS.CallSite[] => sites;

/**
 * The caller's stack, leaf first, at most `maxDepth` frames, with every
 * frame of shardheap itself removed (so frames[0] is the user's allocating
 * function, and the shard bootstrap that called a task is not a root).
 */
export function captureStack(maxDepth: number): Frame[] {
  const previousPrepare = Error.prepareStackTrace;
  const previousLimit = Error.stackTraceLimit;
  const holder: { stack?: unknown } = {};
  let sites: NodeJS.CallSite[];
  try {
    Error.prepareStackTrace = asCallSites;
    Error.stackTraceLimit = maxDepth + OWN_FRAMES_ALLOWANCE;
    Error.captureStackTrace(holder, captureStack);
    // V8 formats `stack` lazily, with the prepareStackTrace in force when it
    // is first read: read it before putting the previous one back.
    sites = holder.stack as NodeJS.CallSite[];
  } finally {
    Error.prepareStackTrace = previousPrepare;
    Error.stackTraceLimit = previousLimit;
  }
  const frames: Frame[] = [];
  for (const site of sites) {
    const url = site.getFileName() ?? site.getEvalOrigin() ?? "";
    if (isOwnFrame(url)) continue;
    frames.push({
      functionName: site.getFunctionName() ?? site.getMethodName() ?? "",
      url,
      line: site.getLineNumber() ?? 0,
      column: site.getColumnNumber() ?? 0,
    });
    if (frames.length === maxDepth) break;
  }
  return frames;
}
