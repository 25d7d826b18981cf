/**
 * memcached's classic text commands on a connection (network/connection.ts
 * hands each line over; protocol/protocol.ts reads it): each run here, on
 * the connection's shard, whatever its key (store/store.ts: the cache's
 * one index, read and written by every shard), and answered through the
 * connection (command-host.ts CommandHost), which keeps the answers in
 * order. The meta commands (meta-commands.ts), get's keys (multi-get.ts)
 * and the stats answers (stats/stats-commands.ts) have their own files;
 * a storage command's two ends are storing.ts's.
 *
 * Only flush_all and the stats that gather from every shard wait for
 * other shards: their answers take a place in line (answerLater), and
 * flush_all holds the connection's next requests until every shard has
 * flushed.
 */
import { VERSION } from "../config.js";
import { line, word, type Chunk } from "../protocol/answers.js";
import { REPLY, absoluteExptime, expired, parseCommand } from "../protocol/protocol.js";
import { answerWhenDone, memoryLimit, statsCommand } from "../stats/stats-commands.js";
import { STAT } from "../stats/stats.js";
import { R_NO_MEMORY, R_NON_NUMERIC } from "../store/store.js";
import type { CommandHost } from "./command-host.js";
import { MetaCommands } from "./meta-commands.js";
import { MultiGet, getKey, type GetHost } from "./multi-get.js";
import { STORE_ANSWER } from "./storing.js";

const VERSION_LINE = line(`VERSION ${VERSION}`);

export class ClassicCommands {
  private readonly host: CommandHost;
  /** mg, ms, md, ma, mn, me. */
  private readonly meta: MetaCommands;
  /** get, gets, gat, gats: what multi-get.ts needs of the host, with the counted lookup. */
  private readonly gets: GetHost;

  constructor(host: CommandHost) {
    this.host = host;
    this.meta = new MetaCommands(host);
    this.gets = {
      ctx: host.ctx,
      now: () => host.now(),
      lookup: (key) => this.lookup(key),
      hit: (ref, withCas, last) => host.hit(ref, withCas, last),
      answer: (chunk) => host.answer(chunk),
      full: () => host.full(),
    };
  }

  /** A command line (`bytes` long with its \r\n): run it; the bytes of data that follow it (storage commands, also on their errors), or 0. */
  run(text: string, bytes: number): number {
    const { host } = this;
    const { ctx } = host;
    const cmd = parseCommand(text, bytes);
    switch (cmd.kind) {
      case "get": {
        const now = host.now();
        const touchTo = cmd.touch ? absoluteExptime(cmd.exptime, now) : undefined;
        if (typeof cmd.keys === "string") getKey(this.gets, cmd.keys, cmd.withCas, touchTo, true, ctx.detail.enabled);
        else host.runGet(new MultiGet(this.gets, cmd.keys, cmd.withCas, touchTo));
        return 0;
      }
      case "store":
        if (ctx.detail.enabled) ctx.detail.set(cmd.key);
        return host.beginStore(cmd);
      case "delete":
        if (ctx.detail.enabled) ctx.detail.delete(cmd.key);
        this.result(ctx.store.delete(cmd.key, host.now()), cmd.noreply);
        return 0;
      case "arith":
        this.result(ctx.store.arith(cmd.key, cmd.incr, cmd.delta, host.now()), cmd.noreply);
        return 0;
      case "touch": {
        const now = host.now();
        this.result(ctx.store.touch(cmd.key, absoluteExptime(cmd.exptime, now), now), cmd.noreply);
        return 0;
      }
      case "flush": {
        ctx.counters[STAT.cmd_flush]++;
        // As memcached: counted, then refused (-F), then the delay read.
        if (!ctx.config.flushAllowed || cmd.delay === undefined) {
          if (!cmd.noreply) host.answer(word(ctx.config.flushAllowed ? REPLY.BAD_EXPTIME : REPLY.FLUSH_REFUSED));
          return 0;
        }
        const done = ctx.flushAll(cmd.delay);
        answerWhenDone(host, done, word(REPLY.OK), cmd.noreply);
        // Nothing after it runs until every shard has flushed: a get reads the index directly, and saw
        // the other shard's items still there (test/apps/memcached/memory.test.ts: flush_all, then a get, pipelined).
        host.holdReadingUntil(done);
        return 0;
      }
      case "version":
        host.answer(VERSION_LINE);
        return 0;
      case "verbosity":
        if (!cmd.noreply) host.answer(word(REPLY.OK));
        return 0;
      case "stats":
        statsCommand(host, cmd.args);
        return 0;
      case "memlimit":
        memoryLimit(host, cmd.megabytes, cmd.noreply);
        return 0;
      case "quit":
        host.endAfterAnswers();
        return 0;
      case "meta":
        return this.meta.run(cmd.tokens);
      case "answer":
        host.answer(word(cmd.reply));
        return 0;
      case "error":
        if (!cmd.noreply) host.answer(word(cmd.reply));
        if (cmd.close) {
          host.endAfterAnswers();
          return 0;
        }
        // A malformed storage line's data block: skipped, never run as commands.
        return cmd.swallow;
    }
  }

  /**
   * A get's lookup, on this thread, in the cache's index: a reference to
   * the live item, or 0. Counted by this shard: cmd_get, and a hit or a
   * miss. An expired item is a miss, taken out of the map here.
   */
  private lookup(key: string): number {
    const { ctx } = this.host;
    const now = this.host.now();
    const c = ctx.counters;
    c[STAT.cmd_get]++;
    const map = ctx.map;
    const ref = map.acquire(key);
    if (ref !== 0) {
      const ptr = map.valuePointer(ref);
      if (!expired(ctx.views.exptime(ptr), now)) {
        c[STAT.get_hits]++;
        ctx.views.setReferenced(ptr, true);
        // The meta protocol's l and me's la: the last hit, in the header line the referenced byte is in.
        ctx.views.setAccessed(ptr, now);
        return ref;
      }
      c[STAT.get_expired]++;
      ctx.store.cache.expire(ref, ptr);
      map.release(ref);
    } else {
      ctx.missed(key);
    }
    c[STAT.get_misses]++;
    return 0;
  }

  /** A one-key command's result, answered unless noreply. */
  private result(r: string | number, noreply: boolean): void {
    if (!noreply) this.host.answer(resultLine(r));
  }
}

/** An operation's result (store.ts: a number R_*, or incr's value) as its answer line. */
function resultLine(r: string | number): Chunk {
  if (typeof r === "string") return `${r}\r\n`;
  if (r === R_NON_NUMERIC) return word(REPLY.NON_NUMERIC);
  if (r === R_NO_MEMORY) return word(REPLY.NO_MEMORY);
  return word(STORE_ANSWER[r]!);
}
