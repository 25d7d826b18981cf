/**
 * Frees that cross shards (Seastar's free_cross_cpu /
 * drain_cross_cpu_freelist): who may free an object, the inbox every shard
 * drains, and the outbox a sending shard batches into.
 *
 * Claims: exactly one free of an object wins
 * ------------------------------------------
 * Each object start has a live bit (written only by the owner, plain
 * stores) and a pending bit in the word beside it (written by any thread,
 * only with Atomics). Whoever sets the pending bit with Atomics.or and sees
 * it was clear has claimed the object: that free wins, every other free of
 * it sees the bit set and throws. Both sides claim, the owner included:
 *
 *   owner's free:  live? -> Atomics.or(pending) was clear? -> clear live,
 *                  keep the object on the pool's claimed list, bit still set
 *   remote free:   live? -> Atomics.or(pending) was clear? -> live still?
 *                  -> link it and push it (inbox or outbox); if it is no
 *                  longer live, the owner freed it first: take the bit back
 *                  (Atomics.and) and throw
 *
 * Two frees started together therefore always meet in one read-modify-write
 * of one word, and exactly one of them wins: the earlier plain checks of
 * the live bit were racy, and a protocol that kept them (the owner read
 * the pending bit, then cleared the live bit, with plain accesses) let both
 * succeed in 7.8% of 600k races. One atomic is the least a free can make:
 * deciding between two threads that never wait for each other takes a
 * read-modify-write on each side (plain loads and stores cannot decide
 * it), and the bit it sets must be cleared before the object is handed out
 * again: a malloc/free pair that reuses one object makes two. Batching the
 * clears (a claimed list settled one Atomics.and per bitmap word) measured
 * no faster: the walk over the list cost what the atomics saved (~33 ns a
 * pair either way, against ~13 ns with neither).
 *
 * Who clears a set pending bit (each set bit has exactly one):
 *   - the remote that set it and then found the object dead clears it at
 *     once (its back-off above);
 *   - otherwise the owner: malloc, when it hands the object out again from
 *     the pool's claimed list (one atomic and); settleClaims, when trimming
 *     sends claimed objects back to their spans (one per bitmap word); or
 *     free itself, at once, for a page-span object.
 * The owner never clears a bit it did not set or take from the inbox, so a
 * remote's transient bit can never be wiped out from under it.
 *
 * The inbox: a lock-free LIFO per shard, one Uint32 head word. Push (any
 * thread) links the object (its first 4 bytes; only after the claim, so a
 * losing free never writes into the object) and publishes with
 * compareExchange, retrying if the head moved. Take (the owner only)
 * swaps the head for 0 with one Atomics.exchange: there is no single-node
 * pop, so there is no ABA problem. A push onto an empty inbox rings the
 * doorbell (Atomics.notify) so an idle owner wakes and drains.
 *
 * The outbox: a shard freeing another shard's objects links them into one
 * chain per destination and pushes the chain with one compareExchange when
 * CROSS_SHARD_BATCH are waiting, or at the latest in a microtask (so a free
 * is never held past the current turn of the event loop). The chains live
 * in the sender's header (S_OUTBOX: one head word per destination; the
 * head object's second word holds the chain's tail), so a thread that dies
 * holding a batch loses nothing: whoever takes the shard over next pushes
 * what it finds there (flushOutbox).
 */
import { HeapError } from "../errors.js";
import { BITMAP_WORDS_PER_PAGE } from "./layout.js";
import type { ShardRegion } from "./region.js";

/**
 * Remote frees per chain: snmalloc batches per destination the same way;
 * chains of 16+ halved the per-item cost of a bare list between two
 * threads (58 -> 28 ns), measured when batching was added.
 */
export const CROSS_SHARD_BATCH = 32;

/**
 * Claim `ptr` (in `owner`'s region, 8-aligned) for a free that cannot be
 * sure the object is still live: a free from a thread that is not its
 * owner, or the owner's realloc after the allocation it made first (that
 * allocation may drain the inbox, where a remote free of `ptr` may wait).
 * True: this free won; the object is this caller's to hand over. False:
 * the object is not live, or another free claimed it first; nothing
 * changed (the caller's slow path then says which).
 */
