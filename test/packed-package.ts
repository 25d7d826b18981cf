/**
 * The package as a user installs it, for the tests that compile and run a
 * user's project against it (package.test.ts, typed-tasks-compile.test.ts):
 * `npm pack` of this repository, the tarball unpacked into a temp
 * project's node_modules/shardheap, its dependencies (and typescript,
 * @types/node) linked from this repository's node_modules. Offline, and
 * no scripts run (npm test's pretest has built dist/ already).
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

export const root = fileURLToPath(new URL("..", import.meta.url));
export const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { name: string; version: string; dependencies: Record<string, string> };

/** npm with the test's bounds; the build already ran (npm test's pretest), so no scripts. */
export function npm(args: string[], cwd = root): string {
  return execFileSync("npm", [...args, "--ignore-scripts"], { cwd, encoding: "utf8", timeout: 120_000, stdio: ["ignore", "pipe", "pipe"] });
}

/**
 * Make `dir` a user's ESM project with the packed package installed and
 * `compilerOptions` over NodeNext defaults (outDir "out", every .ts file in it
 * included). Returns the path of its tsc.
 */
export function packedProject(dir: string, compilerOptions: Record<string, unknown>): { tsc: string; modules: string } {
  npm(["pack", "--pack-destination", dir, "--silent"]);
  const tarball = join(dir, `${pkg.name}-${pkg.version}.tgz`);
  const modules = join(dir, "node_modules");
  mkdirSync(join(modules, "shardheap"), { recursive: true });
  mkdirSync(join(modules, "@types"));
  execFileSync("tar", ["-xzf", tarball, "-C", join(modules, "shardheap"), "--strip-components=1"]);
  for (const dep of [...Object.keys(pkg.dependencies), "@types/node", "typescript"]) {
    symlinkSync(join(root, "node_modules", dep), join(modules, dep), "dir");
  }
  writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }));
  writeFileSync(
    join(dir, "tsconfig.json"),
    JSON.stringify({ compilerOptions: { module: "NodeNext", moduleResolution: "NodeNext", target: "ES2022", types: ["node"], outDir: "out", ...compilerOptions }, include: ["*.ts"] }),
  );
  return { tsc: join(modules, "typescript", "bin", "tsc"), modules };
}
