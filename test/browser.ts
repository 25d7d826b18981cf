/**
 * Debian's Chromium for the browser tests (playwright-core drives it; no
 * browser is downloaded): whether it is here, saying that the check skips
 * when it is not, a headless launch whose flags keep it off the network
 * (without the background-networking ones it reaches for Google's hosts
 * at every start), and a page watcher that collects what must not happen:
 * page errors, console errors (and warnings, when asked), and any request
 * that leaves the server under test; and the dashboard's fixture: an Smp,
 * its admin server and Chromium for one describe block.
 */
import { existsSync } from "node:fs";
import { chromium, type Browser, type Page } from "playwright-core";
import { afterAll, beforeAll } from "vitest";
import { Smp, serveAdmin, type AdminServer, type SmpOptions } from "../dist/index.js";

export const CHROMIUM = "/usr/bin/chromium";

/** Whether Chromium is installed; when not, says on stderr that `check` is skipped. */
export function haveChromium(check: string): boolean {
  const here = existsSync(CHROMIUM);
  if (!here) console.warn(`${check} SKIPPED: ${CHROMIUM} is not installed (apt-get install chromium)`);
  return here;
}

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
}

/**
 * Problems on `page` from now on, as lines: page errors, console errors
 * (and warnings with `warnings`), requests to anything but `base`, its
 * blobs and data: URLs. A test expects the list empty.
 */
export function watchPage(page: Page, base: string, o: { warnings?: boolean } = {}): string[] {
  const problems: string[] = [];
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("console", (m) => {
    if (m.type() === "error" || (o.warnings === true && m.type() === "warning")) problems.push(`console ${m.type()}: ${m.text()}`);
  });
  page.on("request", (r) => {
    if (!r.url().startsWith(`${base}/`) && !r.url().startsWith(`blob:${base}/`) && !r.url().startsWith("data:")) problems.push(`request left the server: ${r.url()}`);
  });
  return problems;
}

/** What dashboardInChromium gives its tests, set once its beforeAll has run. */
export interface DashboardFixture {
  readonly smp: Smp;
  readonly admin: AdminServer;
  readonly browser: Browser;
}

/**
 * Before the tests of the describe block it is called in: an Smp of
 * `options`, its admin server sampling every 100 ms (the dashboard's
 * history) and Chromium; after them, all three stopped, logging silenced.
 */
export function dashboardInChromium(options: SmpOptions): DashboardFixture {
  const fixture = {} as { smp: Smp; admin: AdminServer; browser: Browser };
  beforeAll(async () => {
    process.env.SHARDHEAP_LOG = "silent";
    fixture.smp = await Smp.start(options);
    fixture.admin = await serveAdmin(fixture.smp, { dashboard: { sampleIntervalMs: 100 } });
    fixture.browser = await launchChromium();
  }, 60_000);
  afterAll(async () => {
    await fixture.browser?.close();
    await fixture.admin?.close();
    await fixture.smp?.stop();
  });
  return fixture;
}
