/**
 * The cross-shard inbox (Seastar's free_cross_cpu /
 * drain_cross_cpu_freelist): a lock-free LIFO of objects other shards freed,
 * one Uint32 head word per shard.
 *
 * Push (any thread): claim the object's pending bit with Atomics.or (a
 * second free of the same object sees the bit and is rejected, so an object
 * is never on a list twice), write the current head into the object's
 * first 4 bytes, and publish it with compareExchange; retry if the head
 * moved.
 * Take (the owner only): Atomics.exchange(head, 0) takes the whole list at
 * once. There is no single-node pop, so there is no ABA problem: a pushed
 * node cannot be freed and pushed again before the owner has taken it.
 * A push onto an empty inbox rings the doorbell (Atomics.notify) so an idle
 * owner wakes and drains; pushes onto a non-empty inbox need not, the
 * owner has been rung already and will take them with the rest.
 */
import type { ShardRegion } from "./region.js";

/**
 * Push `ptr` (already validated live in `owner`, pending bit already
 * claimed) onto the owner's inbox. Returns true when the inbox was empty
 * and the doorbell was rung.
 */
export function pushInbox(owner: ShardRegion, ptr: number): boolean {
  return pushInboxChain(owner, ptr, ptr);
}

/**
 * Push a chain of objects already linked through their first words
 * (head ... tail) with one compareExchange: how batched remote frees
 * arrive. Returns true when the inbox was empty and the doorbell was rung.
 */
export function pushInboxChain(owner: ShardRegion, head: number, tail: number): boolean {
  const u32 = owner.u32;
  const inbox = owner.inbox;
  const link = tail >>> 2;
  let old = Atomics.load(u32, inbox);
  for (;;) {
    u32[link] = old;
    const seen = Atomics.compareExchange(u32, inbox, old, head);
    if (seen === old) break;
    old = seen;
  }
  if (old === 0) {
    Atomics.add(owner.i32, owner.doorbell, 1);
    Atomics.notify(owner.i32, owner.doorbell);
    return true;
  }
  return false;
}

/**
 * Claim the right to free `ptr` remotely: sets its pending bit. Returns
 * false when the bit was already set (the object is already being freed).
 */
export function claimPendingFree(owner: ShardRegion, ptr: number): boolean {
  const bit = owner.liveBit(ptr);
  const old = Atomics.or(owner.i32, owner.pendingWord(ptr), bit);
  return (old & bit) === 0;
}

/** Owner side: take the whole inbox. Returns the first object (0 when empty). */
export function takeInbox(owner: ShardRegion): number {
  if (Atomics.load(owner.u32, owner.inbox) === 0) return 0;
  return Atomics.exchange(owner.u32, owner.inbox, 0);
}

/** The next object after `ptr` in a list taken from the inbox. */
export function inboxNext(owner: ShardRegion, ptr: number): number {
  return owner.u32[ptr >>> 2]!;
}
