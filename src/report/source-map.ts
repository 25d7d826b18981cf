/**
 * Report-time source mapping: the profiler records raw JS positions (cheap
 * at allocation time); reports map them to the TypeScript (or other)
 * sources through each script's source map. Uses Node's own SourceMap
 * (node:module), so no parser of ours and no dependency.
 */
import { readFileSync } from "node:fs";
import { SourceMap } from "node:module";
import { fileURLToPath, pathToFileURL } from "node:url";
import type { HeapProfile } from "../memory/heap-profile.js";
import type { Frame } from "../memory/stack-capture.js";

interface LoadedMap {
  map: SourceMap;
  /** URL of the map (or of the script, for an inline map): where `sources` are relative to. */
  base: URL;
}

/** Script URL or path -> its source map, or null when it has none (cached for the report). */
export type SourceMapCache = Map<string, LoadedMap | null>;

const SOURCE_MAPPING_URL = /\/\/[#@] sourceMappingURL=([^\s'"]+)\s*$/;

function scriptUrl(url: string): URL | undefined {
  if (url.startsWith("file:")) return new URL(url);
  if (url.startsWith("/")) return pathToFileURL(url);
  return undefined; // node:internal, eval, a remote URL: not mapped
}

function loadMap(url: string): LoadedMap | null {
  const script = scriptUrl(url);
  if (!script) return null;
  try {
    const text = readFileSync(fileURLToPath(script), "utf8");
    const tail = text.slice(Math.max(0, text.length - 4096)).trimEnd().split("\n").pop() ?? "";
    const ref = SOURCE_MAPPING_URL.exec(tail)?.[1];
    if (!ref) return null;
    if (ref.startsWith("data:")) {
      const comma = ref.indexOf(",");
      const payload = ref.slice(0, comma).endsWith(";base64")
        ? Buffer.from(ref.slice(comma + 1), "base64").toString("utf8")
        : decodeURIComponent(ref.slice(comma + 1));
      return { map: new SourceMap(JSON.parse(payload)), base: script };
    }
    const mapUrl = new URL(ref, script);
    return { map: new SourceMap(JSON.parse(readFileSync(fileURLToPath(mapUrl), "utf8"))), base: mapUrl };
  } catch {
    return null; // unreadable script or map: report the raw position
  }
}

/** `frame` at its original source position, or unchanged when no source map covers it. */
export function mapFrame(frame: Frame, cache: SourceMapCache = new Map()): Frame {
  let loaded = cache.get(frame.url);
  if (loaded === undefined) {
    loaded = loadMap(frame.url);
    cache.set(frame.url, loaded);
  }
  if (!loaded || frame.line < 1) return frame;
  const entry = loaded.map.findEntry(frame.line - 1, Math.max(0, frame.column - 1)) as {
    originalSource?: string;
    originalLine?: number;
    originalColumn?: number;
  };
  if (entry.originalSource === undefined || entry.originalLine === undefined) return frame;
  const source = new URL(entry.originalSource, loaded.base);
  return {
    functionName: frame.functionName,
    // Keep the style the frame came in: a path stays a path, a URL a URL.
    url: frame.url.startsWith("file:") ? source.href : fileURLToPath(source),
    line: entry.originalLine + 1,
    column: (entry.originalColumn ?? 0) + 1,
  };
}

/** The profile with every frame mapped to its original source where a source map exists. */
export function mapProfileToSources(profile: HeapProfile, cache: SourceMapCache = new Map()): HeapProfile {
  return { ...profile, sites: profile.sites.map((s) => ({ ...s, frames: s.frames.map((f) => mapFrame(f, cache)) })) };
}
