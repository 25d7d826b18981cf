/**
 * Named baselines for the admin API's leak hunting: `POST
 * /v1/heapprof/baseline?shard=N|all&name=NAME` remembers each named shard's
 * profile as it is now under NAME ("default" when not given), `GET
 * /v1/heapprof/baseline` lists them, `DELETE ...?name=NAME[&shard=N]`
 * forgets them, and `GET /v1/heapprof?...&diff=baseline&baseline=NAME`
 * renders the growth since (report/diff.ts). Several names let a leak
 * hunter keep "before the load test" while taking "after warm-up" and
 * "now", and diff against each.
 *
 * A name holds one profile per shard, read from the buffer like every
 * profile here (the shards do nothing), raw (source mapping happens once,
 * on the rendered diff); "all" merges the shards' profiles of that name,
 * so a name set for all shards serves a shard's diff too and the other way
 * round. A shard without that name is a 409 that says how to set one.
 *
 * Bounded: at most MAX_BASELINES names, and MAX_BASELINE_BYTES of
 * profiles held in all (estimatedProfileBytes); a POST past either is a
 * 409 (ERR_SHARDHEAP_BASELINES_FULL) naming what is held, so nothing is
 * dropped behind the user's back. Taking a name again replaces it.
 */
import { HttpError, InvalidValueError } from "../errors.js";
import type { Frame, HeapProfile } from "../memory/heap-profile.js";
import type { BaselineInfo } from "./dashboard/api.js"; // a baseline as the admin API lists it, declared once there
import { diffProfiles, mergeProfiles, type ProfileDiff } from "../report/diff.js";
import { formatSize } from "../units.js";

/** The name of a baseline set without one (and of the one `diff=baseline` compares with by default). */
export const DEFAULT_BASELINE = "default";
/** Names held at once, at most. */
export const MAX_BASELINES = 16;
/** Estimated bytes of the profiles held, at most (all names and shards). */
export const MAX_BASELINE_BYTES = 64 * 1024 * 1024;

/** Letters, digits, `.`, `_`, `-`; 1 to 64 of them, starting with a letter or digit: a name that needs no escaping in a URL, a file name or a shell. */
const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** What baselines are taken from: a SharedHeap or an Smp. */
export interface ProfileSource {
  readonly shards: number;
  heapProfile(shard?: number): HeapProfile;
}

interface Held {
  profile: HeapProfile;
  takenAt: number;
  bytes: number;
}

/**
 * Heap bytes a profile read from the buffer holds, estimated: per site its
 * object (four figures that are often heap numbers) and its frames array,
 * per distinct Frame (a read shares one object per frame among the sites)
 * the object, its two strings and their characters. The constants are
 * what Node 20 on x64 (no pointer compression) measured with --expose-gc:
 * 170 bytes a site, 9.5 a frame reference, 105 a frame plus its
 * characters. Measured against estimated: a real profile of 2,048 sites
 * (10 frames each) read from a shard, 610 / 588 KiB; made-up profiles of
 * 20,000 sites of 8 frames over 4,000 distinct frames 4.12 / 5.29 MiB,
 * 65,536 sites of 10 over 20,000 15.3 / 19.6 MiB. Within -4% to +28%:
 * enough for a bound.
 */
export function estimatedProfileBytes(p: HeapProfile): number {
  const SITE = 170;
  const FRAME_REFERENCE = 9.5;
  const FRAME = 105;
  const frames = new Set<Frame>();
  let bytes = 256;
  for (const site of p.sites) {
    bytes += SITE + FRAME_REFERENCE * site.frames.length;
    for (const f of site.frames) frames.add(f);
  }
  for (const f of frames) bytes += FRAME + f.functionName.length + f.url.length;
  return Math.round(bytes);
}

