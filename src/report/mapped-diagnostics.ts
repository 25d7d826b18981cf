/**
 * The diagnostics report (memory/diagnostics.ts) with its top allocation
 * sites mapped to the original sources, as the tree and every other report
 * shows them. For readers that can wait for source maps to be read (the
 * admin API); the allocator's own report stays raw (it is written while an
 * allocation fails, and cannot wait).
 */
import { formatDiagnostics } from "../memory/diagnostics.js";
import { heapProfileOf } from "../memory/profiler/live-profile.js";
import type { ShardRegion } from "../memory/region.js";
import { SourceMapCache, mapProfileToSources } from "./source-map.js";

export async function formatMappedDiagnostics(r: ShardRegion, cache: SourceMapCache = new SourceMapCache()): Promise<string> {
  const profile = await mapProfileToSources(heapProfileOf([r], 0 /* the only region given */), cache);
  return formatDiagnostics(r, { topSites: profile.sites });
}
