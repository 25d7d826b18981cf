/**
 * The dashboard in a real browser: Debian's Chromium driven by
 * playwright-core, against `stress --leak` running in this process with a
 * short growth window (8 s at 250 ms). The page loads with no request
 * leaving the admin server and no console errors; the charts draw; shard
 * 1's profiler switch changes shard 1 only (checked through the REST API);
 * the growing-sites list names the leaking function; a baseline and the
 * growth since show it red; every download is a valid file; with a token
 * the page asks for it and sends it only as a header. Against a second
 * runtime (test/fixtures/dashboard-tasks.mjs, profiling every allocation):
 * failed allocations and the largest free span drawn, every legend showing
 * its latest values unhovered, a note counting the failures; the app
 * panel with the figures published (and gone once withdrawn, an error
 * shown for a reader that throws); the rate box saying "every allocation"
 * as "Now" does; named baselines set, chosen and deleted in the page, and
 * two stacks through one leaf told apart in "Grew most". Screenshots go to
 * the test's temp dir. Without /usr/bin/chromium (`.ci/run` installs it)
 * the test says that it skipped.
 */
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { gunzipSync } from "node:zlib";
import { type Browser, type Page } from "playwright-core";
import { Profile } from "pprof-format";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Smp, formatSize, serveAdmin, type AdminServer, type HeapProfile } from "../../../dist/index.js";
import { runStress, type StressSummary } from "../../../dist/apps/stress/run.js";
import { haveChromium, launchChromium, watchPage } from "../../browser.js";

const hasChromium = haveChromium("dashboard browser check");

const RATE = 4096;
const LEAK = "allocateLeakedRecord";
const TOKEN = "t0ken-for-the-page";

