/** Growing sites: the least-squares fit and the ranking, on series whose answer is known. */
import { describe, expect, it } from "vitest";
import { MIN_FIT, MIN_POINTS, fitLine, rankGrowingSites } from "../src/runtime/growing-sites.js";
import { fillHistoryOptions } from "../src/runtime/memory-history.js";

const frames = (name: string) => [{ functionName: name, url: "", line: 1, column: 1 }];

describe("fitLine", () => {
  it("finds the slope and a perfect fit of a line, no fit of a constant", () => {
    expect(fitLine([0, 1, 2, 3], [10, 12, 14, 16])).toEqual({ slope: 2, r2: 1 });
    expect(fitLine([0, 1, 2, 3], [5, 5, 5, 5])).toEqual({ slope: 0, r2: 0 });
    expect(fitLine([1], [1])).toEqual({ slope: 0, r2: 0 });
    const noisy = fitLine([0, 1, 2, 3, 4, 5], [0, 10, 0, 10, 0, 10]);
    expect(noisy.r2).toBeLessThan(0.5);
  });
});

describe("rankGrowingSites", () => {
  const t = [...Array(30).keys()];
  let seed = 3;
  const wobble = (): number => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31 - 0.5) * 200_000;

  it("ranks steady growth by slope and leaves out steady, noisy, shrinking and one-step sites", () => {
    const ranked = rankGrowingSites(t, [
      { frames: frames("slowLeak"), y: t.map((x) => 1000 + 4096 * x) },
      { frames: frames("steady"), y: t.map(() => 5_000_000 + wobble()) },
      { frames: frames("fastLeak"), y: t.map((x) => 65536 * x + (x % 2) * 1000) },
      { frames: frames("shrinking"), y: t.map((x) => 1e6 - 1000 * x) },
      { frames: frames("jumpedOnce"), y: t.map((x) => (x < 29 ? 0 : 1e6)) },
    ]);
    expect(ranked.map((g) => g.frames[0]!.functionName)).toEqual(["fastLeak", "slowLeak"]);
    expect(ranked[1]).toMatchObject({ slope: 4096, r2: 1, liveBytes: 1000 + 4096 * 29, growth: 4096 * 29 });
    expect(ranked.every((g) => g.r2 >= MIN_FIT)).toBe(true);
  });

  it("by objects: a leak of many small objects leads, the large objects' steady growth second; each site carries both fits", () => {
    const series = [
      { frames: frames("cacheBlocks"), y: t.map((x) => 65536 * 10 * x), counts: t.map((x) => 10 * x) },
      { frames: frames("smallLeak"), y: t.map((x) => 64 * 400 * x), counts: t.map((x) => 400 * x) },
      { frames: frames("fewerBytesNoObjects"), y: t.map((x) => 1000 * x), counts: t.map(() => 7) },
    ];
    expect(rankGrowingSites(t, series).map((g) => g.frames[0]!.functionName)).toEqual(["cacheBlocks", "smallLeak", "fewerBytesNoObjects"]);
    const byCount = rankGrowingSites(t, series, 20, "count");
    expect(byCount.map((g) => g.frames[0]!.functionName)).toEqual(["smallLeak", "cacheBlocks"]);
    expect(byCount[0]).toMatchObject({ slope: 64 * 400, r2: 1, countSlope: 400, countR2: 1, liveCount: 400 * 29, countGrowth: 400 * 29, liveBytes: 64 * 400 * 29 });
  });

  it("says nothing before it has MIN_POINTS samples, and keeps to the limit", () => {
    const few = t.slice(0, MIN_POINTS - 1);
    expect(rankGrowingSites(few, [{ frames: frames("a"), y: few.map((x) => x * 100) }])).toEqual([]);
    const many = [...Array(50).keys()].map((i) => ({ frames: frames(`s${i}`), y: t.map((x) => x * (i + 1)) }));
    expect(rankGrowingSites(t, many, 5).map((g) => g.frames[0]!.functionName)).toEqual(["s49", "s48", "s47", "s46", "s45"]);
  });
});

describe("fillHistoryOptions", () => {
  it("fills defaults and refuses values out of range, naming the field", () => {
    expect(fillHistoryOptions()).toEqual({ sampleIntervalMs: 1000, historySeconds: 900, growthWindowSeconds: 300 });
    expect(() => fillHistoryOptions({ sampleIntervalMs: 10 })).toThrow(/options\.dashboard\.sampleIntervalMs must be a whole number from 50/);
    expect(() => fillHistoryOptions({ historySeconds: 60, growthWindowSeconds: 120 })).toThrow(/growthWindowSeconds/);
    expect(() => fillHistoryOptions({ historySeconds: 1.5 })).toThrow(RangeError);
  });
});
