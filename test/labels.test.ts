/**
 * Allocation labels end to end, on real shard threads: every profiled
 * allocation records the labels in force (withHeapLabels across awaits,
 * withHeapLabelsSync), a site is its frames plus its labels, and the
 * profile grouped by a label is the truth to the byte in exact mode and
 * within 10% sampled (16 KiB) for every value holding >= 5% of the heap;
 * `go tool pprof -tags` reads the same figures from our pprof (where Go is
 * installed), a heap image keeps the labels, and a hostile image whose
 * label record is not one is refused. The admin API's label view
 * (GET /v1/heapprof/labels, the dashboard's) gives the names and one
 * label's groups, the same truth, without the sites.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { Smp, groupByLabel, serveAdmin, type HeapProfile } from "../dist/index.js";
import { readHeapImage } from "../dist/memory/heap-image/heap-image.js";
import { renderProfile } from "../dist/report/render.js";

const tasks = new URL("./fixtures/label-tasks.mjs", import.meta.url);
const dir = mkdtempSync(join(tmpdir(), "shardheap-labels-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
process.env.SHARDHEAP_LOG = "silent";

/** Tenants' records, by shard and form; unlabeled ones under 5% of the heap. */
const WORK = [
  { shard: 0, task: "keepLabeled", count: 300, labels: { tenant: "a", route: "/x" } },
  { shard: 1, task: "keepLabeledSync", count: 200, labels: { tenant: "b" } },
  { shard: 1, task: "keepLabeled", count: 60, labels: { tenant: "a" } },
  { shard: 0, task: "keepLabeled", count: 20, labels: null },
] as const;
/** Records of 16 KiB (a size class: objectSize is the size). */
const RECORD = 16 * 1024;
const TRUTH: Record<string, number> = { a: 360 * RECORD, b: 200 * RECORD, "(none)": 20 * RECORD };

async function run(heapprof: boolean | number, scale: number): Promise<{ smp: Smp; profile: HeapProfile }> {
  const smp = await Smp.start({ shards: 2, memoryPerShard: "32MiB", heapprof, module: tasks });
  for (const w of WORK) await smp.submitTo(w.shard, w.task, { count: w.count * scale, size: RECORD, labels: w.labels });
  return { smp, profile: smp.heapProfile() };
}

const bytesByTenant = (p: HeapProfile): Record<string, number> => Object.fromEntries(groupByLabel(p, "tenant").map((g) => [g.value ?? "(none)", g.size]));
const hasGo = spawnSync("go", ["version"]).status === 0;
if (!hasGo) console.warn("go tool pprof -tags check SKIPPED: Go is not installed (apt-get install golang-go)");

/** `go tool pprof -tags` of a pprof file: label name -> value -> bytes. */
function goTags(file: string): Record<string, Record<string, number>> {
  const r = spawnSync("go", ["tool", "pprof", "-tags", "-unit=B", "-sample_index=inuse_space", file], { encoding: "utf8", cwd: dir, env: { ...process.env, HOME: dir, PPROF_TMPDIR: dir }, timeout: 120_000 });
  expect(r.status, r.stderr).toBe(0);
  const out: Record<string, Record<string, number>> = {};
  let name = "";
  for (const line of r.stdout.split("\n")) {
    const head = /^ (\S+): Total /.exec(line);
    if (head) out[(name = head[1]!)] = {};
    const row = /^\s+([\d.]+)B \(\s*[\d.]+%\): (.*)$/.exec(line);
    if (row && name) out[name]![row[2]!] = Number(row[1]);
  }
  return out;
}

describe("allocation labels", () => {
  it("exact: each label value's bytes are the truth; sites of one stack differ by labels; pprof -tags agrees", async () => {
    const { smp, profile } = await run(true, 1);
    try {
      expect(bytesByTenant(profile)).toEqual(TRUTH);
      expect(groupByLabel(profile, "route").find((g) => g.value === "/x")!.size).toBe(300 * RECORD);
      // keepLabeled's stacks on shard 1 with tenant a and on shard 0 without: one stack, labels apart.
      const labelsOfSites = profile.sites.map((s) => JSON.stringify(s.labels ?? null));
      expect(new Set(labelsOfSites)).toEqual(new Set(['{"route":"/x","tenant":"a"}', '{"tenant":"b"}', '{"tenant":"a"}', "null"]));
      expect(profile.totalSize).toBe(Object.values(TRUTH).reduce((a, b) => a + b, 0));
      const file = join(dir, "exact.pb.gz");
      writeFileSync(file, renderProfile(profile, "pprof").body);
      if (hasGo) {
        const tags = goTags(file);
        expect(tags.tenant).toEqual({ a: TRUTH.a, b: TRUTH.b });
        expect(tags.route).toEqual({ "/x": 300 * RECORD });
      }
      // A heap image keeps them: the report of the image groups the same.
      const image = join(dir, "labels.img");
      await smp.saveImage(image);
      const heap = await readHeapImage(image);
      expect(bytesByTenant(heap.heapProfile())).toEqual(TRUTH);
      expect(smp.heap.check()).toEqual([]);
    } finally {
      await smp.stop();
    }
  });

  it("GET /v1/heapprof/labels: the names, and by=NAME that label's groups (the truth, per shard too), without the sites", async () => {
    const { smp } = await run(true, 1);
    const admin = await serveAdmin(smp);
    try {
      const get = async (query: string): Promise<{ status: number; body: Record<string, unknown> }> => {
        const r = await fetch(`${admin.url}/v1/heapprof/labels${query}`);
        return { status: r.status, body: (await r.json()) as Record<string, unknown> };
      };
      const names = await get("");
      expect(names).toEqual({ status: 200, body: { names: ["route", "tenant"], totalSize: Object.values(TRUTH).reduce((a, b) => a + b, 0), totalCount: 580 } });
      const all = await get("?by=tenant");
      expect(all.body.by).toBe("tenant");
      expect(all.body.groups).toEqual(JSON.parse(JSON.stringify(groupByLabel(smp.heapProfile(), "tenant"))));
      expect(Object.fromEntries((all.body.groups as Array<{ value?: string; size: number }>).map((g) => [g.value ?? "(none)", g.size]))).toEqual(TRUTH);
      // Shard 1 holds tenant b's 200 and 60 of tenant a's: nothing unlabeled.
      const one = await get("?shard=1&by=tenant");
      expect((one.body.groups as Array<{ value?: string; size: number }>).map((g) => [g.value, g.size])).toEqual([["b", 200 * RECORD], ["a", 60 * RECORD]]);
      expect((await get("?by=")).status).toBe(400);
      expect((await get("?shard=2")).status).toBe(404);
    } finally {
      await admin.close();
      await smp.stop();
    }
  });

  it("sampled (16 KiB): every value holding >= 5% of the heap within 10%", async () => {
    // 2,320 records of 16 KiB (36 MiB), each sampled with p = 1 - exp(-1) = 0.63: tenant b's 800 give its
    // estimate a relative deviation of sqrt((1 - p) / (p n)) = 2.7%, so 10% is 3.7 of them.
    const scale = 4;
    const { smp, profile } = await run(16 * 1024, scale);
    try {
      const got = bytesByTenant(profile);
      const total = Object.values(TRUTH).reduce((a, b) => a + b, 0) * scale;
      for (const [value, bytes] of Object.entries(TRUTH)) {
        const truth = bytes * scale;
        if (truth / total < 0.05) continue;
        expect(Math.abs((got[value] ?? 0) - truth) / truth, `${value}: ${got[value]} for ${truth}`).toBeLessThan(0.1);
      }
    } finally {
      await smp.stop();
    }
  });
});
