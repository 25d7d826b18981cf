/**
 * Every document the code and the docs point a reader at is in the
 * repository: a `NAME.md` named in src/, docs/, bench/, test/, examples/ or
 * the README exists (beside the file that names it, or from the
 * repository's root). src/index.ts sent readers to a DESIGN.md that the
 * repository does not have. And every relative link of README.md and
 * docs/**\/*.md (`[text](path#anchor)`, images too) reaches a file that is
 * there, and a heading of that page when it names one: the README was
 * split into docs/guide and docs/reference, and a link left pointing at
 * the old place is what such a move breaks.
 */
import { existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { docPages } from "./doc-pages.js";

const root = fileURLToPath(new URL("..", import.meta.url));
const FOLDERS = ["src", "docs", "bench", "test", "examples"];

function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? filesUnder(path) : /\.(ts|mts|js|mjs|md)$/.test(name) ? [path] : [];
  });
}

describe("documents named in the repository", () => {
  it("every NAME.md that a source, test, benchmark, example or document names is there", () => {
    const files = [join(root, "README.md"), ...FOLDERS.filter((f) => existsSync(join(root, f))).flatMap((f) => filesUnder(join(root, f)))];
    expect(files.length).toBeGreaterThan(50);
    const missing: string[] = [];
    let named = 0;
    const self = fileURLToPath(import.meta.url);
    for (const file of files.filter((f) => f !== self)) {
      for (const [, doc] of readFileSync(file, "utf8").matchAll(/([\w./-]*\w\.md)\b/g)) {
        named++;
        if (!existsSync(join(dirname(file), doc!)) && !existsSync(join(root, doc!))) missing.push(`${relative(root, file)} names ${doc}`);
      }
    }
    expect(named).toBeGreaterThan(5); // the check reads the references it means to
    expect(missing).toEqual([]);
  });
});

/** GitHub's anchor for a heading: its text as shown, lower case, punctuation dropped, spaces as "-". */
function slug(heading: string): string {
  const shown = heading.replace(/`/g, "").replace(/\[([^\]]*)\]\([^)]*\)/g, "$1");
  return shown.toLowerCase().replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, "").replace(/ /g, "-");
}

/** The anchors of a page's headings (outside code blocks), a repeated one with -1, -2, ... as GitHub numbers them. */
function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const [, heading] of withoutFences(text).matchAll(/^#{1,6} (.+)$/gm)) {
    const base = slug(heading!.trim());
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

/** The text without its fenced code blocks (a `# comment` there is no heading). */
function withoutFences(text: string): string {
  return text.replace(/^```[\s\S]*?^```$/gm, "");
}

/** The text with code blanked, inline code too (links there are examples, not links). */
function withoutCode(text: string): string {
  return withoutFences(text).replace(/`[^`\n]*`/g, "``");
}

describe("links between the docs", () => {
  it("every relative link in README.md and docs/**/*.md reaches a file, and a heading there when it names one", () => {
    const pages = docPages();
    expect(pages.map((p) => p.path)).toContain("docs/reference/errors.md");
    const broken: string[] = [];
    let checked = 0;
    for (const page of pages) {
      for (const [, target] of withoutCode(page.text).matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(target!)) continue; // https:, mailto:: not a file here
        checked++;
        const [path, anchor] = target!.split("#") as [string, string | undefined];
        const file = path === "" ? join(root, page.path) : join(root, dirname(page.path), decodeURIComponent(path));
        if (!existsSync(file)) broken.push(`${page.path}: ${target} (no file ${relative(root, file)})`);
        else if (anchor !== undefined && file.endsWith(".md") && !anchors(readFileSync(file, "utf8")).has(anchor)) {
          broken.push(`${page.path}: ${target} (no heading #${anchor} in ${relative(root, file)})`);
        }
      }
    }
    expect(checked).toBeGreaterThan(30); // the check reads the links it means to
    expect(broken).toEqual([]);
  });

  it("reads anchors as GitHub makes them", () => {
    expect([...anchors("# The heap: the allocator in a minute\n## `/debug/pprof`: go tool pprof\n```sh\n# not a heading\n```\n## Peaks\n## Peaks\n")]).toEqual([
      "the-heap-the-allocator-in-a-minute",
      "debugpprof-go-tool-pprof",
      "peaks",
      "peaks-1",
    ]);
  });
});
