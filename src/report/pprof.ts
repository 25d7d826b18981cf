/**
 * pprof: the profile as a gzipped profile.proto, through the `pprof-format`
 * package (no protobuf code of ours). Sample types in Go's heap-profile
 * order, alloc_objects/count, alloc_space/bytes, inuse_objects/count,
 * inuse_space/bytes, with inuse_space the default (viewers that ignore the
 * default take the last type, which is the same). Period type space/bytes,
 * period = the sample rate. Functions and locations are deduplicated; lines
 * keep their columns; a site's labels are its samples' string labels. Values are integers that add up to the profile's
 * rounded totals (sampled estimates are fractional).
 *
 * A diff (diff.ts) gives signed values, next minus base per site (int64
 * varints, negative as protobuf encodes them), so `go tool pprof -top` of
 * it reads as `go tool pprof -top -diff_base BASE NEXT` does; sites whose
 * figures did not change are left out. `defaultSampleType` picks the type
 * viewers open with (Go's /debug/pprof/allocs opens on alloc_space), and
 * `durationNanos` says what span a delta covers (/debug/pprof/heap?seconds=N).
 * A profile whose tables filled carries folded-note.ts's sentence as a
 * comment (`go tool pprof -comments`).
 *
 * A function's filename is the frame's file shown short (display-paths.ts:
 * `src/app.ts`, `shardheap/src/x.ts`), so go tool pprof's listings, -lines
 * and Pyroscope show it whole; as recorded with `fullPaths`. When a path was
 * shortened, a comment says relative to what (PATH_BASE_COMMENT): `shardheap
 * diff` of this file against a heap image shows the image's frames the same
 * way before matching sites, wherever it runs (pprof-read.ts).
 */
import { gzipSync } from "node:zlib";
import { Function as PprofFunction, Label, Line, Location, Profile, Sample, StringTable, ValueType } from "pprof-format";
import { siteWith, type AllocationSite, type HeapProfile, type Frame } from "../memory/heap-profile.js";
import { roundPreservingSum } from "./collapsed.js";
import { isProfileDiff, siteChanged } from "./diff.js";
import { workingDirectory } from "../frame-path.js";
import { withDisplayPaths, type PathOptions } from "./display-paths.js";
import { foldedNote } from "./folded-note.js";

export const PPROF_SAMPLE_TYPES = [
  ["alloc_objects", "count"],
  ["alloc_space", "bytes"],
  ["inuse_objects", "count"],
  ["inuse_space", "bytes"],
] as const;

export type PprofSampleType = (typeof PPROF_SAMPLE_TYPES)[number][0];

export interface PprofOptions extends PathOptions {
  /** The type viewers show first; inuse_space unless told. */
  defaultSampleType?: PprofSampleType;
  /** The span the profile covers, for a delta over time. */
  durationNanos?: number;
}

/**
 * The sites toPprof writes, with the figures it writes: integers, each
 * figure rounded across the sites so its integers add up to its rounded
 * total (roundPreservingSum). A profile's sites without history are left
 * out, and a diff's unchanged sites.
 */
export function pprofSites(p: HeapProfile): AllocationSite[] {
  const sites = isProfileDiff(p)
    ? p.sites.filter(siteChanged)
    : p.sites.filter((s) => s.allocCount > 0 || s.count !== 0 || s.size !== 0); // live sites without new allocations: a delta_heap's
  const [allocCount, allocSize, count, size] = [
    roundPreservingSum(sites.map((s) => s.allocCount)),
    roundPreservingSum(sites.map((s) => s.allocSize)),
    roundPreservingSum(sites.map((s) => s.count)),
    roundPreservingSum(sites.map((s) => s.size)),
  ];
  return sites.map((s, i) => siteWith(s, { allocCount: allocCount[i]!, allocSize: allocSize[i]!, count: count[i]!, size: size[i]! }));
}

/**
 * The comment of a pprof file whose paths were shown short, followed by
 * the directory they are relative to: `go tool pprof -comments` prints it,
 * and pprof-read.ts reads the directory back.
 */
export const PATH_BASE_COMMENT = "shardheap: files in node_modules/PKG/ shown as PKG/..., others relative to ";

