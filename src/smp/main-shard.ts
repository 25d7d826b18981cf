/**
 * The main thread's own shard (Smp.start's `mainShard`): one
 * more region of the heap, after the workers' (its id is `shards`, which
 * is also the main thread's endpoint id in the messaging buffer), owned by
 * the thread that called Smp.start. That thread allocates there directly
 * (smp.memory) instead of asking a shard for every object, a task round
 * trip each.
 *
 * What this file owns, the main-thread side of shard-worker.ts's region
 * duties:
 *   1. take the region before any worker thread exists (so no module's
 *      top-level code can take it first: heap.shard(id) on another thread
 *      reads and throws HeapOwnershipError on anything that writes);
 *   2. apply the start-up profiling rate, as every shard does (--heapprof);
 *   3. drain its inbox, where shards push their frees of its objects:
 *      when the doorbell rings (doorbell.ts, the same word and loop the
 *      workers use), on the allocator's own slow paths, and once more when
 *      Smp.stop() ends (finish()), so the region then holds what the user
 *      left live.
 * Not here: tasks (no task runs on the main thread: submitTo(shards) stays
 * a RangeError), idle trimming (a worker knows when it is idle between
 * calls; the main thread does not, and smp.memory.trim() is the user's),
 * batching of this thread's remote frees (off, as on any thread outside
 * Smp: a free of a shard's object is in its inbox when free returns).
 *
 * The doorbell wait holds nothing open: Atomics.waitAsync is no handle of
 * the event loop (Node 20: a script whose only pending work is a
 * waitAsync exits at once; measured), so a program that stops its Smp, or
 * forgets to, exits as it did without the option. A ring from a worker
 * still wakes an idle loop (V8 posts the resolution as a task, which wakes
 * it: a notify 200 ms into a 1 s timer was seen at 200 ms, not at 1 s).
 */
import { HeapOwnershipError } from "../errors.js";
import type { SharedHeap } from "../memory/shared-heap.js";
import type { ShardAllocator } from "../memory/shard-allocator.js";
import { watchDoorbell, type DoorbellWatch } from "./doorbell.js";

export class MainShard {
  /** The region's allocator, owned by this thread. */
  readonly memory: ShardAllocator;
  private doorbell: DoorbellWatch | undefined;

  /**
   * Take region `id` of `heap` for this thread and profile it at
   * `heapprofRate` (0 off). Call before any thread that could take it
   * starts; the heap is fresh, so nobody owns it yet.
   */
  constructor(heap: SharedHeap, id: number, heapprofRate: number) {
    this.memory = heap.shard(id);
    if (!this.memory.owned) throw new HeapOwnershipError(`shard ${id}: the main thread's region is owned by another thread`, id);
    if (heapprofRate > 0) this.memory.setHeapProfilingSampleRate(heapprofRate);
  }

  get id(): number {
    return this.memory.id;
  }

  /** Start draining when the doorbell rings (once the runtime has started). */
  watch(): void {
    this.doorbell ??= watchDoorbell(this.memory.i32, this.memory.doorbell, () => this.memory.drainCrossShardFrees());
  }

  /**
   * Smp.stop's last step, once no other thread runs: stop watching and
   * drain what was pushed since the last ring. Returns the objects freed.
   * The allocator stays this thread's and usable.
   */
  finish(): number {
    this.doorbell?.stop();
    this.doorbell = undefined;
    return this.memory.drainCrossShardFrees();
  }
}
