/**
 * The pages a user reads: README.md and every docs/**\/*.md, as the tests
 * that run their code blocks, check their tables and follow their links
 * see them (paths relative to the repository's root, "/" separators).
 */
import { readFileSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = fileURLToPath(new URL("..", import.meta.url));

function markdownUnder(dir: string): string[] {
  return readdirSync(join(ROOT, dir))
    .sort()
    .flatMap((name) => {
      const path = `${dir}/${name}`;
      return statSync(join(ROOT, path)).isDirectory() ? markdownUnder(path) : name.endsWith(".md") ? [path] : [];
    });
}

/** README.md first, then docs/ in path order. */
export function docPages(): { path: string; text: string }[] {
  return ["README.md", ...markdownUnder("docs")].map((path) => ({ path, text: readFileSync(join(ROOT, path), "utf8") }));
}
