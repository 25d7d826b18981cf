/**
 * The admin API's JSON answers as the dashboard reads them. Types only, no
 * import: the browser's program (tsconfig.dashboard.json, DOM and no Node)
 * and the server's (admin.ts builds the answers `satisfies` these) both
 * compile this file, so a field the server renames or drops fails the
 * build on one side or the other instead of showing "undefined" in a page.
 * The profile answers (format=json) are rendered to text apart from the
 * routes (report/render.ts): for them the shapes here are the page's word.
 */

/** A stack frame, as every profile answer carries it. */
export interface Frame {
  functionName: string;
  url: string;
  line: number;
  column: number;
}

/** A site's labels (withHeapLabels), when it has any. */
export type Labels = Record<string, string>;

/**
 * A shard's own V8 heap, as it last posted it: smp's JsHeapStats (js-heap-board.ts),
 * written again here because this file imports nothing (the browser's program has no
 * Node); the server's values are JsHeapStats, which this shape must accept.
 */
export interface JsHeapFigures {
  t: number;
  used: number;
  total: number;
  external: number;
  arrayBuffers: number;
  /** The JS heap profiler's mean sampling interval in bytes; 0 off. */
  sampleRate: number;
}

/** One shard in one sample of GET /v1/memory/history (memory-history.ts samples it). */
export interface ShardSample {
  /** allocatedMemory: bytes in use, small pools' cached objects included. */
  used: number;
  free: number;
  liveObjects: number;
  /** Cross-shard frees this shard has sent, cumulative. */
  crossShardFrees: number;
  /** Allocations that failed with OutOfMemoryError, cumulative. */
  failedAllocations: number;
  /** Bytes in the longest free page span (SharedHeap.largestFreeSpan: 0.36 us a read). */
  largestFreeSpan: number;
  /** The profiler's sample rate (0 off, 1 every allocation). */
  sampleRate: number;
  /** Allocations folded into "(other sites)" since profiling began (the dashboard warns when > 0), and the stacks the shard keeps. */
  foldedAllocations: number;
  siteCapacity: number;
  /** The shard's own V8 heap as it last posted it (smp.jsHeapStats); null before its first posting. */
  js: JsHeapFigures | null;
}

export interface HistorySample {
  /** ms since the epoch. */
  t: number;
  shards: ShardSample[];
}

/** A named baseline of one shard (GET /v1/memory/history, POST /v1/heapprof/baseline; baselines.ts keeps them). */
export interface BaselineInfo {
  name: string;
  shard: number;
  /** When it was taken, ms since the epoch. */
  takenAt: number;
  totalSize: number;
  /** Sites the profile holds. */
  sites: number;
  /** What holding it costs this process, estimated (estimatedProfileBytes). */
  bytes: number;
}

/** One figure an app publishes (smp.publishAppStats). */
export interface AppFigure {
  name: string;
  value: number;
  unit: "count" | "bytes" | "ratio";
  kind: "counter" | "gauge";
  help?: string;
}

export interface AppStats {
  app: string;
  /** When it was read, ms since the epoch. */
  t: number;
  figures: AppFigure[];
  error?: string;
}

/** GET /v1/memory/history?since=T */
export interface HistoryBody {
  shards: number;
  /** The main thread's own region (Smp.start({ mainShard: true })), or null. */
  mainShard: number | null;
  sampleIntervalMs: number;
  historySeconds: number;
  growthWindowSeconds: number;
  heapImage: boolean;
  lastSampleMs: number;
  baselines: BaselineInfo[];
  apps: AppStats[];
  samples: HistorySample[];
}

/** PUT /v1/heapprof?shard=S&rate=R[&heap=js] */
export interface RateBody {
  shard: number | "all";
  rate: number;
  heap?: "shared" | "js";
}

/** POST /v1/heapprof/baseline?shard=S&name=N (the shared heap's) */
export interface BaselineSetBody {
  baselines: BaselineInfo[];
}

/** A site of a profile or of a diff (format=json): figures now, or what changed. */
export interface ProfileSite {
  frames: Frame[];
  labels?: Labels;
  count: number;
  size: number;
}

/** GET /v1/heapprof?format=json (diff=baseline: the sites' changes). */
export interface ProfileBody {
  sites: ProfileSite[];
  totalSize: number;
  totalCount: number;
}

/** GET /v1/heapprof?format=json&at=peak */
export interface PeakBody extends ProfileBody {
  /** The profiled live bytes at the peak, and when (ms since the epoch; 0: nothing profiled yet). */
  peakBytes: number;
  peakTime: number;
}

/** A site whose live bytes or objects grow steadily (GET /v1/heapprof/growing; growing-sites.ts ranks them). */
export interface GrowingSite {
  frames: Frame[];
  /** The site's labels (withHeapLabels), when it has any. */
  labels?: Labels;
  /** The fit to live bytes: bytes per second, and its r^2 (0..1; 0 when the bytes do not vary). */
  slope: number;
  r2: number;
  /** Live bytes at the last sample. */
  liveBytes: number;
  /** Live bytes gained from the window's first sample to its last. */
  growth: number;
  /** The fit to the live object count: objects per second, and its r^2. */
  countSlope: number;
  countR2: number;
  /** Live objects at the last sample, and gained over the window. */
  liveCount: number;
  countGrowth: number;
}

/** GET /v1/heapprof/growing?by=bytes|count */
export interface GrowingBody {
  windowSeconds: number;
  /** What the sites are ranked and chosen by. */
  by: "bytes" | "count";
  sites: GrowingSite[];
}

/** One value of a label and its sites' figures (GET /v1/heapprof/labels?by=NAME); no value: the sites without it. */
export interface LabelGroup {
  value?: string | undefined;
  count: number;
  size: number;
  allocCount: number;
  allocSize: number;
  sites: number;
}

export interface LabelsBody {
  names: string[];
  totalSize: number;
  totalCount: number;
  by?: string;
  groups?: LabelGroup[];
}

/** GET /v1/heapprof/timeline: the largest sites' live bytes at each tick. */
export interface TimelineBody {
  shard: number | "all";
  sitesPerSample: number;
  sites: Array<{ frames: Frame[]; labels?: Labels }>;
  /** [index into sites, live bytes, live objects], largest first. */
  samples: Array<{ t: number; used: number; live: number; sites: Array<[number, number, number]> }>;
  intervalMs: number;
}
