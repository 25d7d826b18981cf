/**
 * Every JavaScript block of the README runs as written. A block whose first
 * line is `// NAME.mjs: ...` is a file the others use (written, not run);
 * every other block is a program, run on its own in a temp dir where
 * `import ... from "shardheap"` finds this package, in the README's order.
 */
import { execFile } from "node:child_process";
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { tempDir } from "./helpers.js";

const root = fileURLToPath(new URL("..", import.meta.url));
const readme = readFileSync(join(root, "README.md"), "utf8");
const blocks = [...readme.matchAll(/^```js\n([\s\S]*?)^```$/gm)].map((m) => m[1]!);
const fileName = (block: string): string | undefined => /^\/\/ ([\w-]+\.mjs): /.exec(block)?.[1];
const run = promisify(execFile);

describe("README", () => {
  it("has JavaScript blocks, programs among them", () => {
    expect(blocks.filter((b) => fileName(b) === undefined).length).toBeGreaterThanOrEqual(3);
  });

  const dir = tempDir("shardheap-readme-");
  mkdirSync(join(dir, "node_modules"));
  symlinkSync(root, join(dir, "node_modules", "shardheap"), "dir");
  writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "readme", private: true, type: "module" }));
  for (const block of blocks) {
    const name = fileName(block);
    if (name !== undefined) writeFileSync(join(dir, name), block);
  }
  blocks.forEach((block, i) => {
    if (fileName(block) !== undefined) return;
    const firstLine = block.split("\n").find((l) => l.trim() !== "" && !l.startsWith("import ")) ?? "";
    it(`block ${i + 1} runs: ${firstLine.slice(0, 60)}`, async () => {
      const file = join(dir, `block-${i + 1}.mjs`);
      writeFileSync(file, block);
      const r = await run(process.execPath, [file], { cwd: dir, timeout: 60_000, env: { ...process.env, SHARDHEAP_LOG: "silent" } }).then(
        ({ stderr }) => ({ code: 0, stderr }),
        (e: { code?: unknown; signal?: unknown; stderr?: string }) => ({ code: e.code ?? e.signal, stderr: e.stderr ?? "" }),
      );
      expect(r).toEqual({ code: 0, stderr: "" });
    });
  });
});
