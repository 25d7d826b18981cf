/**
 * The admin API's leak hunting against real shard threads: baselines and
 * the growth since in every format, named baselines (set, list, diff
 * against one, delete; the errors), Go's /debug/pprof/heap and /allocs
 * (headers, default types, debug, seconds deltas, the bounds, a client that
 * leaves cancels its wait), the memory history (failed allocations and the
 * largest free span per shard, the app's figures), GET /v1/app/stats, the
 * dashboard's files with and without a token. Where Go is installed, `go tool pprof` reads
 * /debug/pprof/heap and /allocs over HTTP (the test says that it skipped
 * otherwise).
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { request, type ClientRequest } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { Profile } from "pprof-format";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Smp, serveAdmin, type AdminServer, type HeapProfile } from "../dist/index.js";
import { MAX_DELTA_WAITS } from "../dist/runtime/debug-pprof.js";

const tasks = new URL("./fixtures/leak-tasks.mjs", import.meta.url);
const RECORD = 1000; // a 1024-byte size class
const RECORD_BYTES = 1024;
let smp: Smp;
let admin: AdminServer;
let locked: AdminServer;

beforeAll(async () => {
  process.env.SHARDHEAP_LOG = "silent";
  smp = await Smp.start({ shards: 2, memoryPerShard: "16MiB", heapprof: true, module: tasks });
  admin = await serveAdmin(smp, { dashboard: { sampleIntervalMs: 100 } });
  locked = await serveAdmin(smp, { token: "s3cret" });
});
afterAll(async () => {
  await admin?.close();
  await locked?.close();
  await smp?.stop();
});

interface Answer {
  status: number;
  text: string;
  bytes: Uint8Array;
  headers: Headers;
}
async function call(path: string, init: RequestInit = {}, base = admin.url): Promise<Answer> {
  const r = await fetch(base + path, init);
  const bytes = new Uint8Array(await r.arrayBuffer());
  return { status: r.status, text: Buffer.from(bytes).toString("utf8"), bytes, headers: r.headers };
}
const keep = (shard: number, count: number) => smp.submitTo<number>(shard, "keepRecords", { count, size: RECORD });
const drop = (shard: number, count: number) => smp.submitTo<number>(shard, "dropRecords", { count });

/** A decoded pprof: the default type's name and the signed sums of each type. */
function readPprof(bytes: Uint8Array): { defaultType: string; sums: number[]; durationNanos: number; functions: string[] } {
  const p = Profile.decode(gunzipSync(bytes));
  const strings = p.stringTable.strings;
  const sums = [0, 0, 0, 0];
  for (const s of p.sample) s.value.forEach((v, i) => (sums[i]! += typeof v === "bigint" ? Number(BigInt.asIntN(64, v)) : v));
  return { defaultType: strings[Number(p.defaultSampleType)]!, sums, durationNanos: Number(p.durationNanos), functions: p.function.map((f) => strings[Number(f.name)]!) };
}

