/**
 * Installing the package runs nothing of its own, so npm has nothing to
 * warn about: npm 11 lists every dependency with an install-time script
 * ("install-scripts not yet covered by allowScripts"), and `prepare`
 * counts for a package installed from a tarball, a folder or git. The
 * build runs in `postprepare` instead (npm install and npm ci run it in a
 * clone, never for a dependency) and `prepack` (so a packed or published
 * tarball holds a fresh dist/).
 */
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { tempDir } from "./helpers.js";
import { npm, pkg } from "./packed-package.js";

/** What npm runs when it installs a package as a dependency (arborist's install-scripts.js). */
const INSTALL_TIME = ["preinstall", "install", "postinstall", "prepare"];

describe("installing the package", () => {
  it("its packed manifest has no script npm runs at install time; the build runs in postprepare (npm ci in a clone) and prepack", () => {
    const dir = tempDir("shardheap-manifest-");
    npm(["pack", "--pack-destination", dir, "--silent"]);
    const manifest = JSON.parse(
      execFileSync("tar", ["-xzOf", join(dir, `${pkg.name}-${pkg.version}.tgz`), "package/package.json"], { encoding: "utf8" }),
    ) as { scripts: Record<string, string> };
    expect(Object.keys(manifest.scripts).filter((s) => INSTALL_TIME.includes(s))).toEqual([]);
    // npm ci and npm install (no arguments) run pre/post-prepare in the project itself (npm's ci.js, install.js).
    expect(manifest.scripts.postprepare).toBe("npm run build");
    expect(manifest.scripts.prepack).toBe("npm run build");
  });

  it("npm install of the tarball prints no warning naming shardheap", (ctx) => {
    const dir = tempDir("shardheap-install-");
    npm(["pack", "--pack-destination", dir, "--silent"]);
    writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }));
    // Dependencies from npm's cache when it has them (this repository's npm ci filled it), else the registry.
    const r = spawnSync("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund", `./${pkg.name}-${pkg.version}.tgz`], {
      cwd: dir,
      encoding: "utf8",
      timeout: 180_000,
      stdio: ["ignore", "pipe", "pipe"],
    });
    if (r.status !== 0) ctx.skip(`npm install could not install the tarball's dependencies: ${`${r.stderr}`.trim().split("\n").slice(-1)[0] ?? r.error}`);
    expect(existsSync(join(dir, "node_modules", pkg.name, "dist", "index.js"))).toBe(true);
    const warnings = `${r.stdout}\n${r.stderr}`.split("\n").filter((l) => /\bwarn\b/i.test(l));
    expect(warnings.filter((l) => l.includes(pkg.name))).toEqual([]);
  });
});
