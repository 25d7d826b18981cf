/**
 * Every document the code and the docs point a reader at is in the
 * repository: a `NAME.md` named in src/, docs/, bench/, test/, examples/ or
 * the README exists (beside the file that names it, or from the
 * repository's root). src/index.ts sent readers to a DESIGN.md that the
 * repository does not have.
 */
import { existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

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