export function claimLive(owner: ShardRegion, ptr: number): boolean {
  const i32 = owner.i32;
  const rel = ptr - owner.dataStart;
  const w = owner.bitmap + ((rel >>> 8) << 1);
  const bit = 1 << ((rel >>> 3) & 31);
  if ((i32[w]! & bit) === 0) return false;
  if ((owner.atomicOr((w + 1) << 2, bit) & bit) !== 0) return false;
  // The read-modify-write above orders this load after every owner's free
  // that claimed before us: if the owner freed the object meanwhile, its
  // live bit is clear now, and the bit we set is ours to take back.
  if ((i32[w]! & bit) === 0) {
    owner.atomics.and((w + 1) << 2, ~bit);
    return false;
  }
  return true;
}

/**
 * Push a chain of claimed objects of `owner`, linked through their first
 * words (head ... tail), onto its inbox with one compareExchange. Returns
 * true when the inbox was empty and the doorbell was rung.
 */
export function pushInboxChain(owner: ShardRegion, head: number, tail: number): boolean {
  const address = owner.inbox << 2;
  const link = tail >>> 2;
  // Words as signed 32-bit values throughout, as the atomics return them;
  // the plain first read is only a guess that the compareExchange checks.
  let old = owner.i32[owner.inbox]!;
  for (;;) {
    owner.i32[link] = old;
    const seen = owner.atomics.compareExchange(address, old, head);
    if (seen === old) break;
    old = seen;
  }
  if (old === 0) ringDoorbell(owner);
  return old === 0;
}

/** Push one claimed object of `owner` onto its inbox. */
export function pushInbox(owner: ShardRegion, ptr: number): boolean {
  return pushInboxChain(owner, ptr, ptr);
}

function ringDoorbell(owner: ShardRegion): void {
  Atomics.add(owner.i32, owner.doorbell, 1);
  Atomics.notify(owner.i32, owner.doorbell);
}

/** Owner side: take the whole inbox. Returns the first object (0 when empty). */
export function takeInbox(owner: ShardRegion): number {
  // A plain read first: the slow paths look here on every refill, and an
  // Atomics.load costs ~120 instructions. A push it misses rang (or will
  // ring) the doorbell, and the next drain takes it.
  if (owner.i32[owner.inbox] === 0) return 0;
  return owner.atomics.exchange(owner.inbox << 2, 0) >>> 0;
}

/** The next object after `ptr` in a chain (inbox or outbox). */
export function chainNext(r: ShardRegion, ptr: number): number {
  return r.u32[ptr >>> 2]!;
}

/**
 * Visit every object in every chain of a quiescent heap (check, recovery):
 * each shard's inbox, and each shard's outbox chain for each destination.
 * `where` names the chain. A link that leaves its region, or a chain longer
 * than its region could hold, calls `corrupt` and ends that chain's walk.
 */
export function forEachChained(
  regions: readonly ShardRegion[],
  visit: (owner: ShardRegion, ptr: number, where: string) => void,
  corrupt: (owner: ShardRegion, ptr: number, where: string) => void,
): void {
  const walk = (owner: ShardRegion, first: number, where: string): void => {
    const most = owner.dataBytes / 8;
    let n = 0;
    for (let p = first; p !== 0; p = chainNext(owner, p)) {
      if (!owner.contains(p) || p % 8 !== 0 || ++n > most) return corrupt(owner, p, where);
      visit(owner, p, where);
    }
  };
  for (const owner of regions) walk(owner, Atomics.load(owner.u32, owner.inbox), "cross-shard inbox");
  for (const sender of regions) {
    for (const owner of regions) walk(owner, outboxHead(sender, owner.id), `shard ${sender.id}'s outbox`);
  }
}

/**
 * Push every object that is claimed (live and pending) but sits in no
 * chain onto its owner's inbox: the frees of threads terminated between
 * claiming an object and chaining it (V8 can end a thread at any function
 * entry). Only for a heap no thread is using (Smp.stop, after its threads
 * are gone): a running thread's free between its claim and its chain looks
 * the same. Returns the number recovered. Cost: one pass over the bitmaps.
 */
