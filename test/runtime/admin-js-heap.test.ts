/** The admin API's heap=js (and heap=all): each shard's JS heap profile in every format, its switch, baselines and growth, figures in /metrics and the history. */
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { serveAdmin, type HeapProfile, type Smp } from "../../dist/index.js";
import { startSmp, tempDir } from "../helpers.js";

const JS_TASKS = new URL("../fixtures/js-heap-tasks.mjs", import.meta.url);
const COUNT = 20_000;

beforeAll(() => {
  process.env.SHARDHEAP_LOG = "silent";
});

type Answer = { status: number; text: string; bytes: Uint8Array };

async function serve(o: { heapprof?: boolean; mainShard?: boolean } = {}): Promise<{ smp: Smp; call(path: string, method?: string): Promise<Answer>; json<T>(path: string, method?: string): Promise<T> }> {
  const smp = await startSmp({ shards: 2, module: JS_TASKS, ...o });
  const admin = await serveAdmin(smp);
  onTestFinished(() => admin.close());
  const call = async (path: string, method = "GET"): Promise<Answer> => {
    const r = await fetch(admin.url + path, { method });
    const bytes = new Uint8Array(await r.arrayBuffer());
    return { status: r.status, text: Buffer.from(bytes).toString("utf8"), bytes };
  };
  const json = async <T>(path: string, method = "GET"): Promise<T> => {
    const a = await call(path, method);
    expect(a.status, a.text).toBe(200);
    return JSON.parse(a.text) as T;
  };
  return { smp, call, json };
}

const leaf = (p: HeapProfile): string | undefined => p.sites[0]?.frames[0]?.functionName;
const hasGo = spawnSync("go", ["version"]).status === 0;

/** `go tool pprof` on `bytes`, with `args`: its output (stdout and stderr). */
function goPprof(bytes: Uint8Array, args: string[]): string {
  const dir = tempDir();
  writeFileSync(join(dir, "p.pb.gz"), bytes);
  const r = spawnSync("go", ["tool", "pprof", ...args, "p.pb.gz"], { encoding: "utf8", cwd: dir, timeout: 120_000, env: { ...process.env, PPROF_TMPDIR: dir, HOME: dir } });
  expect(r.status, r.stderr).toBe(0);
  return r.stdout;
}

