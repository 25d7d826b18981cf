/**
 * A known peak, end to end on real shard threads: a first phase built by
 * buildFirstPhase, most of it freed, a smaller second phase built by
 * buildSecondPhase (test/fixtures/peak-tasks.mjs). The peak profile names
 * the first phase, to the byte when exact and within the sampling's bounds
 * at 16 KiB, through the API, the admin API and `shardheap report --peak`
 * from a heap image; the timeline saw the phases; and a shard hoarding past
 * 80% and 90% of its memory raises one memoryPressure event and one stderr
 * line each, the hoarding function on top, again only after falling below.
 * (The dashboard's view of the same: test/runtime/dashboard/dashboard-peaks-browser.test.ts.)
 */
import { join } from "node:path";
import { describe, expect, it, onTestFinished } from "vitest";
import { serveAdmin, type HeapProfile, type MemoryPressureEvent, type PeakProfile } from "../../../dist/index.js";
import { httpRequest, runCli, siteNamed, startSmp, tempDir, waitFor } from "../../helpers.js";

process.env.SHARDHEAP_LOG = "silent";

const PEAK_TASKS = new URL("../../fixtures/peak-tasks.mjs", import.meta.url);
const FIRST = { count: 1200, size: 8000 };
const KEEP = 100;
const SECOND = { count: 500, size: 3000 };

/** Run the phases on shard 1; returns the first phase's object size (its class's). */
async function runPhases(smp: Awaited<ReturnType<typeof startSmp>>): Promise<void> {
  await smp.submitTo(1, "buildFirstPhase", FIRST);
  await smp.submitTo(1, "freeMostOfFirstPhase", { keep: KEEP });
  await smp.submitTo(1, "buildSecondPhase", SECOND);
}

/** The exact figures the first phase had at the peak, from what the live profile says of what is left. */
function firstPhaseAtPeak(live: HeapProfile): { count: number; size: number } {
  const left = siteNamed(live, "buildFirstPhase")!;
  expect(left.count).toBe(KEEP);
  return { count: FIRST.count, size: (left.size / left.count) * FIRST.count };
}

const names = (p: HeapProfile): string[] => p.sites.map((s) => s.frames[0]!.functionName);

