/// <reference types="node" preserve="true" />
/**
 * shardheap: a shard-per-thread SharedArrayBuffer heap with a Seastar-style
 * allocator. The package root re-exports the public API
 * (docs/reference/api.md and docs/reference/errors.md: its API and error
 * tables; docs/ARCHITECTURE.md: the layers behind it).
 *
 * The reference above puts Node's types (@types/node) in every program
 * that imports this package: its declarations name Buffer, NodeJS.Timeout,
 * EventEmitter and net.Server, and from TypeScript 6 on a project's `types`
 * defaults to [] (no @types package loaded unless named), which left them
 * unresolved inside these files (`Cannot find name 'Buffer'`) or, under
 * skipLibCheck, made Smp a class without `on`. `preserve` keeps the line
 * in index.d.ts (from TypeScript 5.5 a written reference is dropped from
 * declaration output otherwise).
 */
import "./memory/profiler/plug-in.js";
import "./memory/heap-image/plug-in.js";
export { PAGE_SIZE } from "./memory/layout.js";
export { SharedHeap, type SharedHeapOptions } from "./memory/shared-heap.js";
export { type LiveCheckOptions } from "./memory/live-check.js";
export { ShardAllocator } from "./memory/shard-allocator.js";
export { SharedMap, type SharedMapOptions, type SharedMapStats } from "./memory/shared-map/shared-map.js";
export { type MemoryStats, MEMORY_STAT_FIELDS } from "./memory/memory-stats.js";
export { MAX_SMALL_SIZE, MIN_OBJECT_SIZE } from "./memory/size-classes.js";
export {
  HeapError,
  OutOfMemoryError,
  InvalidPointerError,
  HeapFormatError,
  HeapOwnershipError,
  InvalidValueError,
  SharedMapError,
  ShardError,
  type HeapErrorCode,
  type SharedMapErrorCode,
  type ErrorCode,
} from "./errors.js";
export { parseSize, formatSize } from "./units.js";
export { Smp, type SmpEvents, type ShardReplacement, type FreedOrphans, type MemoryPressureEvent } from "./smp/smp.js";
export { type JsHeapStats } from "./smp/js-heap-board.js";
export { currentShard, shardContext } from "./smp/current-shard.js";
export { type ShardContext, type ListenOptions, type ListeningAddress, type Tasks, type TaskCall, type TaskFunction, type TaskName, type TaskArgument, type TaskResult, type NoTaskModuleNamed } from "./smp/task-types.js";
export { type AppFigure, type AppFigures, type AppFigureUnit, type AppFigureKind, type AppFigureReading, type AppStats, type AppStatsReader } from "./smp/app-stats.js";
export { type SmpOptions } from "./smp/options.js";
export { type HeapProfile, type AllocationSite, type FoldedSites, type ProfilerTable, type PeakProfile, type SiteTimeline, type TimelineSample, type TimelineSite, type ProfilerFill, type Frame } from "./memory/heap-profile.js";
export { withHeapLabels, withHeapLabelsSync, heapLabelSet, currentHeapLabels, OTHER_LABELS, type HeapLabels, type HeapLabelSet } from "./memory/profiler/heap-labels.js";
export { groupByLabel, filterByLabel, labelNames, NO_LABEL, type LabelGroup } from "./report/labels.js";
export { mapProfileToSources, mapFrame, SourceMapCache } from "./report/source-map.js";
export { formatTree, type TreeOptions } from "./report/tree.js";
export { toCollapsed } from "./report/collapsed.js";
export { toPprof, type PprofOptions } from "./report/pprof.js";
export { displayPath } from "./frame-path.js";
export { withDisplayPaths, type PathOptions } from "./report/display-paths.js";
export { toHeapprofile, type Heapprofile } from "./report/heapprofile.js";
export { readHeapImage, decodeHeapImage } from "./memory/heap-image/heap-image.js";
export { toFlamegraphSvg, type FlamegraphOptions } from "./report/flamegraph.js";
export { diffProfiles, isProfileDiff, type ProfileDiff, type DiffSite } from "./report/diff.js";
export { serveAdmin, type AdminOptions, type AdminServer } from "./runtime/admin.js";
