/**
 * The admin API's `heap=` parameter: which of a shard's two heaps a
 * profile, a switch or a baseline is about.
 *   shared  its region of the SharedArrayBuffer heap (the default): read
 *           from the buffer, no shard asked;
 *   js      its own V8 heap (smp.jsHeapProfile): each named shard's thread
 *           answers with its sampled live objects (the main thread's with
 *           mainShard); "all shards" merges them by site;
 *   all     both at once, one profile whose every site carries the label
 *           `heap` = `shared` or `js` (LABEL), so pprof's `-tagfocus
 *           heap=js`, `by=heap` and the label filters tell them apart: a
 *           shard's whole memory in one flamegraph.
 * JS heap baselines are kept apart from the shared heap's (a second
 * Baselines, bounded alike), under the same names: `heap=js` on POST /
 * DELETE / GET ...&diff=baseline. Their profiles are read before the
 * baseline store is touched (the read awaits the shards), then handed to
 * it in one synchronous step, so two requests never see each other's
 * half-taken baseline.
 */
import { InvalidValueError, UsageError } from "../errors.js";
import type { AllocationSite, HeapProfile } from "../memory/heap-profile.js";
import { mergeProfiles, type ProfileDiff } from "../report/diff.js";
import type { Smp } from "../smp/smp.js";
import { Baselines } from "./baselines.js";
import type { BaselineInfo } from "./dashboard/api.js";

export type HeapKind = "shared" | "js" | "all";
const HEAP_KINDS: readonly HeapKind[] = ["shared", "js", "all"];
/** The label a combined profile's sites carry: which heap they are in. */
export const HEAP_LABEL = "heap";

/** `heap=` (shared when absent); InvalidValueError for anything else. */
export function heapParam(q: URLSearchParams, allowed: readonly HeapKind[] = HEAP_KINDS): HeapKind {
  const v = q.get("heap") ?? "shared";
  if (!(allowed as readonly string[]).includes(v)) throw new InvalidValueError("heap", `heap must be ${allowed.map((k) => `"${k}"`).join(" or ")}, got ${JSON.stringify(v)}`);
  return v as HeapKind;
}

/** `profile`'s sites, each labelled with the heap they are in (a user label of that name is replaced). */
function labelled(profile: HeapProfile, heap: "shared" | "js"): AllocationSite[] {
  return profile.sites.map((s) => ({ ...s, labels: { ...s.labels, [HEAP_LABEL]: heap } }));
}

/** A shard's (or all shards') shared-heap and JS heap profiles as one, every site labelled heap=shared|js. */
export function combinedProfile(shared: HeapProfile, js: HeapProfile): HeapProfile {
  const both = mergeProfiles([
    { ...shared, sites: labelled(shared, "shared") },
    { ...js, sites: labelled(js, "js") },
  ]);
  return { ...both, shard: shared.shard };
}

/** Every region's id: the workers' and the main thread's (mainShard). */
const regionsOf = (smp: Smp): number[] => [...Array(smp.heap.shards).keys()];

/** `shard`'s JS heap profile, or every shard's merged (shard "all") when undefined. */
export async function jsHeapProfileOf(smp: Smp, shard: number | undefined): Promise<HeapProfile> {
  if (shard !== undefined) return smp.jsHeapProfile(shard);
  const merged = mergeProfiles(await Promise.all(regionsOf(smp).map((s) => smp.jsHeapProfile(s))));
  return { ...merged, shard: "all" };
}

/** The profile of `heap` for `shard` (all shards when undefined). */
export async function profileOfHeap(smp: Smp, heap: HeapKind, shard: number | undefined): Promise<HeapProfile> {
  if (heap === "shared") return smp.heapProfile(shard);
  const js = await jsHeapProfileOf(smp, shard);
  return heap === "js" ? js : combinedProfile(smp.heapProfile(shard), js);
}

/** The JS heaps' baselines: a Baselines over profiles read just before each use. */
export class JsHeapBaselines {
  private readonly store: Baselines;
  /** The profiles the store reads, by shard: set right before each (synchronous) call into it. */
  private current = new Map<number, HeapProfile>();

  constructor(private readonly smp: Smp) {
    this.store = new Baselines({
      shards: smp.heap.shards,
      heapProfile: (shard?: number) => {
        if (shard === undefined) return { ...mergeProfiles([...this.current.values()]), shard: "all" };
        const p = this.current.get(shard);
        if (p === undefined) throw new Error(`the JS heap profile of shard ${shard} was not read first`);
        return p;
      },
    });
  }

  async set(name: string, shard: number | "all"): Promise<BaselineInfo[]> {
    this.current = await this.read(shard === "all" ? undefined : shard);
    return this.store.set(name, shard);
  }

  /** Growth since `name` of `shard`, or of all shards merged (undefined). */
  async growth(name: string, shard: number | undefined): Promise<ProfileDiff> {
    this.current = await this.read(shard);
    return this.store.growth(name, shard);
  }

  list(): BaselineInfo[] {
    return this.store.list();
  }

  delete(name: string, shard?: number): BaselineInfo[] {
    return this.store.delete(name, shard);
  }

  /** The named shards' JS heap profiles (every shard's for undefined), by shard: the caller hands them to the store in the same step. */
  private async read(shard: number | undefined): Promise<Map<number, HeapProfile>> {
    const shards = shard === undefined ? regionsOf(this.smp) : [shard];
    const profiles = await Promise.all(shards.map((s) => this.smp.jsHeapProfile(s)));
    return new Map(shards.map((s, i) => [s, profiles[i]!]));
  }
}

/** diff=baseline takes one heap: a combined growth would need both heaps' baselines under one name. */
export function checkDiffHeap(heap: HeapKind): void {
  if (heap === "all") throw new UsageError('diff=baseline compares one heap with its baseline: give heap=shared or heap=js, not heap=all');
}
