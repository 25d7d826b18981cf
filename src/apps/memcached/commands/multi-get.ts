/**
 * get, gets, gat and gats on a connection (classic-commands.ts hands them over,
 * protocol.ts reads their lines): each key answered in order, a hit's
 * answer a view of its item in the shared heap (item.ts), END once, after
 * the last key's answer (in the last hit's view when the last key hits).
 *
 * Every key is answered at once, on the connection's shard: a get reads
 * the cache's one index in place (classic-commands.ts lookup), a gat changes
 * the item's exptime there too (store.ts get), whichever shard's memory
 * holds the item. No message, so nothing waits for another shard.
 *
 * A get of many keys is answered key by key and waits between two keys
 * while the connection's unsent answers are past their bounds
 * (backpressure.ts), until the socket has written half of them: a get
 * line may be 1 MiB (reader.ts MAX_GET_LINE), some 500,000 one-byte keys,
 * and answered at once it made one piece per hit, ~500,000, 90-125 MB of
 * JS memory (each piece 190-290 B: its view, its slots in the connection's
 * lists and the socket's queue), before the connection could stop reading.
 * Waiting, it holds its line and a position in it (get-keys.ts), no copy
 * per key. The keys after the wait are read when it goes on: another
 * client's change meanwhile shows (as it may between two keys of a get in
 * memcached, whose worker threads lock items one at a time); the
 * connection's own later requests wait behind the get (its reader is
 * suspended).
 */
import { KeyCursor, type KeyList } from "../protocol/get-keys.js";
import type { ItemViews } from "../store/item.js";
import type { Chunk } from "../protocol/answers.js";
import type { PrefixStats } from "../stats/prefix-stats.js";
import { REPLY } from "../protocol/protocol.js";
import type { ItemStore } from "../store/store.js";

export const END = Buffer.from(`${REPLY.END}\r\n`, "latin1");

/** What a get needs of its shard (command-host.ts CommandContext has it). */
export interface GetContext {
  readonly views: ItemViews;
  readonly store: ItemStore;
  readonly detail: PrefixStats;
}

/** What a get needs of its connection (classic-commands.ts builds it over command-host.ts CommandHost). */
export interface GetHost {
  readonly ctx: GetContext;
  /** Unix seconds of the current socket read. */
  now(): number;
  /** A get's lookup in the cache's index, counted (classic-commands.ts lookup): a reference to the live item, or 0. */
  lookup(key: string): number;
  /** A hit's answer now (behind any still waiting): the item `ref` names, the reference held until written. */
  hit(ref: number, withCas: boolean, last: boolean): void;
  /** A fixed answer now (behind any still waiting). */
  answer(chunk: Chunk): void;
  /** Whether the connection's unsent answers are past their bounds (it has stopped reading). */
  full(): boolean;
}

/** An item's part of a get's answer: one view of it (get), or three parts with its cas (gets); `last` carries the END line. */
export function itemAnswer(v: ItemViews, ptr: number, withCas: boolean, last: boolean, into: Chunk[]): void {
  if (withCas) into.push(v.getsLineView(ptr), ` ${v.cas(ptr)}\r\n`, v.getsValueView(ptr, last));
  else into.push(v.getView(ptr, last));
}

/**
 * One key of a get, answered now. `touchTo`: gat's new absolute exptime;
 * `last`: its answer carries END; `counting`: `stats detail` was on when
 * the command came.
 */
export function getKey(host: GetHost, key: string, withCas: boolean, touchTo: number | undefined, last: boolean, counting: boolean): void {
  const { ctx } = host;
  const ref = touchTo === undefined ? host.lookup(key) : ctx.store.get(key, host.now(), touchTo);
  if (counting) ctx.detail.get(key, ref !== 0);
  if (ref !== 0) host.hit(ref, withCas, last);
  else if (last) host.answer(END);
}

/** A get of many keys (or, gat, none), answered key by key; it may wait between two (run). */
export class MultiGet {
  private readonly host: GetHost;
  private readonly keys: KeyCursor;
  private readonly withCas: boolean;
  private readonly touchTo: number | undefined;
  /** Counted as `stats detail` was when the command came (a `stats detail off` after it may run before it is done). */
  private readonly counting: boolean;

  constructor(host: GetHost, keys: KeyList, withCas: boolean, touchTo: number | undefined) {
    this.host = host;
    this.keys = new KeyCursor(keys);
    this.withCas = withCas;
    this.touchTo = touchTo;
    this.counting = host.ctx.detail.enabled;
  }

  /**
   * Answer keys until the last (true: done) or until the connection's
   * unsent answers pass their bounds (false: it has stopped reading; call
   * again once it has written half of them).
   */
  run(): boolean {
    const host = this.host;
    for (;;) {
      const key = this.keys.next();
      if (key === undefined) {
        // No key at all (gat 0): END alone.
        host.answer(END);
        return true;
      }
      const last = this.keys.done;
      getKey(host, key, this.withCas, this.touchTo, last, this.counting);
      if (last) return true;
      if (host.full()) return false;
    }
  }
}
