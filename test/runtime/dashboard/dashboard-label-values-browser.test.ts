/**
 * The dashboard's label view with a value a client chose (memcached's key
 * prefixes are such values): control characters, U+0001 among them, which
 * XML 1.0 forbids. The table shows the value as text with its control
 * characters escaped (as every text output shows them), and its click asks
 * for the exact value's sites and shows their flamegraph: not Chromium's
 * "Invalid character" page. Skipped, saying so, without /usr/bin/chromium.
 */
import { type Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import { dashboardInChromium, haveChromium, watchPage } from "../../browser.js";

const hasChromium = haveChromium("dashboard label values check");

const TASKS = new URL("../../fixtures/label-tasks.mjs", import.meta.url);
const CLEAR = "t\x01\x1b[2J\u2028";
const SHOWN = "t\\x01\\x1b[2J\\u2028";

describe.runIf(hasChromium)("the dashboard's label view with control characters in a value", () => {
  const the = dashboardInChromium({ shards: 1, memoryPerShard: "8MiB", heapprof: true, module: TASKS });

  const frameNames = (page: Page): Promise<string[]> => page.frameLocator("#flame").locator("g.frame").evaluateAll((gs) => gs.map((g) => g.getAttribute("data-name")!));
  /** The table's rows as [exact value (data-value), the button's text]. */
  const rows = (page: Page): Promise<Array<[string, string]>> =>
    page.locator("#label-rows tr").evaluateAll((trs) => trs.map((r): [string, string] => [r.getAttribute("data-value")!, r.querySelector("button.value")!.textContent!]));

  it("shows the value escaped, and its click shows the flamegraph of its sites", async () => {
    const { smp, admin, browser } = the;
    await smp.submitTo(0, "keepVia", { via: "user", count: 30, size: 1000, labels: { prefix: CLEAR } });
    await smp.submitTo(0, "keepVia", { via: "session", count: 10, size: 1000, labels: { prefix: "session" } });
    const page = await browser.newPage({ viewport: { width: 1400, height: 1600 } });
    const problems = watchPage(page, admin.url, { warnings: true });
    await page.goto(`${admin.url}/`);
    await page.waitForSelector("#flame[data-loaded]", { timeout: 30_000 });
    await page.uncheck("#auto");
    await expect.poll(() => rows(page), { timeout: 30_000 }).toEqual([[CLEAR, SHOWN], ["session", "session"]]);

    const before = await page.getAttribute("#flame", "data-loaded");
    await page.locator("#label-rows button.value").first().click();
    await expect.poll(() => page.getAttribute("#flame", "data-loaded"), { timeout: 30_000 }).not.toBe(before);
    await expect(page.locator("#label-filter-name").textContent()).resolves.toBe(`prefix=${SHOWN}`);
    const names = await frameNames(page);
    expect(names).toContain(`prefix=${SHOWN}`);
    expect(names.some((n) => n.startsWith("allocUserRecord "))).toBe(true);
    expect(names.filter((n) => n.startsWith("allocSessionRecord ") || n === "prefix=session")).toEqual([]);
    expect(problems).toEqual([]);
    await page.close();
  });
});
