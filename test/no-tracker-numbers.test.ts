/**
 * No comment, test name or document refers to an item of the project's own
 * tracker ("issue 23", "(issue 18 point 7)", "the issue's target"): a reader
 * of the repository cannot open it, so a comment says the rule, why, and
 * the measurement that decided it, and the alternatives set aside live in
 * docs/decisions.md. Another project's tracker is fine when it is named so
 * that a reader can open it: a github.com URL, "jemalloc issue #N", or
 * memcached's own test files (t/issue_14.t).
 */
import { readFileSync, readdirSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("..", import.meta.url));
const FOLDERS = ["src", "test", "bench", "examples", "docs"];
const SKIPPED_DIRS = new Set(["node_modules", "dist"]);

/**
 * Files whose tracker references wait for a change made beside this one
 * (moving or rewriting them here would collide with it). Each is checked
 * to still hold one, so the list cannot outlive its reason: empty it as
 * the changes land.
 */
const PENDING = new Set<string>([]);

/**
 * References a reader can follow, blanked out before the search: an issue
 * or pull request URL on github.com, another project's issue named with
 * its project ("jemalloc issue #24457", "Node.js issue 1234"), memcached's
 * test files named after its issues.
 */
const ALLOWED: readonly RegExp[] = [
  /https?:\/\/github\.com\/[\w.-]+\/[\w.-]+\/(?:issues|pull)\/\d+/g,
  /\b(?:jemalloc|mimalloc|tcmalloc|memcached|Seastar|Node(?:\.js)?|V8|piscina|uPlot|vitest|TypeScript)(?:'s)? issues? #?\d+/gi,
  /\bt\/issue_\d+\.t\b|\bissue_\d+\.t\b/g,
];

/**
 * A tracker reference: "issue" with a number after it (across a space, "#",
 * "-" or a comment's line break: "issue\n// 19", "issue\n * 18"), or an
 * issue spoken of as a known document ("the issue's target", "(issue)",
 * "the profiler issue").
 */
const FORBIDDEN = new RegExp(
  [
    String.raw`\bissues?(?:[\s#-]|\/\/|\*)*\d+`,
    String.raw`\b(?:the|this|that)(?: [\w-]+)? issue(?:'s)?\b(?![\s#-]*\d)`,
    String.raw`\bissue's\b`,
    String.raw`\(issue\)`,
  ].join("|"),
  "gi",
);

/** Each tracker reference in `text`, with its line. */
function trackerReferences(text: string): Array<{ line: number; text: string }> {
  let kept = text;
  for (const allowed of ALLOWED) kept = kept.replace(allowed, (m) => m.replace(/[^\n]/g, " "));
  return [...kept.matchAll(FORBIDDEN)].map((m) => ({ line: kept.slice(0, m.index).split("\n").length, text: m[0].replace(/\s+/g, " ") }));
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return SKIPPED_DIRS.has(name) ? [] : filesUnder(path);
    return [path];
  });
}

/** The repository's text files where a reader meets comments and prose (binary files, NUL bytes, left out). */
function textFiles(): Map<string, string> {
  const self = fileURLToPath(import.meta.url);
  const out = new Map<string, string>();
  for (const file of [join(root, "README.md"), ...FOLDERS.flatMap((f) => filesUnder(join(root, f)))]) {
    if (file === self) continue;
    const bytes = readFileSync(file);
    if (bytes.includes(0)) continue;
    out.set(relative(root, file).split("\\").join("/"), bytes.toString("utf8"));
  }
  return out;
}

describe("tracker references", () => {
  it("finds the forms a tracker reference takes, and lets another project's tracker through", () => {
    const found = (s: string) => trackerReferences(s).map((r) => r.text);
    expect(found("// DNS rebinding, issue 18\n//   point 7).")).toEqual(["issue 18"]);
    expect(found(" * the flamegraph's box (issue 23).")).toEqual(["issue 23"]);
    expect(found("Issue 19 measured 40k hops; issue #9 too")).toEqual(["Issue 19", "issue #9"]);
    expect(found("// a socket-driven service (issue\n// 19). Requests")).toEqual(["issue // 19"]);
    expect(found(" * pin spans (issue\n *   21: on the trickle")).toEqual(["issue * 21"]);
    expect(found("the issue-22 run; the issue's targets; Targets (issue):")).toEqual(["issue-22", "the issue's", "(issue)"]);
    expect(found("checked by the report issue's browser test")).toEqual(["the report issue's"]);
    expect(trackerReferences("a\nb\n(issue 12)")).toEqual([{ line: 3, text: "issue 12" }]);
    expect(found("https://github.com/MaterializeInc/materialize/issues/24457")).toEqual([]);
    expect(found("jemalloc issue #24457, memcached's t/issue_14.t and issue_183.t")).toEqual([]);
    expect(found("tissue 12, reissue 3, an issued token")).toEqual([]);
  });

  it("no file under src/, test/, bench/, examples/, docs/ or README.md cites one", () => {
    const files = textFiles();
    expect(files.size).toBeGreaterThan(200); // the walk reaches the repository
    expect(files.has("README.md") && files.has("docs/decisions.md") && files.has("src/index.ts")).toBe(true);
    const cited: string[] = [];
    for (const [path, text] of files) {
      if (PENDING.has(path)) continue;
      for (const r of trackerReferences(text)) cited.push(`${path}:${r.line}: ${r.text}`);
    }
    expect(cited).toEqual([]);
  });

  it("each file still pending holds a reference (a file done, moved or gone leaves the list)", () => {
    const files = textFiles();
    const stale = [...PENDING].filter((path) => trackerReferences(files.get(path) ?? "").length === 0);
    expect(stale).toEqual([]);
  });
});
