/**
 * Reading back a pprof profile that shardheap wrote (toPprof, `report
 * --format pprof`, the admin API), so `shardheap diff` can take two pprof
 * files as well as two heap images. Only shardheap's shape is accepted: the
 * four sample types in Go's heap order (PPROF_SAMPLE_TYPES), every sample
 * with one value each, every location and function it names present. A
 * file that is not that (another program's profile, a CPU profile, bytes
 * that do not decode) is a HeapFormatError naming the file, as a bad heap
 * image is, so the command exits 2.
 *
 * Nothing read is trusted: gzip output is capped (a small file must not
 * inflate to gigabytes), values are read as signed 64-bit integers (how
 * protobuf stores a diff's negative values) and must be safe integers.
 *
 * Frames come back as the file holds them: shown short unless it was
 * written with fullPaths. readPprof also gives the directory its paths are
 * relative to (toPprof's PATH_BASE_COMMENT), undefined when no path was
 * shortened (or the file is older than that comment).
 */
import { gunzipSync } from "node:zlib";
import { Profile } from "pprof-format";
import { HeapFormatError } from "../errors.js";
import type { AllocationSite, Frame, HeapProfile } from "../memory/heap-profile.js";
import { PATH_BASE_COMMENT, PPROF_SAMPLE_TYPES } from "./pprof.js";

/** Largest decompressed profile read: far above any site table's (a few MiB). */
export const MAX_PPROF_BYTES = 256 << 20;

/** toPprof names an anonymous function so; a heap image's frames leave the name empty. */
const ANONYMOUS = "(anonymous)";

type Numeric = number | bigint;

export interface PprofFile {
  profile: HeapProfile;
  /** The directory the file's short paths are relative to ("" for none: only node_modules paths were shortened); undefined when its paths are as recorded. */
  pathBase: string | undefined;
}

export function fromPprof(bytes: Uint8Array, name = "profile"): HeapProfile {
  return readPprof(bytes, name).profile;
}

export function readPprof(bytes: Uint8Array, name = "profile"): PprofFile {
  const fail = (why: string): never => {
    throw new HeapFormatError(`${name} is not a pprof heap profile written by shardheap: ${why}`);
  };
  let raw: Uint8Array = bytes;
  if (bytes[0] === 0x1f && bytes[1] === 0x8b) {
    try {
      raw = gunzipSync(bytes, { maxOutputLength: MAX_PPROF_BYTES });
    } catch (e) {
      fail(`gzip: ${(e as Error).message}`);
    }
  }
  let p: Profile;
  try {
    p = Profile.decode(raw);
  } catch (e) {
    return fail(`does not decode as profile.proto (${(e as Error).message})`);
  }
  const strings = p.stringTable.strings;
  const text = (i: Numeric): string => {
    const s = strings[Number(i)];
    return s === undefined ? fail(`string index ${String(i)} is outside its string table`) : s;
  };
  const types = p.sampleType.map((t) => `${text(t.type)}/${text(t.unit)}`);
  const wanted = PPROF_SAMPLE_TYPES.map(([type, unit]) => `${type}/${unit}`);
  if (types.join(",") !== wanted.join(",")) fail(`sample types are ${types.join(", ") || "none"}, shardheap writes ${wanted.join(", ")}`);
  const functions = new Map(p.function.map((f) => [String(f.id), f]));
  const locations = new Map(p.location.map((l) => [String(l.id), l]));
  const frameCache = new Map<string, Frame[]>();
  const framesOf = (locationId: Numeric): Frame[] => {
    const key = String(locationId);
    const cached = frameCache.get(key);
    if (cached) return cached;
    const location = locations.get(key) ?? fail(`sample names location ${key}, which is not in the profile`);
    // A location's lines run innermost first, as a stack does.
    const frames = location.line.map((line): Frame => {
      const fn = functions.get(String(line.functionId)) ?? fail(`location ${key} names function ${String(line.functionId)}, which is not in the profile`);
      const functionName = text(fn.name);
      return { functionName: functionName === ANONYMOUS ? "" : functionName, url: text(fn.filename), line: number(line.line), column: number(line.column) };
    });
    frameCache.set(key, frames);
    return frames;
  };
  const number = (v: Numeric): number => {
    const n = typeof v === "bigint" ? Number(BigInt.asIntN(64, v)) : v;
    return Number.isSafeInteger(n) ? n : fail(`value ${String(v)} is not a safe integer`);
  };
  const sites = p.sample.map((s): AllocationSite => {
    if (s.value.length !== wanted.length) fail(`a sample has ${s.value.length} values, not ${wanted.length}`);
    const [allocCount, allocSize, count, size] = s.value.map(number) as [number, number, number, number];
    const site: AllocationSite = { frames: s.locationId.flatMap(framesOf), count, size, allocCount, allocSize };
    // String labels are the site's labels (numeric ones, which shardheap does not write, are left out).
    const labels: Record<string, string> = {};
    for (const l of s.label) if (Number(l.str) !== 0) labels[text(l.key)] = text(l.str);
    if (Object.keys(labels).length > 0) site.labels = labels;
    return site;
  });
  const pathComment = p.comment.map(text).find((c) => c.startsWith(PATH_BASE_COMMENT));
  return {
    profile: {
      shard: "all",
      sampleRate: number(p.period),
      sites,
      totalSize: sites.reduce((n, s) => n + s.size, 0),
      totalCount: sites.reduce((n, s) => n + s.count, 0),
    },
    pathBase: pathComment?.slice(PATH_BASE_COMMENT.length),
  };
}

