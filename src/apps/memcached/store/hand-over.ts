/**
 * The hand-over of replaced items between shards. Every shard writes the
 * one index (the connection's shard: its memory, its LRU), so a set on
 * shard B may replace, and a delete remove, an item that lives in shard
 * A's memory and on A's LRU order, which only A's thread writes. B takes
 * the entry out of the map with exchange / take / takeEntry, which hand
 * it the map's reference to the old entry instead of dropping it (the
 * item stays alive, its links in A's list still right), and pushes that
 * reference onto A's inbox; A takes the whole inbox at once and, for each
 * item, takes it off its list, undoes its counts and releases the
 * reference (the map frees the item once readers let go): item-cache.ts
 * drain. Exactly one writer takes an entry out of the map (the segment's
 * lock), so an item leaves its shard's list exactly once: by its own
 * shard when that shard unlinked it, by the drain when another did.
 *
 * The inbox is a lock-free stack, as cross-shard frees are handed back
 * (memory/cross-shard.ts, Seastar's free_cross_cpu): one head word per
 * shard, in a SharedArrayBuffer of its own, a cache line apart; the link
 * is the item's handoff word (item.ts). A push writes the old head into
 * the item's word, then compareExchange(head, old, ref), again from the
 * head it saw until it wins; the owner takes all with one exchange(head,
 * 0), so there is no single pop and no ABA. The item's word is written
 * before the compareExchange that publishes it and read after the
 * exchange that took it (sequentially consistent atomics: the owner sees
 * it). Only the owner pops; only the pusher that took the entry out of
 * the map writes the item's word, once.
 *
 * When the owner drains (item-cache.ts): before it allocates (so its
 * budget counts only what is still its), before it evicts or flushes, when
 * `stats` asks every shard to (so the counts a client reads after its
 * writes count them), and on a timer that backs off while the inbox stays
 * empty (an idle shard still gives the memory back). A push needs no
 * message: at 10% sets of 64 B keys and 1 KiB values spread over two
 * shards, half the replaces cross.
 */

/** Words between two shards' heads: a cache line each. */
const STRIDE = 16;

/** The inboxes' buffer for `shards` shards (server.ts makes it; every shard is given it). */
export function createInboxes(shards: number): SharedArrayBuffer {
  return new SharedArrayBuffer(4 * STRIDE * shards);
}

/** What an inbox links items by: their handoff words. */
export interface HandoffLinks {
  handoff(ptr: number): number;
  setHandoff(ptr: number, ref: number): void;
}

export class HandOver {
  private readonly heads: Int32Array;
  /** This shard's head word. */
  private readonly mine: number;
  private readonly links: HandoffLinks;

  constructor(inboxes: SharedArrayBuffer, shard: number, links: HandoffLinks) {
    this.heads = new Int32Array(inboxes);
    this.mine = shard * STRIDE;
    this.links = links;
  }

  /** Hand the entry `ref` (the map's counted reference, now the caller's to give), item at `ptr`, to shard `owner`. */
  push(owner: number, ref: number, ptr: number): void {
    const heads = this.heads;
    const at = owner * STRIDE;
    let head = Atomics.load(heads, at);
    for (;;) {
      this.links.setHandoff(ptr, head);
      const seen = Atomics.compareExchange(heads, at, head, ref);
      if (seen === head) return;
      head = seen;
    }
  }

  /** Whether this shard's inbox holds anything (one load). */
  get waiting(): boolean {
    return Atomics.load(this.heads, this.mine) !== 0;
  }

  /** Take this shard's whole inbox: the newest entry's reference (0: empty); each item's handoff word names the next. */
  takeAll(): number {
    return Atomics.exchange(this.heads, this.mine, 0);
  }
}
