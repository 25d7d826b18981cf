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
 * linked), not heap addresses: an item's own reference is then the link
 * that names it (its newer neighbour's older, or the head), so it needs no
 * word of its own (ownRef), and a later inbox of items handed over by
 * other writers would name them as the list does (below).
 *
 * It replaced a JS Map used as a queue (insertion order; eviction took the
 * first and deleted it): V8 keeps a deleted entry as a hole until it
 * rebuilds the table, so every walk from the front passed the items
 * removed since, 12 us an operation at 10,000 entries and 51-54 us at
 * 100,000-200,000.
 *
 * Other writers, later: once other shards write into the map directly (an
 * item in the writer's memory, on the list of the writer's shard), a
 * writer on shard B replacing or deleting a key whose old item lives in
 * this shard's memory cannot take that item off this list: only this shard
 * writes it. B replaces with the map's exchange (take, for a delete:
 * shared-map/writer.ts), which hands it the map's reference to the old
 * entry instead of dropping it, so the item stays alive, and pushes that
 * reference onto this shard's inbox: a lock-free stack through the item's
 * handoff word (item.ts; push by compareExchange on the inbox's head word,
 * taken whole with one exchange, as cross-shard.ts hands frees over: no
 * single pop, so no ABA), which this shard drains before it evicts or
 * reclaims: each item off the list (its links are still right: only this
 * shard moves them), its counts undone, the reference released, the memory
 * freed once readers let go. This shard's own eviction then takes an entry
 * out with takeEntry, which answers 0 when B took it first: the item stays
 * on the list for the drain. The links are map references, not addresses,
 * so the inbox and the list name items alike; a key's entry found in the
 * map may then be another shard's item, on its list (ownRef holds for this
 * shard's items only).
 *
 * Invariants (check): from the head, following older, every item is met
 * once and the walk ends at the tail; each item's newer names the one
 * before it (0 for the head); the list holds `size` items. Written by the
 * owner's thread only; readers on other shards never read these words.
 */
import type { SharedMap } from "../../memory/shared-map/shared-map.js";
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

  /** The reference of the item at `ptr`, which must be in the list: the link that names it. */
  ownRef(ptr: number): number {
    const newer = this.v.newer(ptr);
    return newer === 0 ? this.head : this.v.older(this.map.valuePointer(newer));
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
