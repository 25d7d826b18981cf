/**
 * What one shard's item cache does on its own, on timers, for a shard
 * that went quiet (item-cache.ts): free what readers let go of, take back
 * what other shards handed over (hand-over.ts), and give the pools' cached
 * spans back once both are done. A busy shard does all this on its own
 * requests; the timers cost nothing while a request comes every few ms.
 */
import type { ShardAllocator } from "../../../memory/shard-allocator.js";
import type { SharedMap } from "../../../memory/shared-map/shared-map.js";

/** How long an owner with entries waiting to be freed waits for more before it reclaims them itself (ms). */
const RECLAIM_AFTER_MS = 10;
/**
 * The inbox's timer: first look this long after the last drain (ms), then
 * twice as long each time it finds the inbox empty, up to INBOX_MAX_MS. A
 * busy shard drains on its own requests; the timer is for one that went
 * quiet while others replaced its items.
 */
const INBOX_MIN_MS = 10;
const INBOX_MAX_MS = 1000;

export class CacheTimers {
  private readonly map: SharedMap;
  private readonly memory: ShardAllocator;
  /** Whether the inbox holds anything; take it all back. */
  private readonly waiting: () => boolean;
  private readonly drain: () => void;
  private reclaimTimer: NodeJS.Timeout | undefined;
  private inboxTimer: NodeJS.Timeout | undefined;
  private inboxWait = INBOX_MIN_MS;
  /** A reservation since the inbox's last look (the shard is serving writes). */
  private reservedSinceLook = false;
  /** Items freed since the last trim of the shard's cached spans. */
  private freedSinceTrim = false;
  private readonly reclaimLater = (): void => {
    this.reclaimTimer = undefined;
    if (this.map.reclaim() > 0) this.freedSinceTrim = true;
    if (this.map.reclaimPending) this.scheduleReclaim();
  };
  private readonly lookAtInbox = (): void => {
    if (this.waiting()) {
      this.drain();
      this.inboxWait = INBOX_MIN_MS;
    } else {
      this.inboxWait = Math.min(INBOX_MAX_MS, this.inboxWait * 2);
      // Quiet since the last look, and items freed since: give the pools' cached spans back, as the shard's
      // idle trim does after a message (frees made on a timer come after that trim: a shard whose items
      // another shard deleted otherwise kept 40 KiB of spans).
      if (this.freedSinceTrim && !this.reservedSinceLook && !this.map.reclaimPending) {
        this.freedSinceTrim = false;
        this.memory.trim();
      }
    }
    this.reservedSinceLook = false;
    this.inboxTimer = setTimeout(this.lookAtInbox, this.inboxWait);
    this.inboxTimer.unref();
  };

  constructor(map: SharedMap, memory: ShardAllocator, waiting: () => boolean, drain: () => void) {
    this.map = map;
    this.memory = memory;
    this.waiting = waiting;
    this.drain = drain;
  }

  /** Look at the inbox on a timer from now on (until stop). */
  start(): void {
    if (this.inboxTimer !== undefined) return;
    this.inboxTimer = setTimeout(this.lookAtInbox, this.inboxWait);
    this.inboxTimer.unref();
  }

  stop(): void {
    clearTimeout(this.inboxTimer);
    this.inboxTimer = undefined;
  }

  /** The shard made a reservation (it is busy: no trim at the next look). */
  reserved(): void {
    this.reservedSinceLook = true;
  }

  /**
   * Items left the cache: the map frees what readers let go of by itself
   * once 32 entries wait; an owner that goes quiet with fewer waiting
   * frees them RECLAIM_AFTER_MS later (a timer, only while some wait).
   */
  freed(): void {
    this.freedSinceTrim = true;
    this.scheduleReclaim();
  }

  private scheduleReclaim(): void {
    if (this.reclaimTimer !== undefined) return;
    this.reclaimTimer = setTimeout(this.reclaimLater, RECLAIM_AFTER_MS);
    this.reclaimTimer.unref();
  }
}