describe("admin API: heap=js", () => {
  it("switches one shard's JS heap profiler and serves its profile in every format", async () => {
    const { smp, call, json } = await serve();
    expect(await json("/v1/heapprof?shard=0&rate=4096&heap=js", "PUT")).toEqual({ shard: 0, rate: 4096, heap: "js" });
    await Promise.all([0, 1].map((s) => smp.submitTo(s, "retainKnownObjects", { count: COUNT })));
    const p0 = await json<HeapProfile>("/v1/heapprof?shard=0&heap=js&format=json");
    expect(leaf(p0)).toBe("retainKnownObjects");
    expect(p0.sites[0]!.frames[0]!.url).toBe("test/fixtures/js-heap-tasks.mjs"); // shown short, as the shared heap's frames
    expect((await json<HeapProfile>("/v1/heapprof?shard=1&heap=js&format=json")).sites).toEqual([]);
    // All shards: merged, shard 0's sites only.
    expect(leaf(await json<HeapProfile>("/v1/heapprof?heap=js"))).toBe("retainKnownObjects");
    expect((await call("/v1/heapprof?shard=0&heap=js&format=tree")).text).toMatch(/retainKnownObjects \(test\/fixtures\/js-heap-tasks\.mjs:\d+:\d+\)/);
    expect((await call("/v1/heapprof?shard=0&heap=js&format=collapsed")).text).toMatch(/retainKnownObjects \S+ \d+\n/);
    expect((await call("/v1/heapprof?shard=0&heap=js&format=svg")).text).toContain("retainKnownObjects");
    expect((await call("/v1/heapprof?shard=0&heap=js&format=heapprofile")).text).toContain('"functionName":"retainKnownObjects"');
    // enabled=1 with heap=js is the default interval; off keeps the profile as it stood.
    expect(await json("/v1/heapprof?shard=all&enabled=1&heap=js", "PUT")).toEqual({ shard: "all", rate: 512 * 1024, heap: "js" });
    expect(smp.jsHeapStats(1)!.sampleRate).toBe(512 * 1024);
    await json("/v1/heapprof?shard=all&rate=0&heap=js", "PUT");
    expect((await json<HeapProfile>("/v1/heapprof?shard=1&heap=js")).sampleRate).toBe(0);
    // Bad values: 400, and nothing switched.
    for (const bad of ["/v1/heapprof?shard=0&rate=4096&heap=all", "/v1/heapprof?shard=0&rate=-1&heap=js", "/v1/heapprof?shard=0&rate=4096&heap=v8"]) {
      expect((await call(bad, "PUT")).status, bad).toBe(400);
    }
    expect((await call("/v1/heapprof?heap=JS")).status).toBe(400);
    expect((await call("/v1/heapprof?shard=9&heap=js")).status).toBe(404);
    expect(smp.jsHeapStats(0)!.sampleRate).toBe(0);
  });

  it.skipIf(!hasGo)("go tool pprof reads the JS heap pprof, and the combined pprof's heap label tells the heaps apart", async () => {
    const { smp, call } = await serve({ heapprof: true });
    expect((await call("/v1/heapprof?shard=0&rate=4096&heap=js", "PUT")).status).toBe(200);
    await smp.submitTo(0, "retainKnownObjects", { count: COUNT });
    await smp.submitTo(0, "allocateInSharedHeap", { count: 100, size: 1000 });
    const js = await call("/v1/heapprof?shard=0&heap=js&format=pprof");
    expect(js.status).toBe(200);
    const top = goPprof(js.bytes, ["-top", "-sample_index=inuse_space"]);
    expect(top).toMatch(/^\s*\S+ +\S+% +\S+% +\S+ +\S+% +retainKnownObjects$/m);
    const both = (await call("/v1/heapprof?shard=0&heap=all&format=pprof")).bytes;
    const tags = goPprof(both, ["-tags"]);
    expect(tags).toMatch(/^ heap: Total/m);
    expect(tags).toMatch(/^\s+\S+ \(\s*\S+%\): js$/m);
    expect(tags).toMatch(/^\s+\S+ \(\s*\S+%\): shared$/m);
    const jsOnly = goPprof(both, ["-top", "-tagfocus=heap=js"]);
    expect(jsOnly).toMatch(/retainKnownObjects/);
    const sharedOnly = goPprof(both, ["-top", "-tagfocus=heap=shared"]);
    expect(sharedOnly).toMatch(/allocateInSharedHeap/);
    expect(sharedOnly).not.toMatch(/retainKnownObjects/);
  });

  it("one shard's whole memory: heap=all labels each site with its heap; by=heap groups them", async () => {
    const { smp, json } = await serve({ heapprof: true });
    await json("/v1/heapprof?shard=0&rate=4096&heap=js", "PUT");
    await smp.submitTo(0, "retainKnownObjects", { count: COUNT });
    await smp.submitTo(0, "allocateInSharedHeap", { count: 100, size: 1000 });
    const all = await json<HeapProfile>("/v1/heapprof?shard=0&heap=all");
    const shared = all.sites.filter((s) => s.labels?.heap === "shared");
    const js = all.sites.filter((s) => s.labels?.heap === "js");
    expect(shared.length + js.length).toBe(all.sites.length);
    expect(shared.find((s) => s.frames[0]!.functionName === "allocateInSharedHeap")).toMatchObject({ count: 100 });
    expect(js.some((s) => s.frames[0]!.functionName === "retainKnownObjects")).toBe(true);
    const sharedOnly = await json<HeapProfile>("/v1/heapprof?shard=0");
    const jsOnly = await json<HeapProfile>("/v1/heapprof?shard=0&heap=js");
    expect(all.totalSize).toBeGreaterThan(sharedOnly.totalSize);
    expect(all.totalSize).toBeGreaterThan(jsOnly.totalSize * 0.5);
    const grouped = await json<{ groups: Array<{ value: string }> }>("/v1/heapprof?shard=0&heap=all&by=heap");
    expect(grouped.groups.map((g) => g.value).sort()).toEqual(["js", "shared"]);
  });

  it("JS heap baselines and the growth since, apart from the shared heap's", async () => {
    const { smp, call, json } = await serve();
    await json("/v1/heapprof?shard=all&rate=4096&heap=js", "PUT");
    const set = await json<{ jsBaselines: Array<{ name: string; shard: number }> }>("/v1/heapprof/baseline?shard=all&heap=js&name=before", "POST");
    expect(set.jsBaselines.map((b) => [b.name, b.shard])).toEqual([["before", 0], ["before", 1]]);
    expect(await json("/v1/heapprof/baseline")).toMatchObject({ baselines: [], jsBaselines: [{ name: "before", shard: 0 }, { name: "before", shard: 1 }] });
    await smp.submitTo(1, "retainKnownObjects", { count: COUNT });
    const growth = await json<HeapProfile>("/v1/heapprof?shard=1&heap=js&diff=baseline&baseline=before");
    expect(leaf(growth)).toBe("retainKnownObjects");
    expect(growth.sites[0]!.size).toBeGreaterThan(0);
    const all = await json<HeapProfile>("/v1/heapprof?heap=js&diff=baseline&baseline=before");
    expect(leaf(all)).toBe("retainKnownObjects");
    expect((await call("/v1/heapprof?heap=js&diff=baseline&baseline=before&format=svg")).text).toContain("Growth of the JS heap of all shards");
    // The shared heap has no baseline of that name; heap=all has no growth.
    expect((await call("/v1/heapprof?shard=1&diff=baseline&baseline=before")).status).toBe(409);
    expect((await call("/v1/heapprof?shard=1&heap=all&diff=baseline")).status).toBe(400);
    expect(await json("/v1/heapprof/baseline?name=before&heap=js", "DELETE")).toMatchObject({ deleted: [{ shard: 0 }, { shard: 1 }] });
    expect((await call("/v1/heapprof?shard=1&heap=js&diff=baseline&baseline=before")).status).toBe(409);
  });

  it("each shard's V8 heap figures in /metrics and in the memory history", async () => {
    const { smp, call, json } = await serve({ mainShard: true });
    await smp.submitTo(0, "retainKnownObjects", { count: COUNT });
    const metrics = (await call("/metrics")).text;
    for (const name of ["shardheap_js_heap_used_bytes", "shardheap_js_heap_total_bytes", "shardheap_js_heap_external_bytes", "shardheap_js_heap_array_buffers_bytes", "shardheap_js_heap_sampling_interval_bytes"]) {
      for (const shard of [0, 1, 2]) expect(metrics, `${name} shard ${shard}`).toMatch(new RegExp(`^${name}\\{shard="${shard}"\\} [1-9]\\d*|^${name}\\{shard="${shard}"\\} 0`, "m"));
    }
    const used = (shard: number): number => Number(new RegExp(`^shardheap_js_heap_used_bytes\\{shard="${shard}"\\} (\\d+)`, "m").exec(metrics)![1]);
    expect(used(0)).toBeGreaterThan(0);
    const history = await json<{ samples: Array<{ shards: Array<{ js: { used: number; total: number; external: number; arrayBuffers: number; sampleRate: number } | null }> }> }>("/v1/memory/history");
    const last = history.samples.at(-1)!;
    expect(last.shards).toHaveLength(3);
    for (const s of last.shards) expect(s.js).toMatchObject({ used: expect.any(Number), total: expect.any(Number), external: expect.any(Number), arrayBuffers: expect.any(Number), sampleRate: 0 });
  });
});
