/**
 * The dashboard as a user installs it: the page, its style and its
 * script's modules are files of the package (dist/runtime/dashboard/, which
 * the build compiles and copies), so the check is the tarball's page in
 * Chromium, served by the installed command (`shardheap stress
 * --admin-port 0`): every module loads, the charts draw, the live
 * flamegraph shows, with no console error and no request leaving the admin
 * server. Skipped, saying so, without /usr/bin/chromium.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { afterAll, describe, expect, it } from "vitest";
import { haveChromium, launchChromium, watchPage } from "./browser.js";
import { tempDir } from "./helpers.js";
import { packedProject } from "./packed-package.js";

const hasChromium = haveChromium("the packed package's dashboard");

describe.runIf(hasChromium)("the packed package's dashboard in Chromium", () => {
  let child: ChildProcess | undefined;
  afterAll(() => {
    child?.kill("SIGKILL");
  });

  it("loads every file from the installed package: charts, flamegraph, no console error, nothing from elsewhere", async () => {
    const dir = tempDir("shardheap-packed-dashboard-");
    const { modules } = packedProject(dir, {});
    const cli = join(modules, "shardheap", "dist", "cli.js");
    const stress = spawn(process.execPath, [cli, "stress", "--smp", "1", "--memory", "16MiB", "--duration", "120", "--admin-port", "0", "--out", join(dir, "out")], {
      cwd: dir,
      env: { ...process.env, SHARDHEAP_LOG: "silent" },
      stdio: ["ignore", "pipe", "inherit"],
    });
    child = stress;
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("no admin URL within 60 s")), 60_000);
      createInterface({ input: stress.stdout! }).on("line", (line) => {
        const m = /^admin: (http:\/\/\S+)$/.exec(line);
        if (m) {
          clearTimeout(timer);
          resolve(m[1]!);
        }
      });
      stress.on("exit", (code) => reject(new Error(`stress exited (${code}) before printing its admin URL`)));
    });
    const browser = await launchChromium();
    try {
      const page = await browser.newPage();
      const problems = watchPage(page, url);
      const loaded: string[] = [];
      page.on("response", (r) => {
        if (r.ok()) loaded.push(new URL(r.url()).pathname);
      });
      await page.goto(`${url}/`);
      // Browser-side code as text: this program is compiled without the DOM's types.
      await expect
        .poll(() => page.evaluate("(() => { const d = window.shardheapDashboard; return d !== undefined && d.charts.length === 6 && d.charts.every((c) => c.data[0].length >= 2); })()"), { timeout: 30_000 })
        .toBe(true);
      await page.waitForSelector("#flame[data-loaded]", { timeout: 30_000 });
      expect(await page.frameLocator("#flame").locator("g.frame").count()).toBeGreaterThan(3);
      await page.waitForSelector("#js-heap-rows tr", { timeout: 30_000 });
      expect(loaded).toEqual(expect.arrayContaining(["/", "/dashboard.css", "/dashboard/main.js", "/dashboard/peaks.js", "/dashboard/js-heap.js", "/vendor/uPlot.iife.min.js"]));
      expect(problems).toEqual([]);
    } finally {
      await browser.close();
      stress.kill("SIGKILL");
    }
  }, 180_000);
});
