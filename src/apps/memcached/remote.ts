/**
 * Requests for keys another shard owns: the connection's shard queues
 * each operation for the owner, and once the current socket read has been
 * parsed (a microtask) sends each owner ONE message, `applyOps`, carrying
 * that read's operations for it (a pipelined batch of requests) as a flat
 * array of numbers and strings (the messaging layer's plain encoding, no
 * objects per operation). The owner runs them in order on its store and
 * answers with one result per operation. (Seastar's memcached sends one
 * submit_to per request.) Waiting instead for the end of the loop's turn
 * (setImmediate) to gather every read of the turn into one message made
 * ~10 operations a message under memcaslap -c 128 but cost more than it
 * saved: the owner started later, so the two shards overlapped less
 * (56 vs 43 us of server CPU per request, 15.6k vs 20k requests/s).
 *
 * Order: operations from one shard to one owner run in the order queued
 * (the queue keeps it, and calls from one sender to one shard start in
 * order), which is all a connection needs: a key always lives on one
 * shard. Anything else sent to an owner (flush_all) must first call
 * flush() so it does not overtake queued operations.
 *
 * Gets do not come here: every shard reads the owner's SharedMap itself
 * (connection.ts lookup). What does is every change (a store's map has
 * one writer, its owner): stores, deletes, incr/decr, touch, gat (which
 * sets the exptime: its result is a counted reference to the item for the
 * asking connection, released on that shard), and an expired item a get
 * found (OP_EXPIRE); and a get that must not overtake a change the same
 * connection sent the owner before it (OP_GET: connection.ts). A store sends the pointer of a staging copy of the
 * item in the asking shard's memory, which the owner copies into an entry
 * of its map and the asking shard frees when the answer comes. A value
 * too big for a small pool (connection.ts RESERVE_ABOVE) is not staged:
 * the asking shard first asks the owner for the item (OP_RESERVE: the
 * owner reserves a map entry, evicting its own items as it must), writes
 * the value into it straight from the socket, and hands it over
 * (OP_STORE_RESERVED; OP_GIVE_UP if the value never arrives whole). A staged copy
 * of a big value would take the asking shard's memory too, and make it
 * evict its own items for another shard's: with 8 MiB shards, 40 pipelined
 * sets of 900 KB made the connection's shard evict all it held and then
 * refuse 26 of them, 7.9 MB free once the staging copies were gone.
 */
import type { ShardContext } from "../../smp/current-shard.js";
import type { StoreMode } from "./protocol.js";
import { META_INVALIDATE, META_RESULT, META_VIVIFY, type ItemStore, type MetaStore } from "./store.js";

/** Operation codes, and the number of arguments after each. */
export const OP_EXPIRE = 0; // key -> 0 (a get elsewhere found the item expired: unlink it if it still is)
export const OP_GAT = 1; // key, absolute exptime -> a counted reference to the item (the caller releases it) or 0
export const OP_STORE = 2; // mode, key, staging pointer, cas, casIn, meta bits -> result (store.ts R_*; with META_RESULT, storedAnswer's string)
export const OP_DELETE = 3; // key -> result
export const OP_INCR = 4; // key, delta -> decimal string or result
export const OP_DECR = 5; // key, delta -> decimal string or result
export const OP_TOUCH = 6; // key, absolute exptime -> result
export const OP_FORGET = 7; // key -> 0 (a set that failed leaves no old value)
export const OP_RESERVE = 8; // key, item bytes -> the reference of a map entry the owner reserved (the asker fills it at valuePointer), or 0: no room
export const OP_STORE_RESERVED = 9; // mode, key, reservation (filled), cas, casIn, meta bits -> result as OP_STORE's; the owner publishes or gives up the entry
export const OP_GIVE_UP = 10; // reservation -> 0 (its value will not come)
export const OP_GET = 11; // key -> a counted reference to the item, or 0 (a get behind this connection's changes to the owner's keys)
export const OP_FLUSHED_MISS = 12; // key -> 0 (a get elsewhere found no item: the owner counts get_flushed if flush_all removed it)
export const OP_META_GET = 13; // key, touchTo, vivifyTo, recacheBefore, casIn, bits (1 no bump, 4 R before T, 8 no win) -> store.metaGet's string
export const OP_META_DELETE = 14; // key, cas, casIn, touchTo, bits (1 invalidate, 2 remove value), client flags -> result
export const OP_META_ARITH = 15; // key, incr (1/0), delta, cas, casIn, vivifyTo, initial, touchTo -> store.metaArith's result
export const OP_AFTER = 16; // key -> 0 (nothing: a read in place that must come after this connection's changes to the key, me)
const ARITY = [1, 2, 6, 1, 2, 2, 2, 1, 2, 6, 1, 1, 1, 6, 6, 8, 1];

export type OpArg = string | number;
export type OpResult = string | number;
type Callback = (result: OpResult | Error) => void;

/** The name of the task the owner runs (shard.ts exports it). */
export const APPLY_OPS_TASK = "applyOps";

