/**
 * What flush_all leaves behind for memcached's counters. memcached leaves
 * flushed items in place and finds them lazily: a get of one counts in
 * get_flushed, and a new item that reuses one's memory counts it as
 * reclaimed (and expired_unfetched if no hit had fetched it). Here
 * flush_all unlinks every item at once, so the memory comes back at once
 * (item-cache.ts flushNow), and this remembers what those counts need:
 * the keys, up to MAX_FLUSHED_KEYS, until a request for the key or the
 * next flush; and, oldest first, whether each item had been fetched, for
 * the next links to count as they reuse them (t/issue_183.t).
 */
import { STAT } from "../stats/stats.js";

/**
 * Keys kept: a get on another shard asks the owner about a miss only
 * while some are (STAT.flushed_kept), so a bound keeps both the memory
 * and those messages in check.
 */
const MAX_FLUSHED_KEYS = 1 << 16;

export class FlushedItems {
  private readonly c: Float64Array;
  /** Keys the last flush_all removed, not asked for since. */
  private keys = new Set<string>();
  /** Items the last flush_all removed that the next links count as reclaimed. */
  private reusable = 0;
  /** Whether each of those had been fetched, oldest first, the order the next links reuse them in. */
  private fetched = new Uint8Array(0);
  /** The flush being recorded: its keys, fetched bits, and how many so far. */
  private nextKeys = new Set<string>();
  private nextFetched = new Uint8Array(0);
  private recorded = 0;

  /** `counters`: the shard's row (stats.ts). */
  constructor(counters: Float64Array) {
    this.c = counters;
  }

  /** A flush of `count` items begins; item() each, oldest first, then end(). */
  begin(count: number): void {
    this.nextKeys = new Set<string>();
    this.nextFetched = new Uint8Array(count);
    this.recorded = 0;
  }

  /** One flushed item: its key (read only while keys are still kept) and whether a hit had fetched it. */
  item(key: () => string, fetched: boolean): void {
    if (this.nextKeys.size < MAX_FLUSHED_KEYS) this.nextKeys.add(key());
    this.nextFetched[this.recorded++] = fetched ? 1 : 0;
  }

  end(): void {
    this.keys = this.nextKeys;
    this.fetched = this.nextFetched;
    this.reusable = this.recorded;
    this.nextKeys = new Set<string>();
    this.nextFetched = new Uint8Array(0);
    this.c[STAT.flushed_kept] = this.keys.size;
  }

  /** A get found no item for `key`: counted in get_flushed, once, if flush_all removed it. */
  miss(key: string): void {
    if (this.keys.size === 0 || !this.keys.delete(key)) return;
    this.c[STAT.get_flushed]++;
    this.c[STAT.flushed_kept] = this.keys.size;
  }

  /** Another request for `key`, or a new item under it: no longer a flushed get's. */
  forget(key: string): void {
    if (this.keys.size !== 0 && this.keys.delete(key)) this.c[STAT.flushed_kept] = this.keys.size;
  }

  /** A new item linked: it reuses a flushed one's memory while any is left (reclaimed; expired_unfetched if that one was never fetched). */
  linked(): void {
    if (this.reusable === 0) return;
    if (this.fetched[this.fetched.length - this.reusable] === 0) this.c[STAT.expired_unfetched]++;
    this.reusable--;
    this.c[STAT.reclaimed]++;
  }
}
