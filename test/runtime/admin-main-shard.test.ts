/**
 * The admin API over a runtime with the main thread's own shard
 * (Smp.start({ mainShard: true })): the main thread's region is listed as
 * one more shard everywhere per-shard figures are (stats, diagnostics,
 * profiles, switches, baselines, history, growing sites, /metrics), its
 * profiler switched on the main thread, and an id past it a 404 that
 * names it. In Chromium (when installed): the dashboard names it "main
 * thread (shard N)" and its switch reaches it.
 */
import { beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { serveAdmin, type HeapProfile, type MemoryStats, type Smp } from "../../dist/index.js";
import { haveChromium, launchChromium, watchPage } from "../browser.js";
import { TASKS, siteNamed, startSmp } from "../helpers.js";

beforeAll(() => {
  process.env.SHARDHEAP_LOG = "silent";
});


/** Two worker shards, the main thread's (id 2), and an admin server over them, closed when the test ends. */
async function serve(o: { sampleIntervalMs?: number } = {}): Promise<{ smp: Smp; url: string; get(path: string, init?: RequestInit): Promise<{ status: number; text: string }> }> {
  const smp = await startSmp({ shards: 2, mainShard: true, module: TASKS });
  const admin = await serveAdmin(smp, { dashboard: { sampleIntervalMs: o.sampleIntervalMs ?? 100 } });
  onTestFinished(() => admin.close());
  const get = async (path: string, init: RequestInit = {}): Promise<{ status: number; text: string }> => {
    const r = await fetch(admin.url + path, init);
    return { status: r.status, text: await r.text() };
  };
  return { smp, url: admin.url, get };
}

/** Allocations on the main thread, under a name the profile shows. */
function allocateOnMainThread(smp: Smp, count: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < count; i++) out.push(smp.memory.malloc(512));
  return out;
}

