/**
 * The model and the harness of the allocator's property tests
 * (property.test.ts, property-invalid.test.ts): a fresh two-shard heap and a
 * plain model (which objects are live, which are waiting in a cross-shard
 * inbox, what each holds), every operation played against both, and after
 * each the checks that they agree.
 */
import fc from "fast-check";
import { expect } from "vitest";
import { MAX_SMALL_SIZE, OutOfMemoryError, PAGE_SIZE, SharedHeap, type MemoryStats } from "../../src/index.js";
import { SHARDS, LARGEST_OBJECT, classFor, expectHealthy, isLargeRequest, pagesFor, patternOf, type Op } from "./property-ops.js";
// The model and the harness that plays operations against heap and model.

export interface Obj {
  /** Pattern identity; kept across realloc. */
  id: number;
  ptr: number;
  owner: number;
  /** Bytes asked for (the pattern's length). */
  req: number;
  /** objectSize() when last seen. */
  usable: number;
  /** Alignment the pointer must keep. */
  align: number;
  /** A page span (large object) rather than a small-pool object. */
  large: boolean;
}

export interface Coverage {
  runs: number;
  ops: number;
  ooms: number;
  oomRetrySucceeded: number;
  oomLargerThanShard: number;
  spansReleasedOnFree: number;
  inPlaceLargeShrinks: number;
  inPlaceSmall: number;
  reallocMoves: number;
  crossReallocs: number;
  crossFrees: number;
  explicitDrained: number;
  implicitDrains: number;
  bigAlignments: number;
  invalidCalls: number;
  /** Small objects allocated while their shard's profiler recorded every allocation, below 2 KiB and from 2 KiB up. */
  profiledSmall: number;
  profiledAlone: number;
  /** Trims that left a shard with page-span objects only, whose free spans the model then knows exactly. */
  freeSpansChecked: number;
}

export function newCoverage(): Coverage {
  return {
    runs: 0,
    ops: 0,
    ooms: 0,
    oomRetrySucceeded: 0,
    oomLargerThanShard: 0,
    spansReleasedOnFree: 0,
    inPlaceLargeShrinks: 0,
    inPlaceSmall: 0,
    reallocMoves: 0,
    crossReallocs: 0,
    crossFrees: 0,
    explicitDrained: 0,
    implicitDrains: 0,
    bigAlignments: 0,
    invalidCalls: 0,
    profiledSmall: 0,
    profiledAlone: 0,
    freeSpansChecked: 0,
  };
}

type AllocRequest = { kind: "malloc"; size: number } | { kind: "aligned"; size: number; align: number };

export class Harness {
  /**
   * The heap object the current operation goes through: operations
   * alternate between the one that created the buffer and one attached to
   * it, since all allocator state must live in the buffer.
   */
  heap: SharedHeap;
  private readonly views: readonly [SharedHeap, SharedHeap];
  private opCount = 0;
  /** Live objects: allocated, not freed, not pending a cross-shard free. */
  live: Obj[] = [];
  /** Per owner shard: objects another shard freed, not yet drained. */
  pending: Obj[][] = Array.from({ length: SHARDS }, () => []);
  /** Pointers that were freed at some point (some may be live again). */
  freed: number[] = [];
  private nextId = 1;
  private readonly initial: MemoryStats[];
  /** Per shard: the profiler's rate (0 off, 1 every allocation). */
  private readonly rate: number[] = Array.from({ length: SHARDS }, () => 0);

  constructor(
    shardBytes: number,
    readonly cov: Coverage,
  ) {
    const created = SharedHeap.create({ shards: SHARDS, shardBytes });
    // This thread takes every shard now (ownership.ts), so no later call
    // writes the owner word in the middle of an "unchanged heap" check.
    for (let s = 0; s < SHARDS; s++) created.shard(s);
    this.views = [created, SharedHeap.attach(created.buffer)];
    this.heap = created;
    this.initial = Array.from({ length: SHARDS }, (_, s) => this.heap.stats(s));
    for (const st of this.initial) {
      expect(st.freeMemory).toBe(st.totalMemory);
      expect(st.liveObjects).toBe(0);
    }
    cov.runs++;
  }

  // ------------------------------------------------------------ helpers

  liveOn(s: number): Obj[] {
    return this.live.filter((o) => o.owner === s);
  }

