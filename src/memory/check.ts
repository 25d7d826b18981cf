/**
 * The heap checker behind SharedHeap.check(): walks one region's metadata
 * and returns every invariant it finds broken (layout.ts lists them), as
 * sentences naming the shard, page or pointer. [] means healthy.
 *
 * It reads the buffer only, so any thread can run it, but one pass
 * expects the shard to be quiescent: a shard allocating or draining while
 * it runs can make it report transient states. SharedHeap.check() runs it
 * through live-check.ts, which believes only what stands still. Cost:
 * linear in pages plus cached objects.
 */
import { forEachChained } from "./cross-shard.js";
import { firstWrittenByte, forEachQuarantined } from "./quarantine.js";
import { profilerHooks } from "./hooks.js";
import { objectSizeIn } from "./pointers.js";
import {
  GRANULE,
  PAGE_FREE,
  PAGE_INNER,
  PAGE_LARGE,
  PAGE_POOL,
  PAGE_SIZE,
  PM_FREELIST,
  PM_HEAD,
  PM_NEXT,
  PM_PREV,
  PM_SITE,
  RATE_EPOCHS,
  S_PROF_SITES,
  TAG_SITE_MASK,
  PM_SPAN_PAGES,
  PM_STATE,
  PM_USED,
  P_CAPACITY,
  P_CLAIMED_HEAD,
  P_FREE_COUNT,
  P_FREE_HEAD,
  P_PAGES_IN_USE,
  P_SPAN_FREE,
  P_SPAN_LIST,
  SPAN_BITMAP_WORDS,
  SPAN_LIST_COUNT,
  S_QUARANTINE_BYTES,
  S_QUARANTINE_OBJECTS,
  S_QUARANTINE_WRITTEN,
  S_SPAN_BITMAP,
  S_SPAN_SUMMARY,
} from "./layout.js";
import { spanListMinPages, spanListOf } from "./page-spans.js";
import type { ShardRegion } from "./region.js";
import { POOL_COUNT, SAMPLED_POOL_BASE, classFallbackSpanPages, classSpanPages, objectsPerSpan, poolStride } from "./size-classes.js";
import { poolRecord, sampledTagIndex } from "./small-pool.js";
import { readStats } from "./memory-stats.js";

/** Violations reported at most, per shard and in all. */
export const MAX_REPORTS = 50;

/**
 * Every region of a heap, and what crosses between them: objects pending a
 * cross-shard free must each sit in exactly one chain, an inbox (pushed)
 * or an outbox (batched by the shard that freed them); one that sits in
 * neither is stuck (its free was lost) and is reported. One list per
 * region: what is wrong with that shard's objects and metadata, the chains
 * holding its objects (its inbox, every shard's outbox for it) included,
 * so live-check.ts can judge each shard apart.
 */
export function checkRegions(regions: readonly ShardRegion[]): string[][] {
  const errors: string[][] = regions.map(() => []);
  const inFlight = new Set<number>();
  const fail = (owner: ShardRegion, msg: string): void => {
    const list = errors[owner.id]!;
    if (list.length < MAX_REPORTS) list.push(msg);
  };
  forEachChained(
    regions,
    (owner, p, where) => {
      if (inFlight.has(p)) fail(owner, `shard ${owner.id}: object ${p} is in two cross-shard chains`);
      inFlight.add(p);
      if (!owner.isLive(p) || !owner.isPendingFree(p)) fail(owner, `shard ${owner.id}: ${where} holds ${p}, which is not a live object pending free`);
    },
    (owner, p, where) => fail(owner, `shard ${owner.id}: ${where} is corrupt at ${p}`),
  );
  for (const r of regions) errors[r.id]!.push(...checkRegion(r, inFlight));
  return errors.map((list) => list.slice(0, MAX_REPORTS));
}

