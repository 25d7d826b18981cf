/**
 * Label values (and frame names) holding any character, through every
 * report format: the text formats (tree, collapsed stacks) and the SVG show
 * control characters as visible escapes, so a value can neither forge a
 * tree line, nor drive the terminal that reads the tree, nor break the SVG's
 * XML; json, .heapprofile and pprof carry the exact value (pprof read back
 * too). memcached's key prefixes, which clients choose, are such values.
 */
import { gunzipSync } from "node:zlib";
import { Profile } from "pprof-format";
import { describe, expect, it } from "vitest";
import type { AllocationSite, HeapProfile } from "../../dist/memory/heap-profile.js";
import { diffProfiles } from "../../dist/report/diff.js";
import { fromPprof } from "../../dist/report/pprof-read.js";
import { DIFF_FORMATS, renderProfile, type RenderOptions } from "../../dist/report/render.js";
import { profileOf } from "../helpers.js";

/** A value a client chose: a terminal escape sequence (clear screen), a NUL, a forged tree line, C1 and Unicode separators, XML's forbidden U+FFFE. */
const CLEAR = "t\x01\x1b[2J";
const VALUES = [CLEAR, "nul\x00", "a\n |-- forged (999999, #1)", "c1\x85\x9b\x7f", "sep\u2028\u2029", "bad\ufffe\uffff", "tab\tcr\r"];
const FRAME_NAME = "handler\x1b[31m\x07";

const site = (size: number, labels: Record<string, string>): AllocationSite => ({
  frames: [
    { functionName: FRAME_NAME, url: "file:///app/main.js", line: 10, column: 1 },
    { functionName: "main", url: "file:///app/main.js", line: 99, column: 1 },
  ],
  count: 1,
  size,
  allocCount: 1,
  allocSize: size,
  labels,
});
const p = profileOf(VALUES.map((v, i) => site(1000 * (i + 1), { prefix: v, tenant: `x${v}` })));

/** Characters no text output may carry raw: C0 but the line feed that ends a line, DEL, C1, the Unicode separators, U+FFFE/U+FFFF. */
const RAW_CONTROL = /[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\ufffe\uffff]/;
/** What XML 1.0 forbids in a document (its Char production), lone surrogates aside (none in these values). */
const NOT_XML = /[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]/;

const text = (format: "tree" | "collapsed" | "svg", o: RenderOptions = {}, profile = p): string => renderProfile(profile, format, o).body as string;

