/**
 * The dashboard's peak and timeline panels in Chromium (playwright-core,
 * as dashboard-browser.test.ts; skipped, saying so, without
 * /usr/bin/chromium). Shard 1 builds a first phase, frees most of it and
 * builds a smaller second (test/fixtures/peak-tasks.mjs, profiling every
 * allocation, the timeline ticking every 100 ms): the peak panel says the
 * peak's bytes (to the byte) and time and draws the first phase alone;
 * "Jump to peak" marks its moment on the charts; the stacked chart of the
 * largest sites holds both phases; a window dragged across the whole
 * chart shows its peak (the peak itself: exact) and its growth (the second
 * phase grew). For all shards, the heap-wide peak. No request leaves the
 * server, no console error or warning.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import { dashboardInChromium, haveChromium, watchPage } from "../../browser.js";

const hasChromium = haveChromium("dashboard peak panel check");
const PEAK_TASKS = new URL("../../fixtures/peak-tasks.mjs", import.meta.url);

describe.runIf(hasChromium)("the dashboard's peak and timeline in Chromium", () => {
  const the = dashboardInChromium({ shards: 2, memoryPerShard: "32MiB", heapprof: true, module: PEAK_TASKS, timelineIntervalMs: 100 });

  const frameNames = async (page: Page, frame: string): Promise<string[]> =>
    page.frameLocator(`#${frame}`).locator("g.frame").evaluateAll((gs) => gs.map((g) => g.getAttribute("data-name")!));
  const leaves = async (page: Page, frame: string): Promise<string[]> => [...new Set((await frameNames(page, frame)).map((n) => n.split(" ")[0]!))].filter((n) => /Phase$/.test(n)).sort();
  /** Waits for `frame` to load again after `act`. */
  const reloaded = async (page: Page, frame: string, act: () => Promise<unknown>): Promise<void> => {
    const before = await page.getAttribute(`#${frame}`, "data-loaded");
    await act();
    await expect.poll(() => page.getAttribute(`#${frame}`, "data-loaded"), { timeout: 30_000 }).not.toBe(before);
  };
  const pause = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

  it("shows the peak's size, time and flamegraph, jumps to it, and a window's peak and growth", async () => {
    const { smp, admin, browser } = the;
    const page = await browser.newPage({ viewport: { width: 1400, height: 2400 } });
    const problems = watchPage(page, admin.url, { warnings: true });
    await page.goto(`${admin.url}/`);
    await page.waitForSelector("#peak-flame[data-loaded]", { timeout: 30_000 });
    expect(await page.textContent("#peak-info")).toBe("nothing profiled yet");

    await smp.submitTo(1, "buildFirstPhase", { count: 600, size: 8000 });
    await pause(300); // timeline ticks between the phases
    await smp.submitTo(1, "freeMostOfFirstPhase", { keep: 50 });
    await pause(300);
    await smp.submitTo(1, "buildSecondPhase", { count: 400, size: 3000 });
    await pause(300);
    const peak = smp.peakProfile(1);
    expect(peak.sites.map((s) => s.frames[0]!.functionName)).toEqual(["buildFirstPhase"]);

    await page.uncheck("#auto"); // from here the page refreshes when told, so nothing moves under the clicks
    await reloaded(page, "peak-flame", () => page.selectOption("#shard", "1"));
    expect(Number(await page.getAttribute("#peak-info", "data-peak-bytes"))).toBe(peak.peakBytes);
    expect(Number(await page.getAttribute("#peak-info", "data-peak-time"))).toBe(peak.peakTime);
    expect(await page.textContent("#peak-info")).toMatch(/^\d+(\.\d)?M profiled live at \d/);
    expect(await leaves(page, "peak-flame")).toEqual(["buildFirstPhase"]);
    expect(await page.frameLocator("#peak-flame").locator("#title").textContent()).toContain(`Peak of shard 1: `);

    // Jump to peak: its moment marked on the charts, the legends there.
    await page.click("#jump-to-peak");
    await expect.poll(() => page.getAttribute("#jump-to-peak", "data-jumped"), { timeout: 30_000 }).toBe(String(peak.peakTime));
    expect(await page.evaluate(() => (globalThis as unknown as { shardheapDashboard: { peakPanel: { marker: number } } }).shardheapDashboard.peakPanel.marker)).toBe(peak.peakTime / 1000);

    // The largest sites over time: both phases, stacked.
    await expect.poll(async () => JSON.parse((await page.getAttribute("#chart-sites", "data-sites")) ?? "[]") as string[], { timeout: 30_000 }).toEqual(
      expect.arrayContaining([expect.stringMatching(/^buildFirstPhase /), expect.stringMatching(/^buildSecondPhase /), "other profiled bytes"]),
    );
    expect(Number(await page.getAttribute("#chart-sites", "data-samples"))).toBeGreaterThan(3);

    // A window dragged across the whole chart: its peak is the peak itself, its growth the second phase's.
    const over = page.locator("#chart-sites .u-over");
    const box = (await over.boundingBox())!;
    await page.mouse.move(box.x + 1, box.y + box.height / 2);
    await page.mouse.down();
    await page.mouse.move(box.x + box.width - 1, box.y + box.height / 2, { steps: 10 });
    await page.mouse.up();
    await page.waitForSelector("#window-box:not([hidden])", { timeout: 30_000 });
    await reloaded(page, "window-flame", () => page.click("#window-peak"));
    expect(await page.textContent("#window-shown")).toMatch(/^the window's peak is the peak itself/);
    expect(await leaves(page, "window-flame")).toEqual(["buildFirstPhase"]);
    await reloaded(page, "window-flame", () => page.click("#window-growth"));
    expect(await page.textContent("#window-shown")).toMatch(/^growth from .* to .*: \+/);
    expect(await leaves(page, "window-flame")).toContain("buildSecondPhase");
    await page.screenshot({ path: join(mkdtempSync(join(tmpdir(), "shardheap-peaks-")), "dashboard-peaks.png"), fullPage: true });

    // All shards: the heap-wide peak (shard 0 held nothing, so the same moment and bytes).
    await reloaded(page, "peak-flame", () => page.selectOption("#shard", "all"));
    expect(Number(await page.getAttribute("#peak-info", "data-peak-bytes"))).toBe(smp.peakProfile().peakBytes);
    expect(await page.textContent("#peak-info")).toMatch(/\(all shards' highest sum\)$/);
    expect(await leaves(page, "peak-flame")).toEqual(["buildFirstPhase"]);

    // Reset: the peak is what is held now.
    await reloaded(page, "peak-flame", () => page.click("#reset-peak"));
    expect(Number(await page.getAttribute("#peak-info", "data-peak-bytes"))).toBe(smp.heapProfile().totalSize);
    expect(await leaves(page, "peak-flame")).toEqual(["buildFirstPhase", "buildSecondPhase"]);

    expect(problems).toEqual([]);
    await page.close();
  });
});
