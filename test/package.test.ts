/**
 * The package as users get it: what `npm pack` puts in the tarball, and a
 * TypeScript project of a user's (ESM, NodeNext, strict, @types/node) that
 * installs the tarball, compiles against its .d.ts and runs.
 * Offline: the tarball is unpacked into the project's node_modules and the
 * dependencies are linked from this repository's.
 */
import { execFileSync } from "node:child_process";
import { readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { tempDir } from "./helpers.js";
import { npm, packedProject, pkg, root } from "./packed-package.js";

describe("the npm package", () => {
  let files: string[];
  beforeAll(() => {
    const [packed] = JSON.parse(npm(["pack", "--dry-run", "--json"])) as Array<{ files: Array<{ path: string }> }>;
    files = packed!.files.map((f) => f.path);
  });

  it("carries LICENSE, README, the architecture document, dist and examples, and nothing from the repository's workshop", () => {
    for (const f of ["LICENSE", "README.md", "package.json", "docs/ARCHITECTURE.md", "dist/index.js", "dist/index.d.ts", "dist/cli.js", "dist/smp/shard-worker.js", "dist/smp/shard-entry.cjs"]) {
      expect(files, f).toContain(f);
    }
    for (const example of readdirSync(join(root, "examples"))) expect(files).toContain(`examples/${example}`);
    // Sources are inlined in dist's source maps (tsconfig inlineSources), so src/ is not shipped.
    expect(files.filter((f) => !/^(dist|examples)\//.test(f)).sort()).toEqual(["LICENSE", "README.md", "docs/ARCHITECTURE.md", "package.json"]);
    // Every compiled file comes from a source that exists today (the build starts from an empty dist/).
    for (const f of files.filter((p) => p.startsWith("dist/") && p.endsWith(".js"))) {
      expect(readdirSync(join(root, "src", f.slice("dist/".length).replace(/[^/]+$/, ""))), f).toContain(f.replace(/^.*\//, "").replace(/\.js$/, ".ts"));
    }
    expect(readFileSync(join(root, "LICENSE"), "utf8")).toMatch(/^\s*Apache License\s+Version 2\.0, January 2004/);
  });

  it("a TypeScript user's ESM project compiles against it and runs", () => {
    const dir = tempDir("shardheap-consumer-");
    const { tsc, modules } = packedProject(dir, { strict: true });
    writeFileSync(
      join(dir, "main.ts"),
      `import { SharedHeap, Smp, formatTree, serveAdmin, type HeapProfile, type MemoryStats, type SmpOptions } from "shardheap";
const heap = SharedHeap.create({ shards: 1, shardBytes: "1MiB" });
const shard = heap.shard(0);
shard.setHeapProfilingEnabled(true);
const p: number = shard.malloc(100);
const stats: MemoryStats = heap.stats(0);
const profile: HeapProfile = heap.heapProfile();
const options: SmpOptions = { shards: 1, memoryPerShard: "1MiB", idleTrimMs: 0 };
const start: (o: SmpOptions) => Promise<Smp> = Smp.start;
void serveAdmin;
void start;
console.log(JSON.stringify({ p: p > 0, live: stats.liveObjects, options: options.shards, tree: formatTree(profile).split("\\n")[0] }));
`,
    );
    execFileSync(process.execPath, [tsc, "-p", dir], { cwd: dir, encoding: "utf8", timeout: 120_000 });
    const out = execFileSync(process.execPath, [join(dir, "out", "main.js")], { cwd: dir, encoding: "utf8", env: { ...process.env, SHARDHEAP_LOG: "silent" }, timeout: 60_000 });
    expect(JSON.parse(out)).toEqual({ p: true, live: 1, options: 1, tree: "All (112, #1)" });
    // The command as installed: executable, and it knows its version.
    expect(execFileSync(join(modules, "shardheap", "dist", "cli.js"), ["--version"], { encoding: "utf8", timeout: 30_000 })).toBe(`${pkg.version}\n`);
  });
});
