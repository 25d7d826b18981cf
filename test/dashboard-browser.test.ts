/**
 * The dashboard in a real browser: Debian's Chromium driven by
 * playwright-core, against `stress --leak` running in this process with a
 * short growth window (8 s at 250 ms). The page loads with no request
 * leaving the admin server and no console errors; the charts draw; shard
 * 1's profiler switch changes shard 1 only (checked through the REST API);
 * the growing-sites list names the leaking function; a baseline and the
 * growth since show it red; every download is a valid file; with a token
 * the page asks for it and sends it only as a header. Screenshots go to
 * the test's temp dir. Without /usr/bin/chromium (`.ci/run` installs it)
 * the test says that it skipped.
 */
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { gunzipSync } from "node:zlib";
import { chromium, type Browser, type Page } from "playwright-core";
import { Profile } from "pprof-format";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Smp, serveAdmin, type AdminServer, type HeapProfile } from "../dist/index.js";
import { runStress, type StressSummary } from "../dist/apps/stress/run.js";

const CHROMIUM = "/usr/bin/chromium";
const hasChromium = existsSync(CHROMIUM);
if (!hasChromium) console.warn(`dashboard browser check SKIPPED: ${CHROMIUM} is not installed (apt-get install chromium)`);

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
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    });
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
    const problems: string[] = [];
    const requests: Array<{ url: string; authorization: string | undefined }> = [];
    page.on("console", (m) => {
      if (m.type() === "error" || m.type() === "warning") problems.push(`console ${m.type()}: ${m.text()}`);
    });
    page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
    page.on("request", (r) => {
      requests.push({ url: r.url(), authorization: r.headers()["authorization"] });
      if (!r.url().startsWith(`${base}/`) && !r.url().startsWith(`blob:${base}/`) && !r.url().startsWith("data:")) problems.push(`request left the server: ${r.url()}`);
    });
    await page.goto(`${base}/`);
    return { page, problems, requests };
  }
  const rest = async (path: string): Promise<HeapProfile> => (await fetch(url + path)).json() as Promise<HeapProfile>;
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
      .poll(() => page.evaluate("(() => { const d = window.shardheapDashboard; return d !== undefined && d.charts.length === 4 && d.charts.every((c) => c.data[0].length >= 3); })()"), { timeout: 30_000 })
      .toBe(true);
    // Each chart's canvas has shard 0's line on it (PALETTE[0], #1f77b4).
    const coloured = (await page.evaluate(`[...document.querySelectorAll(".chart canvas")].map((canvas) => {
      const px = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
      let n = 0;
      for (let i = 0; i < px.length; i += 4) if (Math.abs(px[i] - 31) < 20 && Math.abs(px[i + 1] - 119) < 20 && Math.abs(px[i + 2] - 180) < 20) n++;
      return n;
    })`)) as number[];
    expect(coloured).toHaveLength(4);
    for (const n of coloured) expect(n).toBeGreaterThan(20);
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
    await expect(page.locator("#growing-list li.growing-site ol.frames li").first().textContent()).resolves.toMatch(new RegExp(`^${LEAK} \\(.*workload\\.ts:\\d+:\\d+\\)$`));

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
    await expect.poll(() => page.evaluate("window.shardheapDashboard.charts.length"), { timeout: 30_000 }).toBe(4);
    await page.waitForSelector("#flame[data-loaded]", { timeout: 30_000 });
    const api = requests.filter((r) => r.url.startsWith(`${locked.url}/v1/`));
    expect(api.length).toBeGreaterThan(1);
    for (const r of api) expect(r.authorization, r.url).toBe(`Bearer ${TOKEN}`);
    expect(requests.filter((r) => r.url.includes(TOKEN))).toEqual([]);
    await page.screenshot({ path: join(dir, "dashboard-token.png"), fullPage: true });
    expect(problems).toEqual([]);
    await page.close();
  });
});
