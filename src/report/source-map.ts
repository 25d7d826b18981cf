/**
 * Report-time source mapping: the profiler records raw JS positions (cheap
 * at allocation time); reports map them to the TypeScript (or other)
 * sources through each script's source map. Uses Node's own SourceMap
 * (node:module), so no parser of ours and no dependency.
 *
 * A frame's URL comes from the profiled program (`//# sourceURL=` can name
 * anything) or from a heap image (anyone's file), so it is never trusted as
 * a file to read:
 * - only `file:` URLs and absolute paths are read from disk, and only
 *   regular files (a device such as /dev/zero, a FIFO, a directory is left
 *   alone: stat first, and the opened file is checked again); `data:` URLs
 *   (an inline map, or a script given as a data: URL) are decoded in memory;
 *   anything else (node:, http:, eval) is not mapped;
 * - reads are asynchronous and capped (MAX_SOURCE_MAP_BYTES per map,
 *   MAX_BYTES_PER_PASS per profile), so nothing blocks the admin server's
 *   event loop on I/O and no file is read past the cap;
 * - parsed maps are kept in a bounded LRU (SourceMapCache) keyed by the
 *   script's identity (device, inode, size, mtime), so a server maps a
 *   script once, not on every request, and sees a rebuilt script.
 * A frame that cannot be mapped, for any reason, stays as recorded.
 */
import { constants } from "node:fs";
import { open, stat } from "node:fs/promises";
import { SourceMap } from "node:module";
import { fileURLToPath, pathToFileURL } from "node:url";
import type { Frame, HeapProfile } from "../memory/heap-profile.js";

/**
 * Largest source map read (a map file, or the tail of a script holding an
 * inline one): 8 MiB. Parsing is what costs, and a server parses on its
 * event loop: node:module's SourceMap took 0.67 s and 230 MiB of heap for
 * 8 MiB of mappings, 5.3 s and 1 GiB for 32 MiB. tsc's per-file maps are a
 * few KiB to a few hundred KiB; a bundle's map above the cap stays unmapped.
 */
export const MAX_SOURCE_MAP_BYTES = 8 << 20;
/** Bytes read for one profile at most: eight maps of the largest size. */
export const MAX_BYTES_PER_PASS = 8 * MAX_SOURCE_MAP_BYTES;
/** Distinct scripts looked at for one profile at most; frames of further ones stay raw. */
export const MAX_SCRIPTS_PER_PASS = 4096;
/** A script's tail read first: enough for a `//# sourceMappingURL=file.js.map` line. */
const TAIL_BYTES = 4096;

interface LoadedMap {
  map: SourceMap;
  /** URL of the map (or of the script, for an inline map): where `sources` are relative to. */
  base: URL;
}

interface CacheEntry {
  /** The script's device, inode, size and mtime when it was read. */
  identity: string;
  loaded: LoadedMap | null;
  /** Bytes of map text parsed for it (what its SourceMap costs, roughly). */
  bytes: number;
}

/**
 * Parsed source maps by script path, least recently used evicted first:
 * at most `maxEntries` scripts and `maxBytes` of map text (16 MiB by
 * default: with node:module's ~28x heap cost, under 500 MiB retained at
 * worst; this project's own maps total ~1 MiB).
 */
export class SourceMapCache {
  private readonly entries = new Map<string, CacheEntry>();
  private bytes = 0;
  constructor(
    readonly maxEntries = 512,
    readonly maxBytes = 16 << 20,
  ) {}

  get(path: string, identity: string): LoadedMap | null | undefined {
    const entry = this.entries.get(path);
    if (!entry || entry.identity !== identity) return undefined;
    this.entries.delete(path); // re-insert: most recently used last
    this.entries.set(path, entry);
    return entry.loaded;
  }

  set(path: string, identity: string, loaded: LoadedMap | null, bytes: number): void {
    this.remove(path);
    if (bytes > this.maxBytes) return;
    this.entries.set(path, { identity, loaded, bytes });
    this.bytes += bytes;
    for (const [oldest] of this.entries) {
      if (this.entries.size <= this.maxEntries && this.bytes <= this.maxBytes) break;
      this.remove(oldest);
    }
  }