export function recoverLostFrees(regions: readonly ShardRegion[]): number {
  const chained = new Set<number>();
  forEachChained(regions, (_owner, p) => chained.add(p), (owner, p, where) => {
    throw new HeapError(`shard ${owner.id}: ${where} is corrupt at ${p}; nothing recovered`);
  });
  let recovered = 0;
  for (const r of regions) {
    const words = r.dataPages * BITMAP_WORDS_PER_PAGE;
    for (let w = 0; w < words; w += 2) {
      let bits = r.i32[r.bitmap + w]! & Atomics.load(r.i32, r.bitmap + w + 1);
      while (bits !== 0) {
        const k = 31 - Math.clz32(bits);
        bits &= ~(1 << k);
        const ptr = r.dataStart + ((w >>> 1) * 32 + k) * 8;
        if (chained.has(ptr)) continue;
        pushInbox(r, ptr);
        recovered++;
      }
    }
  }
  return recovered;
}

/** Head of the chain `sender` holds for shard `destination` (0: none). */
export function outboxHead(sender: ShardRegion, destination: number): number {
  return Atomics.load(sender.u32, sender.outboxSlots + destination);
}

/**
 * A sending shard's outbox: claimed objects of other shards, chained per
 * destination in the sender's header until they are pushed. Only the thread
 * owning the sender uses it; the counts are that thread's own (the chains
 * in the buffer are the truth, the counts only decide when to push).
 */
export class Outbox {
  private readonly counts: Int32Array;
  private flushQueued = false;
  private readonly flushSoon = (): void => {
    this.flushQueued = false;
    this.flush();
  };

  constructor(
    private readonly sender: ShardRegion,
    private readonly regions: readonly ShardRegion[],
  ) {
    this.counts = new Int32Array(regions.length);
  }

  /** Add claimed object `ptr` of shard `owner` to its chain; push the chain when it is full. */
  add(owner: ShardRegion, ptr: number): void {
    const u32 = this.sender.u32;
    const slot = this.sender.outboxSlots + owner.id;
    const head = u32[slot]!;
    const n = this.counts[owner.id]!;
    if (head === 0) {
      u32[ptr >>> 2] = 0;
      u32[(ptr >>> 2) + 1] = ptr; // a chain of one: its own tail
      if (!this.flushQueued) {
        this.flushQueued = true;
        queueMicrotask(this.flushSoon);
      }
    } else {
      u32[ptr >>> 2] = head;
      u32[(ptr >>> 2) + 1] = u32[(head >>> 2) + 1]!; // the tail moves to the new head
    }
    // A plain store: only this thread reads the slot while it lives, and a
    // thread that takes the shard over reads it after this one has ended.
    u32[slot] = ptr;
    this.counts[owner.id] = n + 1;
    if (n + 1 >= CROSS_SHARD_BATCH) this.push(owner.id);
  }

  /** Push every waiting chain now. Returns how many objects were pushed (counted by this thread). */
  flush(): number {
    let pushed = 0;
    for (let s = 0; s < this.regions.length; s++) {
      if (this.counts[s] === 0) continue;
      pushed += this.counts[s]!;
      this.push(s);
    }
    return pushed;
  }

  private push(destination: number): void {
    this.counts[destination] = 0;
    pushOutboxChain(this.sender, this.regions[destination]!);
  }
}

/**
 * Push `sender`'s chain for `destination`, if any. The header slot is
 * cleared before the push, not after: a thread terminated in between
 * leaves the chain claimed and in no list, which recoverLostFrees finds
 * (it pushes each object once); the other order could leave a pushed chain
 * still listed, and a second push would corrupt the inbox.
 */
export function pushOutboxChain(sender: ShardRegion, destination: ShardRegion): void {
  const u32 = sender.u32;
  const slot = sender.outboxSlots + destination.id;
  const head = u32[slot]!;
  if (head === 0) return;
  const tail = u32[(head >>> 2) + 1]!;
  u32[slot] = 0;
  pushInboxChain(destination, head, tail);
}

/**
 * Push every chain a shard's outbox holds (a shard being taken over from a
 * thread that stopped or died). Returns the number of chains pushed.
 */
export function flushOutbox(sender: ShardRegion, regions: readonly ShardRegion[]): number {
  let chains = 0;
  for (const destination of regions) {
    if (outboxHead(sender, destination.id) === 0) continue;
    pushOutboxChain(sender, destination);
    chains++;
  }
  return chains;
}
