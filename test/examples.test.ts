/**
 * Every example runs as a user runs it, found rather than listed, so a new
 * one is run as soon as it is added:
 * - a program is an `examples/*.mjs` that no other example loads as its
 *   task module (`new URL("./NAME.mjs", import.meta.url)`); a task module
 *   is run through the programs that load it;
 * - a TypeScript project is a folder with a tsconfig.json: compiled with
 *   this repository's tsc, then its `npm start` (`node FILE`) runs.
 * Each runs in a temp dir holding a copy of examples/, where `import ...
 * from "shardheap"` finds this package (node_modules/shardheap links to
 * it) and TMPDIR points inside, with SHARDHEAP_LOG=silent; it must exit 0
 * with nothing on stderr and print every line its `// Output: TEXT`
 * comments promise (`...` in TEXT stands for anything), at least one.
 * examples/README.md names each of them. At most two run at once (the
 * machine has two cores; each example starts threads of its own).
 */
import { execFile } from "node:child_process";
import { cpSync, mkdirSync, readFileSync, readdirSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { tempDir } from "./helpers.js";

const root = fileURLToPath(new URL("..", import.meta.url));
const examples = join(root, "examples");
const run = promisify(execFile);
/** A bound on one example's run (each ends in a few seconds; a stuck one is killed). */
const RUN_TIMEOUT_MS = 45_000;

interface Example {
  /** The program's file, or the project's folder, under examples/. */
  name: string;
  /** The files whose `// Output:` lines the run must print. */
  sources: string[];
  /** Runs it in `dir` (the copy of examples/), resolving with its output. */
  start: (dir: string, env: NodeJS.ProcessEnv) => Promise<{ stdout: string; stderr: string }>;
}

const entries = readdirSync(examples).sort();
const moduleFiles = entries.filter((f) => f.endsWith(".mjs"));
const text = (f: string): string => readFileSync(join(examples, f), "utf8");
/** Files another example names as `./NAME.mjs` (its task module). */
const loaded = new Set(moduleFiles.flatMap((f) => [...text(f).matchAll(/["']\.\/([\w-]+\.mjs)["']/g)].map((m) => m[1]!).filter((m) => m !== f)));
const node = (args: string[], cwd: string, env: NodeJS.ProcessEnv): Promise<{ stdout: string; stderr: string }> =>
  run(process.execPath, args, { cwd, env, timeout: RUN_TIMEOUT_MS, killSignal: "SIGKILL", maxBuffer: 16 << 20 });

const programs: Example[] = moduleFiles
  .filter((f) => !loaded.has(f))
  .map((f) => ({ name: f, sources: [join(examples, f)], start: (dir, env) => node([join(dir, f)], dir, env) }));

const projects: Example[] = entries
  .filter((f) => statSync(join(examples, f)).isDirectory())
  .map((f) => {
    const pkg = JSON.parse(readFileSync(join(examples, f, "package.json"), "utf8")) as { scripts?: Record<string, string> };
    const main = /^node (\S+)$/.exec(pkg.scripts?.start ?? "")?.[1];
    const tsFiles = (dir: string): string[] =>
      readdirSync(dir, { withFileTypes: true }).flatMap((d) => (d.isDirectory() ? tsFiles(join(dir, d.name)) : d.name.endsWith(".ts") ? [join(dir, d.name)] : []));
    return {
      name: `${f}/`,
      sources: tsFiles(join(examples, f)),
      start: async (dir, env) => {
        expect(main, `${f}/package.json: scripts.start is "node FILE"`).toBeDefined();
        const project = join(dir, f);
        await node([join(root, "node_modules", "typescript", "bin", "tsc"), "-p", project, "--pretty", "false"], project, env);
        return node([main!], project, env);
      },
    };
  });

/** The lines a file promises to print: `// Output: TEXT`, `...` matching anything. */
function promisedLines(file: string): RegExp[] {
  const escape = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  return [...readFileSync(file, "utf8").matchAll(/^\s*\/\/ Output: (.+)$/gm)].map((m) => new RegExp(`^${m[1]!.trim().split("...").map(escape).join(".*")}$`));
}

/** At most `n` runs at once. */
function limiter(n: number): <T>(f: () => Promise<T>) => Promise<T> {
  let running = 0;
  const waiting: Array<() => void> = [];
  return async (f) => {
    if (running < n) running++;
    else await new Promise<void>((resolve) => waiting.push(resolve));
    try {
      return await f();
    } finally {
      const next = waiting.shift();
      if (next !== undefined) next();
      else running--;
    }
  };
}

describe("examples", () => {
  const dir = tempDir("shardheap-examples-");
  const copy = join(dir, "examples");
  cpSync(examples, copy, { recursive: true });
  mkdirSync(join(dir, "node_modules", "@types"), { recursive: true });
  symlinkSync(root, join(dir, "node_modules", "shardheap"), "dir");
  symlinkSync(join(root, "node_modules", "@types", "node"), join(dir, "node_modules", "@types", "node"), "dir");
  writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "examples", private: true, type: "module" }));
  const slot = limiter(2);

  it("holds programs, their task modules, TypeScript projects and README.md, nothing else; the README names each example", () => {
    expect(programs.length).toBeGreaterThanOrEqual(10);
    expect(projects.length).toBeGreaterThanOrEqual(1);
    const known = new Set([...programs.map((p) => p.name), ...loaded, ...projects.map((p) => p.name.slice(0, -1)), "README.md"]);
    expect(entries.filter((f) => !known.has(f))).toEqual([]);
    const readme = text("README.md");
    for (const e of [...programs, ...projects]) expect(readme, `examples/README.md names ${e.name}`).toContain(`\`${e.name}\``);
  });

  for (const example of [...programs, ...projects]) {
    it.concurrent(
      `${example.name} runs, exits 0 with an empty stderr, and prints what it says it prints`,
      async ({ expect }) => {
        const promised = example.sources.flatMap(promisedLines);
        expect(promised.length, `${example.name}: at least one "// Output: TEXT" line`).toBeGreaterThan(0);
        const tmp = tempDir(`shardheap-example-${example.name.replace(/\W/g, "")}-`);
        const env = { ...process.env, SHARDHEAP_LOG: "silent", TMPDIR: tmp };
        const r = await slot(() =>
          example.start(copy, env).then(
            ({ stdout, stderr }) => ({ code: 0 as unknown, stdout, stderr }),
            (e: { code?: unknown; signal?: unknown; stdout?: string; stderr?: string }) => ({ code: e.code ?? e.signal, stdout: e.stdout ?? "", stderr: e.stderr ?? "" }),
          ),
        );
        expect({ code: r.code, stderr: r.stderr }, r.stdout).toEqual({ code: 0, stderr: "" });
        const lines = r.stdout.split("\n").map((l) => l.trim());
        for (const line of promised) expect(lines.some((l) => line.test(l)), `${example.name} printed a line matching ${line}:\n${r.stdout}`).toBe(true);
      },
      4 * RUN_TIMEOUT_MS,
    );
  }
});
