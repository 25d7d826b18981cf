/** Report-time mapping of recorded JS positions to original sources. */
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, truncateSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_SOURCE_MAP_BYTES, SourceMapCache, mapFrame, mapProfileToSources } from "../../src/report/source-map.js";
import type { HeapProfile } from "../../src/index.js";

const distUnits = fileURLToPath(new URL("../../dist/units.js", import.meta.url));
const srcUnits = fileURLToPath(new URL("../../src/units.ts", import.meta.url));
const lineOf = (file: string, text: string): number => readFileSync(file, "utf8").split("\n").findIndex((l) => l.includes(text)) + 1;

describe("source maps", () => {
  it("maps a built JS position to the TypeScript source, as a path or a URL", async () => {
    const line = lineOf(distUnits, "export function formatSize");
    const frame = { functionName: "formatSize", url: distUnits, line, column: 17 };
    expect(await mapFrame(frame)).toEqual({ functionName: "formatSize", url: srcUnits, line: lineOf(srcUnits, "export function formatSize"), column: 17 });
    const asUrl = await mapFrame({ ...frame, url: pathToFileURL(distUnits).href });
    expect(asUrl.url).toBe(pathToFileURL(srcUnits).href);
  });

  it("reads inline (data:) source maps", async () => {
    const dir = mkdtempSync(join(tmpdir(), "shardheap-sm-"));
    // One generated line "a;b" whose column 2 maps to original.ts line 10, column 4.
    const map = { version: 3, sources: ["original.ts"], names: [], mappings: "AASI,EAAA" };
    const file = join(dir, "gen.js");
    writeFileSync(file, `a;b\n//# sourceMappingURL=data:application/json;base64,${Buffer.from(JSON.stringify(map)).toString("base64")}\n`);
    const mapped = await mapFrame({ functionName: "f", url: file, line: 1, column: 1 });
    expect(mapped).toEqual({ functionName: "f", url: join(dir, "original.ts"), line: 10, column: 5 });
  });

  it("leaves frames without a map, or that cannot be read, as they are", async () => {
    const none = { functionName: "g", url: fileURLToPath(import.meta.url), line: 3, column: 1 };
    expect(await mapFrame({ ...none, url: "node:internal/timers" })).toEqual({ ...none, url: "node:internal/timers" });
    expect(await mapFrame({ ...none, url: "/no/such/file.js" })).toEqual({ ...none, url: "/no/such/file.js" });
  });

  it("maps every frame of a profile and keeps the figures", async () => {
    const line = lineOf(distUnits, "export function parseSize");
    const profile: HeapProfile = {
      shard: 0, sampleRate: 1, totalSize: 64, totalCount: 1,
      sites: [{ frames: [{ functionName: "parseSize", url: distUnits, line, column: 17 }], count: 1, size: 64, allocCount: 2, allocSize: 128 }],
    };
    const mapped = await mapProfileToSources(profile);
    expect(mapped.sites[0]!.frames[0]!.url).toBe(srcUnits);
    expect(mapped.sites[0]!.frames[0]!.line).toBe(lineOf(srcUnits, "export function parseSize"));
    expect({ ...mapped, sites: [] }).toEqual({ ...profile, sites: [] });
    expect(mapped.sites[0]!.allocSize).toBe(128);
  });
});

/** `promise`, or a rejection naming `what` after `ms`: a regression to a blocking read fails instead of hanging. */
async function within<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

