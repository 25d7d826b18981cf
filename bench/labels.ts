/**
 * "labels": what allocation labels cost. A malloc(64) + free
 * pair on one shard, timed in one run:
 *
 *   off              profiler off, no labels: the fast path (the floor here)
 *   off, labeled     profiler off, each pair inside withHeapLabelsSync: what
 *                    entering labels costs where nothing reads them
 *   exact            every allocation recorded, no labels
 *   exact, sync      every allocation recorded, the loop inside
 *                    withHeapLabelsSync(set) (one set, made once)
 *   exact, async     the loop inside withHeapLabels (AsyncLocalStorage)
 *   sampled 512K     one sample per 512 KiB, no labels / the loop labeled
 *
 * The ratios to their unlabeled twins say what a labeled allocation costs;
 * "off, labeled" / "off" what the synchronous form costs by itself. The
 * profiler-off malloc path is not touched by labels (a label is read only
 * in recordSample, on the sampled slow path).
 */
import { SharedHeap, heapLabelSet, withHeapLabels, withHeapLabelsSync } from "../src/index.js";
import type { ShardAllocator } from "../src/memory/shard-allocator.js";
import { compare, type BenchModule } from "./report.js";
import { measure, type Candidate, type Measurement } from "./timing.js";

const SIZE = 64;
const SAMPLE_RATE = 512 * 1024;
const LABELS = heapLabelSet({ tenant: "bench", route: "/pairs" });

function pairs(shard: ShardAllocator, n: number): number {
  let acc = 0;
  for (let i = 0; i < n; i++) {
    const p = shard.malloc(SIZE);
    shard.free(p);
    acc ^= p;
  }
  return acc;
}

const heaps: SharedHeap[] = [];

/** A shard of its own with the given rate (0 off, 1 exact), warmed from another call site. */
function shardWith(rate: number): ShardAllocator {
  const heap = SharedHeap.create({ shards: 1, shardBytes: 16 * 1024 * 1024 });
  heaps.push(heap);
  const shard = heap.shard(0);
  shard.setHeapProfilingSampleRate(rate);
  for (let i = 0; i < 200_000; i++) shard.free(shard.malloc(SIZE));
  return shard;
}

export const labels: BenchModule = {
  name: "labels",
  title: `allocation labels: malloc(${SIZE}) + free, unlabeled and labeled, profiler off, exact and sampled`,
  run(ctx) {
    const off = shardWith(0);
    const offLabeled = shardWith(0);
    const exact = shardWith(1);
    const exactSync = shardWith(1);
    const exactAsync = shardWith(1);
    const sampled = shardWith(SAMPLE_RATE);
    const sampledLabeled = shardWith(SAMPLE_RATE);
    const candidates: Candidate[] = [
      { name: "off", run: (n) => pairs(off, n) },
      {
        name: "off, labeled",
        run(n) {
          let acc = 0;
          for (let i = 0; i < n; i++) acc ^= withHeapLabelsSync(LABELS, () => {
            const p = offLabeled.malloc(SIZE);
            offLabeled.free(p);
            return p;
          });
          return acc;
        },
      },
      { name: "exact", run: (n) => pairs(exact, n), timing: { minOps: 1000 } },
      { name: "exact, sync", run: (n) => withHeapLabelsSync(LABELS, () => pairs(exactSync, n)), timing: { minOps: 1000 } },
      { name: "exact, async", run: (n) => withHeapLabels(LABELS, () => pairs(exactAsync, n)), timing: { minOps: 1000 } },
      { name: "sampled 512K", run: (n) => pairs(sampled, n) },
      { name: "sampled 512K, labeled", run: (n) => withHeapLabelsSync(LABELS, () => pairs(sampledLabeled, n)) },
    ];
    ctx.progress(`labels: timing ${candidates.map((c) => c.name).join(", ")}`);
    const m = measure(candidates, ctx.timing);
    const by = new Map(m.map((x) => [x.name, x]));
    const record = (x: Measurement, extra: object): void =>
      ctx.record({ bench: "labels", candidate: x.name, nsPerOp: x.nsPerOp, minNsPerOp: x.minNsPerOp, maxNsPerOp: x.maxNsPerOp, opsPerRound: x.opsPerRound, rounds: x.samples.length, ...extra });
    const pairOf = (name: string, base: string): void => record(by.get(name)!, compare(by.get(name)!.nsPerOp, base, by.get(base)!.nsPerOp));
    record(by.get("off")!, {});
    pairOf("off, labeled", "off");
    record(by.get("exact")!, compare(by.get("exact")!.nsPerOp, "off", by.get("off")!.nsPerOp));
    pairOf("exact, sync", "exact");
    pairOf("exact, async", "exact");
    record(by.get("sampled 512K")!, compare(by.get("sampled 512K")!.nsPerOp, "off", by.get("off")!.nsPerOp));
    pairOf("sampled 512K, labeled", "sampled 512K");
    // The labeled heaps' profiles carry the labels: the bench measured what it says.
    const labeled = exactSync.heapProfile().sites.filter((s) => s.labels?.tenant === "bench").length;
    if (labeled === 0) throw new Error("labels: the labeled exact heap recorded no labeled site");
    for (const heap of heaps.splice(0)) {
      const errors = heap.check();
      if (errors.length > 0) throw new Error(`labels: heap check failed after the run: ${errors.join("; ")}`);
    }
  },
};
