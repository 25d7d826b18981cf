/** pprof round trip: encode a profile, decode it again with pprof-format, check types, totals and stacks. */
import { gunzipSync } from "node:zlib";
import { Profile } from "pprof-format";
import { describe, expect, it } from "vitest";
import type { AllocationSite, HeapProfile } from "../../src/index.js";
import { toPprof } from "../../src/report/pprof.js";

const frame = (functionName: string, line: number) => ({ functionName, url: "file:///srv/app.js", line, column: 5 });
const sites: AllocationSite[] = [
  { frames: [frame("makeBuffer", 10), frame("handle", 20), frame("main", 30)], count: 4, size: 16384, allocCount: 10, allocSize: 40960 },
  { frames: [frame("makeKey", 11), frame("handle", 20), frame("main", 30)], count: 2.6, size: 124.8, allocCount: 7.2, allocSize: 345.6 },
  { frames: [frame("", 3)], count: 0, size: 0, allocCount: 1, allocSize: 64 },
];
const profile: HeapProfile = { shard: "all", sampleRate: 4096, sites, totalSize: 16508.8, totalCount: 6.6 };

function decode(bytes: Uint8Array) {
  const p = Profile.decode(gunzipSync(bytes));
  const str = (i: unknown): string => p.stringTable.strings[Number(i)]!;
  const fn = new Map(p.function.map((f) => [Number(f.id), f]));
  const loc = new Map(p.location.map((l) => [Number(l.id), l]));
  const stack = (s: (typeof p.sample)[number]) =>
    s.locationId.map((id) => {
      const line = loc.get(Number(id))!.line[0]!;
      return `${str(fn.get(Number(line.functionId))!.name)}:${Number(line.line)}:${Number(line.column)}`;
    });
  return { p, str, stack };
}

describe("toPprof", () => {
  it("is gzipped profile.proto with Go's heap sample types, inuse_space by default", () => {
    const bytes = toPprof(profile);
    expect([bytes[0], bytes[1]]).toEqual([0x1f, 0x8b]);
    const { p, str } = decode(bytes);
    expect(p.sampleType.map((t) => `${str(t.type)}/${str(t.unit)}`)).toEqual([
      "alloc_objects/count",
      "alloc_space/bytes",
      "inuse_objects/count",
      "inuse_space/bytes",
    ]);
    expect(str(p.defaultSampleType)).toBe("inuse_space");
    expect(`${str(p.periodType!.type)}/${str(p.periodType!.unit)}`).toBe("space/bytes");
    expect(Number(p.period)).toBe(4096);
  });

  it("keeps every site's stack (leaf first, with lines and columns) and totals that add up", () => {
    const { p, stack } = decode(toPprof(profile));
    expect(p.sample.map(stack)).toEqual([
      ["makeBuffer:10:5", "handle:20:5", "main:30:5"],
      ["makeKey:11:5", "handle:20:5", "main:30:5"],
      ["(anonymous):3:5"],
    ]);
    const total = (k: number) => p.sample.reduce((n, s) => n + Number(s.value[k]), 0);
    expect(total(3)).toBe(Math.round(profile.totalSize));
    expect(total(2)).toBe(Math.round(profile.totalCount));
    expect(total(1)).toBe(Math.round(40960 + 345.6 + 64));
    // Shared frames are one function and one location.
    expect(p.function.length).toBe(5);
    expect(p.location.length).toBe(5);
  });

  it("an exact or empty profile encodes too (period 1)", () => {
    const { p } = decode(toPprof({ shard: 0, sampleRate: 1, sites: [], totalSize: 0, totalCount: 0 }));
    expect(p.sample).toEqual([]);
    expect(Number(p.period)).toBe(1);
  });
});