function checkRegion(r: ShardRegion, inFlight: Set<number>): string[] {
  const errors: string[] = [];
  const fail = (msg: string): void => {
    if (errors.length < MAX_REPORTS) errors.push(`shard ${r.id}: ${msg}`);
  };
  const i32 = r.i32;
  const held = checkQuarantine(r, fail);
  const meta = (p: number, f: number): number => i32[r.pageMeta(p) + f]!;

  // 1. Walk the spans head to head; they must tile the region exactly.
  let freePages = 0;
  let liveLarge = 0;
  const freeHeads = new Set<number>();
  const poolSpans: number[][] = Array.from({ length: POOL_COUNT }, () => []);
  let previousFree = -1;
  for (let p = 0; p < r.dataPages; ) {
    const state = meta(p, PM_STATE);
    const len = meta(p, PM_SPAN_PAGES);
    if (state === PAGE_INNER || len <= 0 || p + len > r.dataPages) {
      fail(`page ${p} should head a span but has state ${state}, length ${len}`);
      return errors;
    }
    if (state === PAGE_FREE) {
      freePages += len;
      freeHeads.add(p);
      if (previousFree >= 0) fail(`free spans at pages ${previousFree} and ${p} touch but were not merged`);
      if (meta(p + len - 1, PM_HEAD) !== p) fail(`free span at page ${p}: its last page ${p + len - 1} names head ${meta(p + len - 1, PM_HEAD)}`);
      for (let q = p + 1; q < p + len; q++) if (meta(q, PM_STATE) !== PAGE_INNER) fail(`page ${q} inside free span ${p} is marked ${meta(q, PM_STATE)}`);
      if (anyBitsSet(r, r.pageAddress(p), len * PAGE_SIZE)) fail(`free span at page ${p} has live or pending bits set`);
    } else if (state === PAGE_LARGE) {
      if (r.poolOfPage(p) !== -1) fail(`large span at page ${p} names pool ${r.poolOfPage(p)}`);
      for (let q = p + 1; q < p + len; q++) if (meta(q, PM_STATE) !== PAGE_INNER) fail(`page ${q} inside large span ${p} is marked ${meta(q, PM_STATE)}`);
      const heldNow = held.has(r.pageAddress(p));
      if (!r.isLive(r.pageAddress(p)) && !heldNow) fail(`large span at page ${p} is used but its object is not live`);
      if (r.isPendingFree(r.pageAddress(p)) && !inFlight.has(r.pageAddress(p)) && !heldNow) fail(stuckPending(r.pageAddress(p)));
      const tag = meta(p, PM_SITE);
      if (tag !== 0 && !validTag(r, tag)) fail(`large span at page ${p} has a bad site tag ${tag}`);
      if (anyBitsSet(r, r.pageAddress(p) + GRANULE, len * PAGE_SIZE - GRANULE)) fail(`large span at page ${p} has live bits inside the object`);
      if (!heldNow) liveLarge++;
    } else if (state === PAGE_POOL) {
      checkPoolSpan(r, p, inFlight, fail);
      const cls = r.poolOfPage(p);
      if (cls >= 0 && cls < POOL_COUNT) poolSpans[cls]!.push(p);
    } else {
      fail(`page ${p} has unknown state ${state}`);
      return errors;
    }
    previousFree = state === PAGE_FREE ? p : -1;
    p += len;
  }
  if (freePages !== r.freePages()) fail(`free pages counter ${r.freePages()} but free spans hold ${freePages}`);

  // 2. Free-span lists: each entry a free head of the list's lengths,
  // links consistent, the bitmap and its summary saying which are non-empty.
  let listed = 0;
  for (let k = 0; k < SPAN_LIST_COUNT; k++) {
    let prev = -1;
    let n = 0;
    for (let p = i32[r.spanLists + k]!; p >= 0; p = meta(p, PM_NEXT)) {
      if (p >= r.dataPages || ++n > r.dataPages) {
        fail(`free-span list ${k} is corrupt at page ${p}`);
        break;
      }
      if (!freeHeads.has(p) || spanListOf(meta(p, PM_SPAN_PAGES)) !== k) {
        fail(`free-span list ${k} (spans of ${spanListMinPages(k)} pages or more) holds page ${p}, not a free span it lists`);
      }
      if (meta(p, PM_PREV) !== prev) fail(`free-span list ${k}: page ${p} has back link ${meta(p, PM_PREV)}, expected ${prev}`);
      prev = p;
    }
    listed += n;
    const flagged = (i32[r.hdr + S_SPAN_BITMAP + (k >>> 5)]! & (1 << (k & 31))) !== 0;
    if ((n > 0) !== flagged) fail(`free-span list ${k}: bitmap bit ${flagged ? "set" : "clear"} but the list has ${n} spans`);
  }
  for (let w = 0; w < SPAN_BITMAP_WORDS; w++) {
    const summary = (i32[r.hdr + S_SPAN_SUMMARY]! & (1 << w)) !== 0;
    if (summary !== (i32[r.hdr + S_SPAN_BITMAP + w] !== 0)) fail(`free-span bitmap word ${w}: summary bit disagrees with the word`);
  }
  if (listed !== freeHeads.size) fail(`${freeHeads.size} free spans but ${listed} listed`);

  // 3. Pools: cached objects are free objects of the pool, counts add up.
  let livePool = 0;
  for (let c = 0; c < POOL_COUNT; c++) livePool += checkPool(r, c, poolSpans[c]!, held, fail);

  // 4. Counters: every live bit is a malloc without a free.
  const live = readStats(r).liveObjects;
  if (live !== liveLarge + livePool) fail(`mallocs - frees = ${live} but ${liveLarge + livePool} objects are live`);

  // 5. The peak's books: its live figure is the sites' (peaks.ts).
  const peaks = profilerHooks().booksProblem(r);
  if (peaks) fail(peaks);

  return errors;
}

