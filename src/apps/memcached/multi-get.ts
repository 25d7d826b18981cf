/**
 * get, gets, gat and gats on a connection (connection.ts hands them over,
 * protocol.ts reads their lines): each key answered in order, a hit's
 * answer a view of its item in the shared heap (item.ts), END once, after
 * the last key's answer (in the last hit's view when the last key hits).
 *
 * A key this shard reads in place (connection.ts lookup: any shard's map)
 * or owns (gat changes the item: its owner's work) is answered at once;
 * one that goes to its owner (gat of another shard's key, or a get behind
 * this connection's own change of the key on its way there) takes its
 * place in the connection's line, counted among the unsent answers as the
 * pieces of a hit until the owner answers, and the keys after it wait
 * behind it.
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
 *
 * An owner that cannot answer (its shard failed, the server is stopping):
 * a one-key get answers SERVER_ERROR and the connection carries on; a get
 * of many keys has sent part of its answer already, so its key answers
 * SERVER_ERROR and the connection ends there (a client could not tell the
 * rest of that answer from the next request's).
 */
import type { SharedMap } from "../../memory/shared-map/shared-map.js";
import { KeyCursor, type KeyList } from "./get-keys.js";
import type { ItemViews } from "./item.js";
import { keyOwner } from "./key-owner.js";
import type { Chunk } from "./meta-commands.js";
import type { PrefixStats } from "./prefix-stats.js";
import { REPLY } from "./protocol.js";
import { OP_GAT, OP_GET, type OpArg, type OpResult } from "./remote.js";
import type { ItemStore } from "./store.js";

export const END = Buffer.from(`${REPLY.END}\r\n`, "latin1");

/** What a get needs of its shard (connection.ts ConnectionContext has it). */
export interface GetContext {
  readonly shard: number;
  readonly shards: number;
  readonly views: ItemViews;
  readonly store: ItemStore;
  readonly maps: SharedMap[];
  readonly detail: PrefixStats;
}

/** Complete an answer in its place: its chunks, the held references they are views of, and whether the connection ends after it. */
export type Place = (chunks: Chunk[], refs: number[], close?: boolean) => void;

/** What a get needs of its connection (connection.ts). */
export interface GetHost {
  readonly ctx: GetContext;
  /** Unix seconds of the current socket read. */
  now(): number;
  /** A get's lookup in the owner's map, counted (connection.ts lookup): a reference to the live item, or 0. */
  lookup(key: string, owner: number): number;
  /** Whether a get of another shard's key may read the owner's map now. */
  readsHere(key: string): boolean;
  /** A hit's answer now (behind any still waiting): item `ref` of `owner`'s map, the reference held until written. */
  hit(owner: number, ref: number, withCas: boolean, last: boolean): void;
  /** A fixed answer now (behind any still waiting). */
  answer(chunk: Chunk): void;
  /** A place in line for an answer another shard completes, counted as `pieces` unsent pieces until it does. */
  later(pieces: number): Place;
  /** An operation for another shard's store (connection.ts toOwner). */
  toOwner(owner: number, args: readonly OpArg[], done: (result: OpResult | Error) => void, changes?: string): void;
  /** A reference of `owner`'s map as the connection holds it. */
  hold(owner: number, ref: number): number;
  /** Another shard could not answer. */
  failure(e: Error): Buffer;
  /** Whether the connection's unsent answers are past their bounds (it has stopped reading). */
  full(): boolean;
}

/** An item's part of a get's answer: one view of it (get), or three parts with its cas (gets); `last` carries the END line. */
export function itemAnswer(v: ItemViews, ptr: number, withCas: boolean, last: boolean, into: Chunk[]): void {
  if (withCas) into.push(v.getsLineView(ptr), ` ${v.cas(ptr)}\r\n`, v.getsValueView(ptr, last));
  else into.push(v.getView(ptr, last));
}

/**
 * One key of a get: answered now, or in its place once its owner answers.
 * `touchTo`: gat's new absolute exptime; `last`: its answer carries END;
 * `counting`: `stats detail` was on when the command came; `cut`: an
 * owner's failure ends the connection (a get of many keys).
 */
export function getKey(host: GetHost, key: string, withCas: boolean, touchTo: number | undefined, last: boolean, counting: boolean, cut: boolean): void {
  const { ctx } = host;
  const owner = keyOwner(key, ctx.shards);
  if (owner === ctx.shard || (touchTo === undefined && host.readsHere(key))) {
    const ref = touchTo === undefined ? host.lookup(key, owner) : ctx.store.get(key, host.now(), touchTo);
    if (counting) ctx.detail.get(key, ref !== 0);
    if (ref !== 0) host.hit(owner, ref, withCas, last);
    else if (last) host.answer(END);
    return;
  }
  // gat changes the item: its owner's work; and a get behind this connection's changes there goes there too.
  const place = host.later(withCas ? 3 : 1);
  host.toOwner(
    owner,
    touchTo === undefined ? [OP_GET, key] : [OP_GAT, key, touchTo],
    (r) => {
      if (counting) ctx.detail.get(key, typeof r === "number" && r !== 0);
      if (r instanceof Error) return place([host.failure(r)], [], cut);
      if (r === 0) return place(last ? [END] : [], [], false);
      const chunks: Chunk[] = [];
      itemAnswer(ctx.views, ctx.maps[owner]!.valuePointer(r as number), withCas, last, chunks);
      place(chunks, [host.hold(owner, r as number)], false);
    },
    touchTo === undefined ? undefined : key,
  );
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
      getKey(host, key, this.withCas, this.touchTo, last, this.counting, true);
      if (last) return true;
      if (host.full()) return false;
    }
  }
}