describe.runIf(hasChromium)("dashboard in Chromium", () => {
  let browser: Browser;
  let dir: string;
  let url: string;
  let stop!: () => void;
  let stress: Promise<StressSummary>;
  let smp: Smp;
  let locked: AdminServer;
  let stressStarted = 0;

  beforeAll(async () => {
    process.env.SHARDHEAP_LOG = "silent";
    dir = mkdtempSync(join(tmpdir(), "shardheap-dashboard-"));
    let printed = "";
    let announce!: (url: string) => void;
    const announced = new Promise<string>((resolve) => (announce = resolve));
    const out = new Writable({
      write(chunk: Buffer, _enc, done) {
        printed += chunk.toString();
        const m = /admin: (http:\/\/\S+)/.exec(printed);
        if (m) announce(m[1]!);
        done();
      },
    });
    stressStarted = Date.now();
    stress = runStress({
      shards: 2,
      memoryPerShard: 16 << 20,
      heapprofRate: RATE,
      durationSeconds: 900,
      crossShard: 0.25,
      outDir: join(dir, "stress"),
      out,
      interrupted: new Promise<void>((resolve) => (stop = resolve)),
      adminPort: 0,
      adminHeapImage: true,
      adminDashboard: { sampleIntervalMs: 250, growthWindowSeconds: 8 },
      leakRate: 128 * 1024,
    });
    url = await Promise.race([announced, stress.then(() => Promise.reject(new Error(`stress ended first:\n${printed}`)))]);
    smp = await Smp.start({ shards: 2, memoryPerShard: "8MiB", heapprof: RATE });
    locked = await serveAdmin(smp, { token: TOKEN });
    browser = await launchChromium();
  });
  afterAll(async () => {
    stop?.();
    await Promise.race([stress, new Promise((r) => setTimeout(r, 60_000).unref())]);
    await browser?.close();
    await locked?.close();
    await smp?.stop();
  });

  /** A page of the dashboard at `base`, recording console errors, page errors and every request that leaves `base`. */
  async function open(base: string): Promise<{ page: Page; problems: string[]; requests: Array<{ url: string; authorization: string | undefined }> }> {
    const page = await browser.newPage({ viewport: { width: 1400, height: 1800 }, acceptDownloads: true });
    const problems = watchPage(page, base, { warnings: true });
    const requests: Array<{ url: string; authorization: string | undefined }> = [];
    page.on("request", (r) => requests.push({ url: r.url(), authorization: r.headers()["authorization"] }));
    await page.goto(`${base}/`);
    return { page, problems, requests };
  }
  const rest = async (path: string, base = url): Promise<HeapProfile> => (await fetch(base + path)).json() as Promise<HeapProfile>;
  const until = async (what: string, check: () => Promise<boolean>, ms = 30_000): Promise<void> => {
    const end = Date.now() + ms;
    while (!(await check())) {
      if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  };

  it("loads with nothing fetched from elsewhere and no console errors; the charts draw, the flamegraph shows", async () => {
    const { page, problems } = await open(url);
    // Browser-side code as text (this program is compiled without the DOM's types), run by
    // page.evaluate: polling inside the page would need eval, which the page's CSP refuses.
    await expect
      .poll(() => page.evaluate("(() => { const d = window.shardheapDashboard; return d !== undefined && d.charts.length === 6 && d.charts.every((c) => c.data[0].length >= 3); })()"), { timeout: 30_000 })
      .toBe(true);
    // Each of the first four charts' canvas has shard 0's line on it (PALETTE[0], #1f77b4); the last two may be flat lines shard 1's covers.
    const coloured = (await page.evaluate(`["chart-used", "chart-free", "chart-live", "chart-cross"].map((id) => document.querySelector("#" + id + " canvas")).map((canvas) => {
      const px = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
      let n = 0;
      for (let i = 0; i < px.length; i += 4) if (Math.abs(px[i] - 31) < 20 && Math.abs(px[i + 1] - 119) < 20 && Math.abs(px[i + 2] - 180) < 20) n++;
      return n;
    })`)) as number[];
    expect(coloured).toHaveLength(4);
    for (const n of coloured) expect(n).toBeGreaterThan(20);
    // stress publishes no figures of its own: no app panel.
    expect(await page.isHidden("#app-section")).toBe(true);
    await page.waitForSelector("#flame[data-loaded]", { timeout: 30_000 });
    const flame = page.frameLocator("#flame");
    await expect(flame.locator("#title").textContent()).resolves.toBe("Heap profile (live bytes)");
    expect(await flame.locator("g.frame").count()).toBeGreaterThan(3);
    // Search goes through to the flamegraph's own search.
    await page.fill("#search", "^allocateSessionState");
    await expect.poll(() => flame.locator("#matched").textContent(), { timeout: 10_000 }).toMatch(/^Matched: \d+\.\d%$/);
    await page.screenshot({ path: join(dir, "dashboard.png"), fullPage: true });
    expect(existsSync(join(dir, "dashboard.png"))).toBe(true);
    expect(problems).toEqual([]);
    await page.close();
  });

  it("switching shard 1's profiler in the page changes shard 1 only", async () => {
    const { page, problems } = await open(url);
    await page.waitForSelector("#prof-on-1:checked", { timeout: 30_000 });
    await page.click("#prof-on-1");
    await until("shard 1 off", async () => (await rest("/v1/heapprof?shard=1")).sampleRate === 0);
    expect((await rest("/v1/heapprof?shard=0")).sampleRate).toBe(RATE);
    await expect.poll(() => page.textContent("#prof-now-1")).toBe("off");
    expect(await page.isChecked("#prof-on-0")).toBe(true);
    // On again, at the rate typed in.
    await page.fill("#prof-rate-1", "4K");
    await page.click("#prof-on-1");
    await until("shard 1 on", async () => (await rest("/v1/heapprof?shard=1")).sampleRate === RATE);
    expect((await rest("/v1/heapprof?shard=0")).sampleRate).toBe(RATE);
    await expect.poll(() => page.textContent("#prof-now-1")).toBe("1 sample per 4K");
    expect(problems).toEqual([]);
    await page.close();
  });

  it("names the leaking function among the growing sites, and a baseline shows its growth red", async () => {
    const { page, problems } = await open(url);
    const started = Date.now();
    await expect.poll(async () => (await page.locator("#growing-list li.growing-site .name").allTextContents())[0], { timeout: 60_000, interval: 250 }).toMatch(new RegExp(`^${LEAK} `));
    console.log(`growing sites named ${LEAK} first ${((Date.now() - started) / 1000).toFixed(1)} s after the page opened, ${((Date.now() - stressStarted) / 1000).toFixed(1)} s after stress started`);
    await page.click("#growing-list li.growing-site summary");
    // The site's frames as every report shows them: the file relative to the working directory, its line visible.
    await expect(page.locator("#growing-list li.growing-site ol.frames li").first().textContent()).resolves.toMatch(new RegExp(`^${LEAK} \\(src/apps/stress/workload\\.ts:\\d+:\\d+\\)$`));

    await page.click("#set-baseline");
    await page.waitForSelector("#growth:not([hidden])", { timeout: 30_000 });
    // Let the leak grow a little past the baseline, then refresh.
    await until("growth since the baseline", async () => ((await (await fetch(`${url}/v1/heapprof?diff=baseline`)).json()) as HeapProfile).sites.some((s) => s.frames[0]?.functionName === LEAK && s.size >= 64 * 1024));
    const loaded = await page.getAttribute("#growth-flame", "data-loaded");
    await page.click("#refresh");
    await expect.poll(() => page.getAttribute("#growth-flame", "data-loaded"), { timeout: 30_000 }).not.toBe(loaded);
    const leakFrame = page.frameLocator("#growth-flame").locator(`g.frame[data-name^="${LEAK} "]`);
    expect(Number(await leakFrame.getAttribute("data-delta"))).toBeGreaterThan(0);
    expect(await leakFrame.locator("rect").getAttribute("fill")).toMatch(/^rgb\(255,(\d+),\1\)$/);
    await expect.poll(() => page.locator("#grown-rows tr td.name").allTextContents(), { timeout: 30_000 }).toContainEqual(expect.stringMatching(new RegExp(`^${LEAK} `)));
    await page.screenshot({ path: join(dir, "dashboard-growth.png"), fullPage: true });
    expect(problems).toEqual([]);
    await page.close();
  });

  it("downloads valid files of every format, the heap image and the growth included", async () => {
    const { page, problems } = await open(url);
    await page.waitForSelector("#downloads button", { timeout: 30_000 });
    await page.click("#set-baseline");
    await page.waitForSelector("#growth:not([hidden])", { timeout: 30_000 });
    const names = await page.locator("#downloads button").evaluateAll((bs) => bs.map((b) => b.getAttribute("data-file")!));
    expect(names).toEqual(["heapprof.pb.gz", "heapprof.heapprofile", "heapprof.collapsed", "heapprof.svg", "heapprof.txt", "growth.pb.gz", "growth.svg", "heap.img"]);
    for (const name of names) {
      const [download] = await Promise.all([page.waitForEvent("download", { timeout: 30_000 }), page.click(`#downloads button[data-file="${name}"]`)]);
      expect(download.suggestedFilename()).toBe(name);
      const file = join(dir, name);
      await download.saveAs(file);
      const bytes = readFileSync(file);
      const text = bytes.toString("utf8");
      if (name.endsWith(".pb.gz")) expect(Profile.decode(gunzipSync(bytes)).sample.length, name).toBeGreaterThan(0);
      else if (name.endsWith(".heapprofile")) expect(JSON.parse(text).head.callFrame.functionName).toBe("(root)");
      else if (name.endsWith(".collapsed")) expect(text).toMatch(/^(\S.* \d+\n)+$/);
      else if (name.endsWith(".svg")) expect(text).toMatch(/^<\?xml [\s\S]*<\/svg>\n$/);
      else if (name.endsWith(".txt")) expect(text).toMatch(/^All \(\d+, #\d+\)\n/);
      else expect(bytes.subarray(0, 8).toString("latin1")).toBe("SHARDIMG");
    }
    expect(problems).toEqual([]);
    await page.close();
  });

  it("with a token, asks for it first and sends it only as a bearer header, never in a URL", async () => {
    const { page, problems, requests } = await open(locked.url);
    await page.waitForSelector("#token-box:not([hidden])");
    expect(requests.filter((r) => r.url.includes("/v1/"))).toEqual([]);
    await page.fill("#token", TOKEN);
    await page.click("#token-ok");
    await expect.poll(() => page.evaluate("window.shardheapDashboard.charts.length"), { timeout: 30_000 }).toBe(6);
    await page.waitForSelector("#flame[data-loaded]", { timeout: 30_000 });
    const api = requests.filter((r) => r.url.startsWith(`${locked.url}/v1/`));
    expect(api.length).toBeGreaterThan(1);
    for (const r of api) expect(r.authorization, r.url).toBe(`Bearer ${TOKEN}`);
    expect(requests.filter((r) => r.url.includes(TOKEN))).toEqual([]);
    await page.screenshot({ path: join(dir, "dashboard-token.png"), fullPage: true });
    expect(problems).toEqual([]);
    await page.close();
  });

  describe("failures, the app panel, the rate box and named baselines (a runtime profiling every allocation)", () => {
    let apps: Smp;
    let admin: AdminServer;
    beforeAll(async () => {
      apps = await Smp.start({ shards: 2, memoryPerShard: "2MiB", heapprof: true, module: new URL("../../fixtures/dashboard-tasks.mjs", import.meta.url) });
      admin = await serveAdmin(apps, { dashboard: { sampleIntervalMs: 250 } });
    });
    afterAll(async () => {
      await admin?.close();
      await apps?.stop();
    });
    /** The legend values of chart `id`, by series: the time first, then shard 0, 1. */
    const legend = (page: Page, id: string): Promise<string[]> => page.locator(`#${id} .u-legend tr.u-series td.u-value`).allTextContents();
    const baselineNames = async (): Promise<string[]> =>
      [...new Set(((await (await fetch(`${admin.url}/v1/heapprof/baseline`)).json()) as { baselines: Array<{ name: string }> }).baselines.map((b) => b.name))];

    it("draws failed allocations and the largest free span; every legend shows its latest values unhovered; a note counts the failures", async () => {
      const filled = await apps.submitTo<{ failed: number }>(0, "fillUntilFailing", { size: 64 * 1024, failures: 25 });
      expect(filled.failed).toBe(25);
      expect(apps.stats(0).failedAllocations).toBe(25);
      const { page, problems } = await open(admin.url);
      await expect.poll(() => legend(page, "chart-failed"), { timeout: 30_000 }).toEqual([expect.any(String), "25", "0"]);
      // As the server reads it now (an idle shard's trimmer may still give spans back meanwhile).
      await expect.poll(async () => (await legend(page, "chart-largest-free")).slice(1).join(" ") === [0, 1].map((s) => formatSize(apps.heap.largestFreeSpan(s))).join(" "), { timeout: 30_000 }).toBe(true);
      expect(apps.heap.largestFreeSpan(0)).toBeLessThan(64 * 1024); // what made the mallocs fail
      // No hover anywhere: every chart's legend shows values (it showed "-" until hovered).
      for (const id of ["chart-used", "chart-free", "chart-live", "chart-cross", "chart-failed", "chart-largest-free"]) {
        const values = await legend(page, id);
        expect(values, id).toHaveLength(3);
        for (const v of values) expect(v, id).not.toMatch(/^-*$/);
      }
      await expect(page.textContent("#failed-note")).resolves.toMatch(/^25 allocations failed \(OutOfMemoryError\) since the start: shard 0 25 \(largest free span \d+(\.\d)?[BKM] of \d+(\.\d)?[BKM] free\), shard 1 0 \(largest free span /);
      expect(await page.isVisible("#failed-note")).toBe(true);
      await page.screenshot({ path: join(dir, "dashboard-failures.png"), fullPage: true });
      expect(problems).toEqual([]);
      await page.close();
    });

    it("shows the figures the app publishes, a counter's rate, a broken reader's error; the panel goes when the app withdraws", async () => {
      const t0 = Date.now();
      const withdraw = apps.publishAppStats("demo-cache", () => ({
        "hit rate": { value: 0.75, unit: "ratio", help: "hits / lookups" },
        items: 42,
        "item bytes": { value: 3 * 1024 * 1024, unit: "bytes" },
        evictions: { value: Math.floor((Date.now() - t0) / 10), kind: "counter" }, // 100 a second
      }));
      const withdrawBroken = apps.publishAppStats("broken", () => {
        throw new Error("stats block gone");
      });
      try {
        const { page, problems } = await open(admin.url);
        await page.waitForSelector("#app-section:not([hidden])", { timeout: 30_000 });
        const figure = (app: string, name: string, cell: string): Promise<string | null> => page.textContent(`.app-panel[data-app="${app}"] tr[data-figure="${name}"] td.${cell}`);
        await expect(figure("demo-cache", "hit rate", "value")).resolves.toBe("75.0%");
        await expect(figure("demo-cache", "items", "value")).resolves.toBe("42");
        await expect(figure("demo-cache", "item bytes", "value")).resolves.toBe("3M");
        await expect(page.getAttribute('.app-panel[data-app="demo-cache"] tr[data-figure="hit rate"] th', "title")).resolves.toBe("hits / lookups");
        await expect.poll(async () => Number(/^\+([\d.]+)\/s$/.exec((await figure("demo-cache", "evictions", "rate")) ?? "")?.[1]), { timeout: 30_000 }).toBeGreaterThan(50);
        await expect(page.textContent('.app-panel[data-app="broken"] .error')).resolves.toBe("its reader threw: stats block gone");
        const rest = (await (await fetch(`${admin.url}/v1/app/stats`)).json()) as { apps: Array<{ app: string }> };
        expect(rest.apps.map((a) => a.app)).toEqual(["demo-cache", "broken"]);
        await page.screenshot({ path: join(dir, "dashboard-app.png"), fullPage: true });
        withdraw();
        withdrawBroken();
        await page.waitForSelector("#app-section[hidden]", { state: "attached", timeout: 30_000 });
        expect(problems).toEqual([]);
        await page.close();
      } finally {
        withdraw();
        withdrawBroken();
      }
    });

    it("the rate box says a rate as Now does: every allocation, or the bytes per sample", async () => {
      const { page, problems } = await open(admin.url);
      await expect.poll(() => page.textContent("#prof-now-1"), { timeout: 30_000 }).toBe("every allocation");
      expect(await page.inputValue("#prof-rate-1")).toBe("every allocation");
      await page.fill("#prof-rate-1", "4K");
      await page.click("#prof-apply-1");
      await expect.poll(async () => (await rest(`/v1/heapprof?shard=1`, admin.url)).sampleRate, { timeout: 30_000 }).toBe(4096);
      await expect.poll(() => page.textContent("#prof-now-1")).toBe("1 sample per 4K");
      expect(await page.inputValue("#prof-rate-1")).toBe("4K");
      await page.fill("#prof-rate-1", "every allocation");
      await page.click("#prof-apply-1");
      await expect.poll(async () => (await rest(`/v1/heapprof?shard=1`, admin.url)).sampleRate, { timeout: 30_000 }).toBe(1);
      await expect.poll(() => page.textContent("#prof-now-1")).toBe("every allocation");
      await page.click("body"); // the box leaves focus, so the page may write it
      await expect.poll(() => page.inputValue("#prof-rate-1"), { timeout: 30_000 }).toBe("every allocation");
      expect(problems).toEqual([]);
      await page.close();
    });

    it("named baselines: set two, choose which to compare with, delete one; two stacks through one leaf read differently", async () => {
      const { page, problems } = await open(admin.url);
      await page.waitForSelector("#shard option[value='1']", { state: "attached", timeout: 30_000 });
      await page.selectOption("#shard", "1");
      await page.fill("#baseline-name", "before");
      await page.click("#set-baseline");
      await page.waitForSelector("#growth:not([hidden])", { timeout: 30_000 });
      await apps.submitTo(1, "keepViaCache", { count: 40, size: 1000 });
      await apps.submitTo(1, "keepViaSession", { count: 20, size: 1000 });
      await page.fill("#baseline-name", "after");
      await page.click("#set-baseline");
      await expect.poll(() => page.inputValue("#baseline-select")).toBe("after");
      expect(await baselineNames()).toEqual(["before", "after"]);
      await apps.submitTo(1, "keepViaSession", { count: 5, size: 1000 });
      // Since "after": the session's 5 records only.
      await page.click("#refresh");
      await expect.poll(() => page.textContent("#growth-total"), { timeout: 30_000 }).toBe("+5K in all");
      // Since "before": both stacks, each ending in allocateRecord, told apart by their callers.
      await page.selectOption("#baseline-select", "before");
      await expect.poll(() => page.textContent("#growth-total"), { timeout: 30_000 }).toBe("+65K in all");
      const rows = page.locator("#grown-rows tr");
      await expect.poll(() => rows.count(), { timeout: 30_000 }).toBe(2);
      const shortForms = await page.locator("#grown-rows tr summary .name").allTextContents();
      expect(shortForms).toHaveLength(2);
      for (const text of shortForms) expect(text).toMatch(/^allocateRecord \(dashboard-tasks\.mjs:\d+\) \u2190 keepVia(Cache|Session) \(dashboard-tasks\.mjs:\d+\)/);
      expect(new Set(shortForms).size).toBe(2);
      expect(shortForms[0]).toContain("keepViaCache"); // 40 records since "before" against the session's 25: most bytes first
      // Opened, a row lists the whole stack (its tooltip too).
      await rows.first().locator("summary").click();
      const frames = await rows.first().locator("ol.frames li").allTextContents();
      expect(frames.length).toBeGreaterThanOrEqual(3);
      expect(frames[0]).toMatch(/^allocateRecord \(.*dashboard-tasks\.mjs:\d+:\d+\)$/);
      expect((await rows.first().locator("details").getAttribute("title"))?.split("\n")).toEqual(frames);
      await page.screenshot({ path: join(dir, "dashboard-baselines.png"), fullPage: true });
      await page.selectOption("#baseline-select", "after");
      // A growth read still on its way when its baseline is deleted must not ask for the deleted name
      // (a 409 the browser logs): growth requests are held 300 ms on their way out, and the delete follows at once.
      // Counted by request, not by event: a read sent before the route was set (the select above makes one) ends
      // after it, and a count by events then went below zero (-2 seen) and never came back.
      const growthReads = new Set<object>();
      const growthRead = (r: object): void => void growthReads.delete(r);
      page.on("requestfinished", growthRead);
      page.on("requestfailed", growthRead);
      await page.route(/diff=baseline/, async (route) => {
        growthReads.add(route.request());
        await new Promise((r) => setTimeout(r, 300));
        await route.continue().catch(() => {}); // the page may be closing
      });
      await page.click("#refresh");
      await page.click("#delete-baseline");
      await expect.poll(baselineNames, { timeout: 30_000 }).toEqual(["before"]);
      await expect.poll(() => page.locator("#baseline-select option").allTextContents()).toEqual(["before"]);
      await expect.poll(() => growthReads.size, { timeout: 30_000 }).toBe(0);
      expect(problems).toEqual([]);
      await page.close();
    });
  });
});