describe("admin API with the main thread's shard", () => {
  it("lists it as shard 2: stats, diagnostics, metrics, history; shard 3 is a 404 naming it", async () => {
    const { smp, get } = await serve();
    const ptrs = allocateOnMainThread(smp, 30);
    const stats = JSON.parse((await get("/v1/memory/stats?shard=2")).text) as MemoryStats;
    expect(stats).toEqual(smp.stats(2));
    expect(stats.liveObjects).toBe(30);
    expect((JSON.parse((await get("/v1/memory/stats")).text) as MemoryStats).liveObjects).toBe(smp.stats().liveObjects);
    const missing = await get("/v1/memory/stats?shard=3");
    expect(missing.status).toBe(404);
    expect(JSON.parse(missing.text).error).toBe("no shard 3: shards are 0 to 2 (2: the main thread's)");
    expect((await get("/v1/memory/diagnostics?shard=2")).text).toMatch(/^Used memory:/m);
    expect((await get("/v1/memory/diagnostics")).text.match(/^Used memory:/gm)).toHaveLength(3);
    const metrics = (await get("/metrics")).text;
    expect(metrics).toContain('shardheap_memory_malloc_live_objects{shard="2"} 30');
    expect(metrics).toMatch(/^shardheap_profiler_site_capacity\{shard="2"\} \d+$/m);
    let history: { shards: number; mainShard: number | null; samples: Array<{ shards: Array<{ liveObjects: number }> }> } | undefined;
    // A sample taken after the mallocs (one every 100 ms): 5 s at most.
    for (let i = 0; i < 100 && !(history?.samples.at(-1)?.shards[2]?.liveObjects === 30); i++) {
      history = JSON.parse((await get("/v1/memory/history")).text);
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(history).toMatchObject({ shards: 3, mainShard: 2 });
    expect(history!.samples.at(-1)!.shards).toHaveLength(3);
    expect(history!.samples.at(-1)!.shards[2]!.liveObjects).toBe(30);
    for (const p of ptrs) smp.memory.free(p);
  });

  it("profiles it: PUT rate for shard 2 and for all applies on the main thread; its profile, merged ones, baselines and growth include it", async () => {
    const { smp, get } = await serve();
    const put = await get("/v1/heapprof?shard=2&rate=1", { method: "PUT" });
    expect(put).toEqual({ status: 200, text: '{"shard":2,"rate":1}' });
    expect(smp.memory.heapProfilingSampleRate()).toBe(1);
    expect(await smp.submitTo(0, "sampleRate")).toBe(0);
    expect((await get("/v1/heapprof/baseline?shard=all&name=before", { method: "POST" })).status).toBe(200);
    const ptrs = allocateOnMainThread(smp, 12);
    const own = JSON.parse((await get("/v1/heapprof?shard=2&format=json")).text) as HeapProfile;
    expect(own.sampleRate).toBe(1);
    expect(siteNamed(own, "allocateOnMainThread")).toMatchObject({ count: 12, size: 12 * 512 });
    const all = JSON.parse((await get("/v1/heapprof?format=json")).text) as HeapProfile;
    expect(siteNamed(all, "allocateOnMainThread")).toMatchObject({ count: 12 });
    expect((await get("/v1/heapprof?shard=2&format=collapsed")).text).toMatch(/allocateOnMainThread \(.*\) 6144$/m);
    const growth = JSON.parse((await get("/v1/heapprof?format=json&diff=baseline&baseline=before")).text) as HeapProfile;
    expect(siteNamed(growth, "allocateOnMainThread")).toMatchObject({ count: 12, size: 6144 });
    const growth2 = JSON.parse((await get("/v1/heapprof?shard=2&format=json&diff=baseline&baseline=before")).text) as HeapProfile;
    expect(siteNamed(growth2, "allocateOnMainThread")).toMatchObject({ count: 12 });
    const listed = JSON.parse((await get("/v1/heapprof/baseline")).text) as { baselines: Array<{ shard: number }> };
    expect(listed.baselines.map((b) => b.shard).sort()).toEqual([0, 1, 2]);
    expect((await get("/v1/heapprof/growing?shard=2")).status).toBe(200);
    expect((await get("/v1/heapprof/labels?shard=2")).status).toBe(200);
    expect((await get("/v1/heapprof?shard=all&rate=64K", { method: "PUT" })).status).toBe(200);
    expect(smp.memory.heapProfilingSampleRate()).toBe(65536);
    expect(await smp.invokeOnAll("sampleRate")).toEqual([65536, 65536]);
    expect((await get("/v1/heapprof?shard=2&enabled=false", { method: "PUT" })).status).toBe(200);
    expect(smp.memory.heapProfilingSampleRate()).toBe(0);
    expect(await smp.invokeOnAll("sampleRate")).toEqual([65536, 65536]);
    expect((await get("/v1/heapprof?shard=3&rate=1", { method: "PUT" })).status).toBe(404);
    for (const p of ptrs) smp.memory.free(p);
  });

  it("without mainShard the history says so (mainShard null) and the shards are the workers'", async () => {
    const smp = await startSmp({ shards: 1 });
    const admin = await serveAdmin(smp);
    onTestFinished(() => admin.close());
    expect(JSON.parse(await (await fetch(`${admin.url}/v1/memory/history`)).text())).toMatchObject({ shards: 1, mainShard: null });
    expect((await fetch(`${admin.url}/v1/memory/stats?shard=1`)).status).toBe(404);
    expect(await (await fetch(`${admin.url}/metrics`)).text()).not.toContain('shard="1"');
  });

  it.runIf(haveChromium("dashboard main-shard check"))("the dashboard names it \"main thread (shard 2)\" and its profiler switch reaches it", async () => {
    const { smp, url } = await serve({ sampleIntervalMs: 100 });
    const browser = await launchChromium();
    onTestFinished(() => browser.close());
    const page = await browser.newPage({ viewport: { width: 1400, height: 1800 } });
    const problems = watchPage(page, url, { warnings: true });
    await page.goto(`${url}/`);
    await page.waitForSelector("#shard option[value='2']", { state: "attached", timeout: 30_000 });
    expect(await page.locator("#shard option").allTextContents()).toEqual(["all shards", "shard 0", "shard 1", "main thread (shard 2)"]);
    expect(await page.locator("#prof-row-2 td").first().textContent()).toBe("main thread (shard 2)");
    await page.waitForSelector("#prof-on-2:not(:checked)", { timeout: 30_000 });
    await page.fill("#prof-rate-2", "1");
    await page.click("#prof-on-2");
    await expect.poll(() => smp.memory.heapProfilingSampleRate(), { timeout: 10_000 }).toBe(1);
    expect(await smp.invokeOnAll("sampleRate")).toEqual([0, 0]);
    expect(await page.evaluate("window.shardheapDashboard.charts[0].series.map((s) => s.label)")).toEqual(["Time", "shard 0", "shard 1", "main thread (shard 2)"]);
    expect(problems).toEqual([]);
  });
});
