/**
 * Labels through the renderers, on hand-built profiles: a site is its
 * frames plus its labels (merges and diffs keep two sites of one stack
 * apart when their labels differ), pprof writes them as string labels and
 * reads them back, and `by` groups every format by one label.
 */
import { gunzipSync } from "node:zlib";
import { Profile } from "pprof-format";
import { describe, expect, it } from "vitest";
import { OTHER_LABELS } from "../dist/memory/profiler/heap-labels.js";
import type { AllocationSite, HeapProfile } from "../dist/memory/heap-profile.js";
import { diffProfiles, mergeProfiles } from "../dist/report/diff.js";
import { groupByLabel, labelNames } from "../dist/report/labels.js";
import { fromPprof } from "../dist/report/pprof-read.js";
import { renderProfile } from "../dist/report/render.js";
import { formatTree } from "../dist/report/tree.js";

const frame = (functionName: string, line: number) => ({ functionName, url: "file:///app/main.js", line, column: 1 });
const site = (size: number, count: number, labels?: Record<string, string>, leaf = "allocate"): AllocationSite => ({
  frames: [frame(leaf, 10), frame("main", 99)],
  count,
  size,
  allocCount: count,
  allocSize: size,
  ...(labels === undefined ? {} : { labels }),
});
const profile = (sites: AllocationSite[]): HeapProfile => ({
  shard: "all",
  sampleRate: 1,
  sites,
  totalSize: sites.reduce((n, s) => n + s.size, 0),
  totalCount: sites.reduce((n, s) => n + s.count, 0),
});

const p = profile([site(3000, 3, { prefix: "user" }), site(2000, 2, { prefix: "session" }), site(500, 1)]);

describe("labels in reports", () => {
  it("merging adds sites up by frames and labels: one stack with two label values stays two sites", () => {
    const merged = mergeProfiles([p, profile([site(1000, 1, { prefix: "user" })])]);
    expect(merged.sites.map((s) => [s.labels?.prefix, s.size])).toEqual([["user", 4000], ["session", 2000], [undefined, 500]]);
    expect(labelNames(merged)).toEqual(["prefix"]);
  });

  it("a diff matches sites by frames and labels", () => {
    const next = profile([site(5000, 5, { prefix: "user" }), site(2000, 2, { prefix: "session" }), site(500, 1, { prefix: "cart" })]);
    const d = diffProfiles(p, next);
    const by = Object.fromEntries(d.sites.map((s) => [s.labels?.prefix ?? "-", s.size]));
    expect(by).toEqual({ user: 2000, session: 0, cart: 500, "-": -500 });
  });

  it("pprof carries labels as string labels, in name order, and reads them back", () => {
    const two = profile([site(100, 1, { tenant: "a", route: "/x" })]);
    const bytes = renderProfile(two, "pprof").body as Uint8Array;
    const decoded = Profile.decode(gunzipSync(bytes));
    const strings = decoded.stringTable.strings;
    expect(decoded.sample[0]!.label.map((l) => [strings[Number(l.key)], strings[Number(l.str)]])).toEqual([["route", "/x"], ["tenant", "a"]]);
    expect(fromPprof(bytes).sites[0]!.labels).toEqual({ route: "/x", tenant: "a" });
    expect(fromPprof(renderProfile(profile([site(1, 1)]), "pprof").body as Uint8Array).sites[0]!.labels).toBeUndefined();
  });

  it("groups by a label: figures per value, sites without it as (none)", () => {
    expect(groupByLabel(p, "prefix")).toEqual([
      { value: "user", count: 3, size: 3000, allocCount: 3, allocSize: 3000, sites: 1 },
      { value: "session", count: 2, size: 2000, allocCount: 2, allocSize: 2000, sites: 1 },
      { value: undefined, count: 1, size: 500, allocCount: 1, allocSize: 500, sites: 1 },
    ]);
    expect(JSON.parse(renderProfile(p, "json", { by: "prefix" }).body as string).groups.map((g: { value?: string; size: number }) => [g.value ?? null, g.size])).toEqual([["user", 3000], ["session", 2000], [null, 500]]);
  });

  it("by: the tree's first level is the label's values, collapsed stacks and the flamegraph root at them", () => {
    expect(formatTree(p, { by: "prefix" })).toBe(
      [
        "All (5500, #6)",
        " |-- prefix=user (3000, #3)",
        " |   allocate (file:///app/main.js:10:1)",
        " |   main (file:///app/main.js:99:1)",
        " |   ",
        " |-- prefix=session (2000, #2)",
        " |   allocate (file:///app/main.js:10:1)",
        " |   main (file:///app/main.js:99:1)",
        " |   ",
        " \\-- prefix=(none) (500, #1)",
        "     allocate (file:///app/main.js:10:1)",
        "     main (file:///app/main.js:99:1)",
        "",
      ].join("\n"),
    );
    // Without by, the stack's three sites are one node.
    expect(formatTree(p)).toBe("All (5500, #6)\nallocate (file:///app/main.js:10:1)\nmain (file:///app/main.js:99:1)\n");
    expect(renderProfile(p, "collapsed", { by: "prefix" }).body).toBe(
      "prefix=user;main (file:///app/main.js:99:1);allocate (file:///app/main.js:10:1) 3000\n" +
        "prefix=session;main (file:///app/main.js:99:1);allocate (file:///app/main.js:10:1) 2000\n" +
        "prefix=(none);main (file:///app/main.js:99:1);allocate (file:///app/main.js:10:1) 500\n",
    );
    expect(renderProfile(p, "svg", { by: "prefix" }).body).toMatch(/prefix=session/);
  });
});

describe("the fold set, (other labels)", () => {
  it("its sites group under (other labels) whatever label a report groups or filters by: which value they had is not known", () => {
    const folded = profile([site(3000, 3, { prefix: "user" }), site(700, 7, { [OTHER_LABELS]: OTHER_LABELS }), site(500, 1)]);
    for (const name of ["prefix", "tenant"]) {
      expect(groupByLabel(folded, name).map((g) => [g.value, g.size])).toEqual(name === "prefix" ? [["user", 3000], [OTHER_LABELS, 700], [undefined, 500]] : [[undefined, 3500], [OTHER_LABELS, 700]]);
      const only = JSON.parse(renderProfile(folded, "json", { label: [name, OTHER_LABELS] }).body as string) as HeapProfile;
      expect([only.totalSize, only.totalCount]).toEqual([700, 7]);
    }
    expect(formatTree(folded, { by: "tenant" })).toMatch(/^ \\-- tenant=\(other labels\) \(700, #7\)$/m);
    expect(renderProfile(folded, "collapsed", { by: "prefix" }).body).toContain("prefix=(other labels);main (file:///app/main.js:99:1);allocate (file:///app/main.js:10:1) 700\n");
  });
});

describe("label filters", () => {
  it("label=NAME=VALUE keeps one value's sites, (none) those without; totals follow", () => {
    const user = JSON.parse(renderProfile(p, "json", { label: ["prefix", "user"] }).body as string) as HeapProfile;
    expect([user.totalSize, user.totalCount, user.sites.length]).toEqual([3000, 3, 1]);
    const none = JSON.parse(renderProfile(p, "json", { label: ["prefix", "(none)"] }).body as string) as HeapProfile;
    expect([none.totalSize, none.sites[0]!.labels]).toEqual([500, undefined]);
    expect(renderProfile(p, "collapsed", { label: ["prefix", "nobody"] }).body).toBe("");
  });
});