/** pprof's period for a profile of `sampleRate` (0 off and -1 mixed have no period of their own). */
export const pprofPeriod = (sampleRate: number): number => Math.max(1, sampleRate);

/**
 * `p` at the precision of its pprof export: the figures fromPprof reads
 * back from toPprof(p). `shardheap diff` compares a heap image (sampled
 * figures are fractional) with a pprof file (integers) through it, so an
 * image and its own export differ by nothing, not by rounding residue.
 */
export function atPprofPrecision(p: HeapProfile): HeapProfile {
  const sites = pprofSites(p);
  return {
    shard: p.shard,
    sampleRate: pprofPeriod(p.sampleRate),
    sites,
    totalSize: sites.reduce((n, s) => n + s.size, 0),
    totalCount: sites.reduce((n, s) => n + s.count, 0),
  };
}

export function toPprof(raw: HeapProfile, o: PprofOptions = {}): Uint8Array {
  const base = workingDirectory();
  const p = o.fullPaths === true ? raw : withDisplayPaths(raw, base);
  // withDisplayPaths gives the very profile back when no path changes.
  const shortened = p !== raw;
  const strings = new StringTable();
  const functions: PprofFunction[] = [];
  const locations: Location[] = [];
  const functionIds = new Map<string, number>();
  const locationIds = new Map<string, number>();
  // Sites share frame objects (heap-profile.ts): one key built per frame, not per frame of every site.
  const locationOfFrame = new Map<Frame, number>();
  const sites = pprofSites(p);
  const samples = sites.map((site) => {
    const ids = site.frames.map((f) => {
      const known = locationOfFrame.get(f);
      if (known !== undefined) return known;
      const name = f.functionName || "(anonymous)";
      const fnKey = `${name}\0${f.url}`;
      let functionId = functionIds.get(fnKey);
      if (functionId === undefined) {
        functionId = functions.length + 1;
        functionIds.set(fnKey, functionId);
        functions.push(new PprofFunction({ id: functionId, name: strings.dedup(name), systemName: strings.dedup(name), filename: strings.dedup(f.url) }));
      }
      const locKey = `${fnKey}\0${f.line}\0${f.column}`;
      let locationId = locationIds.get(locKey);
      if (locationId === undefined) {
        locationId = locations.length + 1;
        locationIds.set(locKey, locationId);
        locations.push(new Location({ id: locationId, line: [new Line({ functionId, line: f.line, column: f.column })] }));
      }
      locationOfFrame.set(f, locationId);
      return locationId;
    });
    // A site's labels as string labels, in name order (go tool pprof -tags, -tagfocus).
    const label = site.labels === undefined ? [] : Object.keys(site.labels).sort().map((k) => new Label({ key: strings.dedup(k), str: strings.dedup(site.labels![k]!) }));
    return new Sample({ locationId: ids, value: [site.allocCount, site.allocSize, site.count, site.size], label });
  });
  const note = isProfileDiff(p) ? undefined : foldedNote(p);
  // Without a working directory only node_modules paths were shortened: the comment names none ("").
  const comments = [...(note === undefined ? [] : [note]), ...(shortened ? [PATH_BASE_COMMENT + (base ?? "")] : [])];
  const profile = new Profile({
    sampleType: PPROF_SAMPLE_TYPES.map(([type, unit]) => new ValueType({ type: strings.dedup(type), unit: strings.dedup(unit) })),
    sample: samples,
    location: locations,
    function: functions,
    stringTable: strings,
    periodType: new ValueType({ type: strings.dedup("space"), unit: strings.dedup("bytes") }),
    period: pprofPeriod(p.sampleRate),
    defaultSampleType: strings.dedup(o.defaultSampleType ?? "inuse_space"),
    timeNanos: BigInt(Date.now()) * 1_000_000n,
    ...(o.durationNanos === undefined ? {} : { durationNanos: Math.round(o.durationNanos) }),
    ...(comments.length === 0 ? {} : { comment: comments.map((c) => strings.dedup(c)) }),
  });
  return gzipSync(profile.encode());
}