  get size(): number {
    return this.entries.size;
  }

  private remove(path: string): void {
    const entry = this.entries.get(path);
    if (!entry) return;
    this.bytes -= entry.bytes;
    this.entries.delete(path);
  }
}

/** What one mapping pass may still read. */
interface Budget {
  bytes: number;
}

const SOURCE_MAPPING_URL = /^\/\/[#@] sourceMappingURL=([^\s'"]+)\s*$/;

/** The `sourceMappingURL` of a script's last line, or undefined. */
function mappingUrlOf(tail: string): string | undefined {
  const trimmed = tail.trimEnd();
  return SOURCE_MAPPING_URL.exec(trimmed.slice(trimmed.lastIndexOf("\n") + 1))?.[1];
}

/** A data: URL's payload as text, or undefined when it is not one we decode. */
function dataUrlText(url: string): string | undefined {
  const comma = url.indexOf(",");
  if (!url.startsWith("data:") || comma < 0) return undefined;
  const payload = url.slice(comma + 1);
  return url.slice(0, comma).endsWith(";base64") ? Buffer.from(payload, "base64").toString("utf8") : decodeURIComponent(payload);
}

/**
 * Up to `length` bytes ending `fromEnd` bytes before the end of the regular
 * file `path` (whole file when shorter), or undefined when it is not a
 * regular file, cannot be read, or the budget is spent. The file is opened
 * non-blocking (a FIFO swapped in after the stat must not wait for a
 * writer) and checked again once open.
 */
async function readTail(path: string, length: number, budget: Budget): Promise<Buffer | undefined> {
  let handle;
  try {
    handle = await open(path, constants.O_RDONLY | (constants.O_NONBLOCK ?? 0));
    const st = await handle.stat();
    if (!st.isFile()) return undefined;
    const n = Math.min(length, st.size);
    if (n > budget.bytes) return undefined;
    budget.bytes -= n;
    const buf = Buffer.alloc(n);
    let got = 0;
    while (got < n) {
      const { bytesRead } = await handle.read(buf, got, n - got, st.size - n + got);
      if (bytesRead === 0) break;
      got += bytesRead;
    }
    return buf.subarray(0, got);
  } catch {
    return undefined;
  } finally {
    await handle?.close().catch(() => undefined);
  }
}

/** The regular file at `path`: its identity for the cache, or undefined for anything else. */
async function regularFile(path: string): Promise<{ identity: string; size: number } | undefined> {
  try {
    const st = await stat(path);
    return st.isFile() ? { identity: `${st.dev}:${st.ino}:${st.size}:${st.mtimeMs}`, size: st.size } : undefined;
  } catch {
    return undefined;
  }
}

/** The map a `sourceMappingURL` names, relative to `script`: inline (data:) or a regular file. */
async function loadMapAt(ref: string, script: URL, budget: Budget): Promise<{ loaded: LoadedMap; bytes: number } | null> {
  try {
    const inline = dataUrlText(ref);
    if (inline !== undefined) {
      if (inline.length > MAX_SOURCE_MAP_BYTES) return null;
      return { loaded: { map: new SourceMap(JSON.parse(inline)), base: script }, bytes: inline.length };
    }
    const mapUrl = new URL(ref, script);
    if (mapUrl.protocol !== "file:") return null;
    const mapPath = fileURLToPath(mapUrl);
    const file = await regularFile(mapPath);
    if (!file || file.size > MAX_SOURCE_MAP_BYTES) return null;
    const text = await readTail(mapPath, MAX_SOURCE_MAP_BYTES, budget);
    if (!text || text.length !== file.size) return null;
    return { loaded: { map: new SourceMap(JSON.parse(text.toString("utf8"))), base: mapUrl }, bytes: text.length };
  } catch {
    return null; // not JSON, not a source map, a URL that does not parse: report the raw position
  }
}

/** The source map of the script a frame names, through `cache`; null when it has none or may not be read. */
async function mapOfScript(url: string, cache: SourceMapCache, budget: Budget): Promise<LoadedMap | null> {
  if (url.startsWith("data:")) {
    if (url.length > MAX_SOURCE_MAP_BYTES) return null;
    const ref = mappingUrlOf(dataUrlText(url) ?? "");
    // A data: script has no place on disk: only an inline map can belong to it.
    return ref?.startsWith("data:") ? ((await loadMapAt(ref, new URL("data:,"), budget))?.loaded ?? null) : null;
  }
  let path: string;
  try {
    if (url.startsWith("file:")) path = fileURLToPath(url);
    else if (url.startsWith("/")) path = fileURLToPath(pathToFileURL(url));
    else return null; // node:internal, eval, a remote URL: not mapped
  } catch {
    return null;
  }
  const file = await regularFile(path);
  if (!file) return null;
  const cached = cache.get(path, file.identity);
  if (cached !== undefined) return cached;
  const script = pathToFileURL(path);
  // Most scripts end with a short `//# sourceMappingURL=x.js.map`; an inline
  // map makes the last line long, and then up to the map cap is read.
  let tail = await readTail(path, TAIL_BYTES, budget);
  if (tail && tail.length < file.size && !tail.subarray(0, tail.length - 1).includes(0x0a)) {
    tail = await readTail(path, MAX_SOURCE_MAP_BYTES, budget);
  }
  if (!tail) return null; // unreadable, swapped for something else, or over budget: try again next time
  const ref = mappingUrlOf(tail.toString("utf8"));
  const found = ref === undefined ? null : await loadMapAt(ref, script, budget);
  cache.set(path, file.identity, found?.loaded ?? null, found?.bytes ?? 0);
  return found?.loaded ?? null;
}

/** `frame` at its original source position through `loaded`, or unchanged. */
function mapWith(frame: Frame, loaded: LoadedMap | null): Frame {
  if (!loaded || frame.line < 1) return frame;
  try {
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
      url: frame.url.startsWith("/") && source.protocol === "file:" ? fileURLToPath(source) : source.href,
      line: entry.originalLine + 1,
      column: (entry.originalColumn ?? 0) + 1,
    };
  } catch {
    return frame;
  }
}

