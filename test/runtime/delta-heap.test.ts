/**
 * /debug/pprof/delta_heap as Grafana's godeltaprof serves it (what Alloy's
 * godeltaprof_memory scrapes): alloc_* the allocations since the previous
 * call, inuse_* the live heap now, against real shard threads.
 */
import { gunzipSync } from "node:zlib";
import { Profile } from "pprof-format";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Smp, serveAdmin, type AdminServer } from "../../dist/index.js";

const tasks = new URL("../fixtures/leak-tasks.mjs", import.meta.url);
const RECORD = 1000; // a 1024-byte size class
const RECORD_BYTES = 1024;
let smp: Smp;
let admin: AdminServer;

beforeAll(async () => {
  process.env.SHARDHEAP_LOG = "silent";
  smp = await Smp.start({ shards: 2, memoryPerShard: "16MiB", heapprof: true, module: tasks });
  admin = await serveAdmin(smp);
});
afterAll(async () => {
  await admin?.close();
  await smp?.stop();
});

/** One scrape: its sums per sample type (alloc_objects, alloc_space, inuse_objects, inuse_space), duration and headers. */
async function scrape(path = "/debug/pprof/delta_heap"): Promise<{ status: number; sums: number[]; durationNanos: number; type: string; disposition: string; text: string }> {
  const r = await fetch(admin.url + path);
  const bytes = new Uint8Array(await r.arrayBuffer());
  if (r.status !== 200) return { status: r.status, sums: [], durationNanos: 0, type: "", disposition: "", text: Buffer.from(bytes).toString() };
  const p = Profile.decode(gunzipSync(bytes));
  const sums = [0, 0, 0, 0];
  for (const s of p.sample) s.value.forEach((v, i) => (sums[i]! += Number(v)));
  return { status: 200, sums, durationNanos: Number(p.durationNanos), type: r.headers.get("content-type") ?? "", disposition: r.headers.get("content-disposition") ?? "", text: "" };
}

describe("/debug/pprof/delta_heap", () => {
  it("alloc_* since the previous call, inuse_* now; a site with only live bytes stays in", async () => {
    await smp.submitTo(0, "keepRecords", { count: 10, size: RECORD });
    const first = await scrape();
    expect(first.type).toBe("application/octet-stream");
    expect(first.disposition).toBe('attachment; filename="heap.pprof.gz"');
    // Everything since the start, the first time (other tests' allocations too, if any: at least ours).
    expect(first.sums[0]).toBeGreaterThanOrEqual(10);
    const live = (await fetch(`${admin.url}/v1/heapprof?format=json`).then((r) => r.json())) as { totalSize: number; totalCount: number };
    expect(first.sums.slice(2)).toEqual([live.totalCount, live.totalSize]);
    // Nothing allocated since: no allocations, the same live heap.
    const second = await scrape();
    expect(second.sums).toEqual([0, 0, live.totalCount, live.totalSize]);
    expect(second.durationNanos).toBeGreaterThan(0);
    await smp.submitTo(1, "keepRecords", { count: 5, size: RECORD });
    await smp.submitTo(0, "dropRecords", { count: 10 });
    const third = await scrape();
    expect(third.sums).toEqual([5, 5 * RECORD_BYTES, live.totalCount - 10 + 5, live.totalSize - 10 * RECORD_BYTES + 5 * RECORD_BYTES]);
    await smp.submitTo(1, "dropRecords", { count: 5 });
  });

  it("takes no seconds or debug, in words", async () => {
    const r = await scrape("/debug/pprof/delta_heap?seconds=5");
    expect(r.status).toBe(400);
    expect(r.text).toMatch(/delta_heap takes no seconds: it is the change since the previous call/);
    expect((await scrape("/debug/pprof/delta_heap?debug=1")).status).toBe(400);
    expect(await fetch(`${admin.url}/debug/pprof/`).then((x) => x.text())).toMatch(/delta_heap/);
  });
});
