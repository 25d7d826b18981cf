/**
 * Plugs the heap profiler into the allocator's hooks (hooks.ts) as this
 * module loads: the recorder each allocator samples into, the set-up of a
 * new heap's profiler areas, and the readings SharedHeap and ShardAllocator
 * answer with. Imported, for that effect alone, by every module outside
 * src/memory that makes a heap (hooks.ts names them).
 */
import { plugProfiler } from "../hooks.js";
import { AllocationProfiler } from "./allocation-profiler.js";
import { heapProfileOf } from "./live-profile.js";
import { peakBooksProblem, peakProfileOf } from "./peak-profile.js";
import { initHeapPeak, initPeaks, resetHeapPeak } from "./peaks.js";
import { initSiteTable, readProfilerFill } from "./site-table.js";
import { siteTimelineOf, timelineProfileAt } from "./timeline-profile.js";

plugProfiler({
  recorder: (r) => new AllocationProfiler(r),
  initRegion: (r, layout) => {
    initSiteTable(r, layout);
    initPeaks(r);
  },
  initHeap: (i32, f64) => initHeapPeak(i32, f64),
  resetHeapPeak: (i32, f64) => resetHeapPeak(i32, f64),
  heapProfile: heapProfileOf,
  peakProfile: peakProfileOf,
  timeline: siteTimelineOf,
  timelineProfile: timelineProfileAt,
  fill: readProfilerFill,
  booksProblem: peakBooksProblem,
});
