/**
 * The dashboard in Chromium (playwright-core; skipped, saying so, without
 * /usr/bin/chromium): growing sites and the sites that grew most since a
 * baseline ranked by bytes or by objects (a leak of many small objects
 * gains fewer bytes than a cache filling with large ones, and ranked by
 * bytes alone came second: test/fixtures/rank-tasks.mjs grows both); the
 * growth since the newest baseline shown by default; and the charts' time
 * axes with no label on another, at any span of time (uPlot's own ticks
 * crowded sub-second labels together in a page's first seconds). No
 * request leaves the server, no console error or warning.
 */
import { type Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import { dashboardInChromium, haveChromium, watchPage } from "./browser.js";

const hasChromium = haveChromium("dashboard ranking and axes check");
const RANK_TASKS = new URL("./fixtures/rank-tasks.mjs", import.meta.url);

/** The leaf of each site listed in `selector` (its summary's name: the leaf, then callers). */
const leaves = async (page: Page, selector: string): Promise<string[]> => (await page.locator(selector).allTextContents()).map((t) => t.split(" ")[0]!);

describe.runIf(hasChromium)("the dashboard ranks growth by bytes or by objects", () => {
  const the = dashboardInChromium({ shards: 2, memoryPerShard: "32MiB", heapprof: true, module: RANK_TASKS });

  it("growing sites and grew most: the cache first by bytes, the leak of small objects first by objects", async () => {
    const { smp, admin, browser } = the;
    const page = await browser.newPage({ viewport: { width: 1400, height: 2400 } });
    const problems = watchPage(page, admin.url, { warnings: true });
    await page.goto(`${admin.url}/`);
    await page.waitForSelector("#shard option[value='1']", { state: "attached", timeout: 30_000 });
    await page.selectOption("#shard", "1");
    await page.click("#set-baseline");
    await page.waitForSelector("#growth:not([hidden])", { timeout: 30_000 });
    await smp.submitTo(1, "grow", { maxMs: 60_000 });
    try {
      const growing = "#growing-list li.growing-site summary .name";
      await expect.poll(() => leaves(page, growing), { timeout: 60_000, interval: 250 }).toEqual(["allocateCacheBlock", "allocateSessionToken"]);
      await page.selectOption("#growing-by", "count");
      await expect.poll(() => leaves(page, growing), { timeout: 30_000, interval: 250 }).toEqual(["allocateSessionToken", "allocateCacheBlock"]);
      expect(await page.textContent("#growing-what")).toBe("objects");
      await expect(page.locator("#growing-list li.growing-site summary .num").first().textContent()).resolves.toMatch(/^ \+[\d.]+k? objects\/s, fit (0\.(8|9)\d|1\.00), /);
      // Grew most, since the baseline set before the growth: by bytes, then by objects.
      await page.click("#refresh");
      const grown = "#grown-rows tr summary .name";
      await expect.poll(() => leaves(page, grown), { timeout: 30_000 }).toEqual(expect.arrayContaining(["allocateCacheBlock", "allocateSessionToken"]));
      expect((await leaves(page, grown))[0]).toBe("allocateCacheBlock");
      await page.selectOption("#grown-by", "count");
      await expect.poll(async () => (await leaves(page, grown))[0], { timeout: 30_000 }).toBe("allocateSessionToken");
      // The REST API ranks the same way, and refuses a measure it does not know.
      const rest = async (by: string): Promise<{ by: string; sites: Array<{ frames: Array<{ functionName: string }> }> }> => (await fetch(`${admin.url}/v1/heapprof/growing?shard=1&by=${by}`)).json() as never;
      expect((await rest("count")).sites[0]!.frames[0]!.functionName).toBe("allocateSessionToken");
      expect((await fetch(`${admin.url}/v1/heapprof/growing?by=size`)).status).toBe(400);
    } finally {
      await smp.submitTo(1, "stop");
    }
    expect(problems).toEqual([]);
    await page.close();
  });
});

describe.runIf(hasChromium)("the dashboard compares with the newest baseline by default", () => {
  const the = dashboardInChromium({ shards: 2, memoryPerShard: "8MiB", heapprof: true, module: RANK_TASKS });

  it("opens on the baseline taken last, not the first; a choice holds; a deleted choice gives way to the newest left", async () => {
    const { smp, admin, browser } = the;
    const post = (name: string): Promise<Response> => fetch(`${admin.url}/v1/heapprof/baseline?shard=all&name=${name}`, { method: "POST" });
    expect((await post("older")).status).toBe(200);
    await smp.submitTo(0, "allocateBetween", { count: 30 });
    expect((await post("newer")).status).toBe(200);
    await smp.submitTo(0, "allocateBetween", { count: 5 });
    const page = await browser.newPage({ viewport: { width: 1400, height: 2400 } });
    const problems = watchPage(page, admin.url, { warnings: true });
    await page.goto(`${admin.url}/`);
    await expect.poll(() => page.inputValue("#baseline-select"), { timeout: 30_000 }).toBe("newer");
    await expect.poll(() => page.textContent("#growth-total"), { timeout: 30_000 }).toBe("+5K in all");
    await page.selectOption("#baseline-select", "older");
    await expect.poll(() => page.textContent("#growth-total"), { timeout: 30_000 }).toBe("+35K in all");
    // Another baseline taken elsewhere does not move a choice made in the page.
    expect((await post("newest")).status).toBe(200);
    await page.click("#refresh");
    await expect.poll(async () => (await page.locator("#baseline-select option").allTextContents()).length, { timeout: 30_000 }).toBe(3);
    expect(await page.inputValue("#baseline-select")).toBe("older");
    await page.click("#delete-baseline");
    await expect.poll(() => page.inputValue("#baseline-select"), { timeout: 30_000 }).toBe("newest");
    expect(problems).toEqual([]);
    await page.close();
  });
});

describe.runIf(hasChromium)("the dashboard's time axes", () => {
  const the = dashboardInChromium({ shards: 2, memoryPerShard: "8MiB", heapprof: true });

  /**
   * Every chart's x labels at many spans and offsets (set on its scale):
   * the pairs of labels on one row closer than their half widths plus 8
   * px, measured with the axis's own font.
   */
  const CROWDED = `(() => {
    const crowded = [];
    const t0 = Math.floor(Date.now() / 1000 / 3600) * 3600 + 1795;
    for (const u of window.shardheapDashboard.charts) {
      const a = u.axes[0];
      for (const span of [1, 2, 5, 10, 30, 60, 120, 300, 900]) for (let off = 0; off < 90; off += 3) {
        u.setScale("x", { min: t0 + off, max: t0 + off + span });
        u.ctx.font = a.font[0];
        const labels = (a._values || []).map((v, i) => ({ rows: String(v).split("\\n"), x: u.valToPos(a._splits[i], "x", true) }));
        for (let i = 0; i + 1 < labels.length; i++) for (let j = i + 1; j < labels.length; j++) for (let r = 0; r < 3; r++) {
          const p = labels[i].rows[r], q = labels[j].rows[r];
          if (!p || !q) continue;
          if (Math.abs(labels[i].x - labels[j].x) < (u.ctx.measureText(p).width + u.ctx.measureText(q).width) / 2 + 8) crowded.push(span + " s: " + JSON.stringify(p) + " next to " + JSON.stringify(q));
        }
      }
    }
    return crowded;
  })()`;

  for (const width of [1280, 800]) {
    it(`no time label on or against another at any span, ${width} px wide (charts in ${width > 1000 ? "two columns" : "one"})`, async () => {
      const { admin, browser } = the;
      const page = await browser.newPage({ viewport: { width, height: 1600 } });
      const problems = watchPage(page, admin.url, { warnings: true });
      await page.goto(`${admin.url}/`);
      await expect.poll(() => page.evaluate("(() => { const d = window.shardheapDashboard; return d.charts.length === 6 && d.charts.every((c) => c.data[0].length >= 3); })()"), { timeout: 30_000 }).toBe(true);
      await page.uncheck("#auto"); // no redraw between the scale set and the measurement
      const crowded = (await page.evaluate(CROWDED)) as string[];
      expect(crowded.slice(0, 5)).toEqual([]);
      // Each label is one row, the time of day.
      const values = (await page.evaluate("window.shardheapDashboard.charts[0].axes[0]._values")) as string[];
      for (const v of values) expect(v).toMatch(/^\d\d:\d\d:\d\d$/);
      expect(problems).toEqual([]);
      await page.close();
    });
  }
});
