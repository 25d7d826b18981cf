/**
 * The diagnostics report, in the shape of Seastar's
 * dump_memory_diagnostics: totals, then a small-pool table
 * (objsz spansz usedobj memory unused wst%), then a page-span table
 * (index size free used spans), and the top allocation sites when the
 * profiler is on. It is attached to every OutOfMemoryError and served by
 * the admin API. Read-only: works on any thread's view.
 *
 * The sites' frames are the raw positions the profiler recorded (compiled
 * JavaScript). Mapping them to TypeScript sources reads source maps from
 * disk, asynchronously, which an allocator failing an allocation cannot
 * wait for: ShardAllocator.diagnostics() and OutOfMemoryError.report stay
 * raw, and the admin API passes sites it has mapped (report/
 * mapped-diagnostics.ts) as `topSites`. Either way a site's file is shown
 * as every report shows it (frame-path.ts: `src/app.ts`,
 * `shardheap/dist/x.js`), so its line stays readable, followed by its
 * labels, `[prefix=user]` (sites of one stack differ by them alone), control
 * characters shown as visible escapes (display-text.ts), as the tree does.
 */
import { escapeControls } from "../display-text.js";
import { displayPath, workingDirectory } from "../frame-path.js";
import { formatCount, formatSize } from "../units.js";
import { C_FAILED_ALLOCATIONS, PAGE_SIZE, PM_SPAN_PAGES, PM_STATE, PAGE_INNER, PAGE_FREE } from "./layout.js";
import { largestFreeSpanPages } from "./page-spans.js";
import type { ShardRegion } from "./region.js";
import { CLASS_COUNT, POOL_COUNT, classSize, classSpanPages } from "./size-classes.js";
import { poolBytes, poolObjectsInUse } from "./small-pool.js";
import { readStats } from "./memory-stats.js";
import { sampleRateOf, type AllocationSite } from "./heap-profile.js";
import { profilerHooks } from "./hooks.js";

const pad = (s: string | number, n: number): string => String(s).padStart(n);

export interface DiagnosticsOptions {
  /** The region's profile sites, frames already mapped to sources; read raw from the buffer when absent. */
  topSites?: readonly AllocationSite[];
}

export function formatDiagnostics(r: ShardRegion, o: DiagnosticsOptions = {}): string {
  const s = readStats(r);
  const out: string[] = [];
  out.push(`Dumping shardheap memory diagnostics (shard ${r.id})`);
  out.push(`Used memory:   ${formatSize(s.allocatedMemory)}`);
  out.push(`Free memory:   ${formatSize(s.freeMemory)}`);
  // Fragmentation at a glance: the largest request a page span can meet now.
  out.push(`Largest free span: ${formatSize(largestFreeSpanPages(r) * PAGE_SIZE)}`);
  out.push(`Total memory:  ${formatSize(s.totalMemory)}`);
  out.push(`Hard failures: ${r.counter(C_FAILED_ALLOCATIONS)}`);
  out.push("");
  out.push("Small pools:");
  out.push("objsz spansz usedobj memory unused wst%");
  for (let c = 0; c < POOL_COUNT; c++) {
    const memory = poolBytes(r, c);
    // A busy shard (or an image of one) may be read mid-refill or mid-trim,
    // its counts a few operations apart: show what its spans can hold.
    const used = Math.max(0, Math.min(poolObjectsInUse(r, c), Math.floor(memory / classSize[c]!)));
    // Pools of sampled objects (marked "s") are listed only when they hold memory.
    if (c >= CLASS_COUNT && memory === 0) continue;
    const unused = memory - used * classSize[c]!;
    const wasted = memory ? Math.floor((unused * 100) / memory) : 0;
    out.push(
      `${pad(c >= CLASS_COUNT ? `${classSize[c]}s` : classSize[c]!, 5)} ${pad(formatSize(classSpanPages[c]! * PAGE_SIZE), 6)} ${pad(formatCount(used), 7)} ` +
        `${pad(formatSize(memory), 6)} ${pad(formatSize(unused), 6)} ${pad(wasted, 4)}`,
    );
  }
  out.push("");
  out.push("Page spans:");
  out.push("index  size  free  used spans");
  const spans = new Array<number>(32).fill(0);
  const usedPages = new Array<number>(32).fill(0);
  const freePages = new Array<number>(32).fill(0);
  // Walk spans head to head; pool spans are counted once, at their head.
  for (let p = 0; p < r.dataPages; ) {
    const m = r.pageMeta(p);
    const len = Math.max(1, r.i32[m + PM_SPAN_PAGES]!);
    const state = r.i32[m + PM_STATE]!;
    if (state === PAGE_INNER) {
      p++;
      continue;
    }
    const idx = len === 1 ? 0 : 32 - Math.clz32(len - 1);
    spans[idx]!++;
    if (state !== PAGE_FREE) usedPages[idx]! += len;
    else freePages[idx]! += len;
    p += len;
  }
  for (let i = 0; i < 32; i++) {
    if (2 ** i > r.dataPages && spans[i] === 0) break;
    out.push(
      `${pad(i, 5)} ${pad(formatSize(2 ** i * PAGE_SIZE), 5)} ${pad(formatSize(freePages[i]! * PAGE_SIZE), 5)} ` +
        `${pad(formatSize(usedPages[i]! * PAGE_SIZE), 5)} ${pad(formatCount(spans[i]!), 5)}`,
    );
  }
  const rate = sampleRateOf(r);
  if (rate > 0) {
    out.push("");
    out.push(`Top allocation sites (heap profiler, ${rate === 1 ? "every allocation" : `sampled every ${formatSize(rate)}`}):`);
    out.push("     size    count  site");
    const sites = (o.topSites ?? profilerHooks().heapProfile([r], 0 /* the only region given */).sites).filter((site) => site.size > 0);
    const base = workingDirectory();
    for (const site of sites.slice(0, TOP_SITES)) {
      out.push(`${pad(formatSize(Math.round(site.size)), 9)} ${pad(formatCount(Math.round(site.count)), 8)}  ${siteWhere(site, base)}`);
    }
    if (sites.length > TOP_SITES) out.push(`(${sites.length - TOP_SITES} more sites)`);
  }
  return out.join("\n") + "\n";
}

/**
 * A site as one line names it: its leaf frame, the file shown short
 * (frame-path.ts, against `base`), its labels; control characters escaped.
 */
export function siteWhere(site: AllocationSite, base: string | null = workingDirectory()): string {
  const leaf = site.frames[0];
  const where = leaf ? `${leaf.functionName || "(anonymous)"} (${displayPath(leaf.url, base)}:${leaf.line}:${leaf.column})` : "(no frames)";
  return escapeControls(where + labelsOf(site));
}

/**
 * A site's labels as its row shows them, ` [prefix=user, tenant=a]` (names
 * in order), or "": sites of one stack differ by their labels alone.
 */
function labelsOf(site: AllocationSite): string {
  const labels = site.labels;
  return labels === undefined ? "" : ` [${Object.keys(labels).sort().map((name) => `${name}=${labels[name]}`).join(", ")}]`;
}

/** Sites listed in the report when profiling is on. */
const TOP_SITES = 10;