/** The owner's side: run a batch of operations on its store, one result each. */
export function runOps(store: ItemStore, ops: readonly OpArg[], now: number): OpResult[] {
  const results: OpResult[] = [];
  let i = 0;
  while (i < ops.length) {
    const op = ops[i] as number;
    const key = ops[i + 1] as string;
    switch (op) {
      case OP_EXPIRE:
        store.expire(key, now);
        results.push(0);
        break;
      case OP_GET:
        results.push(store.get(key, now));
        break;
      case OP_GAT:
        results.push(store.get(key, now, ops[i + 2] as number));
        break;
      case OP_STORE:
      case OP_STORE_RESERVED: {
        // ops: OP_STORE, mode, key, staging item (or reservation), cas, casIn, meta bits
        const bits = ops[i + 6] as number;
        const meta = metaStore(ops[i + 5] as number, bits);
        const mode = ops[i + 1] as StoreMode;
        const args = [mode, ops[i + 2] as string, ops[i + 3] as number, ops[i + 4] as string, now, meta] as const;
        const r = op === OP_STORE ? store.store(...args) : store.storeReserved(...args);
        results.push(bits & META_RESULT ? store.storedAnswer(args[1], r) : r);
        break;
      }
      case OP_META_GET: {
        const bits = ops[i + 6] as number;
        results.push(store.metaGet(key, now, ops[i + 2] as number, ops[i + 3] as number, ops[i + 4] as number, ops[i + 5] as number, (bits & 1) !== 0, (bits & 4) !== 0, (bits & 8) !== 0));
        break;
      }
      case OP_META_DELETE: {
        const bits = ops[i + 5] as number;
        results.push(store.metaDelete(key, now, ops[i + 2] as string, ops[i + 3] as number, ops[i + 4] as number, (bits & 1) !== 0, (bits & 2) !== 0, ops[i + 6] as number));
        break;
      }
      case OP_META_ARITH:
        results.push(store.metaArith(key, now, ops[i + 2] === 1, ops[i + 3] as string, ops[i + 4] as string, ops[i + 5] as number, ops[i + 6] as number, ops[i + 7] as string, ops[i + 8] as number));
        break;
      case OP_RESERVE:
        results.push(store.reserve(key, ops[i + 2] as number));
        break;
      case OP_GIVE_UP:
        store.giveUp(ops[i + 1] as number);
        results.push(0);
        break;
      case OP_DELETE:
        results.push(store.delete(key, now));
        break;
      case OP_INCR:
      case OP_DECR:
        results.push(store.arith(key, op === OP_INCR, ops[i + 2] as string, now));
        break;
      case OP_TOUCH:
        results.push(store.touch(key, ops[i + 2] as number, now));
        break;
      case OP_FORGET:
        store.forget(key);
        results.push(0);
        break;
      case OP_FLUSHED_MISS:
        store.flushedMiss(key);
        results.push(0);
        break;
      case OP_AFTER:
        results.push(0);
        break;
      default:
        throw new RangeError(`runOps: unknown operation ${String(op)} at ${i}`);
    }
    i += 1 + ARITY[op]!;
  }
  return results;
}

/** OP_STORE's casIn and meta bits -> the store's MetaStore (undefined for the classic commands: casIn -1, no bits). */
export function metaStore(casIn: number, bits: number): MetaStore | undefined {
  if (casIn < 0 && (bits & (META_INVALIDATE | META_VIVIFY)) === 0) return undefined;
  return { casIn, invalidate: (bits & META_INVALIDATE) !== 0, vivify: (bits & META_VIVIFY) !== 0 };
}

interface Outgoing {
  ops: OpArg[];
  callbacks: Callback[];
}

/** The asking side: per owner, the operations queued by this read. */
export class RemoteOps {
  private readonly shard: ShardContext;
  private readonly outgoing: Array<Outgoing | undefined>;
  private scheduled = false;

  constructor(shard: ShardContext) {
    this.shard = shard;
    this.outgoing = new Array<Outgoing | undefined>(shard.shards).fill(undefined);
  }

  /** Queue one operation (`args` as the OP_* comment says) for `owner`; `done` gets its result, or the Error of a failed call. */
  call(owner: number, args: readonly OpArg[], done: Callback): void {
    let q = this.outgoing[owner];
    if (q === undefined) q = this.outgoing[owner] = { ops: [], callbacks: [] };
    for (const a of args) q.ops.push(a);
    q.callbacks.push(done);
    if (!this.scheduled) {
      this.scheduled = true;
      queueMicrotask(() => this.flush());
    }
  }

  /** Send everything queued now (before anything that must not overtake it). */
  flush(): void {
    this.scheduled = false;
    for (let owner = 0; owner < this.outgoing.length; owner++) {
      const q = this.outgoing[owner];
      if (q === undefined) continue;
      this.outgoing[owner] = undefined;
      this.shard.submitTo<OpResult[]>(owner, APPLY_OPS_TASK, q.ops).then(
        (results) => {
          for (let i = 0; i < q.callbacks.length; i++) q.callbacks[i]!(results[i]!);
        },
        (e: unknown) => {
          const error = e instanceof Error ? e : new Error(String(e));
          for (const cb of q.callbacks) cb(error);
        },
      );
    }
  }
}
