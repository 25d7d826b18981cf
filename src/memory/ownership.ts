/**
 * Which thread owns a shard: the header's owner word (S_OWNER), the rule
 * that keeps the share-nothing design honest across threads.
 *
 * A shard's allocator state (free lists, page records, counters, the live
 * bits) has one writer, the thread that owns the shard; other threads only
 * read it, and touch nothing but the inbox and pending bits, with Atomics.
 * A second thread writing that state would corrupt it (the main thread
 * calling smp.heap.shard(0).malloc while shard 0 ran handed out the heap's
 * magic number as a pointer). So the buffer records the owner: the thread
 * that first takes the shard with heap.shard(id) (compareExchange from 0),
 * or its Smp worker (adopt). Every other thread gets an allocator that
 * reads but throws HeapOwnershipError instead of writing.
 *
 * The word holds the worker_threads threadId + 1 (the main thread is 1),
 * 0 while no thread owns the shard.
 */
import { threadId } from "node:worker_threads";
import { S_OWNER } from "./layout.js";
import type { ShardRegion } from "./region.js";

/** This thread's owner token. */
export const THIS_THREAD = threadId + 1;

/** The owner token of shard `r` (0: none). */
export function ownerToken(r: ShardRegion): number {
  return Atomics.load(r.i32, r.hdr + S_OWNER);
}

/** Whether the thread whose owner token is `token` owns one of `regions` (a thread that owns none is gone, or never wrote). */
export function ownsAShard(regions: readonly ShardRegion[], token: number): boolean {
  for (const r of regions) if (ownerToken(r) === token) return true;
  return false;
}

/** Take shard `r` for this thread if no thread owns it. True when this thread owns it now. */
export function takeShard(r: ShardRegion): boolean {
  const seen = Atomics.compareExchange(r.i32, r.hdr + S_OWNER, 0, THIS_THREAD);
  return seen === 0 || seen === THIS_THREAD;
}

/**
 * Make this thread the owner whoever owned it before: only for a runtime
 * that knows the previous owner has stopped or died (Smp's shard threads,
 * Smp.stop), never to take a shard from a running thread.
 */
export function adoptShard(r: ShardRegion): void {
  Atomics.store(r.i32, r.hdr + S_OWNER, THIS_THREAD);
}

/** Give shard `r` up if this thread owns it (so another thread may take it). */
export function releaseShard(r: ShardRegion): void {
  Atomics.compareExchange(r.i32, r.hdr + S_OWNER, THIS_THREAD, 0);
}

/** Who a token names, for messages. */
export function describeOwner(token: number): string {
  if (token === 0) return "no thread";
  if (token === 1) return "the main thread";
  return `worker thread ${token - 1}`;
}

/** The message of a HeapOwnershipError for `op` on shard `r` from this thread. */
export function ownershipMessage(r: ShardRegion, op: string): string {
  const owner = ownerToken(r);
  const now =
    owner === 0
      ? "no thread owns it now (call heap.shard(" + r.id + ") again to take it)"
      : `it belongs to ${describeOwner(owner)}`;
  return (
    `${op} on shard ${r.id} from ${describeOwner(THIS_THREAD)}: ${now}. ` +
    "A shard's state changes only on the thread that owns it: allocate there (with Smp, submitTo the shard, or smp.memory on the thread that started it, when it has the main thread's shard); " +
    "heap.free(ptr) frees from any thread, and stats, heapProfile, diagnostics and check read from any thread."
  );
}