/** A baseline name, checked (InvalidValueError naming `field`). */
export function baselineName(value: string | null | undefined, field = "name"): string {
  if (value === null || value === undefined || value === "") return DEFAULT_BASELINE;
  if (!NAME.test(value)) {
    throw new InvalidValueError(field, `${field} must be 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit; got ${JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}...` : value)}`);
  }
  return value;
}

export class Baselines {
  /** By name (in the order names were first taken), then by shard. */
  private readonly byName = new Map<string, Map<number, Held>>();
  private heldBytes = 0;

  constructor(private readonly source: ProfileSource) {}

  /** Remember the named shards' profiles now under `name`; what was set. */
  set(name: string, shard: number | "all"): BaselineInfo[] {
    const shards = this.shardsOf(shard);
    const existing = this.byName.get(name);
    if (existing === undefined && this.byName.size >= MAX_BASELINES) {
      throw new HttpError("ERR_SHARDHEAP_BASELINES_FULL", `the server keeps at most ${MAX_BASELINES} baselines (${[...this.byName.keys()].join(", ")}): DELETE /v1/heapprof/baseline?name=NAME one first, or take one of those names again`);
    }
    const takenAt = Date.now();
    const taken = shards.map((s): [number, Held] => {
      const profile = this.source.heapProfile(s);
      return [s, { profile, takenAt, bytes: estimatedProfileBytes(profile) }];
    });
    const replaced = shards.reduce((n, s) => n + (existing?.get(s)?.bytes ?? 0), 0);
    const added = taken.reduce((n, [, h]) => n + h.bytes, 0);
    if (this.heldBytes - replaced + added > MAX_BASELINE_BYTES) {
      throw new HttpError(
        "ERR_SHARDHEAP_BASELINES_FULL",
        `baseline ${JSON.stringify(name)} would take about ${formatSize(added)}, past the ${formatSize(MAX_BASELINE_BYTES)} the server holds for baselines (${formatSize(this.heldBytes)} in ${this.byName.size} now): DELETE /v1/heapprof/baseline?name=NAME one first`,
      );
    }
    const held = existing ?? new Map<number, Held>();
    for (const [s, h] of taken) held.set(s, h);
    this.byName.set(name, held);
    this.heldBytes += added - replaced;
    return this.list().filter((b) => b.name === name && shards.includes(b.shard));
  }

  /** Every baseline: names in the order first taken, shards in order. */
  list(): BaselineInfo[] {
    return [...this.byName].flatMap(([name, held]) =>
      [...held]
        .sort(([a], [b]) => a - b)
        .map(([shard, h]) => ({ name, shard, takenAt: h.takenAt, totalSize: h.profile.totalSize, sites: h.profile.sites.length, bytes: h.bytes })),
    );
  }

  /** Forget `name` (one shard's, or every shard's); what was forgotten. A 404 when there was nothing to forget. */
  delete(name: string, shard?: number): BaselineInfo[] {
    const held = this.byName.get(name);
    const gone = this.list().filter((b) => b.name === name && (shard === undefined || b.shard === shard));
    if (held === undefined || gone.length === 0) {
      const names = [...this.byName.keys()];
      throw new HttpError("ERR_SHARDHEAP_NOT_FOUND", `no baseline ${JSON.stringify(name)}${shard === undefined ? "" : ` for shard ${shard}`}: ${names.length === 0 ? "none is set" : `the names are ${names.join(", ")}`}`);
    }
    for (const b of gone) {
      this.heldBytes -= b.bytes;
      held.delete(b.shard);
    }
    if (held.size === 0) this.byName.delete(name);
    return gone;
  }

  /** The growth of `shard` (all shards when undefined) since baseline `name`; a 409 when a shard has none of that name. */
  growth(name: string, shard: number | undefined): ProfileDiff {
    const shards = this.shardsOf(shard ?? "all");
    const held = this.byName.get(name);
    const missing = shards.filter((s) => !held?.has(s));
    if (missing.length > 0) {
      const which = missing.length === 1 ? `shard ${missing[0]}` : `shards ${missing.join(", ")}`;
      const named = name === DEFAULT_BASELINE ? "" : ` ${JSON.stringify(name)}`;
      const query = name === DEFAULT_BASELINE ? "" : `&name=${name}`;
      throw new HttpError("ERR_SHARDHEAP_NO_BASELINE", `no baseline${named} for ${which}: POST /v1/heapprof/baseline?shard=${shard ?? "all"}${query} first`);
    }
    const base = shard === undefined ? mergeProfiles(shards.map((s) => held!.get(s)!.profile)) : held!.get(shard)!.profile;
    return diffProfiles(base, this.source.heapProfile(shard));
  }

  private shardsOf(shard: number | "all"): number[] {
    return shard === "all" ? [...Array(this.source.shards).keys()] : [shard];
  }
}
