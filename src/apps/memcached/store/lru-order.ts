/**
 * The LRU order of one shard's items: an intrusive doubly linked list
 * through two words of each item's header (item.ts newer / older), newest
 * at the head, so that linking, unlinking and moving an item cost O(1)
 * whatever the cache holds, as memcached's items.c keeps its LRU. The
 * item cache (item-cache.ts) decides what joins, leaves and moves; this
 * file only keeps the links right.
 *
 * The links are the map's references to the neighbours (the entry's
 * counted reference that reserve gave and the map keeps while the entry is
 * linked), not heap addresses: the inbox of items other shards handed
 * back (hand-over.ts) names them as the list does, and the map's
 * takeEntry, given the tail's link, takes that very entry out.
 *
 * It replaced a JS Map used as a queue (insertion order; eviction took the
 * first and deleted it): V8 keeps a deleted entry as a hole until it
 * rebuilds the table, so every walk from the front passed the items
 * removed since, 12 us an operation at 10,000 entries and 51-54 us at
 * 100,000-200,000: a full --smp 1 server under memcaslap's half sets
 * (64 B keys, 1 KiB values, 256 MiB) spent 17% of its time in eviction and
 * 13% in the expired-tail look, and fell from 51k requests/s filling to
 * 12k at 171,000 items.
 *
 * Other writers: every shard writes the index, and an item stays on the
 * list of the shard whose memory holds it whoever replaces or deletes it.
 * A writer on another shard cannot take the item off this list (only this
 * shard writes it): it takes the entry out of the map keeping the map's
 * reference, and hands it over (hand-over.ts); this shard drains its
 * inbox and takes each item off the list then (item-cache.ts drain). Until
 * then the item is out of the map but still linked here, its links right
 * (only this shard moves them), its memory held by that reference.
 *
 * Invariants (check): from the head, following older, every item is met
 * once and the walk ends at the tail; each item's newer names the one
 * before it (0 for the head); the list holds `size` items. Written by the
 * owner's thread only; readers on other shards never read these words.
 */
import type { SharedMap } from "../../../memory/shared-map/shared-map.js";
import type { ItemViews } from "./item.js";

export class LruOrder {
  /** The newest item's reference (0: empty). */
  head = 0;
  /** The oldest item's reference, which eviction looks at first (0: empty). */
  tail = 0;
  /** Items in the list. */
  size = 0;
  private readonly v: ItemViews;
  private readonly map: SharedMap;

  constructor(views: ItemViews, map: SharedMap) {
    this.v = views;
    this.map = map;
  }

  /** Add the item at `ptr` (the entry `ref`) at the head. */
  push(ref: number, ptr: number): void {
    this.attach(ref, ptr);
    this.size++;
  }

  /** Take the item at `ptr` out. */
  remove(ptr: number): void {
    this.detach(ptr);
    this.size--;
  }

  /** Move the item at `ptr` (the entry `ref`) to the head. */
  toHead(ref: number, ptr: number): void {
    this.detach(ptr);
    this.attach(ref, ptr);
  }

  private attach(ref: number, ptr: number): void {
    const v = this.v;
    v.setNewer(ptr, 0);
    v.setOlder(ptr, this.head);
    if (this.head === 0) this.tail = ref;
    else v.setNewer(this.map.valuePointer(this.head), ref);
    this.head = ref;
  }

  private detach(ptr: number): void {
    const v = this.v;
    const newer = v.newer(ptr);
    const older = v.older(ptr);
    if (newer === 0) this.head = older;
    else v.setOlder(this.map.valuePointer(newer), older);
    if (older === 0) this.tail = newer;
    else v.setNewer(this.map.valuePointer(older), newer);
  }

  /**
   * The invariants as sentences, [] when they hold; `each` is called with
   * every item's reference and address from the head (at most size + 1,
   * so a cycle ends the walk).
   */
  check(each: (ref: number, ptr: number) => void): string[] {
    const v = this.v;
    const problems: string[] = [];
    let n = 0;
    let newer = 0;
    for (let ref = this.head; ref !== 0 && n <= this.size; n++) {
      const ptr = this.map.valuePointer(ref);
      if (v.newer(ptr) !== newer) problems.push(`item ${n} from the head names ${v.newer(ptr)} as newer, not ${newer}`);
      each(ref, ptr);
      newer = ref;
      ref = v.older(ptr);
    }
    if (newer !== this.tail) problems.push(`the walk from the head ends at ${newer}, the tail is ${this.tail}`);
    if (n !== this.size) problems.push(`the walk from the head meets ${n} items, the list counts ${this.size}`);
    return problems;
  }
}