  dataPages(s: number): number {
    return this.initial[s]!.totalMemory / PAGE_SIZE;
  }

  private pick<T>(list: readonly T[], n: number): T | undefined {
    return list.length === 0 ? undefined : list[n % list.length];
  }

  private removeLive(o: Obj): void {
    const i = this.live.indexOf(o);
    expect(i).toBeGreaterThanOrEqual(0);
    this.live.splice(i, 1);
  }

  writePattern(o: Obj): void {
    this.heap.bytes(o.ptr, o.req).set(patternOf(o.id, o.req));
  }

  /** The first `length` bytes of `o` hold its pattern. */
  verifyPattern(o: Obj, length = o.req, at = o.ptr): void {
    const actual = this.heap.bytes(at, length);
    const expected = patternOf(o.id, length);
    if (Buffer.compare(actual, expected) !== 0) {
      let i = 0;
      while (actual[i] === expected[i]) i++;
      throw new Error(
        `contents of object #${o.id} (shard ${o.owner}, ${o.req} B asked, ${o.usable} B usable) at ${at} ` +
          `changed at byte ${i} (address ${at + i}): ${actual[i]} != ${expected[i]}`,
      );
    }
  }

  /**
   * Account for a drain the allocator may have done by itself (allocation
   * slow paths drain the inbox; the list is taken whole, so it is all or
   * nothing). `mayDrain` false: liveObjects must match exactly.
   */
  reconcile(s: number, mayDrain: boolean): void {
    const live = this.heap.stats(s).liveObjects;
    const modelLive = this.liveOn(s).length;
    const pend = this.pending[s]!.length;
    if (live === modelLive + pend) return;
    if (mayDrain && pend > 0 && live === modelLive) {
      this.cov.implicitDrains++;
      this.markDrained(s);
      return;
    }
    throw new Error(
      `shard ${s}: liveObjects ${live}, model has ${modelLive} live + ${pend} pending cross-shard frees` +
        (mayDrain ? " (a drain would make it " + modelLive + ")" : ""),
    );
  }

  markDrained(s: number): void {
    for (const o of this.pending[s]!) this.freed.push(o.ptr);
    this.pending[s] = [];
  }

  /**
   * The model's invariants; with `deep`, also heap.check() and every live
   * object's contents. (heap.check() is linear in the heap, about 1 ms for
   * two 4 MiB shards, so the properties afford it after every operation.)
   */
  checkInvariants(deep: boolean): void {
    const heap = this.heap;
    for (let s = 0; s < SHARDS; s++) {
      const st = heap.stats(s);
      expect(st.mallocs - st.frees, `shard ${s} mallocs - frees`).toBe(st.liveObjects);
      expect(st.freeMemory + st.allocatedMemory, `shard ${s} free + allocated`).toBe(st.totalMemory);
      expect(st.totalMemory).toBe(this.initial[s]!.totalMemory);
      expect(st.liveObjects, `shard ${s} liveObjects (model: live + pending)`).toBe(
        this.liveOn(s).length + this.pending[s]!.length,
      );
      expect(st.freeMemory).toBeGreaterThanOrEqual(0);
    }
    for (const o of this.live) {
      expect(o.ptr % 8, `object #${o.id} is 8-aligned`).toBe(0);
      expect(o.ptr % o.align, `object #${o.id} at ${o.ptr} aligned to ${o.align}`).toBe(0);
      expect(heap.ownerOf(o.ptr), `owner of object #${o.id}`).toBe(o.owner);
      expect(heap.ownerOf(o.ptr + o.usable - 1), `owner of object #${o.id}'s last byte`).toBe(o.owner);
      expect(o.usable).toBeGreaterThanOrEqual(o.req);
      // Any shard may ask the size of any shard's object.
      expect(heap.shard(o.ptr % 16 === 0 ? 0 : 1).objectSize(o.ptr), `objectSize of #${o.id}`).toBe(o.usable);
    }
    // Pending objects still occupy their memory until drained.
    const all = [...this.live, ...this.pending.flat()].sort((a, b) => a.ptr - b.ptr);
    for (let i = 1; i < all.length; i++) {
      const a = all[i - 1]!;
      const b = all[i]!;
      if (a.ptr + a.usable > b.ptr) {
        throw new Error(`object #${a.id} [${a.ptr}, ${a.ptr + a.usable}) overlaps object #${b.id} at ${b.ptr}`);
      }
    }
    if (deep) {
      expectHealthy(heap);
      for (const o of this.live) this.verifyPattern(o);
    }
  }

