/**
 * Frame lists that are not a profile's (growing sites, the timelines'
 * sites) mapped to their sources and shown short as every profile the
 * admin API serves, so the dashboard finds a site's frame in a flamegraph
 * by the name the SVG gives it.
 */
import type { Frame, HeapProfile } from "../memory/heap-profile.js";
import { profileToShow, type PathOptions } from "./display-paths.js";
import { mapProfileToSources, type SourceMapCache } from "./source-map.js";

/** Each of `sites`' frames, mapped and shown (as recorded when `fullPaths`), in order. */
export async function shownFrames(sites: ReadonlyArray<{ readonly frames: Frame[] }>, cache: SourceMapCache, o: PathOptions = {}): Promise<Frame[][]> {
  const carrier: HeapProfile = {
    shard: "all",
    sampleRate: 0,
    totalSize: 0,
    totalCount: 0,
    sites: sites.map((s) => ({ frames: s.frames, count: 0, size: 0, allocCount: 0, allocSize: 0 })),
  };
  return profileToShow(await mapProfileToSources(carrier, cache), o).sites.map((s) => s.frames);
}