/** The maps of the scripts `urls` name, looked up one after another within one pass's budget. */
async function mapsOf(urls: Iterable<string>, cache: SourceMapCache): Promise<Map<string, LoadedMap | null>> {
  const budget: Budget = { bytes: MAX_BYTES_PER_PASS };
  const maps = new Map<string, LoadedMap | null>();
  for (const url of urls) {
    if (maps.has(url)) continue;
    maps.set(url, maps.size < MAX_SCRIPTS_PER_PASS ? await mapOfScript(url, cache, budget) : null);
  }
  return maps;
}

/** `frame` at its original source position, or unchanged when no source map covers it. */
export async function mapFrame(frame: Frame, cache: SourceMapCache = new SourceMapCache()): Promise<Frame> {
  return mapWith(frame, (await mapsOf([frame.url], cache)).get(frame.url) ?? null);
}

/**
 * The profile with every frame mapped to its original source where a
 * source map exists. Give a long-lived `cache` when mapping repeatedly (a
 * server): each script's map is then read and parsed once.
 */
export async function mapProfileToSources(profile: HeapProfile, cache: SourceMapCache = new SourceMapCache()): Promise<HeapProfile> {
  const maps = await mapsOf(
    (function* () {
      for (const s of profile.sites) for (const f of s.frames) yield f.url;
    })(),
    cache,
  );
  // Sites share frame objects: each is mapped once, and the mapped frames are shared alike.
  const mapped = new Map<Frame, Frame>();
  const map = (f: Frame): Frame => {
    let m = mapped.get(f);
    if (m === undefined) mapped.set(f, (m = mapWith(f, maps.get(f.url) ?? null)));
    return m;
  };
  return { ...profile, sites: profile.sites.map((s) => ({ ...s, frames: s.frames.map(map) })) };
}
