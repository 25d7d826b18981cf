/**
 * The one interface between a connection (network/connection.ts) and the
 * commands it runs: the classic ones (classic-commands.ts, with get's in
 * multi-get.ts), the meta ones (meta-commands.ts) and the stats answers
 * (stats/stats-commands.ts, which take the StatsHost part of it). The
 * commands decide what to answer; the host owns the socket, the order of
 * the answers, the references they hold, and reading: it may stop, hold
 * or end it. A fake host runs the commands without a socket
 * (test/apps/memcached/commands/classic-commands.test.ts).
 */
import type { SharedMap } from "../../../memory/shared-map/shared-map.js";
import type { ItemViews } from "../store/item.js";
import type { ItemStore } from "../store/store.js";
import type { Chunk } from "../protocol/answers.js";
import type { MetaStoreCommand } from "../protocol/meta-protocol.js";
import type { StatsContext, StatsHost } from "../stats/stats-commands.js";
import type { MultiGet } from "./multi-get.js";

/** What a connection's commands need of their shard (shard.ts builds it). */
export interface CommandContext extends StatsContext {
  readonly shards: number;
  readonly views: ItemViews;
  readonly store: ItemStore;
  /** This thread's SharedMap object of the cache's index (the store's). */
  readonly map: SharedMap;
  /** This shard's row of counters. */
  readonly counters: Float64Array;
  /** Every shard's row of counters, by shard (read only: each is its shard's to write). */
  readonly rows: readonly Float64Array[];
  /** flush_all on every shard: this one at once, the others by message. */
  flushAll(delay: number): Promise<void>;
  /** A get found no item for `key`: get_flushed, here or on the shard whose flush_all removed it. */
  missed(key: string): void;
}

/** What the commands need of their connection (network/connection.ts). */
export interface CommandHost extends StatsHost {
  readonly ctx: CommandContext;
  /** Unix seconds of the current socket read. */
  now(): number;
  /** An answer of several pieces ready now (behind any still waiting); `refs`: the held references its chunks are views of. */
  answerAll(chunks: Chunk[], refs: number[]): void;
  /** A get's hit: its answer now (behind any still waiting), the item `ref` names, the reference held until written. */
  hit(ref: number, withCas: boolean, last: boolean): void;
  /** Whether the connection's unsent answers are past their bounds (it has stopped reading). */
  full(): boolean;
  /** A get of many keys: run it until done, or until the socket has written half the connection's unsent answers. */
  runGet(get: MultiGet): void;
  /** A storage command's line: the bytes of data (and \r\n) to read after it (storing.ts reserveItem says where they go). */
  beginStore(cmd: MetaStoreCommand): number;
  /** Read no request until `done` settles (flush_all: a get reads the index directly, and would see what the flush removes). */
  holdReadingUntil(done: Promise<unknown>): void;
  /** Read no more; end the connection once every answer so far is written (quit, a line that closes). */
  endAfterAnswers(): void;
}
