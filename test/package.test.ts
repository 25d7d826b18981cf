/**
 * The package as users get it: what `npm pack` puts in the tarball, and a
 * TypeScript project of a user's (ESM, NodeNext, strict, @types/node) that
 * installs the tarball, compiles against its .d.ts and runs.
 * Offline: the tarball is unpacked into the project's node_modules and the
 * dependencies are linked from this repository's.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { join, posix, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import { DASHBOARD_MODULES } from "../src/runtime/dashboard.js";
import { docPages } from "./doc-pages.js";
import { tempDir } from "./helpers.js";
import { npm, packedProject, pkg, root } from "./packed-package.js";

describe("the npm package", () => {
  let files: string[];
  beforeAll(() => {
    const [packed] = JSON.parse(npm(["pack", "--dry-run", "--json"])) as Array<{ files: Array<{ path: string }> }>;
    files = packed!.files.map((f) => f.path);
  });

  it("carries LICENSE, README, the docs, dist, src and examples, and nothing from the repository's workshop", () => {
    // Every file the admin server serves the dashboard from (built into dist/, not in src/).
    const dashboard = ["index.html", "dashboard.css", ...DASHBOARD_MODULES.map((m) => `${m}.js`)].map((f) => `dist/runtime/dashboard/${f}`);
    for (const f of ["LICENSE", "README.md", "package.json", "docs/ARCHITECTURE.md", "dist/index.js", "dist/index.d.ts", "dist/cli.js", "dist/smp/shard-worker.js", "dist/smp/shard-entry.cjs", ...dashboard]) {
      expect(files, f).toContain(f);
    }
    // Every example, a TypeScript project's files included (not what compiling or installing one leaves there).
    const examples = readdirSync(join(root, "examples"), { recursive: true, encoding: "utf8" })
      .filter((f) => statSync(join(root, "examples", f)).isFile())
      .map((f) => `examples/${f.split(sep).join("/")}`)
      .filter((f) => !/\/(dist|node_modules)\//.test(f));
    expect(examples.length).toBeGreaterThan(20);
    for (const example of examples) expect(files).toContain(example);
    // The docs as users read them on npm too: every page README.md links to (the guides, the references,
    // the architecture and development notes) and the small SVG a guide shows; not the dashboard's
    // screenshot (a 290 KB PNG), whose link only the repository resolves.
    const pages = docPages().map((p) => p.path);
    expect(pages).toEqual(expect.arrayContaining(["docs/ARCHITECTURE.md", "docs/guide/shards.md", "docs/reference/api.md", "docs/reference/errors.md"]));
    expect(files.filter((f) => !/^(dist|src|examples)\//.test(f)).sort()).toEqual(["LICENSE", ...pages, "docs/peak-flamegraph.svg", "package.json"].sort());
    // src/ is shipped so that dist's source maps name files that are there: a mapped frame
    // reads shardheap/src/x.ts and an editor opens it. Every map's sources are in the package, and
    // no map carries them inline again (tsconfig has no inlineSources).
    const maps = files.filter((f) => f.startsWith("dist/") && f.endsWith(".map"));
    expect(maps.length).toBeGreaterThan(50);
    for (const m of maps) {
      const map = JSON.parse(readFileSync(join(root, m), "utf8")) as { sources: string[]; sourcesContent?: unknown };
      expect(map.sourcesContent, m).toBeUndefined();
      for (const source of map.sources) expect(files, `${m} names ${source}`).toContain(posix.join(posix.dirname(m), source));
    }
    expect(files.filter((f) => f.startsWith("src/") && !/\.c?ts$/.test(f))).toEqual([]);
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
  }, 180_000); // tsc alone may take its 120 s bound on a loaded 2-core machine (57 s measured at load 20)

  it("a profile of the installed package's own code names its TypeScript files as shardheap/src/...ts:LINE, files that are there", () => {
    const dir = tempDir("shardheap-frames-");
    const { modules } = packedProject(dir, {});
    const cli = join(modules, "shardheap", "dist", "cli.js");
    const run = (args: string[]): string =>
      execFileSync(process.execPath, [cli, ...args], { cwd: dir, encoding: "utf8", env: { ...process.env, SHARDHEAP_LOG: "silent" }, timeout: 120_000 });
    // The stress workload is code of the package (dist/apps/stress/workload.js); its end-of-run tree is mapped to sources.
    const tree = run(["stress", "--smp", "1", "--memory", "16MiB", "--duration", "0.5", "--out", "out"]);
    const frames = [...tree.matchAll(/(\w+) \((shardheap\/src\/[^():\s]+\.ts):(\d+):(\d+)\)/g)].map(([, fn, path, line, column]) => ({ fn: fn!, path: path!, line: Number(line), column: Number(column) }));
    expect(frames.map((f) => f.path)).toContain("shardheap/src/apps/stress/workload.ts");
    expect(tree).not.toContain("file:");
    expect(tree).not.toMatch(/shardheap\/dist\//);
    const leaves = frames.filter((f) => /^allocate(RequestBuffer|CacheEntry|SessionState)$/.test(f.fn));
    expect(leaves.length).toBeGreaterThan(0);
    for (const f of frames) {
      const lines = readFileSync(join(modules, f.path), "utf8").split("\n"); // the file is there, in the installed package
      const text = lines[f.line - 1];
      expect(text?.trim(), `${f.fn} at ${f.path}:${f.line}`).toBeTruthy();
      expect(f.column, `${f.fn} at ${f.path}:${f.line}`).toBeLessThanOrEqual(text!.length);
      // An allocating function's line is its malloc, in the TypeScript the map names.
      if (leaves.includes(f)) expect(text, `${f.fn} at ${f.path}:${f.line}`).toMatch(/\.malloc\(/);
    }
    // The files it wrote show them alike, and the recorded (mapped) URLs name the same files.
    expect(readFileSync(join(dir, "out", "heapprof.collapsed"), "utf8")).toMatch(/\(shardheap\/src\/apps\/stress\/workload\.ts:\d+:\d+\) \d+$/m);
    const full = run(["report", join("out", "heap.img"), "--format", "collapsed", "--full-paths"]);
    const urls = new Set([...full.matchAll(/\((file:\/\/\/[^()\s]+\.ts):\d+:\d+\)/g)].map((m) => m[1]!));
    expect(urls.size).toBeGreaterThan(0);
    for (const url of urls) {
      expect(url).toMatch(/\/node_modules\/shardheap\/src\//);
      expect(existsSync(fileURLToPath(url)), url).toBe(true);
    }
  });
});
