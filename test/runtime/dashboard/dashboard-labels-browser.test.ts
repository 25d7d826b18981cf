/**
 * The dashboard's label view in Chromium (playwright-core, as
 * dashboard-browser.test.ts; skipped, saying so, without /usr/bin/chromium).
 * Two shards profiling every allocation run test/fixtures/label-tasks.mjs:
 * records through a leaf of their own under prefix=user (with tenant=acme),
 * prefix=session, and unlabeled. Before anything is labeled the chooser is
 * off with its note; then it lists both names, and each label's table
 * gives, to the byte, the figures groupByLabel gives for the profile (all
 * shards, and one), largest first, "(none)" for the unlabeled. A value's
 * click shows the flamegraph of its sites only (its leaf, its root
 * `prefix=VALUE`, no other value's frames); "Show all" brings every one
 * back. "Grew most" shows the sites' labels. No request leaves the server.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import { NO_LABEL, groupByLabel } from "../../../dist/index.js";
import { dashboardInChromium, haveChromium, watchPage } from "../../browser.js";

const hasChromium = haveChromium("dashboard label view check");

const TASKS = new URL("../../fixtures/label-tasks.mjs", import.meta.url);
const LEAVES = { user: "allocUserRecord", session: "allocSessionRecord", plain: "allocPlainRecord" } as const;

describe.runIf(hasChromium)("the dashboard's label view in Chromium", () => {
  const the = dashboardInChromium({ shards: 2, memoryPerShard: "8MiB", heapprof: true, module: TASKS });

  /** The table's rows as [value, exact live bytes, exact objects, share]. */
  const tableRows = (page: Page): Promise<Array<[string, number, number, string]>> =>
    page.locator("#label-rows tr").evaluateAll((rows) =>
      rows.map((r): [string, number, number, string] => [
        r.getAttribute("data-value")!,
        Number(r.querySelector("td.bytes")!.getAttribute("data-bytes")),
        Number(r.querySelector("td.objects")!.getAttribute("data-count")),
        r.querySelector("td.share")!.textContent!,
      ]),
    );
  /** What the table must say for label `name` of `shard`'s profile (all shards when undefined), by groupByLabel. */
  const expected = (name: string, shard?: number): Array<[string, number, number, string]> => {
    const p = the.smp.heapProfile(shard);
    return groupByLabel(p, name).map((g) => [g.value ?? NO_LABEL, g.size, g.count, `${((100 * g.size) / p.totalSize).toFixed(1)}%`]);
  };
  const frameNames = async (page: Page): Promise<string[]> => page.frameLocator("#flame").locator("g.frame").evaluateAll((gs) => gs.map((g) => g.getAttribute("data-name")!));
  /** Waits for the live flamegraph to load again after `act`. */
  const reloaded = async (page: Page, act: () => Promise<void>): Promise<void> => {
    const before = await page.getAttribute("#flame", "data-loaded");
    await act();
    await expect.poll(() => page.getAttribute("#flame", "data-loaded"), { timeout: 30_000 }).not.toBe(before);
  };

  it("groups live memory by a chosen label to the byte, and a value's click shows its flamegraph only", async () => {
    const { smp, admin, browser } = the;
    const page = await browser.newPage({ viewport: { width: 1400, height: 1600 } });
    const problems = watchPage(page, admin.url, { warnings: true });
    // The baseline first, so that "Grew most" holds the labeled sites below.
    expect((await fetch(`${admin.url}/v1/heapprof/baseline?shard=all`, { method: "POST" })).status).toBe(200);
    await page.goto(`${admin.url}/`);
    await page.waitForSelector("#flame[data-loaded]", { timeout: 30_000 });
    // Nothing labeled yet: the chooser is off and says why.
    await page.locator("#no-labels").waitFor({ state: "visible", timeout: 30_000 });
    expect(await page.isDisabled("#label-name")).toBe(true);
    expect(await page.isHidden("#label-table")).toBe(true);
    // The page refreshes when told from here on, so nothing changes under the clicks.
    await page.uncheck("#auto");

    await smp.submitTo(0, "keepVia", { via: "user", count: 40, size: 1000, labels: { prefix: "user", tenant: "acme" } });
    await smp.submitTo(1, "keepVia", { via: "session", count: 25, size: 2048, labels: { prefix: "session" } });
    await smp.submitTo(0, "keepVia", { via: "plain", count: 10, size: 512, labels: null });
    await reloaded(page, () => page.click("#refresh"));
    await expect.poll(() => page.isEnabled("#label-name"), { timeout: 30_000 }).toBe(true);
    expect(await page.locator("#label-name option").allTextContents()).toEqual(["prefix", "tenant"]);
    expect(await page.isHidden("#no-labels")).toBe(true);

    // The first name is shown until another is chosen; each table agrees with groupByLabel to the byte.
    await expect.poll(() => tableRows(page), { timeout: 30_000 }).toEqual(expected("prefix"));
    await page.selectOption("#label-name", "tenant");
    await expect.poll(() => tableRows(page), { timeout: 30_000 }).toEqual(expected("tenant"));
    expect((await tableRows(page)).map((r) => r[0])).toEqual([NO_LABEL, "acme"]); // session's and the unlabeled records outweigh acme's
    await page.selectOption("#label-name", "prefix");
    await expect.poll(() => tableRows(page), { timeout: 30_000 }).toEqual(expected("prefix"));
    const rows = await tableRows(page);
    // Largest first: session's 25 x 2048 B, user's 40 x 1000 B (each in its size class), then the unlabeled.
    expect(rows.map((r) => r[0])).toEqual(["session", "user", NO_LABEL]);
    expect(rows.find((r) => r[0] === "user")![2]).toBe(40);
    expect(rows.find((r) => r[0] === "session")![2]).toBe(25);
    // The human form beside the exact one: session's 51,200 B read as 50K.
    await expect(page.locator('#label-rows tr[data-value="session"] td.bytes').textContent()).resolves.toBe("50K");

    // One shard's: shard 1 holds the session records only.
    await page.selectOption("#shard", "1");
    await expect.poll(() => tableRows(page), { timeout: 30_000 }).toEqual(expected("prefix", 1));
    expect((await tableRows(page)).map((r) => r[0])).toContain("session");
    expect((await tableRows(page)).map((r) => r[0])).not.toContain("user");
    await reloaded(page, async () => {
      await page.selectOption("#shard", "all");
    });
    await expect.poll(() => tableRows(page), { timeout: 30_000 }).toEqual(expected("prefix"));

    // Every value's frames in the whole flamegraph.
    const all = await frameNames(page);
    for (const leaf of Object.values(LEAVES)) expect(all.some((n) => n.startsWith(`${leaf} `))).toBe(true);

    // A value's click: its sites only, rooted at its value.
    await reloaded(page, () => page.click('#label-rows tr[data-value="user"] button.value'));
    await expect(page.locator("#label-filter-name").textContent()).resolves.toBe("prefix=user");
    expect(await page.isVisible("#label-filter")).toBe(true);
    expect(await page.getAttribute('#label-rows tr[data-value="user"]', "class")).toBe("chosen");
    const user = await frameNames(page);
    expect(user).toContain("prefix=user");
    expect(user.some((n) => n.startsWith(`${LEAVES.user} `))).toBe(true);
    expect(user.filter((n) => n.startsWith(`${LEAVES.session} `) || n.startsWith(`${LEAVES.plain} `) || /^prefix=(?!user$)/.test(n))).toEqual([]);
    await page.screenshot({ path: join(mkdtempSync(join(tmpdir(), "shardheap-labels-")), "dashboard-labels.png"), fullPage: true });

    // The unlabeled sites: the "(none)" row.
    await reloaded(page, () => page.click(`#label-rows tr[data-value="${NO_LABEL}"] button.value`));
    const none = await frameNames(page);
    expect(none).toContain(`prefix=${NO_LABEL}`);
    expect(none.some((n) => n.startsWith(`${LEAVES.plain} `))).toBe(true);
    expect(none.filter((n) => n.startsWith(`${LEAVES.user} `) || n.startsWith(`${LEAVES.session} `))).toEqual([]);
    // The filter stays through a refresh.
    await reloaded(page, () => page.click("#refresh"));
    expect((await frameNames(page)).filter((n) => n.startsWith(`${LEAVES.user} `))).toEqual([]);

    // And back to all.
    await reloaded(page, () => page.click("#label-filter-clear"));
    expect(await page.isHidden("#label-filter")).toBe(true);
    expect(await page.locator("#label-rows tr.chosen").count()).toBe(0);
    const back = await frameNames(page);
    for (const leaf of Object.values(LEAVES)) expect(back.some((n) => n.startsWith(`${leaf} `))).toBe(true);
    expect(back.filter((n) => n.startsWith("prefix="))).toEqual([]);

    // "Grew most" (the growth since the baseline) shows the labeled sites' labels.
    await page.waitForSelector("#growth:not([hidden])", { timeout: 30_000 });
    const chips = async (): Promise<string[]> => (await page.locator("#grown-rows tr .labels span").allTextContents()).sort();
    await expect.poll(chips, { timeout: 30_000 }).toEqual(["prefix=session", "prefix=user", "tenant=acme"]);
    const userRow = page.locator("#grown-rows tr", { hasText: "tenant=acme" });
    await expect(userRow.locator("summary .name").textContent()).resolves.toMatch(new RegExp(`^${LEAVES.user} `));

    expect(problems).toEqual([]);
    await page.close();
  });
});
