/**
 * Every JavaScript block of the README and of docs/**\/*.md runs as
 * written. A block whose first line is `// NAME.mjs: ...` is a file the
 * page's other blocks use (written, not run); every other block is a
 * program, run on its own in the page's temp dir where
 * `import ... from "shardheap"` finds this package, in the page's order.
 * Each page has a dir of its own, so a page's files are its own. The
 * TypeScript blocks (each `// NAME.ts: ...`) of a page compile together
 * under strict, exactOptionalPropertyTypes and noUncheckedIndexedAccess,
 * and those that say `npx tsx NAME.ts` run under tsx.
 */
import { execFile, execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { ROOT as root, docPages } from "./doc-pages.js";
import { tempDir } from "./helpers.js";

const pages = docPages();
const readme = pages[0]!.text;
const blocksOf = (text: string, lang: string): string[] => [...text.matchAll(new RegExp(`^\`\`\`${lang}\\n([\\s\\S]*?)^\`\`\`$`, "gm"))].map((m) => m[1]!);
const fileName = (block: string): string | undefined => /^\/\/ ([\w-]+\.mjs): /.exec(block)?.[1];
const run = promisify(execFile);

describe("README", () => {
  it("starts with exactly two set-up commands: install and run the main job, run the tests", () => {
    const first = /```sh\n([\s\S]*?)```/.exec(readme);
    expect(readme.indexOf("```")).toBe(first?.index);
    const commands = first![1]!.split("\n").map((l) => l.replace(/#.*/, "").trim()).filter((l) => l !== "");
    expect(commands).toEqual(["npm ci && npx shardheap stress", "npm test"]);
    const scripts = (JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { scripts: Record<string, string> }).scripts;
    expect(scripts.test).toBeDefined();
  });

  it("has JavaScript blocks, programs among them", () => {
    expect(blocksOf(readme, "js").filter((b) => fileName(b) === undefined).length).toBeGreaterThanOrEqual(3);
  });

  it("the docs have JavaScript and TypeScript blocks beside it (the pages below are read)", () => {
    expect(pages.filter((p) => p.path.startsWith("docs/guide/") && blocksOf(p.text, "js").length > 0).length).toBeGreaterThanOrEqual(4);
    expect(pages.flatMap((p) => blocksOf(p.text, "ts")).length).toBeGreaterThanOrEqual(2);
  });
});

for (const page of pages) {
  const blocks = blocksOf(page.text, "js");
  if (blocks.length === 0) continue;
  describe(`${page.path}'s JavaScript`, () => {
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
}

for (const page of pages) {
  const tsBlocks = blocksOf(page.text, "ts");
  if (tsBlocks.length === 0) continue;
  describe(`${page.path}'s TypeScript`, () => {
    const tsDir = tempDir("shardheap-readme-ts-");
    mkdirSync(join(tsDir, "node_modules", "@types"), { recursive: true });
    symlinkSync(root, join(tsDir, "node_modules", "shardheap"), "dir");
    symlinkSync(join(root, "node_modules", "tsx"), join(tsDir, "node_modules", "tsx"), "dir");
    symlinkSync(join(root, "node_modules", "@types", "node"), join(tsDir, "node_modules", "@types", "node"), "dir");
    writeFileSync(join(tsDir, "package.json"), JSON.stringify({ name: "readme-ts", private: true, type: "module" }));
    const compilerOptions = { module: "NodeNext", moduleResolution: "NodeNext", target: "ES2022", strict: true, exactOptionalPropertyTypes: true, noUncheckedIndexedAccess: true, types: ["node"], noEmit: true };
    writeFileSync(join(tsDir, "tsconfig.json"), JSON.stringify({ compilerOptions, include: ["*.ts"] }));
    const named = tsBlocks.map((block) => ({ block, name: /^\/\/ ([\w-]+\.ts): /.exec(block)?.[1] }));
    for (const { block, name } of named) if (name !== undefined) writeFileSync(join(tsDir, name), block);

    it("every block is a file (// NAME.ts: ...), and they compile together", () => {
      expect(named.filter((b) => b.name === undefined).map((b) => b.block.split("\n")[0])).toEqual([]);
      const tsc = join(root, "node_modules", "typescript", "bin", "tsc");
      expect(() => execFileSync(process.execPath, [tsc, "-p", tsDir, "--pretty", "false"], { cwd: tsDir, encoding: "utf8", timeout: 120_000 })).not.toThrow();
    }, 120_000);

    for (const { block, name } of named) {
      if (name === undefined || !block.split("\n")[0]!.includes(`npx tsx ${name}`)) continue;
      it(`${name} runs under tsx`, async () => {
        const r = await run(process.execPath, ["--import", "tsx", name], { cwd: tsDir, timeout: 60_000, env: { ...process.env, SHARDHEAP_LOG: "silent" } }).then(
          ({ stderr }) => ({ code: 0, stderr }),
          (e: { code?: unknown; signal?: unknown; stderr?: string }) => ({ code: e.code ?? e.signal, stderr: e.stderr ?? "" }),
        );
        expect(r).toEqual({ code: 0, stderr: "" });
      }, 60_000);
    }
  });
}