  // ------------------------------------------------------------ allocation

  private tryAlloc(s: number, r: AllocRequest): number {
    const a = this.heap.shard(s);
    return r.kind === "malloc" ? a.malloc(r.size) : a.allocateAligned(r.align, r.size);
  }

  /**
   * A request that even an empty shard cannot hold: a page span (with its
   * alignment slack) longer than the shard. The allocator rejects it before
   * touching its inbox.
   */
  private rejectedOutright(s: number, size: number, align: number): boolean {
    if (!isLargeRequest(size, align)) return false;
    const alignPages = align > PAGE_SIZE ? align / PAGE_SIZE : 1;
    return pagesFor(size) + alignPages - 1 > this.dataPages(s);
  }

  /** After an OutOfMemoryError on shard `s`: nothing allocated, the inbox drained, the heap sound. */
  private afterOom(s: number, e: unknown, before: MemoryStats, size: number, align: number): void {
    if (!(e instanceof OutOfMemoryError)) throw e;
    this.cov.ooms++;
    expect(e.name).toBe("OutOfMemoryError");
    expect(e.report).toMatch(/Total memory:/);
    const st = this.heap.stats(s);
    expect(st.failedAllocations).toBe(before.failedAllocations + 1);
    expect(st.mallocs).toBe(before.mallocs);
    if (this.rejectedOutright(s, size, align)) this.reconcile(s, true);
    else {
      // "the shard drains its cross-shard list before giving up"
      if (this.pending[s]!.length > 0) this.cov.implicitDrains++;
      this.markDrained(s);
      this.reconcile(s, false);
    }
  }

  /** Register a fresh object from shard `s` and check its size and alignment. */
  private adopt(s: number, ptr: number, r: AllocRequest): Obj {
    const align = r.kind === "aligned" ? r.align : 8;
    const large = isLargeRequest(r.size, align);
    const o: Obj = { id: this.nextId++, ptr, owner: s, req: r.size, usable: this.heap.shard(s).objectSize(ptr), align, large };
    expect(ptr).toBeGreaterThan(0);
    expect(ptr % align, `allocation aligned to ${align}`).toBe(0);
    expect(o.usable).toBeGreaterThanOrEqual(r.size);
    if (!large && this.rate[s] === 1) {
      if (o.usable >= 2048) this.cov.profiledAlone++;
      else this.cov.profiledSmall++;
    }
    if (large) expect(o.usable, `large object of ${r.size} B is whole pages`).toBe(pagesFor(r.size) * PAGE_SIZE);
    else if (r.kind === "malloc") expect(o.usable, `small object of ${r.size} B uses its size class`).toBe(classFor(r.size));
    else expect(o.usable).toBeLessThanOrEqual(MAX_SMALL_SIZE);
    this.live.push(o);
    // Allocation slow paths may have drained the inbox: settle that first,
    // then the new object must not overlap anything live or still pending.
    this.reconcile(s, true);
    this.expectNoOverlap(o);
    this.writePattern(o);
    return o;
  }

  private expectNoOverlap(o: Obj): void {
    for (const p of [...this.live, ...this.pending.flat()]) {
      if (p !== o && o.ptr < p.ptr + p.usable && p.ptr < o.ptr + o.usable) {
        throw new Error(`new object #${o.id} at ${o.ptr} (${o.usable} B) overlaps object #${p.id} at ${p.ptr} (${p.usable} B)`);
      }
    }
  }

