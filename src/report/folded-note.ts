/**
 * The sentence a report adds when the profiler's tables filled up: how many
 * allocations (and live bytes) went to "(other sites)" instead of their own
 * stacks, which table was full, and the option that makes room. The text
 * tree ends with it (so `shardheap report`, the end of `stress` and
 * `memcached`, and the admin API's tree say it) and pprof carries it as a
 * comment (`go tool pprof -comments`). A profile with nothing folded gets
 * none; a diff neither (its figures are differences, not a fill).
 */
import type { FoldedSites, HeapProfile, ProfilerTable } from "../memory/heap-profile.js";
import { formatSize, plural } from "../units.js";

const TABLE_NAMES: Readonly<Record<ProfilerTable, string>> = { sites: "site", frames: "frame", strings: "string" };

const percent = (part: number, whole: number): string => (whole > 0 ? `${((100 * part) / whole).toFixed(1)}%` : "all");

/** The note for `p`, or undefined when it folded nothing. */
export function foldedNote(p: HeapProfile): string | undefined {
  const f: FoldedSites | undefined = p.folded;
  if (f === undefined || !(f.allocCount > 0)) return undefined;
  const allocations = p.sites.reduce((n, s) => n + s.allocCount, 0);
  const tables = f.full.length === 0 ? "a table" : `the ${f.full.map((t) => TABLE_NAMES[t]).join(" and ")} table${f.full.length > 1 ? "s" : ""}`;
  return (
    `Folded into (other sites): ${Math.round(f.allocCount)} of ${Math.round(allocations)} allocations (${percent(f.allocCount, allocations)}), ` +
    `${formatSize(Math.round(f.size))} of ${formatSize(Math.round(p.totalSize))} live (${percent(f.size, p.totalSize)}): ` +
    `${tables} ${f.full.length > 1 ? "were" : "was"} full at ${plural(f.siteCapacity, "site")} a shard. ` +
    `Raise that with --heapprof-sites N (heapprofSites in Smp.start or SharedHeap.create).`
  );
}
