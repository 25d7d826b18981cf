/** Golden tests of the seed's text tree and of collapsed stacks, on hand-built profiles. */
import { describe, expect, it } from "vitest";
import { formatTree } from "../../src/report/tree.js";
import { toFlamegraphSvg } from "../../src/report/flamegraph.js";
import { roundPreservingSum, toCollapsed } from "../../src/report/collapsed.js";
import { profileOf as profile, siteOf as site } from "../helpers.js";

// The seed's example, reduced: leaf-first stacks as the profiler records them.
const seed = profile([
  site(["allocate_large_and_trim", "allocate_large_aligned", "segment_zone", "allocate_segment"], 268435456, 1),
  site(["allocate_large_and_trim", "allocate_large_aligned", "allocate_aligned", "memalign", "acquire_buffer"], 262144, 2),
  site(["allocate_large_and_trim", "allocate_large_aligned", "allocate_aligned", "posix_memalign"], 262144, 2),
  site(["small_object"], 100, 3),
  site(["freed_long_ago"], 0, 0),
]);

describe("what is not there", () => {
  it("sites of less than a byte (float residue from a hand-built or foreign profile) are not drawn, in the tree or the SVG", () => {
    const residue = profile([site(["leaf", "main"], 1.6e-10, 1e-12), site(["other"], 0.2e-10, 0)]);
    expect(formatTree(residue)).toBe("All (0, #0)\n");
    expect(toFlamegraphSvg(residue).match(/<g class="frame"/g)).toHaveLength(1); // the root only, not "0 bytes, 88.89%"
    expect(toCollapsed(residue)).toBe("");
  });
});

describe("formatTree", () => {
  it("prints the seed's format: branches, stems, sizes descending, equal chains collapsed", () => {
    expect(formatTree(seed)).toBe(
      [
        "All (268959844, #8)",
        " |-- allocate_large_and_trim (268959744, #5)",
        " |   allocate_large_aligned",
        " |    |-- segment_zone (268435456, #1)",
        " |    |   allocate_segment",
        " |    |   ",
        " |    \\-- allocate_aligned (524288, #4)",
        " |         |-- memalign (262144, #2)",
        " |         |   acquire_buffer",
        " |         |   ",
        " |         \\-- posix_memalign (262144, #2)",
        " |   ",
        " \\-- small_object (100, #3)",
        "",
      ].join("\n"),
    );
  });

  it("inverted: caller-first", () => {
    const p = profile([site(["leaf_a", "main"], 300, 3), site(["leaf_b", "main"], 100, 1)]);
    expect(formatTree(p, { inverted: true })).toBe(
      ["All (400, #4)", "main", " |-- leaf_a (300, #3)", " |   ", " \\-- leaf_b (100, #1)", ""].join("\n"),
    );
    expect(formatTree(p)).toBe(
      ["All (400, #4)", " |-- leaf_a (300, #3)", " |   main", " |   ", " \\-- leaf_b (100, #1)", "     main", ""].join("\n"),
    );
  });

  it("minSize drops smaller branches", () => {
    const tree = formatTree(seed, { minSize: 262145 });
    expect(tree).not.toMatch(/small_object|memalign/);
    expect(tree).toMatch(/allocate_aligned \(524288, #4\)/);
    expect(formatTree(seed, { minSize: 1e12 })).toBe("");
  });

  it("rounds sampled estimates and names frames with their position", () => {
    const p = profile([
      { frames: [{ functionName: "", url: "file:///app.js", line: 3, column: 14 }, { functionName: "main", url: "file:///app.js", line: 9, column: 1 }], size: 1000.6, count: 2.4, allocCount: 3, allocSize: 2000 },
    ]);
    expect(formatTree(p)).toBe(["All (1001, #2)", "(anonymous) (file:///app.js:3:14)", "main (file:///app.js:9:1)", ""].join("\n"));
  });

  it("an empty profile is just the root", () => {
    expect(formatTree(profile([]))).toBe("All (0, #0)\n");
  });
});

describe("toCollapsed", () => {
  it("writes root-first stacks whose integer bytes add up to the total", () => {
    expect(toCollapsed(seed)).toBe(
      [
        "allocate_segment;segment_zone;allocate_large_aligned;allocate_large_and_trim 268435456",
        "acquire_buffer;memalign;allocate_aligned;allocate_large_aligned;allocate_large_and_trim 262144",
        "posix_memalign;allocate_aligned;allocate_large_aligned;allocate_large_and_trim 262144",
        "small_object 100",
        "",
      ].join("\n"),
    );
    const sampled = profile([site(["a"], 10.4, 1), site(["b"], 10.4, 1), site(["c"], 10.2, 1)]);
    const sum = toCollapsed(sampled).trim().split("\n").reduce((n, l) => n + Number(l.split(" ").pop()), 0);
    expect(sum).toBe(Math.round(sampled.totalSize));
  });

  it("removes ; and line breaks from names", () => {
    expect(toCollapsed(profile([site(["a;b\nc"], 5, 1)]))).toBe("abc 5\n");
  });

  it("roundPreservingSum keeps the rounded total", () => {
    expect(roundPreservingSum([0.5, 0.5, 0.5, 0.5])).toEqual([1, 1, 0, 0]);
    expect(roundPreservingSum([1.2, 2.2, 3.6])).toEqual([1, 2, 4]);
  });
});
