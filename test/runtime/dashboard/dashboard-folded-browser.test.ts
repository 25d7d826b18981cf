/**
 * The dashboard's folded-sites warning in Chromium (playwright-core, as
 * dashboard-browser.test.ts; skipped, saying so, without /usr/bin/chromium):
 * two shards whose profilers keep one stack each; shard 0 allocates from
 * two stacks, so its second folds into "(other sites)". The warning shows
 * for all shards and for shard 0, naming shard 0, the count and the flag;
 * for shard 1, which folded nothing, it is hidden. No request leaves the
 * admin server.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { TASKS } from "../../helpers.js";
import { dashboardInChromium, haveChromium, watchPage } from "../../browser.js";

const hasChromium = haveChromium("dashboard folded-sites check");

describe.runIf(hasChromium)("the dashboard's folded-sites warning in Chromium", () => {
  const the = dashboardInChromium({ shards: 2, memoryPerShard: "8MiB", heapprof: true, heapprofSites: 1, module: TASKS });

  beforeAll(async () => {
    const { smp } = the;
    await smp.submitTo(0, "allocMany", { count: 3, size: 64 }); // the one stack shard 0 keeps
    await smp.submitTo(0, "allocateForProfile", { count: 5, size: 64 }); // folded
    await smp.submitTo(1, "allocMany", { count: 2, size: 64 });
    expect(smp.heapProfile(0).folded).toMatchObject({ allocCount: 5, siteCapacity: 1, full: ["sites"] });
    expect(smp.heapProfile(1).folded).toBeUndefined();
  }, 60_000);

  it("shows for the shards that folded, names them and the flag, hides for one that did not", async () => {
    const { admin, browser } = the;
    const page = await browser.newPage();
    const problems = watchPage(page, admin.url);
    await page.goto(`${admin.url}/`);
    const warning = page.locator("#folded-warning");
    await warning.waitFor({ state: "visible", timeout: 30_000 });
    const text = `5 allocations went to "(other sites)" on shard 0: the profiler's site table is full (1 site a shard), so their stacks are not told apart. Start with --heapprof-sites N (heapprofSites) for more.`;
    await expect(warning.textContent()).resolves.toBe(text);
    await page.selectOption("#shard", "1");
    await warning.waitFor({ state: "hidden", timeout: 10_000 });
    await page.selectOption("#shard", "0");
    await warning.waitFor({ state: "visible", timeout: 10_000 });
    await expect(warning.textContent()).resolves.toBe(text);
    await page.screenshot({ path: join(mkdtempSync(join(tmpdir(), "shardheap-folded-")), "dashboard-folded.png"), fullPage: true });
    expect(problems).toEqual([]);
    await page.close();
  }, 60_000);
});