describe("a known peak, exact", () => {
  it("names the first phase to the byte: API, admin API, and report --peak from an image", async () => {
    const smp = await startSmp({ shards: 2, memoryPerShard: "32MiB", heapprof: true, module: PEAK_TASKS, timelineIntervalMs: 50 });
    await runPhases(smp);
    const expected = firstPhaseAtPeak(smp.heapProfile(1));
    // The live profile says what is there now: the second phase is the larger site.
    expect(names(smp.heapProfile(1))[0]).toBe("buildSecondPhase");

    const peak = smp.peakProfile(1);
    expect(names(peak)).toEqual(["buildFirstPhase"]);
    expect(peak.sites[0]).toMatchObject({ ...expected, allocCount: FIRST.count, allocSize: expected.size });
    expect([peak.peakBytes, peak.totalSize, peak.totalCount]).toEqual([expected.size, expected.size, FIRST.count]);
    expect(peak.peakTime).toBeGreaterThan(0);
    expect(peak.peakTime).toBeLessThanOrEqual(Date.now());
    // Shard 0 held nothing: the heap-wide peak is the same moment.
    expect(smp.peakProfile()).toMatchObject({ shard: "all", peakBytes: expected.size, peakTime: peak.peakTime });
    expect(names(smp.peakProfile())).toEqual(["buildFirstPhase"]);

    // The admin API: JSON and the tree at=peak, for the shard and for all.
    const admin = await serveAdmin(smp);
    onTestFinished(() => admin.close());
    const json = async (path: string): Promise<PeakProfile> => {
      const r = await httpRequest(admin.url, "GET", path);
      expect(r.status, r.body.toString()).toBe(200);
      return JSON.parse(r.body.toString()) as PeakProfile;
    };
    for (const shard of ["shard=1&", ""]) {
      const served = await json(`/v1/heapprof?${shard}format=json&at=peak`);
      expect(names(served)).toEqual(["buildFirstPhase"]);
      expect(served.sites[0]).toMatchObject(expected);
      expect([served.peakBytes, served.peakTime]).toEqual([expected.size, peak.peakTime]);
    }
    const tree = (await httpRequest(admin.url, "GET", "/v1/heapprof?shard=1&format=tree&at=peak")).body.toString();
    expect(tree).toMatch(new RegExp(`^All \\(${expected.size}, #${FIRST.count}\\)\\nbuildFirstPhase \\(`));
    const svg = (await httpRequest(admin.url, "GET", "/v1/heapprof?shard=1&format=svg&at=peak")).body.toString();
    expect(svg).toContain(`Peak of shard 1: ${Math.round((expected.size / 2 ** 20) * 10) / 10}M profiled live at ${new Date(peak.peakTime).toISOString()}`);
    expect(svg).toContain("buildFirstPhase");
    expect(svg).not.toContain("buildSecondPhase");

    // An image, reported offline.
    const image = join(tempDir("shardheap-peak-"), "heap.img");
    await smp.saveImage(image);
    const cli = runCli(["report", image, "--peak", "--shard", "1", "--format", "json"]);
    expect(cli.status, cli.stderr).toBe(0);
    const fromImage = JSON.parse(cli.stdout) as PeakProfile;
    expect(names(fromImage)).toEqual(["buildFirstPhase"]);
    expect(fromImage.sites[0]).toMatchObject(expected);
    expect([fromImage.peakBytes, fromImage.peakTime]).toEqual([expected.size, peak.peakTime]);
    const treeFromImage = runCli(["report", image, "--peak"]);
    expect(treeFromImage.stdout).toMatch(new RegExp(`^Heap-wide peak \\(the shards' highest sum\\): .*\\nAll \\(${expected.size}, #${FIRST.count}\\)\\nbuildFirstPhase \\(`));
    // Without --peak, the image's own moment: the second phase leads.
    expect(runCli(["report", image, "--shard", "1"]).stdout).toMatch(new RegExp(`^All \\(\\d+, #${KEEP + SECOND.count}\\)\\n \\|-- buildSecondPhase \\(`));

    // The timeline saw the peak and the fall (ticks every 50 ms, one more at saveImage).
    const timeline = smp.timeline(1);
    const highest = Math.max(...timeline.samples.map((s) => s.live));
    expect(highest).toBeLessThanOrEqual(expected.size);
    expect(timeline.samples.at(-1)!.live).toBe(smp.heapProfile(1).totalSize);
    expect(timeline.sites.map((s) => s.frames[0]!.functionName)).toContain("buildSecondPhase");
  });

  it("a reset starts the peak again from what the shard holds now", async () => {
    const smp = await startSmp({ shards: 2, memoryPerShard: "32MiB", heapprof: true, module: PEAK_TASKS });
    await runPhases(smp);
    const admin = await serveAdmin(smp);
    onTestFinished(() => admin.close());
    const reset = await httpRequest(admin.url, "POST", "/v1/heapprof/peak/reset?shard=all");
    expect([reset.status, JSON.parse(reset.body.toString())]).toEqual([200, { shard: "all" }]);
    const now = smp.heapProfile(1);
    expect(smp.peakProfile(1)).toMatchObject({ peakBytes: now.totalSize, totalSize: now.totalSize });
    expect(names(smp.peakProfile(1))).toEqual(names(now));
    expect(smp.peakProfile().peakBytes).toBe(smp.heapProfile().totalSize);
  });
});