/**
 * Debug pointers' quarantine (quarantine.ts): its chain holds what its
 * counts say, each object a freed one (live bit clear) whose claim is
 * kept, its link words agreeing and the rest poisoned: a byte changed is a
 * write after the free, reported with the ones found earlier (as they
 * left, or as their link words were next needed). Past a link that was
 * written, the held objects are found by their bits. Returns them.
 */
function checkQuarantine(r: ShardRegion, fail: (m: string) => void): Set<number> {
  const held = new Set<number>();
  let bytes = 0;
  forEachQuarantined(
    r,
    (p) => {
      if (r.isLive(p) || !r.isPendingFree(p) || held.has(p)) return fail(`the debug quarantine holds ${p}, which is not a freed object it may hold`);
      held.add(p);
      const size = objectSizeIn(r, p);
      bytes += size;
      const written = firstWrittenByte(r, p, size);
      if (written >= 0) fail(`object ${p} (${size} bytes) was written after it was freed, at byte ${written} (debug pointers)`);
    },
    (p) => fail(`the debug quarantine's chain is corrupt at ${p}`),
  );
  if (held.size !== r.u32[r.hdr + S_QUARANTINE_OBJECTS] || bytes !== r.u32[r.hdr + S_QUARANTINE_BYTES]) {
    fail(`the debug quarantine counts ${r.u32[r.hdr + S_QUARANTINE_OBJECTS]} objects of ${r.u32[r.hdr + S_QUARANTINE_BYTES]} bytes but holds ${held.size} of ${bytes}`);
  }
  const earlier = r.i32[r.hdr + S_QUARANTINE_WRITTEN]!;
  if (earlier > 0) fail(`${earlier} freed object${earlier === 1 ? " was" : "s were"} written after ${earlier === 1 ? "its" : "their"} free (debug pointers found them in the quarantine; see the SHARDHEAP_WRITE_AFTER_FREE warnings)`);
  return held;
}

function stuckPending(ptr: number): string {
  return `object ${ptr} is pending a cross-shard free but no inbox or outbox holds it (its free was lost)`;
}

/**
 * A pool span's pages agree; its objects' live and pending bits sit on
 * object starts; a live object pending free is in a cross-shard chain.
 */