describe("source maps of frames that name something else than a script", () => {
  let dir: string;
  let fifo: string;
  /** One generated line "a;b" whose column 2 maps to original.ts line 10, column 4. */
  const map = { version: 3, sources: ["original.ts"], names: [], mappings: "AASI,EAAA" };
  const frameIn = (url: string) => ({ functionName: "f", url, line: 1, column: 3 });
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "shardheap-sm-hostile-"));
    fifo = join(dir, "fifo");
    execFileSync("mkfifo", [fifo]);
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("never reads a device, a FIFO or a directory, as a script or as its map", async () => {
    const subdir = join(dir, "a-directory");
    mkdirSync(subdir);
    for (const url of ["/dev/zero", "file:///dev/zero", "/dev/urandom", fifo, pathToFileURL(fifo).href, subdir]) {
      expect(await within(10_000, url, mapFrame(frameIn(url))), url).toEqual(frameIn(url));
    }
    // A regular script whose map reference names a device or a FIFO.
    for (const [name, ref] of [["zero.js", "/dev/zero"], ["fifo.js", pathToFileURL(fifo).href], ["dir.js", "a-directory"]] as const) {
      const script = join(dir, name);
      writeFileSync(script, `a;b\n//# sourceMappingURL=${ref}\n`);
      expect(await within(10_000, name, mapFrame(frameIn(script))), name).toEqual(frameIn(script));
    }
    // The same file with a real map next to it maps, so the cases above cannot pass vacuously.
    writeFileSync(join(dir, "good.js.map"), JSON.stringify(map));
    writeFileSync(join(dir, "good.js"), "a;b\n//# sourceMappingURL=good.js.map\n");
    expect((await mapFrame(frameIn(join(dir, "good.js")))).line).toBe(10);
  });

  it("skips a map over the size cap without reading it, and remote or non-file sources", async () => {
    writeFileSync(join(dir, "big.js"), "a;b\n//# sourceMappingURL=big.js.map\n");
    writeFileSync(join(dir, "big.js.map"), JSON.stringify(map));
    truncateSync(join(dir, "big.js.map"), MAX_SOURCE_MAP_BYTES + 1); // sparse: a cap check, not a slow read
    expect(await mapFrame(frameIn(join(dir, "big.js")))).toEqual(frameIn(join(dir, "big.js")));
    writeFileSync(join(dir, "remote.js"), "a;b\n//# sourceMappingURL=http://127.0.0.1:9/remote.js.map\n");
    expect(await mapFrame(frameIn(join(dir, "remote.js")))).toEqual(frameIn(join(dir, "remote.js")));
    // A map whose sources are not files (a bundler's webpack:// URLs) maps to those URLs.
    const inline = Buffer.from(JSON.stringify({ ...map, sources: ["webpack:///src/original.ts"] })).toString("base64");
    writeFileSync(join(dir, "bundle.js"), `a;b\n//# sourceMappingURL=data:application/json;base64,${inline}\n`);
    expect(await mapFrame(frameIn(join(dir, "bundle.js")))).toEqual({ functionName: "f", url: "webpack:///src/original.ts", line: 10, column: 5 });
    // A script given as a data: URL (import("data:text/javascript,...")) is decoded, never looked up on disk.
    const script = `data:text/javascript,${encodeURIComponent(`a;b\n//# sourceMappingURL=data:application/json;base64,${inline}\n`)}`;
    expect(await mapFrame(frameIn(script))).toEqual({ functionName: "f", url: "webpack:///src/original.ts", line: 10, column: 5 });
  });

  it("caches maps by the script's identity, in a bounded LRU", async () => {
    const script = join(dir, "cached.js");
    writeFileSync(join(dir, "cached.js.map"), JSON.stringify(map));
    writeFileSync(script, "a;b\n//# sourceMappingURL=cached.js.map\n");
    const cache = new SourceMapCache(2);
    expect((await mapFrame(frameIn(script), cache)).line).toBe(10);
    // The map breaks but the script is the same file: the cached map answers.
    writeFileSync(join(dir, "cached.js.map"), "not json");
    expect((await mapFrame(frameIn(script), cache)).line).toBe(10);
    // The script is rebuilt (new mtime): read again, and the broken map leaves the frame raw.
    utimesSync(script, new Date(), new Date(Date.now() + 5000));
    expect(await mapFrame(frameIn(script), cache)).toEqual(frameIn(script));
    for (const name of ["one.js", "two.js", "three.js"]) {
      writeFileSync(join(dir, name), "a;b\n");
      await mapFrame(frameIn(join(dir, name)), cache);
    }
    expect(cache.size).toBe(2);
  });
});