  /**
   * Allocate; on OutOfMemoryError free this shard's objects (largest first)
   * and retry after each, until it succeeds or the shard is empty.
   */
  allocate(s: number, r: AllocRequest): Obj | undefined {
    const align = r.kind === "aligned" ? r.align : 8;
    if (align >= 8192) this.cov.bigAlignments++;
    let before = this.heap.stats(s);
    try {
      return this.adopt(s, this.tryAlloc(s, r), r);
    } catch (e) {
      this.afterOom(s, e, before, r.size, align);
    }
    // Nothing was allocated and the heap is sound (checked once per failed request).
    this.checkInvariants(true);
    if (this.rejectedOutright(s, r.size, align)) {
      // Longer than the whole shard: no amount of freeing helps.
      this.cov.oomLargerThanShard++;
      return undefined;
    }
    for (;;) {
      const victim = this.liveOn(s).sort((a, b) => b.usable - a.usable)[0];
      if (!victim) break;
      this.freeLocal(victim);
      before = this.heap.stats(s);
      try {
        const o = this.adopt(s, this.tryAlloc(s, r), r);
        this.cov.oomRetrySucceeded++;
        return o;
      } catch (e) {
        this.afterOom(s, e, before, r.size, align);
      }
    }
    // The shard holds nothing now and reclaimed before giving up: all of
    // it is free, in one run of adjacent free blocks, so a request no
    // longer than the shard must succeed.
    const st = this.heap.stats(s);
    throw new Error(
      `${r.kind}(${r.size}, align ${align}) still fails on an empty shard of ${this.dataPages(s)} pages ` +
        `(freeMemory ${st.freeMemory} of ${st.totalMemory})`,
    );
  }

  // ------------------------------------------------------------ frees

  freeLocal(o: Obj, size?: number): void {
    this.verifyPattern(o);
    const freeBefore = this.heap.stats(o.owner).freeMemory;
    if (size === undefined) this.heap.shard(o.owner).free(o.ptr);
    else this.heap.shard(o.owner).free(o.ptr, size);
    const gained = this.heap.stats(o.owner).freeMemory - freeBefore;
    if (o.large) expect(gained, `freeing large object #${o.id} returns its pages`).toBe(o.usable);
    else {
      expect(gained).toBeGreaterThanOrEqual(0);
      // The pool's list overflowed and was trimmed back, releasing empty spans.
      if (gained > 0) this.cov.spansReleasedOnFree++;
    }
    this.removeLive(o);
    this.freed.push(o.ptr);
    this.reconcile(o.owner, false);
  }

  crossFree(o: Obj, sized: boolean): void {
    this.verifyPattern(o);
    const via = (o.owner + 1) % SHARDS;
    const sent = this.heap.stats(via).crossShardFrees;
    if (sized) this.heap.shard(via).free(o.ptr, o.req);
    else this.heap.shard(via).free(o.ptr);
    expect(this.heap.stats(via).crossShardFrees).toBe(sent + 1);
    this.removeLive(o);
    this.pending[o.owner]!.push(o);
    this.cov.crossFrees++;
    this.reconcile(o.owner, false);
    this.reconcile(via, false);
  }

  drain(s: number): void {
    const n = this.heap.shard(s).drainCrossShardFrees();
    expect(n, `drainCrossShardFrees() on shard ${s}`).toBe(this.pending[s]!.length);
    this.cov.explicitDrained += n;
    this.markDrained(s);
    this.reconcile(s, false);
  }

  trim(s: number): void {
    const before = this.heap.stats(s).freeMemory;
    const returned = this.heap.shard(s).trim();
    expect(returned).toBe(this.heap.stats(s).freeMemory - before);
    this.markDrained(s); // trim drains the inbox first
    this.reconcile(s, false);
    this.checkFreeSpans(s);
  }

  /**
   * A trimmed shard whose objects are all page spans holds no pool span,
   * so its free pages are exactly the gaps between those objects, each one
   * free span (freed pages merge with their free neighbours at once): the
   * largest free span is the largest gap.
   */
  private checkFreeSpans(s: number): void {
    const mine = this.liveOn(s);
    if (mine.some((o) => !o.large)) return;
    const region = this.heap.regions[s]!;
    const end = region.dataStart + region.dataBytes;
    let largestGap = 0;
    let at = region.dataStart;
    for (const o of [...mine].sort((a, b) => a.ptr - b.ptr)) {
      largestGap = Math.max(largestGap, o.ptr - at);
      at = o.ptr + o.usable;
    }
    largestGap = Math.max(largestGap, end - at);
    expect(this.heap.stats(s).freeMemory, `shard ${s}: free memory is all but its page-span objects`).toBe(
      region.dataBytes - mine.reduce((n, o) => n + o.usable, 0),
    );
    expect(this.heap.largestFreeSpan(s), `shard ${s}: largest free span after trim, with ${mine.length} page-span objects`).toBe(largestGap);
    this.cov.freeSpansChecked++;
  }