describe("the timeline over the admin API", () => {
  it("serves the ticks as JSON, a tick as a profile (at=T), the growth between two (from=T0&at=T1), and refuses what it cannot answer", async () => {
    const smp = await startSmp({ shards: 2, memoryPerShard: "32MiB", heapprof: true, module: PEAK_TASKS, timelineIntervalMs: 3_600_000 });
    const admin = await serveAdmin(smp);
    onTestFinished(() => admin.close());
    const get = async (path: string): Promise<{ status: number; body: string }> => {
      const r = await httpRequest(admin.url, "GET", path);
      return { status: r.status, body: r.body.toString() };
    };
    // Ticks at moments this test chooses: saveImage ticks first.
    const image = join(tempDir("shardheap-timeline-"), "heap.img");
    await smp.submitTo(1, "buildFirstPhase", FIRST);
    await smp.saveImage(image);
    await smp.submitTo(1, "freeMostOfFirstPhase", { keep: KEEP });
    await smp.submitTo(1, "buildSecondPhase", SECOND);
    await smp.saveImage(image);
    const served = JSON.parse((await get("/v1/heapprof/timeline?shard=1")).body) as { samples: Array<{ t: number; live: number }>; sites: Array<{ frames: Array<{ functionName: string; url: string }> }>; intervalMs: number };
    expect(served.intervalMs).toBe(3_600_000);
    const [start, t1, t2] = served.samples; // the tick at start, then the two saveImage ticks
    expect(served.samples).toHaveLength(3);
    expect(start!.live).toBe(0);
    expect(t1!.live).toBe(smp.peakProfile(1).peakBytes);
    expect(t2!.live).toBe(smp.heapProfile(1).totalSize);
    expect(served.sites.map((s) => s.frames[0]!.functionName).sort()).toEqual(["buildFirstPhase", "buildSecondPhase"]);
    expect(served.sites[0]!.frames[0]!.url).toBe("test/fixtures/peak-tasks.mjs"); // shown short, as the profiles are

    const tick = JSON.parse((await get(`/v1/heapprof?shard=1&format=json&at=${t1!.t + 1}`)).body) as HeapProfile & { t: number };
    expect(tick.t).toBe(t1!.t);
    expect(names(tick)).toEqual(["buildFirstPhase"]);
    expect(tick.totalSize).toBe(t1!.live);
    const growth = JSON.parse((await get(`/v1/heapprof?shard=1&format=json&from=${t1!.t}&at=${t2!.t}`)).body) as HeapProfile;
    expect(siteNamed(growth, "buildSecondPhase")!.size).toBeGreaterThan(0);
    expect(siteNamed(growth, "buildFirstPhase")!.size).toBeLessThan(0);
    expect(growth.totalSize).toBe(t2!.live - t1!.live);

    for (const [path, status, message] of [
      ["/v1/heapprof?at=soon", 400, /at must be "peak" or a time in ms since the epoch/],
      ["/v1/heapprof?from=5", 400, /from=T0 needs at=T/],
      ["/v1/heapprof?at=peak&from=5", 400, /give at=T \(a time\), not at=peak/],
      ["/v1/heapprof?at=peak&diff=baseline", 400, /at= and diff=baseline each name a profile/],
      [`/v1/heapprof?shard=1&at=${start!.t - 1}`, 404, /no timeline tick of shard 1 at or before at=/],
      ["/v1/heapprof/timeline?shard=9", 404, /no shard 9/],
    ] as const) {
      const r = await get(path);
      expect([r.status, (JSON.parse(r.body) as { error: string }).error], path).toEqual([status, expect.stringMatching(message)]);
    }
  });
});

describe("a known peak, sampled at 16 KiB", () => {
  it("names the first phase within the sampling's bounds", async () => {
    const rate = 16 * 1024;
    const smp = await startSmp({ shards: 2, memoryPerShard: "32MiB", heapprof: rate, module: PEAK_TASKS });
    await runPhases(smp);
    const peak = smp.peakProfile(1);
    const site = siteNamed(peak, "buildFirstPhase")!;
    // The objects are 8192 B (their class): each is sampled with p = 1 - exp(-8192 / 16384)
    // and counted 1/p times, so the estimate of N of them has standard deviation
    // 8192 * sqrt(N (1 - p) / p): 4.8% of the true bytes at N = 1200. Five of them.
    const objectSize = 8192;
    const p = 1 - Math.exp(-objectSize / rate);
    const truth = FIRST.count * objectSize;
    const sd = objectSize * Math.sqrt((FIRST.count * (1 - p)) / p);
    expect(Math.abs(site.size - truth)).toBeLessThan(5 * sd);
    expect(Math.abs(peak.peakBytes - truth)).toBeLessThan(5 * sd);
    // The second phase came after the peak: nothing of it was there.
    expect(siteNamed(peak, "buildSecondPhase")).toBeUndefined();
    expect(names(peak)[0]).toBe("buildFirstPhase");
    // The same estimates everywhere: the image's report.
    const image = join(tempDir("shardheap-peak-"), "heap.img");
    await smp.saveImage(image);
    const fromImage = JSON.parse(runCli(["report", image, "--peak", "--shard", "1", "--format", "json"]).stdout) as PeakProfile;
    expect(fromImage.peakBytes).toBe(peak.peakBytes);
    expect(siteNamed(fromImage, "buildFirstPhase")!.size).toBe(site.size);
  });
});

