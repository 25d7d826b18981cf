/**
 * The answers of `stats` and its subcommands, `stats cachedump`, `stats
 * detail` and `cache_memlimit`, as memcached 1.6 gives them (extra
 * arguments ignored, as memcached does), for a connection's commands
 * (commands/classic-commands.ts hands them over).
 *
 * Most read the statistics block every shard writes in shared memory
 * (stats.ts), once every shard has taken back what others handed over to
 * it (StatsContext.settled), so the counts are those of its items; those
 * that need what only a shard's thread holds (its order's ages, its
 * connections, its prefix counts, its items for cachedump) ask every shard
 * by a task (shard.ts). An answer that waits takes its place in the
 * connection's line (StatsHost.answerLater): the answers after it wait too.
 */
import type { SharedHeap } from "../../../memory/shared-heap.js";
import { cacheBytesPerShard, type ServerConfig } from "../config.js";
import { line, word, type Chunk } from "../protocol/answers.js";
import { REPLY, parseU32 } from "../protocol/protocol.js";
import { ITEM_CLASSES } from "./item-classes.js";
import { formatPrefixDump, type PrefixCounts, type PrefixStats } from "./prefix-stats.js";
import { formatItems, formatSlabs } from "./stats-classes.js";
import { formatConns, type ConnEntry } from "./stats-conns.js";
import { formatSettings, formatStats } from "./stats.js";

/** What the stats answers need of their shard (shard.ts builds it, with the rest of commands/command-host.ts CommandContext). */
export interface StatsContext {
  readonly shard: number;
  readonly heap: SharedHeap;
  readonly config: ServerConfig;
  /** This shard's `stats detail` counts (on or off on every shard at once). */
  readonly detail: PrefixStats;
  /** Run a task (shard.ts) on every shard, this one too; results in shard order. */
  everyShard<T>(task: string, arg?: unknown): Promise<T[]>;
  /** Every shard has taken back what others handed over to it (store/item-cache.ts drain): its counts are those of its items. */
  settled(): Promise<void>;
  /** stats reset on every shard. */
  resetStats(): Promise<void>;
}

/** What the stats answers need of their connection (commands/command-host.ts CommandHost has it all). */
export interface StatsHost {
  readonly ctx: StatsContext;
  /** The connection's socket descriptor (`stats conns` marks the one that asked). */
  readonly id: number;
  /** An answer ready now, behind any still waiting. */
  answer(chunk: Chunk): void;
  /** A place in line now for an answer `answer` completes (SERVER_ERROR if it rejects). */
  answerLater(answer: Promise<Chunk>): void;
}

/** cache_memlimit's bounds, in megabytes, and its answers, as memcached's. */
const MIN_MEMLIMIT_MB = 8;
const MAX_MEMLIMIT_MB = 1_000_000_000;
const MEMLIMIT_TOO_SMALL = "MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m";
const MEMLIMIT_NOT_BYTES = "MEMLIMIT_ADJUST_FAILED input value is megabytes not bytes";
const MEMLIMIT_FAILED = "MEMLIMIT_ADJUST_FAILED out of bounds or unable to adjust";
/** memcached's cap on a cachedump answer. */
export const CACHEDUMP_BYTES = 2 << 20;
const DETAIL_USAGE = "CLIENT_ERROR usage: stats detail on|off|dump";
const noop = (): void => {};

/** `answer` once `done` is (in its place in line), or nothing with noreply. */
export function answerWhenDone(host: StatsHost, done: Promise<void>, answer: Buffer, noreply: boolean): void {
  if (noreply) done.catch(noop);
  else host.answerLater(done.then(() => answer));
}

/** An answer made once every shard has taken back what others handed over (so the counts are its items'). */
function answerWhenSettled(host: StatsHost, make: () => string | Promise<string>): void {
  host.answerLater(host.ctx.settled().then(make));
}

/**
 * `stats` and its subcommands. A plain `stats` (and settings, slabs,
 * cachedump...) waits for every shard to settle, so what it shows counts
 * what this connection's writes handed over.
 */
