/**
 * SharedHeap.check() on a heap whose owners may be running: believe only
 * what stands still.
 *
 * check.ts walks a region in one pass and expects it quiescent. Run from
 * the main thread while the shards drained the frees of a round (objects
 * handed to the next shard and freed there), one pass reported 50 to 71
 * violations that were not there ("object X is pending a cross-shard free
 * but no inbox or outbox holds it": the owner had taken its inbox and was
 * freeing what it held; "object is in two cross-shard chains": the walk
 * followed an inbox into the pool lists the owner was relinking it into);
 * 200 ms later the same heap checked []. A health check that cries wolf on
 * a busy heap is worse than none.
 *
 * A consistent view needs no help from the owners, and costs their fast
 * paths nothing, because every change of a shard's allocator state writes
 * its header (layout.ts: pool records with their list heads, counts and
 * malloc/free counters; page counters and free-span list heads; the inbox
 * head; the profiler's site count), and every change of what crosses
 * shards writes an inbox head or an outbox slot. So around each pass the
 * checker takes a stamp of each shard: its header words, and every other
 * shard's outbox slot for it. A shard whose stamp moved during a pass
 * changed under it: that pass says nothing about the shard, and it is
 * checked again. A pass over a shard that stood still is believed:
 *   - nothing found: the shard is healthy ([] for it);
 *   - something found: reported once still passes 10, 50 and 200 ms
 *     later, the stamp unchanged all along, find exactly the same (these
 *     run past the time allowed, if need be). The
 *     pauses cover an owner stopped by the scheduler halfway through an
 *     operation (its header written, a live bit or a link not yet): once it
 *     runs again it finishes, and a later pass no longer sees it. On these
 *     2-core machines, with a dozen runnable threads, a thread waited tens
 *     of milliseconds for a core; one kept from running for 200 ms would
 *     still be mistaken for corruption (only owner cooperation, a pause at
 *     a safe point, could rule that out).
 * A shard that never stands still within the time allowed, nor in its
 * first MIN_PASSES passes (a shard allocating all along, as under
 * `shardheap stress`), is reported as such, in one line that says it could
 * not be checked: never as corrupt.
 *
 * Cost on a quiet heap: one pass (and two header copies per shard). The
 * pauses, by Atomics.wait on the calling thread, are paid only when a
 * shard moved or something was found.
 */
import { MAX_REPORTS, checkRegions } from "./check.js";
import { SHARD_HEADER_BYTES } from "./layout.js";
import type { ShardRegion } from "./region.js";

export interface LiveCheckOptions {
  /** How long to keep trying to find each shard still, in ms (default 1000). */
  timeoutMs?: number;
}

const DEFAULT_TIMEOUT_MS = 1000;
/**
 * Passes every shard gets before it may be named unchecked, whatever the
 * time: one pass over a large heap can itself outlast the time allowed (two
 * 64 MiB shards just after 4,000 steps of churn, at load 20 on 2 cores:
 * over 1 s), and a shard that had just gone idle moves once more when its
 * idle trimmer returns its cached spans 200 ms later. With one pass such a
 * shard was named unchecked in 1 of 4 runs; a second pass finds it still.
 */
const MIN_PASSES = 3;
/** After a still pass that found something: when the passes that must find it again come, in ms after it. */
const CONFIRM_AFTER_MS = [10, 50, 200];
/** Between passes while shards move: short first, then longer (ms). */
const RETRY_PAUSES_MS = [0, 0, 1, 1, 2, 5, 10];

/** One shard's standing in a live check. */
interface ShardVerdict {
  /** Its findings, once established ([] healthy, or the violations, or the line saying it was not checked). */
  result: string[] | undefined;
  /** Passes over it, and those during which it changed. */
  passes: number;
  moved: number;
  /** What a still pass found, under which stamp, when, and how many later passes found it again. */
  candidate: { stamp: Int32Array; found: string[]; at: number; confirmed: number } | undefined;
}

/** Every violation in `regions`, from passes over shards that stood still; shards that never did are named. */
export function checkLiveRegions(regions: readonly ShardRegion[], o: LiveCheckOptions = {}): string[] {
  const timeoutMs = o.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const deadline = performance.now() + timeoutMs;
  const shards: ShardVerdict[] = regions.map(() => ({ result: undefined, passes: 0, moved: 0, candidate: undefined }));
  for (let pass = 0; ; pass++) {
    const before = regions.map((r) => stampOf(regions, r));
    const found = checkRegions(regions);
    const after = regions.map((r) => stampOf(regions, r));
    const now = performance.now();
    for (const r of regions) {
      const v = shards[r.id]!;
      if (v.result !== undefined) continue;
      v.passes++;
      if (!sameWords(before[r.id]!, after[r.id]!)) {
        v.moved++;
        v.candidate = undefined;
      } else if (found[r.id]!.length === 0) {
        v.result = [];
      } else if (v.candidate === undefined || !sameWords(v.candidate.stamp, after[r.id]!) || !sameFindings(v.candidate.found, found[r.id]!)) {
        v.candidate = { stamp: after[r.id]!, found: found[r.id]!, at: now, confirmed: 0 };
      } else if (now - v.candidate.at >= CONFIRM_AFTER_MS[v.candidate.confirmed]!) {
        if (++v.candidate.confirmed === CONFIRM_AFTER_MS.length) v.result = v.candidate.found;
      }
      // Past the deadline a shard still being confirmed goes on (200 ms at
      // most, while it stands still); one waiting to stand still is named.
      if (v.result === undefined && v.candidate === undefined && now >= deadline && v.passes >= MIN_PASSES) {
        v.result = [
          `shard ${r.id}: could not be checked: it changed during ${v.moved} of ${v.passes} passes in ${timeoutMs} ms ` +
            "(a shard that allocates or frees all along never stands still; check it while it is quiet)",
        ];
      }
    }
    const open = shards.filter((v) => v.result === undefined);
    if (open.length === 0) break;
    // Sleep until the next confirmation is due, or briefly while some shard moves.
    let wait = Infinity;
    for (const v of open) {
      wait = Math.min(wait, v.candidate === undefined ? RETRY_PAUSES_MS[Math.min(pass, RETRY_PAUSES_MS.length - 1)]! : v.candidate.at + CONFIRM_AFTER_MS[v.candidate.confirmed]! - now);
    }
    pause(wait);
  }
  return shards.flatMap((v) => v.result!).slice(0, MAX_REPORTS);
}

/**
 * What changes whenever shard `r`'s state changes: its header's words, and
 * every shard's outbox slot for `r` (a remote free batched for it).
 */
function stampOf(regions: readonly ShardRegion[], r: ShardRegion): Int32Array {
  const words = SHARD_HEADER_BYTES / 4;
  const stamp = new Int32Array(words + regions.length);
  stamp.set(r.i32.subarray(r.hdr, r.hdr + words));
  for (const sender of regions) stamp[words + sender.id] = sender.i32[sender.outboxSlots + r.id]!;
  return stamp;
}

function sameWords(a: Int32Array, b: Int32Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function sameFindings(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((m, i) => m === b[i]);
}

const sleeper = new Int32Array(new SharedArrayBuffer(4));
function pause(ms: number): void {
  if (ms > 0) Atomics.wait(sleeper, 0, 0, ms);
}