describe("memory pressure", () => {
  it("crossing 80% and 90% raises one event and one stderr line each, the hoarding function on top; again after falling below", async () => {
    // No idle trim: what the shard holds moves only with the tasks.
    const smp = await startSmp({ shards: 2, memoryPerShard: "4MiB", heapprof: 16 * 1024, module: PEAK_TASKS, idleTrimMs: 0 });
    const events: MemoryPressureEvent[] = [];
    smp.on("memoryPressure", (e) => events.push(e));
    const lines: string[] = [];
    const write = process.stderr.write.bind(process.stderr);
    process.stderr.write = ((chunk: string | Uint8Array, ...rest: unknown[]): boolean => {
      const text = String(chunk);
      if (text.includes("of its memory")) lines.push(text);
      return (write as (c: string | Uint8Array, ...r: unknown[]) => boolean)(chunk, ...rest);
    }) as typeof process.stderr.write;
    const log = process.env.SHARDHEAP_LOG;
    delete process.env.SHARDHEAP_LOG; // this thread writes the line; the shards were started silent
    onTestFinished(() => {
      process.stderr.write = write;
      process.env.SHARDHEAP_LOG = log;
    });

    await smp.submitTo(1, "hoard", { share: 0.95, size: 20_000 });
    await waitFor(() => events.length >= 2, "two memoryPressure events");
    expect(events.map((e) => [e.shard, e.threshold])).toEqual([[1, 0.8], [1, 0.9]]);
    for (const e of events) {
      expect(e.topSites[0]!.frames[0]!.functionName).toBe("hoard");
      expect(e.totalBytes).toBe(smp.stats(1).totalMemory);
      expect(e.usedBytes).toBeGreaterThanOrEqual(e.threshold * e.totalBytes); // read as this thread reported it: the shard may be further by then
    }
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/^shardheap: shard 1 reached 80% of its memory \([\d.]+M of [\d.]+M used\); largest sites: hoard \(test\/fixtures\/peak-tasks\.mjs:\d+:\d+\) [\d.]+M\n$/);
    expect(lines[1]).toMatch(/^shardheap: shard 1 reached 90% of its memory/);

    // Above both, going higher: nothing new. Below both and back: both again.
    await smp.submitTo(1, "hoard", { share: 0.97, size: 20_000 });
    const below = await smp.submitTo<number>(1, "release");
    expect(below).toBeLessThan(0.8);
    await smp.submitTo(1, "hoard", { share: 0.92, size: 20_000 });
    await waitFor(() => events.length >= 4, "two more memoryPressure events");
    expect(events.slice(2).map((e) => [e.shard, e.threshold])).toEqual([[1, 0.8], [1, 0.9]]);
    await smp.submitTo(1, "release");

    const admin = await serveAdmin(smp);
    onTestFinished(() => admin.close());
    const metrics = (await httpRequest(admin.url, "GET", "/metrics")).body.toString();
    expect(metrics).toMatch(/^shardheap_memory_pressure_events_total\{shard="1"\} 4$/m);
    expect(metrics).toMatch(/^shardheap_memory_pressure_events_total\{shard="0"\} 0$/m);
    expect(events).toHaveLength(4);
    expect(lines).toHaveLength(4);
  });

  it("memoryPressure: false sets no threshold", async () => {
    const smp = await startSmp({ shards: 1, memoryPerShard: "2MiB", module: PEAK_TASKS, memoryPressure: false });
    const events: MemoryPressureEvent[] = [];
    smp.on("memoryPressure", (e) => events.push(e));
    await smp.submitTo(0, "hoard", { share: 0.95, size: 20_000 });
    await smp.submitTo(0, "release");
    await smp.stop(); // reports whatever was counted before it: nothing
    expect(events).toEqual([]);
  });
});