describe("baselines", () => {
  it("POST remembers a shard's profile; GET ...&diff=baseline is the growth since, in every format", async () => {
    const set = await call("/v1/heapprof/baseline?shard=1", { method: "POST" });
    expect(set.status).toBe(200);
    expect(JSON.parse(set.text).baselines).toEqual([expect.objectContaining({ shard: 1, takenAt: expect.any(Number) })]);
    await keep(1, 50);
    await keep(0, 7); // another shard's growth is not in shard 1's
    const json = JSON.parse((await call("/v1/heapprof?shard=1&diff=baseline&format=json")).text) as HeapProfile & { base: unknown };
    expect(json.totalSize).toBe(50 * RECORD_BYTES);
    expect(json.base).toBeDefined();
    expect(json.sites[0]).toMatchObject({ size: 50 * RECORD_BYTES, count: 50 });
    expect(json.sites[0]!.frames[0]!.functionName).toBe("keepRecords");
    const tree = (await call("/v1/heapprof?shard=1&diff=baseline&format=tree")).text;
    expect(tree).toMatch(/^All \(\+50K \+51200, #\+50\)$/m);
    const collapsed = (await call("/v1/heapprof?shard=1&diff=baseline&format=collapsed")).text;
    expect(collapsed.trim().split("\n").reduce((n, l) => n + Number(l.slice(l.lastIndexOf(" ") + 1)), 0)).toBe(50 * RECORD_BYTES);
    const svg = await call("/v1/heapprof?shard=1&diff=baseline&format=svg");
    expect(svg.headers.get("content-type")).toBe("image/svg+xml");
    expect(svg.text).toMatch(/data-name="keepRecords [^"]*" data-value="51200" data-delta="51200"><title>[^<]*<\/title><rect [^>]*fill="rgb\(255,0,0\)"/);
    expect(svg.text).toContain("since the baseline");
    expect(readPprof((await call("/v1/heapprof?shard=1&diff=baseline&format=pprof")).bytes).sums[3]).toBe(50 * RECORD_BYTES);
    const heapprofile = JSON.parse((await call("/v1/heapprof?shard=1&diff=baseline&format=heapprofile")).text) as { samples: Array<{ size: number }> };
    expect(heapprofile.samples.reduce((n, s) => n + s.size, 0)).toBe(50 * RECORD_BYTES);
    // Shrinking shows as negative figures.
    await drop(1, 20);
    expect(JSON.parse((await call("/v1/heapprof?shard=1&diff=baseline")).text).totalSize).toBe(30 * RECORD_BYTES);
    await drop(1, 30);
    await drop(0, 7);
  });

  it("a shard without a baseline is a 409 that says how to set one; all shards merge their baselines", async () => {
    const fresh = await serveAdmin(smp);
    try {
      const missing = await call("/v1/heapprof?shard=0&diff=baseline", {}, fresh.url);
      expect(missing.status).toBe(409);
      expect(JSON.parse(missing.text)).toEqual({ error: "no baseline for shard 0: POST /v1/heapprof/baseline?shard=0 first", code: "ERR_SHARDHEAP_NO_BASELINE" });
      expect((await call("/v1/heapprof/baseline?shard=1", { method: "POST" }, fresh.url)).status).toBe(200);
      expect(JSON.parse((await call("/v1/heapprof?diff=baseline", {}, fresh.url)).text).error).toMatch(/no baseline for shard 0/);
      expect(JSON.parse((await call("/v1/heapprof/baseline", { method: "POST" }, fresh.url)).text).baselines.map((b: { shard: number }) => b.shard)).toEqual([0, 1]);
      await keep(0, 3);
      await keep(1, 4);
      const all = JSON.parse((await call("/v1/heapprof?diff=baseline&format=json", {}, fresh.url)).text) as HeapProfile;
      expect(all.totalSize).toBe(7 * RECORD_BYTES);
      expect(JSON.parse((await call("/v1/heapprof/baseline", {}, fresh.url)).text).baselines).toHaveLength(2);
      expect((await call("/v1/heapprof?diff=yesterday", {}, fresh.url)).status).toBe(400);
      expect((await call("/v1/heapprof/baseline?shard=5", { method: "POST" }, fresh.url)).status).toBe(404);
      expect((await call("/v1/heapprof/baseline", { method: "PATCH" }, fresh.url)).status).toBe(405);
    } finally {
      await drop(0, 3);
      await drop(1, 4);
      await fresh.close();
    }
  });
});

describe("named baselines", () => {
  it("POST ...&name= keeps several; ?diff=baseline&baseline=NAME diffs against one; DELETE forgets one; bad names and requests are 400s", async () => {
    const fresh = await serveAdmin(smp);
    const names = async (): Promise<string[]> => [...new Set((JSON.parse((await call("/v1/heapprof/baseline", {}, fresh.url)).text).baselines as Array<{ name: string }>).map((b) => b.name))];
    const growth = async (query: string): Promise<Answer> => call(`/v1/heapprof?shard=1&diff=baseline${query}`, {}, fresh.url);
    try {
      const before = JSON.parse((await call("/v1/heapprof/baseline?shard=1&name=before", { method: "POST" }, fresh.url)).text);
      expect(before.baselines).toEqual([{ name: "before", shard: 1, takenAt: expect.any(Number), totalSize: expect.any(Number), sites: expect.any(Number), bytes: expect.any(Number) }]);
      await keep(1, 8);
      await call("/v1/heapprof/baseline?shard=all&name=after", { method: "POST" }, fresh.url);
      await keep(1, 2);
      expect(await names()).toEqual(["before", "after"]);
      expect(JSON.parse((await growth("&baseline=before")).text).totalSize).toBe(10 * RECORD_BYTES);
      expect(JSON.parse((await growth("&baseline=after")).text).totalSize).toBe(2 * RECORD_BYTES);
      expect((await growth("&baseline=after&format=svg")).text).toContain("since baseline after");
      // The default name is its own baseline: none set here.
      const none = await growth("");
      expect(none.status).toBe(409);
      expect(JSON.parse(none.text).error).toBe("no baseline for shard 1: POST /v1/heapprof/baseline?shard=1 first");
      expect(JSON.parse((await call("/v1/heapprof?diff=baseline&baseline=before", {}, fresh.url)).text).error).toBe('no baseline "before" for shard 0: POST /v1/heapprof/baseline?shard=all&name=before first');
      // Forget one shard of "after", then "before" whole.
      expect(JSON.parse((await call("/v1/heapprof/baseline?name=after&shard=0", { method: "DELETE" }, fresh.url)).text).deleted).toEqual([expect.objectContaining({ name: "after", shard: 0 })]);
      expect((await growth("&baseline=after")).status).toBe(200);
      const deleted = await call("/v1/heapprof/baseline?name=before", { method: "DELETE" }, fresh.url);
      expect(deleted.status).toBe(200);
      expect(JSON.parse(deleted.text).deleted.map((b: { shard: number }) => b.shard)).toEqual([1]);
      expect(await names()).toEqual(["after"]);
      expect((await growth("&baseline=before")).status).toBe(409);
      const again = await call("/v1/heapprof/baseline?name=before", { method: "DELETE" }, fresh.url);
      expect([again.status, JSON.parse(again.text)]).toEqual([404, { error: 'no baseline "before": the names are after', code: "ERR_SHARDHEAP_NOT_FOUND" }]);
      for (const [method, path] of [
        ["DELETE", "/v1/heapprof/baseline"],
        ["POST", "/v1/heapprof/baseline?name=a%20b"],
        ["POST", "/v1/heapprof/baseline?name=-x"],
        ["GET", "/v1/heapprof?shard=1&baseline=after"],
        ["GET", "/v1/heapprof?shard=1&diff=baseline&baseline=../x"],
      ] as const) {
        const r = await call(path, { method }, fresh.url);
        expect(r.status, `${method} ${path}`).toBe(400);
      }
      expect(JSON.parse((await call("/v1/heapprof/baseline", { method: "DELETE" }, fresh.url)).text).error).toMatch(/^name is required/);
      expect(await names()).toEqual(["after"]);
    } finally {
      await drop(1, 10);
      await fresh.close();
    }
  });
});

describe("/debug/pprof (Go's net/http/pprof)", () => {
  it("heap and allocs: the gzipped profile of all shards, opening on inuse_space and alloc_space, with Go's headers", async () => {
    await keep(0, 10);
    try {
      const heap = await call("/debug/pprof/heap");
      expect(heap.status).toBe(200);
      expect(heap.headers.get("content-type")).toBe("application/octet-stream");
      expect(heap.headers.get("content-disposition")).toBe('attachment; filename="heap"');
      expect(heap.headers.get("x-content-type-options")).toBe("nosniff");
      const h = readPprof(heap.bytes);
      expect(h.defaultType).toBe("inuse_space");
      expect(h.sums[3]).toBe(smp.heapProfile().totalSize);
      expect(h.functions).toContain("keepRecords");
      const allocs = await call("/debug/pprof/allocs?gc=1");
      expect(allocs.headers.get("content-disposition")).toBe('attachment; filename="allocs"');
      expect(readPprof(allocs.bytes).defaultType).toBe("alloc_space");
      const text = await call("/debug/pprof/heap?debug=1");
      expect(text.headers.get("content-type")).toBe("text/plain; charset=utf-8");
      expect(text.text).toMatch(/^All \(\d+, #\d+\)$/m);
      const index = await call("/debug/pprof/");
      expect(index.text).toMatch(/href="heap\?debug=1"/);
      expect((await call("/debug/pprof/goroutine")).status).toBe(404);
    } finally {
      await drop(0, 10);
    }
  });

  it("refuses bad seconds and debug with seconds, as Go does", async () => {
    for (const q of ["seconds=0", "seconds=-1", "seconds=x", "seconds=1.5", "seconds=901", "seconds=1&debug=1", "debug=x"]) {
      const r = await call(`/debug/pprof/heap?${q}`);
      expect(r.status, q).toBe(400);
      expect(JSON.parse(r.text).error, q).toBeTruthy();
    }
  });

  it("?seconds=N answers after N seconds with the difference over them", async () => {
    const started = performance.now();
    const answer = call("/debug/pprof/heap?seconds=2");
    let done = false;
    void answer.then(() => (done = true));
    // Keep one record every 100 ms while the request waits: those made after
    // the server's first snapshot are the difference (at least one; at most all).
    let records = 0;
    while (!done && performance.now() - started < 10_000) {
      await keep(1, 1);
      records++;
      await new Promise((r) => setTimeout(r, 100));
    }
    const r = await answer;
    expect(performance.now() - started).toBeGreaterThanOrEqual(1900);
    expect(r.headers.get("content-disposition")).toBe('attachment; filename="heap-delta"');
    const d = readPprof(r.bytes);
    expect(d.durationNanos).toBeGreaterThanOrEqual(1.9e9);
    expect(d.sums[3]! % RECORD_BYTES).toBe(0);
    expect(d.sums[3]).toBeGreaterThanOrEqual(RECORD_BYTES);
    expect(d.sums[3]).toBeLessThanOrEqual(records * RECORD_BYTES);
    expect(d.sums[2]).toBe(d.sums[3]! / RECORD_BYTES);
    await drop(1, records);
  });

  it("holds at most MAX_DELTA_WAITS waits (503 beyond), and a client that leaves frees its wait at once", async () => {
    // One more than the bound: whichever arrives last is refused, the others wait.
    const waits: ClientRequest[] = [];
    const url = new URL(admin.url);
    const refused = new Promise<{ status: number | undefined; retryAfter: string | undefined }>((resolve) => {
      for (let i = 0; i <= MAX_DELTA_WAITS; i++) {
        const req = request({ host: url.hostname, port: url.port, path: "/debug/pprof/heap?seconds=900" }, (res) => {
          resolve({ status: res.statusCode, retryAfter: res.headers["retry-after"] as string | undefined });
          res.resume();
        });
        req.on("error", () => undefined); // the ones destroyed below
        req.end();
        waits.push(req);
      }
    });
    const timeout = new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), 30_000).unref());
    try {
      expect(await Promise.race([refused, timeout])).toEqual({ status: 503, retryAfter: "900" });
    } finally {
      for (const req of waits) req.destroy();
    }
    // The server sees the clients go and frees their waits: a new one is served.
    let after = 503;
    for (let i = 0; i < 50 && after === 503; i++) {
      after = (await call("/debug/pprof/heap?seconds=1")).status;
      if (after === 503) await new Promise((r) => setTimeout(r, 100));
    }
    expect(after).toBe(200);
  });

  const hasGo = spawnSync("go", ["version"]).status === 0;
  if (!hasGo) console.warn("go tool pprof over HTTP SKIPPED: Go is not installed (apt-get install golang-go)");
  it.runIf(hasGo)("go tool pprof reads /debug/pprof/heap and /allocs over HTTP", async () => {
    await keep(0, 25);
    try {
      const dir = mkdtempSync(join(tmpdir(), "shardheap-gopprof-"));
      const top = async (path: string): Promise<string> => {
        // Asynchronous: the server answering is on this thread.
        const { spawn } = await import("node:child_process");
        const child = spawn("go", ["tool", "pprof", "-top", `${admin.url}${path}`], { cwd: dir, env: { ...process.env, PPROF_TMPDIR: dir, HOME: dir } });
        let out = "";
        child.stdout.on("data", (b: Buffer) => (out += b.toString()));
        child.stderr.on("data", (b: Buffer) => (out += b.toString()));
        const code = await new Promise<number | null>((resolve) => {
          const timer = setTimeout(() => child.kill(), 120_000);
          child.on("close", (c) => {
            clearTimeout(timer);
            resolve(c);
          });
        });
        expect(code, out).toBe(0);
        return out;
      };
      const heap = await top("/debug/pprof/heap");
      expect(heap).toMatch(/Type: inuse_space/);
      expect(heap).toMatch(/\bkeepRecords\b/);
      expect(await top("/debug/pprof/allocs")).toMatch(/Type: alloc_space/);
    } finally {
      await drop(0, 25);
    }
  });
});

describe("memory history and the dashboard's files", () => {
  it("GET /v1/memory/history: every shard's figures per sample, from a bounded ring; since= gives the newer ones", async () => {
    let body: { shards: number; sampleIntervalMs: number; samples: Array<{ t: number; shards: Array<Record<string, number>> }> } = { shards: 0, sampleIntervalMs: 0, samples: [] };
    for (let i = 0; i < 100 && body.samples.length < 2; i++) {
      body = JSON.parse((await call("/v1/memory/history")).text);
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(body).toMatchObject({ shards: 2, sampleIntervalMs: 100, historySeconds: 900, growthWindowSeconds: 300, heapImage: false });
    expect(body.samples.length).toBeGreaterThanOrEqual(2);
    const last = body.samples[body.samples.length - 1]!;
    expect(Object.keys(last.shards[1]!).sort()).toEqual(["crossShardFrees", "failedAllocations", "foldedAllocations", "free", "js", "largestFreeSpan", "liveObjects", "sampleRate", "siteCapacity", "used"]);
    // The shard's own V8 heap as it last posted it (every 500 ms), null before its first posting.
    const js = (last.shards[1] as Record<string, unknown>).js as Record<string, number> | null;
    if (js !== null) expect(js.used).toBeGreaterThan(0);
    expect(last.shards[1]!.failedAllocations).toBe(smp.stats(1).failedAllocations);
    expect(last.shards[1]!.largestFreeSpan).toBeGreaterThan(0);
    expect(last.shards[1]!.largestFreeSpan).toBeLessThanOrEqual(last.shards[1]!.free);
    expect(last.shards[1]!.sampleRate).toBe(1);
    expect(last.shards[0]!.used + last.shards[0]!.free).toBe(smp.stats(0).totalMemory);
    const newer = JSON.parse((await call(`/v1/memory/history?since=${last.t}`)).text).samples as Array<{ t: number }>;
    expect(newer.every((s) => s.t > last.t)).toBe(true);
    expect(JSON.parse((await call("/v1/heapprof/growing?shard=1")).text)).toMatchObject({ windowSeconds: 300, sites: expect.any(Array) });
    expect((await call("/v1/heapprof/growing?shard=1&fullpaths=1")).status).toBe(200);
    expect((await call("/v1/heapprof/growing?fullpaths=perhaps")).status).toBe(400);
    expect((await call("/v1/memory/history?since=soon")).status).toBe(400);
  });

  it("GET /v1/app/stats and the history's apps: what smp.publishAppStats publishes, read at each request; nothing once withdrawn", async () => {
    expect(JSON.parse((await call("/v1/app/stats")).text)).toEqual({ apps: [] });
    let reads = 0;
    const withdraw = smp.publishAppStats("leak-tasks", () => ({ reads: { value: ++reads, kind: "counter" }, kept: { value: 2048, unit: "bytes" } }));
    try {
      const first = JSON.parse((await call("/v1/app/stats")).text) as { apps: Array<{ app: string; figures: Array<{ name: string; value: number }> }> };
      expect(first.apps).toEqual([{ app: "leak-tasks", t: expect.any(Number), figures: [{ name: "reads", value: 1, unit: "count", kind: "counter" }, { name: "kept", value: 2048, unit: "bytes", kind: "gauge" }] }]);
      const history = JSON.parse((await call("/v1/memory/history")).text) as { apps: Array<{ app: string; figures: Array<{ value: number }> }> };
      expect(history.apps.map((a) => [a.app, a.figures[0]!.value])).toEqual([["leak-tasks", 2]]);
    } finally {
      withdraw();
    }
    expect(JSON.parse((await call("/v1/memory/history")).text).apps).toEqual([]);
  });

  it("serves the page and its scripts without the token (the page asks for it), data only with it", async () => {
    const page = await call("/", {}, locked.url);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(page.text).toContain('<body data-token="required">');
    expect(page.headers.get("content-security-policy")).toMatch(/default-src 'none'; script-src 'self' 'unsafe-hashes' 'sha256-[^']+' 'sha256-[^']+'; .*connect-src 'self'; frame-src blob:/);
    expect((await call("/")).text).toContain('<body data-token="none">');
    for (const asset of ["/dashboard/main.js", "/dashboard/lib.js", "/dashboard.css", "/vendor/uPlot.iife.min.js", "/vendor/uPlot.min.css"]) {
      const r = await call(asset, {}, locked.url);
      expect(r.status, asset).toBe(200);
      expect(r.bytes.length, asset).toBeGreaterThan(100);
    }
    for (const path of ["/v1/memory/history", "/v1/heapprof/growing", "/debug/pprof/heap", "/v1/heapprof?diff=baseline"]) {
      expect((await call(path, {}, locked.url)).status, path).toBe(401);
    }
    expect((await call("/debug/pprof/heap", { headers: { authorization: "Bearer s3cret" } }, locked.url)).status).toBe(200);
    expect((await call("/", { method: "POST" })).status).toBe(405);
  });
});