function checkPoolSpan(r: ShardRegion, head: number, inFlight: Set<number>, fail: (m: string) => void): void {
  const cls = r.poolOfPage(head);
  const len = r.i32[r.pageMeta(head) + PM_SPAN_PAGES]!;
  if (cls < 0 || cls >= POOL_COUNT) return fail(`pool span at page ${head} names class ${cls}`);
  if (len !== classSpanPages[cls] && len !== classFallbackSpanPages[cls]) {
    fail(`pool span at page ${head} has ${len} pages, class ${cls} uses ${classSpanPages[cls]} or ${classFallbackSpanPages[cls]}`);
  }
  for (let q = head; q < head + len; q++) {
    const m = r.pageMeta(q);
    if (r.i32[m + PM_STATE] !== PAGE_POOL || r.poolOfPage(q) !== cls || r.i32[m + PM_HEAD] !== head) {
      fail(`page ${q} of pool span ${head} disagrees about its pool or head`);
    }
  }
  const start = r.pageAddress(head);
  const size = poolStride[cls]!;
  forEachMarkedGranule(r, start, len * PAGE_SIZE, (ptr) => {
    const off = ptr - start;
    if (off % size !== 0 || off / size >= objectsPerSpan(cls, len)) {
      fail(`pool span at page ${head}: live or pending bit at ${ptr}, inside a ${size}-byte object`);
    } else if (r.isLive(ptr) && r.isPendingFree(ptr) && !inFlight.has(ptr)) {
      fail(stuckPending(ptr));
    }
  });
}

/** Check one pool; returns its live object count. */
function checkPool(r: ShardRegion, cls: number, heads: readonly number[], held: ReadonlySet<number>, fail: (m: string) => void): number {
  const i32 = r.i32;
  const u32 = r.u32;
  const pool = poolRecord(r, cls);
  const size = poolStride[cls]!;
  const isFreeObjectOfPool = (obj: number): boolean => {
    if (!r.contains(obj) || obj % GRANULE !== 0) return false;
    const m = r.pageMeta(r.pageOf(obj));
    if (r.poolOfPage(r.pageOf(obj)) !== cls) return false;
    return (obj - r.pageAddress(i32[m + PM_HEAD]!)) % size === 0 && !r.isLive(obj);
  };
  // Spans owned by this pool, found by the page walk's definition.
  let spanPages = 0;
  let capacity = 0;
  let used = 0;
  let liveBits = 0;
  for (const p of heads) {
    const m = r.pageMeta(p);
    const len = i32[m + PM_SPAN_PAGES]!;
    {
      const perSpan = objectsPerSpan(cls, len);
      spanPages += len;
      capacity += perSpan;
      let own = 0;
      for (let obj = u32[m + PM_FREELIST]!; obj !== 0; obj = u32[obj >>> 2]!) {
        if (!isFreeObjectOfPool(obj) || i32[r.pageMeta(r.pageOf(obj)) + PM_HEAD] !== p || ++own > perSpan) {
          fail(`class ${size}: span ${p}'s freelist is corrupt at ${obj}`);
          break;
        }
      }
      if (i32[m + PM_USED]! + own !== perSpan) {
        fail(`class ${size}: span ${p} has ${i32[m + PM_USED]} used + ${own} free != ${perSpan} objects`);
      }
      used += i32[m + PM_USED]!;
      liveBits += countLiveBits(r, r.pageAddress(p), len * PAGE_SIZE);
      if (cls >= SAMPLED_POOL_BASE) {
        // Every live sampled object's tag names a recorded site.
        const start = r.pageAddress(p);
        for (let k = 0; k < perSpan; k++) {
          if (!r.isLive(start + k * size)) continue;
          const tag = i32[sampledTagIndex(r, start + k * size, cls)]!;
          if (!validTag(r, tag)) fail(`class ${size}: sampled object ${start + k * size} has a bad site tag ${tag}`);
        }
      }
    }
  }
  if (i32[pool + P_CAPACITY] !== capacity) fail(`class ${size}: capacity ${i32[pool + P_CAPACITY]}, spans hold ${capacity}`);
  if (i32[pool + P_PAGES_IN_USE] !== spanPages) fail(`class ${size}: pages in use ${i32[pool + P_PAGES_IN_USE]}, spans hold ${spanPages}`);
  // The pool's own lists: clean objects have their pending bit clear,
  // claimed ones still set (cross-shard.ts); no other free object has it.
  let clean = 0;
  for (let obj = u32[pool + P_FREE_HEAD]!; obj !== 0; obj = u32[obj >>> 2]!) {
    if (!isFreeObjectOfPool(obj) || ++clean > capacity) {
      fail(`class ${size}: pool free list is corrupt at ${obj}`);
      break;
    }
    if (r.isPendingFree(obj)) fail(`class ${size}: free object ${obj} on the clean list has its pending bit set`);
  }
  let claimed = 0;
  const claimedObjects = new Set<number>();
  for (let obj = u32[pool + P_CLAIMED_HEAD]!; obj !== 0; obj = u32[obj >>> 2]!) {
    if (!isFreeObjectOfPool(obj) || ++claimed > capacity) {
      fail(`class ${size}: claimed list is corrupt at ${obj}`);
      break;
    }
    claimedObjects.add(obj);
    if (!r.isPendingFree(obj)) fail(`class ${size}: object ${obj} on the claimed list has lost its pending bit`);
  }
  if (clean + claimed !== i32[pool + P_FREE_COUNT]) {
    fail(`class ${size}: free count ${i32[pool + P_FREE_COUNT]}, lists hold ${clean} clean + ${claimed} claimed`);
  }
  let heldHere = 0;
  for (const p of heads) {
    forEachMarkedGranule(r, r.pageAddress(p), i32[r.pageMeta(p) + PM_SPAN_PAGES]! * PAGE_SIZE, (obj) => {
      if (held.has(obj)) heldHere++;
      else if (!r.isLive(obj) && r.isPendingFree(obj) && !claimedObjects.has(obj)) {
        fail(`class ${size}: free object ${obj} has a pending bit but is not on the claimed list`);
      }
    });
  }
  // Objects held in the debug quarantine are freed but neither cached nor back in their span.
  const cached = clean + claimed + heldHere;
  if (capacity - i32[pool + P_SPAN_FREE]! !== used) fail(`class ${size}: span-free count ${i32[pool + P_SPAN_FREE]} disagrees with spans`);
  if (used - cached !== liveBits) fail(`class ${size}: ${used} used - ${cached} cached != ${liveBits} live objects`);
  // Spans with objects in their own freelist are on the pool's span list.
  let onList = 0;
  for (let p = i32[pool + P_SPAN_LIST]!; p >= 0; p = i32[r.pageMeta(p) + PM_NEXT]!) {
    if (++onList > capacity || u32[r.pageMeta(p) + PM_FREELIST] === 0) {
      fail(`class ${size}: span list is corrupt at page ${p}`);
      break;
    }
  }
  return liveBits;
}

