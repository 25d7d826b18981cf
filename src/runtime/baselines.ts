/**
 * Baselines for the admin API's leak hunting: `POST
 * /v1/heapprof/baseline?shard=N|all` remembers each named shard's profile
 * as it is now, and `GET /v1/heapprof?...&diff=baseline` renders the growth
 * since (report/diff.ts). One baseline per shard, read from the buffer like
 * every profile here (the shards do nothing), raw (source mapping happens
 * once, on the rendered diff); "all" merges the shards' baselines, so a
 * baseline set for all shards serves a shard's diff too and the other way
 * round. A shard without a baseline is a 409 that says how to set one.
 */
import { HttpError } from "../errors.js";
import type { HeapProfile } from "../memory/heap-profile.js";
import { diffProfiles, mergeProfiles, type ProfileDiff } from "../report/diff.js";
import type { Smp } from "../smp/smp.js";

export interface BaselineInfo {
  shard: number;
  /** When it was taken, ms since the epoch. */
  takenAt: number;
  totalSize: number;
}

export class Baselines {
  private readonly byShard = new Map<number, { profile: HeapProfile; takenAt: number }>();

  constructor(private readonly smp: Smp) {}

  /** Remember the named shards' profiles now; what was set. */
  set(shard: number | "all"): BaselineInfo[] {
    const takenAt = Date.now();
    for (const s of this.shardsOf(shard)) this.byShard.set(s, { profile: this.smp.heapProfile(s), takenAt });
    return this.list().filter((b) => shard === "all" || b.shard === shard);
  }

  list(): BaselineInfo[] {
    return [...this.byShard.entries()].sort(([a], [b]) => a - b).map(([shard, b]) => ({ shard, takenAt: b.takenAt, totalSize: b.profile.totalSize }));
  }

  /** The growth of `shard` (all shards when undefined) since its baseline; a 409 when a shard has none. */
  growth(shard: number | undefined): ProfileDiff {
    const shards = this.shardsOf(shard ?? "all");
    const missing = shards.filter((s) => !this.byShard.has(s));
    if (missing.length > 0) {
      const which = missing.length === 1 ? `shard ${missing[0]}` : `shards ${missing.join(", ")}`;
      throw new HttpError("ERR_SHARDHEAP_NO_BASELINE", `no baseline for ${which}: POST /v1/heapprof/baseline?shard=${shard ?? "all"} first`);
    }
    const base = shard === undefined ? mergeProfiles(shards.map((s) => this.byShard.get(s)!.profile)) : this.byShard.get(shard)!.profile;
    return diffProfiles(base, this.smp.heapProfile(shard));
  }

  private shardsOf(shard: number | "all"): number[] {
    return shard === "all" ? [...Array(this.smp.shards).keys()] : [shard];
  }
}
