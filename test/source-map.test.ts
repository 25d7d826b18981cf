/** Report-time mapping of recorded JS positions to original sources. */
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { mapFrame, mapProfileToSources } from "../src/report/source-map.js";
import type { HeapProfile } from "../src/index.js";

const distUnits = fileURLToPath(new URL("../dist/units.js", import.meta.url));
const srcUnits = fileURLToPath(new URL("../src/units.ts", import.meta.url));
const lineOf = (file: string, text: string): number => readFileSync(file, "utf8").split("\n").findIndex((l) => l.includes(text)) + 1;

describe("source maps", () => {
  it("maps a built JS position to the TypeScript source, as a path or a URL", () => {
    const line = lineOf(distUnits, "export function formatSize");
    const frame = { functionName: "formatSize", url: distUnits, line, column: 17 };
    expect(mapFrame(frame)).toEqual({ functionName: "formatSize", url: srcUnits, line: lineOf(srcUnits, "export function formatSize"), column: 17 });
    const asUrl = mapFrame({ ...frame, url: pathToFileURL(distUnits).href });
    expect(asUrl.url).toBe(pathToFileURL(srcUnits).href);
  });

  it("reads inline (data:) source maps", () => {
    const dir = mkdtempSync(join(tmpdir(), "shardheap-sm-"));
    // One generated line "a;b" whose column 2 maps to original.ts line 10, column 4.
    const map = { version: 3, sources: ["original.ts"], names: [], mappings: "AASI,EAAA" };
    const file = join(dir, "gen.js");
    writeFileSync(file, `a;b\n//# sourceMappingURL=data:application/json;base64,${Buffer.from(JSON.stringify(map)).toString("base64")}\n`);
    const mapped = mapFrame({ functionName: "f", url: file, line: 1, column: 1 });
    expect(mapped).toEqual({ functionName: "f", url: join(dir, "original.ts"), line: 10, column: 5 });
  });

  it("leaves frames without a map, or that cannot be read, as they are", () => {
    const none = { functionName: "g", url: fileURLToPath(import.meta.url), line: 3, column: 1 };
    expect(mapFrame({ ...none, url: "node:internal/timers" })).toEqual({ ...none, url: "node:internal/timers" });
    expect(mapFrame({ ...none, url: "/no/such/file.js" })).toEqual({ ...none, url: "/no/such/file.js" });
  });

  it("maps every frame of a profile and keeps the figures", () => {
    const line = lineOf(distUnits, "export function parseSize");
    const profile: HeapProfile = {
      shard: 0, sampleRate: 1, totalSize: 64, totalCount: 1,
      sites: [{ frames: [{ functionName: "parseSize", url: distUnits, line, column: 17 }], count: 1, size: 64, allocCount: 2, allocSize: 128 }],
    };
    const mapped = mapProfileToSources(profile);
    expect(mapped.sites[0]!.frames[0]!.url).toBe(srcUnits);
    expect(mapped.sites[0]!.frames[0]!.line).toBe(lineOf(srcUnits, "export function parseSize"));
    expect({ ...mapped, sites: [] }).toEqual({ ...profile, sites: [] });
    expect(mapped.sites[0]!.allocSize).toBe(128);
  });
});