/** A site tag (layout.ts): a recorded site and a rate epoch. */
function validTag(r: ShardRegion, tag: number): boolean {
  const site = (tag & TAG_SITE_MASK) - 1;
  return site >= 0 && site < r.headerSlot(S_PROF_SITES) && tag >>> 24 < RATE_EPOCHS;
}

/** Live or pending bits set in [from, from + bytes) (from 8-aligned). */
function anyBitsSet(r: ShardRegion, from: number, bytes: number): boolean {
  let found = false;
  forEachMarkedGranule(r, from, bytes, () => {
    found = true;
  });
  return found;
}

function countLiveBits(r: ShardRegion, from: number, bytes: number): number {
  let n = 0;
  forEachMarkedGranule(r, from, bytes, (ptr) => {
    if (r.isLive(ptr)) n++;
  });
  return n;
}

/** Calls `visit` for each granule in the range whose live or pending bit is set; skips empty words. */
function forEachMarkedGranule(r: ShardRegion, from: number, bytes: number, visit: (ptr: number) => void): void {
  const end = from + bytes;
  for (let ptr = from; ptr < end; ) {
    const bits = r.i32[r.liveWord(ptr)]! | r.i32[r.pendingWord(ptr)]!;
    const wordStart = ptr - (((ptr - r.dataStart) >>> 3) & 31) * GRANULE;
    const wordEnd = Math.min(end, wordStart + 32 * GRANULE);
    if (bits !== 0) {
      for (let q = ptr; q < wordEnd; q += GRANULE) if ((bits & r.liveBit(q)) !== 0) visit(q);
    }
    ptr = wordEnd;
  }
}
