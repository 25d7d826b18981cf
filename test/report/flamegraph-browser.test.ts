/**
 * The SVG flamegraph in a real browser: Debian's Chromium driven by
 * playwright-core. Load the file, click a frame (zoom), search a name
 * (matched share), hover (details), and save a screenshot in the test's
 * temp dir. Without /usr/bin/chromium (`.ci/run` installs it) the test
 * says that it skipped.
 */
import { existsSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { type Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { toFlamegraphSvg } from "../../src/report/flamegraph.js";
import { renderProfile } from "../../src/report/render.js";
import { profileOf, siteOf as site } from "../helpers.js";
import { haveChromium, launchChromium } from "../browser.js";

const hasChromium = haveChromium("flamegraph browser check");

const profile = profileOf([site(["makeBuffer", "handleRequest", "main"], 3000), site(["makeKey", "handleRequest", "main"], 600), site(["startup", "main"], 400)], { shard: "all" });

describe.runIf(hasChromium)("flamegraph in Chromium", () => {
  let browser: Browser;
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "shardheap-svg-"));
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
  });

  it("zooms on click, resets, searches with the matched share, shows hover details", async () => {
    const file = join(dir, "heapprof.svg");
    writeFileSync(file, toFlamegraphSvg(profile, { title: "Test <heap>" }));
    const page = await browser.newPage({ viewport: { width: 1200, height: 300 } });
    await page.goto(pathToFileURL(file).href);
    await expect(page.locator("#title").textContent()).resolves.toBe("Test <heap>");
    const width = (name: string) => page.locator(`g.frame[data-name="${name}"] rect`).getAttribute("width").then(Number);
    expect(await width("makeBuffer")).toBeCloseTo(1180 * 0.75 - 0.5, 0);

    // Zoom into handleRequest: it and its children fill the width, startup is hidden.
    await page.locator('g.frame[data-name="handleRequest"] rect').click();
    expect(await width("handleRequest")).toBeCloseTo(1180 - 0.5, 0);
    expect(await width("makeBuffer")).toBeCloseTo(1180 * (3000 / 3600) - 0.5, 0);
    expect(await page.locator('g.frame[data-name="startup"]').getAttribute("class")).toContain("hidden");
    await expect(page.locator("#reset").isVisible()).resolves.toBe(true);
    await page.locator("#reset").click();
    expect(await width("startup")).toBeCloseTo(1180 * 0.1 - 0.5, 0);

    // Search: matched frames turn purple and the share is shown.
    page.once("dialog", (d) => void d.accept("^make"));
    await page.locator("#search").click();
    await expect(page.locator("#matched").textContent()).resolves.toBe("Matched: 90.0%");
    expect(await page.locator('g.frame[data-name="makeKey"] rect').getAttribute("fill")).toBe("rgb(230,0,230)");

    // Hover: the details line names the frame with its bytes and share.
    await page.locator('g.frame[data-name="startup"] rect').hover();
    await expect(page.locator("#details").textContent()).resolves.toBe("Function: startup (400 bytes, 10.00%)");

    const shot = join(dir, "flamegraph.png");
    await page.screenshot({ path: shot });
    expect(existsSync(shot)).toBe(true);
  });

  it("loads with label values and frame names of any character: XML forbids U+0001 and U+FFFE, so they show as escapes", async () => {
    const hostile = profileOf([{ ...site(["allocate\x07", "main"], 3000), labels: { prefix: "t\x01\x1b[2J" } }, { ...site(["allocate\x07", "main"], 1000), labels: { prefix: "x\ufffe\n" } }], { shard: "all" });
    const file = join(dir, "labels.svg");
    writeFileSync(file, renderProfile(hostile, "svg", { by: "prefix", title: "Labels \x01" }).body as string);
    const page = await browser.newPage({ viewport: { width: 1200, height: 300 } });
    const errors: string[] = [];
    page.on("pageerror", (e) => errors.push(e.message));
    await page.goto(pathToFileURL(file).href);
    // A document Chromium could not parse shows its error instead of the SVG: no title, no frames.
    await expect(page.locator("#title").textContent()).resolves.toBe("Labels \\x01");
    const names = await page.locator("g.frame").evaluateAll((gs) => gs.map((g) => g.getAttribute("data-name")));
    expect(names).toEqual(expect.arrayContaining(["prefix=t\\x01\\x1b[2J", "prefix=x\\ufffe\\x0a", "allocate\\x07"]));
    await page.locator('g.frame[data-name="prefix=t\\\\x01\\\\x1b[2J"] rect').hover();
    await expect(page.locator("#details").textContent()).resolves.toBe("Function: prefix=t\\x01\\x1b[2J (3,000 bytes, 75.00%)");
    expect(errors).toEqual([]);
    await page.close();
  });
});