  /** Turn shard `s`'s profiler to `rate` through every view of the heap (each has its own sampler). */
  profile(s: number, rate: number, seed: number): void {
    for (const view of this.views) {
      const a = view.shard(s);
      a.setHeapProfilingSampleRate(rate);
      a.seedHeapProfiler(seed);
    }
    this.rate[s] = rate;
  }

  // ------------------------------------------------------------ realloc

  realloc(o: Obj, newReq: number, cross: boolean): void {
    const t = cross ? (o.owner + 1) % SHARDS : o.owner; // the shard calling realloc
    this.verifyPattern(o);
    const inPlace =
      !cross &&
      (o.large
        ? newReq > MAX_SMALL_SIZE && pagesFor(newReq) * PAGE_SIZE <= o.usable
        : newReq <= MAX_SMALL_SIZE && classFor(newReq) === o.usable);
    const ownerBefore = this.heap.stats(o.owner);
    const callerBefore = this.heap.stats(t);
    let p: number;
    try {
      p = this.heap.shard(t).realloc(o.ptr, newReq);
    } catch (e) {
      expect(inPlace, "an in-place realloc cannot run out of memory").toBe(false);
      // The old object is untouched and still live.
      this.afterOom(t, e, callerBefore, newReq, 8);
      expect(this.heap.shard(o.owner).objectSize(o.ptr)).toBe(o.usable);
      this.verifyPattern(o);
      this.checkInvariants(true);
      return;
    }
    const keep = Math.min(o.req, newReq);
    if (inPlace) {
      expect(p, `realloc(${o.ptr} of ${o.usable} B, ${newReq}) stays in place`).toBe(o.ptr);
      const usable = this.heap.shard(o.owner).objectSize(p);
      if (o.large) {
        expect(usable, `objectSize after realloc(${o.ptr} of ${o.usable} B, ${newReq}) in place`).toBe(pagesFor(newReq) * PAGE_SIZE);
        // The tail pages went straight back to the page allocator.
        expect(this.heap.stats(o.owner).freeMemory - ownerBefore.freeMemory).toBe(o.usable - usable);
        if (usable < o.usable) {
          this.cov.inPlaceLargeShrinks++;
          this.freed.push(o.ptr + usable); // the cut-off tail is no object (unless reused)
        }
      } else {
        expect(usable).toBe(o.usable);
        expect(this.heap.stats(o.owner).freeMemory).toBe(ownerBefore.freeMemory);
        this.cov.inPlaceSmall++;
      }
      expect(this.heap.stats(o.owner).mallocs).toBe(ownerBefore.mallocs);
      o.usable = usable;
      this.verifyPattern(o, keep);
      o.req = newReq;
      this.writePattern(o);
      this.reconcile(o.owner, false);
      return;
    }
    expect(p, `realloc(${o.ptr}, ${newReq}) moves`).not.toBe(o.ptr);
    expect(this.heap.ownerOf(p), "realloc's new object belongs to the calling shard").toBe(t);
    this.removeLive(o);
    if (cross) {
      this.pending[o.owner]!.push(o); // the old object went to its owner's inbox
      expect(this.heap.stats(t).crossShardFrees).toBe(callerBefore.crossShardFrees + 1);
      this.cov.crossReallocs++;
    } else {
      this.freed.push(o.ptr);
    }
    this.cov.reallocMoves++;
    const moved: Obj = {
      id: o.id,
      ptr: p,
      owner: t,
      req: newReq,
      usable: this.heap.shard(t).objectSize(p),
      align: 8,
      large: newReq > MAX_SMALL_SIZE,
    };
    expect(moved.usable).toBe(moved.large ? pagesFor(newReq) * PAGE_SIZE : classFor(newReq));
    this.verifyPattern(moved, keep); // contents preserved up to min(old, new)
    this.live.push(moved);
    this.reconcile(t, true);
    if (cross) this.reconcile(o.owner, false);
    this.expectNoOverlap(moved);
    this.writePattern(moved);
  }

  // ------------------------------------------------------------ dispatch