describe("label values with control characters", () => {
  it("the tree (plain, by a label, inverted, a diff's) shows them escaped: no raw control character, no forged line", () => {
    const by = text("tree", { by: "prefix" });
    expect(by).not.toMatch(RAW_CONTROL);
    // One line per value's node and two frames each, plus the root and the blank stems between values.
    const lines = by.split("\n").filter((l) => l !== "");
    expect(lines).toHaveLength(1 + VALUES.length * 3 + (VALUES.length - 1));
    expect(lines.filter((l) => /^ [|\\]-- prefix=/.test(l))).toHaveLength(VALUES.length);
    expect(lines.some((l) => l.startsWith(" |-- forged"))).toBe(false);
    expect(by).toContain("prefix=t\\x01\\x1b[2J (");
    expect(by).toContain("prefix=a\\x0a |-- forged (999999, #1) (");
    expect(by).toContain("prefix=c1\\x85\\x9b\\x7f (");
    expect(by).toContain("prefix=sep\\u2028\\u2029 (");
    expect(by).toContain("handler\\x1b[31m\\x07 (file:///app/main.js:10:1)");
    for (const o of [{}, { inverted: true }, { by: "tenant", inverted: true }]) expect(text("tree", o), JSON.stringify(o)).not.toMatch(RAW_CONTROL);
    const grown = diffProfiles(profileOf([]), p);
    expect(text("tree", { by: "prefix" }, grown)).not.toMatch(RAW_CONTROL);
  });

  it("collapsed stacks: one line per site, no control character in any name", () => {
    for (const o of [{}, { by: "prefix" }]) {
      const lines = text("collapsed", o).split("\n").slice(0, -1);
      expect(lines).toHaveLength(VALUES.length);
      for (const line of lines) expect(line).toMatch(/^[^\n]+ \d+$/);
      expect(lines.join("\n")).not.toMatch(RAW_CONTROL);
    }
    expect(text("collapsed", { by: "prefix" })).toContain("prefix=t\\x01\\x1b[2J;main (file:///app/main.js:99:1);handler\\x1b[31m\\x07 (file:///app/main.js:10:1) 1000\n");
  });

  it("the SVG (plain, by a label, one value's, a diff's) is XML that carries them as visible escapes", () => {
    const grown = diffProfiles(profileOf([]), p);
    for (const [what, svg] of [
      ["plain", text("svg")],
      ["by", text("svg", { by: "prefix" })],
      ["one value", text("svg", { by: "prefix", label: ["prefix", CLEAR] })],
      ["diff", text("svg", { by: "prefix" }, grown)],
      ["title", text("svg", { title: `growth of ${CLEAR}` })],
    ] as const) {
      expect(svg, what).not.toMatch(NOT_XML);
      expect(svg, what).not.toMatch(RAW_CONTROL);
    }
    const by = text("svg", { by: "prefix" });
    expect(by).toContain('data-name="prefix=t\\x01\\x1b[2J"');
    expect(by).toContain('data-name="prefix=bad\\ufffe\\uffff"');
    expect(by).toContain('data-name="prefix=tab\\x09cr\\x0d"');
  });

  it("json, .heapprofile and pprof carry the exact values", () => {
    const json = JSON.parse(renderProfile(p, "json", { by: "prefix" }).body as string) as HeapProfile & { groups: Array<{ value?: string }> };
    expect(json.sites.map((s) => s.labels!.prefix).sort()).toEqual([...VALUES].sort());
    expect(json.groups.map((g) => g.value).sort()).toEqual([...VALUES].sort());
    expect(json.sites[0]!.frames[0]!.functionName).toBe(FRAME_NAME);
    const devtools = JSON.parse(renderProfile(p, "heapprofile", { by: "prefix" }).body as string) as { head: { children: Array<{ callFrame: { functionName: string } }> } };
    expect(devtools.head.children.map((c) => c.callFrame.functionName).sort()).toEqual(VALUES.map((v) => `prefix=${v}`).sort());
    const bytes = renderProfile(p, "pprof").body as Uint8Array;
    const decoded = Profile.decode(gunzipSync(bytes));
    const strings = decoded.stringTable.strings;
    expect(decoded.sample.map((s) => strings[Number(s.label.find((l) => strings[Number(l.key)] === "prefix")!.str)]).sort()).toEqual([...VALUES].sort());
    const back = fromPprof(bytes);
    expect(back.sites.map((s) => s.labels).sort((a, b) => a!.prefix!.localeCompare(b!.prefix!))).toEqual(p.sites.map((s) => s.labels).sort((a, b) => a!.prefix!.localeCompare(b!.prefix!)));
    expect(back.sites[0]!.frames[0]!.functionName).toBe(FRAME_NAME);
    // A diff's formats: the text ones escaped, json exact.
    const grown = diffProfiles(profileOf([]), p);
    for (const format of DIFF_FORMATS) {
      const body = renderProfile(grown, format, { by: "prefix" }).body;
      if (format === "json") expect((JSON.parse(body as string) as HeapProfile).sites.map((s) => s.labels!.prefix).sort()).toEqual([...VALUES].sort());
      else if (format !== "pprof") expect(body as string, format).not.toMatch(RAW_CONTROL);
    }
  });

  it("a value's filter takes the exact value, control characters and all", () => {
    const one = JSON.parse(renderProfile(p, "json", { label: ["prefix", CLEAR] }).body as string) as HeapProfile;
    expect(one.sites.map((s) => s.labels!.prefix)).toEqual([CLEAR]);
    // One site: the chain folds onto the root's lines.
    expect(text("tree", { label: ["prefix", CLEAR], by: "prefix" }).split("\n").slice(0, 2)).toEqual(["All (1000, #1)", "prefix=t\\x01\\x1b[2J"]);
  });
});