export function statsCommand(host: StatsHost, args: string[]): void {
  const { ctx } = host;
  const sub = args[0];
  const config = ctx.config;
  switch (sub) {
    case undefined:
      return answerWhenSettled(host, () => formatStats(config, ctx.heap));
    case "reset":
      return answerWhenDone(host, ctx.resetStats(), word(REPLY.RESET), false);
    case "settings":
      return answerWhenSettled(host, () => formatSettings(config, ctx.detail.enabled));
    case "slabs":
      return answerWhenSettled(host, () => formatSlabs(config, ctx.heap));
    case "items":
      return answerWhenSettled(host, () => ctx.everyShard<number[]>("classAges").then((ages) => formatItems(config, ages)));
    case "sizes":
      // memcached tracks the item size histogram only with -o track_sizes, which this server does not offer.
      return host.answer("STAT sizes_status disabled\r\nEND\r\n");
    case "detail":
    case "cachedump":
      // memcached's -X turns both off, in its words.
      if (!config.dumpEnabled) return host.answer(line(`CLIENT_ERROR stats ${sub} not allowed`));
      return sub === "detail" ? statsDetail(host, args[1], args[2]) : cachedump(host, args);
    case "conns": {
      const asking = ctx.shard * 2 ** 32 + host.id;
      return answerWhenSettled(host, () => ctx.everyShard<ConnEntry[]>("connectionList", asking).then(formatConns));
    }
    default:
      return host.answer(word(REPLY.ERROR));
  }
}

/** `stats detail on|off|dump`; `dump bytes` adds each prefix's live item bytes (prefix-stats.ts). */
function statsDetail(host: StatsHost, what: string | undefined, extra: string | undefined): void {
  const { ctx } = host;
  if (what === "on" || what === "off") {
    // Here at once, so the commands that follow on this connection are counted (or not); the other shards by message.
    ctx.detail.enabled = what === "on";
    answerWhenDone(host, ctx.everyShard("statsDetail", what === "on").then(noop), word(REPLY.OK), false);
  } else if (what === "dump") answerWhenSettled(host, () => ctx.everyShard<PrefixCounts[]>("prefixCounts", extra === "bytes").then(formatPrefixDump));
  else host.answer(line(DETAIL_USAGE));
}

/** `stats cachedump <class> <limit>`: the class's items, each shard's most recent first, up to 2 MB as memcached. */
function cachedump(host: StatsHost, args: string[]): void {
  if (args.length < 3) return host.answer(line("CLIENT_ERROR bad command line"));
  const id = parseU32(args[1]!);
  const limit = parseU32(args[2]!);
  if (id < 0 || limit < 0) return host.answer(word(REPLY.BAD_FORMAT));
  // memcached's MAX_NUMBER_OF_SLAB_CLASSES (64) bounds the id; its classes past 39 are empty, as here.
  if (id >= 64) return host.answer(line("CLIENT_ERROR Illegal slab id"));
  if (id === 0 || id > ITEM_CLASSES) return host.answer(word(REPLY.END));
  answerWhenSettled(host, async () => formatCachedump(await host.ctx.everyShard<Array<[string, number, number]>>("cacheDump", [id, limit, CACHEDUMP_BYTES]), limit));
}

/** Every shard's cachedump rows (key, bytes, exptime), as one answer: at most `limit` (0: all) and CACHEDUMP_BYTES. */
export function formatCachedump(perShard: ReadonlyArray<ReadonlyArray<readonly [string, number, number]>>, limit: number): string {
  let out = "";
  let shown = 0;
  for (const rows of perShard) {
    for (const [key, bytes, exptime] of rows) {
      if (limit !== 0 && shown >= limit) break;
      const text = `ITEM ${key} [${bytes} b; ${exptime} s]\r\n`;
      if (out.length + text.length + 5 > CACHEDUMP_BYTES) break;
      out += text;
      shown++;
    }
  }
  return out + "END\r\n";
}

/** cache_memlimit: the cache's size, split over the shards; no more than the heap holds (memcached's answers otherwise). */
export function memoryLimit(host: StatsHost, megabytes: number, noreply: boolean): void {
  const say = (text: string): void => {
    if (!noreply) host.answer(line(text));
  };
  if (megabytes < MIN_MEMLIMIT_MB) return say(MEMLIMIT_TOO_SMALL);
  if (megabytes > MAX_MEMLIMIT_MB) return say(MEMLIMIT_NOT_BYTES);
  const { config } = host.ctx;
  const bytes = megabytes * 1024 * 1024;
  // Each shard's items live in its region: a limit past the regions would promise memory that is not there.
  if (bytes > config.shards * cacheBytesPerShard(config)) return say(MEMLIMIT_FAILED);
  answerWhenDone(host, host.ctx.everyShard("setMemoryLimit", bytes).then(noop), word(REPLY.OK), noreply);
}