  run(op: Op): void {
    this.cov.ops++;
    this.heap = this.views[this.opCount++ % 2]!;
    switch (op.k) {
      case "malloc":
        this.allocate(op.shard, { kind: "malloc", size: op.size });
        break;
      case "aligned":
        this.allocate(op.shard, { kind: "aligned", size: op.size, align: 2 ** op.alignLog });
        break;
      case "free": {
        const o = this.pick(this.live, op.pick);
        if (o) this.freeLocal(o);
        break;
      }
      case "freeSized": {
        const o = this.pick(this.live, op.pick);
        if (o) this.freeLocal(o, [o.req, o.usable, 0, o.req >>> 1][op.how]!);
        break;
      }
      case "realloc": {
        const large = this.live.filter((x) => x.large);
        const o = this.pick(op.large && large.length > 0 ? large : this.live, op.pick);
        if (!o) break;
        const size = op.rel === null ? op.size : Math.floor(o.req * op.rel) + op.delta;
        this.realloc(o, Math.min(LARGEST_OBJECT, Math.max(0, size)), op.cross);
        break;
      }
      case "reallocNull": {
        // realloc(0, n) is malloc(n).
        const s = op.shard;
        const before = this.heap.stats(s);
        let p: number;
        try {
          p = this.heap.shard(s).realloc(0, op.size);
        } catch (e) {
          this.afterOom(s, e, before, op.size, 8);
          this.checkInvariants(true);
          break;
        }
        this.adopt(s, p, { kind: "malloc", size: op.size });
        break;
      }
      case "objectSize": {
        const o = this.pick(this.live, op.pick);
        if (o) expect(this.heap.shard(op.via).objectSize(o.ptr)).toBe(o.usable);
        break;
      }
      case "crossFree": {
        const o = this.pick(this.live, op.pick);
        if (o) this.crossFree(o, op.sized);
        break;
      }
      case "drain":
        this.drain(op.shard);
        break;
      case "trim":
        this.trim(op.shard);
        break;
      case "profile":
        this.profile(op.shard, op.rate, op.seed);
        break;
      case "burst": {
        const made: Obj[] = [];
        for (let i = 0; i < op.count; i++) {
          const o = this.allocate(op.shard, { kind: "malloc", size: op.size });
          if (o) made.push(o);
        }
        // Some may have been freed to make room after an OutOfMemoryError.
        const rank = (o: Obj): number => (Math.imul(o.id, 0x9e3779b1) ^ op.order) >>> 0;
        const victims = made.filter((o) => this.live.includes(o)).sort((a, b) => rank(a) - rank(b));
        for (const o of victims.slice(0, Math.ceil(victims.length * op.freeFraction))) {
          if (op.cross) this.crossFree(o, false);
          else this.freeLocal(o);
        }
        if (op.cross) this.drain(op.shard);
        break;
      }
    }
  }

  /** Free everything, drain, trim: every shard must be all-free again. */
  finish(): void {
    for (const o of this.live) this.verifyPattern(o);
    for (const o of [...this.live]) this.freeLocal(o);
    for (let s = 0; s < SHARDS; s++) this.drain(s);
    for (let s = 0; s < SHARDS; s++) {
      const a = this.heap.shard(s);
      const before = a.stats().freeMemory;
      expect(a.trim()).toBe(a.stats().freeMemory - before);
      const st = a.stats();
      expect(st.liveObjects, `shard ${s} liveObjects at the end`).toBe(0);
      expect(st.freeMemory, `shard ${s} freeMemory after free all + trim`).toBe(this.initial[s]!.freeMemory);
      expect(st.freeMemory).toBe(st.totalMemory);
      // Nothing is left behind: the whole shard is one free span, allocatable as one object.
      expect(this.heap.largestFreeSpan(s)).toBe(st.totalMemory);
      const p = a.malloc(st.totalMemory);
      expect(a.objectSize(p)).toBe(st.totalMemory);
      a.free(p);
      expect(a.stats().freeMemory).toBe(st.totalMemory);
    }
    expectHealthy(this.heap);
  }
}

// ---------------------------------------------------------------------------

/**
 * A passing run takes a few seconds. A failing one shrinks, which can take
 * minutes on long operation lists: stop after this long and report the
 * smallest counterexample found so far.
 */
const TIME_LIMIT_MS = 40_000;
/** SHARDHEAP_TEST_VERBOSE=1 prints how often each interesting path was taken. */
export const VERBOSE = Boolean(process.env.SHARDHEAP_TEST_VERBOSE);
export const plugins = [fc.interruptAfterTimeLimit(TIME_LIMIT_MS, { failOnInterrupt: true })];
