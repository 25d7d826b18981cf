/**
 * The dashboard's whole-memory panel in Chromium (playwright-core, as
 * dashboard-browser.test.ts; skipped, saying so, without /usr/bin/chromium):
 * two shards, the shared heap profiled, the JS heap profiler off until
 * shard 0's switch in the page turns it on. Shard 0 then keeps objects in
 * its JS heap (retainKnownObjects) and in its shared-heap region
 * (allocateInSharedHeap): with shard 0 chosen, the two flamegraphs side by
 * side show each heap's own function, the table shows the switch as the
 * shard applied it and each shard's V8 figures, shard 1 says its JS heap
 * profiler is off. No request leaves the server, no console error.
 */
import { type Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import { dashboardInChromium, haveChromium, watchPage } from "../../browser.js";

const hasChromium = haveChromium("dashboard whole-memory panel check");
const JS_TASKS = new URL("../../fixtures/js-heap-tasks.mjs", import.meta.url);

describe.runIf(hasChromium)("the dashboard's whole-memory panel in Chromium", () => {
  const the = dashboardInChromium({ shards: 2, memoryPerShard: "8MiB", heapprof: true, module: JS_TASKS });

  const frameNames = (page: Page, id: string): Promise<string[]> => page.frameLocator(`#${id}`).locator("g.frame").evaluateAll((gs) => gs.map((g) => g.getAttribute("data-name")!));
  const named = (names: string[], fn: string): boolean => names.some((n) => n.startsWith(`${fn} `) || n === fn);

  it("switches a shard's JS heap profiler and shows its JS heap beside its shared-heap region", async () => {
    const { smp, admin, browser } = the;
    const page = await browser.newPage({ viewport: { width: 1400, height: 2400 } });
    const problems = watchPage(page, admin.url, { warnings: true });
    await page.goto(`${admin.url}/`);
    await page.waitForSelector("#js-row-1", { timeout: 30_000 });
    await page.waitForSelector("#both-js[data-loaded]", { timeout: 30_000 });
    expect(await page.textContent("#js-prof-now-0")).toBe("off");
    expect(await page.isChecked("#js-prof-on-0")).toBe(false);

    await page.fill("#js-prof-rate-0", "4K");
    await page.check("#js-prof-on-0");
    await expect.poll(() => smp.jsHeapStats(0)?.sampleRate, { timeout: 30_000 }).toBe(4096);
    expect(smp.jsHeapStats(1)?.sampleRate).toBe(0);
    await smp.submitTo(0, "retainKnownObjects", { count: 20_000 });
    await smp.submitTo(0, "allocateInSharedHeap", { count: 50, size: 2000 });

    await page.uncheck("#auto");
    await page.selectOption("#shard", "0");
    await expect.poll(async () => named(await frameNames(page, "both-js"), "retainKnownObjects"), { timeout: 30_000 }).toBe(true);
    await expect.poll(async () => named(await frameNames(page, "both-shared"), "allocateInSharedHeap"), { timeout: 30_000 }).toBe(true);
    expect(named(await frameNames(page, "both-shared"), "retainKnownObjects")).toBe(false);
    expect(await page.isHidden("#js-heap-off")).toBe(true);
    await expect.poll(() => page.textContent("#js-prof-now-0"), { timeout: 30_000 }).toBe("one sample per 4K");
    expect(await page.isChecked("#js-prof-on-0")).toBe(true);
    expect(await page.textContent("#js-prof-now-1")).toBe("off");
    for (const s of [0, 1]) {
      expect(Number(await page.getAttribute(`#js-used-${s}`, "data-bytes"))).toBeGreaterThan(0);
      expect(await page.textContent(`#js-external-${s}`)).not.toBe("-");
    }
    await page.selectOption("#shard", "1");
    await expect.poll(() => page.isVisible("#js-heap-off"), { timeout: 30_000 }).toBe(true);
    expect(problems).toEqual([]);
    await page.close();
  });

  it("the shared heap's switch of a shard that is not the last switches that shard", async () => {
    const { smp, admin, browser } = the;
    const page = await browser.newPage({ viewport: { width: 1400, height: 1600 } });
    const problems = watchPage(page, admin.url, { warnings: true });
    await page.goto(`${admin.url}/`);
    await page.waitForSelector("#prof-on-0:checked", { timeout: 30_000 });
    await page.click("#prof-on-0");
    await expect.poll(() => smp.heapProfile(0).sampleRate, { timeout: 30_000 }).toBe(0);
    expect(smp.heapProfile(1).sampleRate).toBe(1);
    await page.click("#prof-on-0");
    await expect.poll(() => smp.heapProfile(0).sampleRate, { timeout: 30_000 }).not.toBe(0);
    expect(problems).toEqual([]);
    await page.close();
  });
});
