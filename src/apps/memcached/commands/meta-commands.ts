/**
 * The meta protocol's commands on a connection (classic-commands.ts hands them
 * over; meta-protocol.ts reads their lines): each run where the classic
 * commands run theirs, and answered as memcached 1.6 answers them.
 *
 * Where: on the connection's shard, as the classic commands, whatever the
 * key (store.ts: mg, md, ma, and ms, a storage command of the
 * connection's, its data block read into an entry reserved the same way,
 * with the meta options added). An mg marks the hit (the referenced byte
 * and the access time, item.ts) unless u, so h and l report what the item
 * held before this hit.
 *
 * Answers: the return code (HD, VA, EN, NF, NS, EX, MN, ME), then the
 * flags that ask for something, in the order they came, then Z, X and W;
 * q drops the nominal answers only (mg: EN; md and ms: HD; ma: its
 * success), errors are always sent. The TTL flag t reports the TTL in
 * flag order, as memcached does: t before T gives the old one.
 */
import { CLASS_COUNT, classSize } from "../../../memory/size-classes.js";
import { MARK_KEY_BINARY } from "../store/item.js";
import type { Chunk } from "../protocol/answers.js";
import type { CommandHost } from "./command-host.js";
import { META_REPLY, answerFlags, encodeKey, exptimePlan, parseMeta, type ExptimePlan, type MetaFlags, type MetaStoreRequest } from "../protocol/meta-protocol.js";
import { MODE_APPEND, MODE_CAS, MODE_PREPEND, REPLY, absoluteExptime, expired } from "../protocol/protocol.js";
import { STAT } from "../stats/stats.js";
import { MG_CREATED, MG_FETCHED, MG_STALE, MG_TOKEN_SENT, MG_WON, R_DELETED, R_EXISTS, R_NO_MEMORY, R_NON_NUMERIC, R_NOT_FOUND, R_NOT_STORED, R_STORED, type MetaGot, type Stored } from "../store/store.js";

const MN = Buffer.from("MN\r\n", "latin1");
const EN = Buffer.from("EN\r\n", "latin1");
const CODE: Record<number, string> = {
  [R_STORED]: "HD",
  [R_DELETED]: "HD",
  [R_NOT_STORED]: "NS",
  [R_EXISTS]: "EX",
  [R_NOT_FOUND]: "NF",
};

const errorLine = (reply: string): string => `${reply}\r\n`;
const OPAQUE_TOO_LONG = errorLine(META_REPLY.OPAQUE_TOO_LONG);
const ttlOf = (exptime: number, now: number): number => (exptime === 0 ? -1 : exptime - now);
/**
 * The TTL the t flag reports: -1 for none, else memcached's
 * itoa_u32(exptime - current_time), so an item already expired (a T-1
 * in the same command) reports 2^32 less its age. memcached's clock
 * starts 62 seconds before the process (ITEM_UPDATE_INTERVAL + 2) and
 * reads a time before that as its second 1 (realtime()): `startedAt`.
 */
const ttlFlag = (exptime: number, now: number, startedAt: number): number => (exptime === 0 ? -1 : (Math.max(exptime, startedAt - 61) - now) >>> 0);
/**
 * An absolute exptime for a flag's TTL, or -1 for none (store.ts reads -1
 * so). As memcached's realtime(): a time before its
 * clock's start (62 seconds before the server's, `startedAt`) is its
 * second 1, the time a negative TTL gives, so the two compare equal (R).
 */
const until = (ttl: number | undefined, now: number, startedAt: number): number => {
  if (ttl === undefined) return -1;
  const exptime = absoluteExptime(ttl, now);
  return exptime !== 0 && exptime <= startedAt - 62 ? 1 : exptime;
};

/**
 * Whether an mg leaves the item's hit marks alone: u, or an O too long
 * in a command memcached runs locked (T, N, R, h, l), whose bump comes
 * after its answer loop, which the O's error leaves.
 */
const noBumpOf = (f: MetaFlags): boolean => f.noBump || (f.opaqueTooLong && f.tokens.some((t) => "TNRhl".includes(t[0]!)));

export class MetaCommands {
  private readonly host: CommandHost;

  constructor(host: CommandHost) {
    this.host = host;
  }

  /** A meta command line's tokens: run it; the bytes of data that follow it (ms, also on its errors), or 0. */
  run(tokens: string[]): number {
    const cmd = parseMeta(tokens);
    const host = this.host;
    switch (cmd.kind) {
      case "mn":
        host.answerAll([MN], []);
        return 0;
      case "me":
        this.debug(cmd.key);
        return 0;
      case "mg":
        this.get(cmd.flags);
        return 0;
      case "md":
        this.delete(cmd.flags);
        return 0;
      case "ma":
        this.arith(cmd.flags, cmd.incr);
        return 0;
      case "ms": {
        const f = cmd.flags;
        const appending = cmd.mode === MODE_APPEND || cmd.mode === MODE_PREPEND;
        const vivify = appending && f.vivify !== undefined;
        return host.beginStore({
          kind: "store",
          mode: cmd.mode,
          key: f.key,
          flags: f.clientFlags,
          // Append and prepend ignore T; with N a miss stores the value with N's TTL (memcached).
          exptime: vivify ? f.vivify! : (f.ttl ?? 0),
          bytes: cmd.bytes,
          cas: cmd.mode === MODE_CAS || appending ? (f.compareCas ?? "") : "",
          noreply: false,
          meta: { flags: f, casIn: f.casIn ?? -1, invalidate: f.invalidate && cmd.mode === MODE_CAS, vivify },
        });
      }
      case "meta-error":
        host.answerAll([errorLine(cmd.reply)], []);
        return cmd.swallow;
    }
  }

  // ---- mg ----

  private get(f: MetaFlags): void {
    const host = this.host;
    const { ctx } = host;
    const now = host.now();
    // An item N creates gets the last of T and N (plan.vivify); the store applies T to an item it found only.
    const plan = exptimePlan(f, until(f.ttl, now, ctx.config.startedAt), until(f.vivify, now, ctx.config.startedAt));
    const recacheBefore = until(f.recache, now, ctx.config.startedAt);
    // An O too long stops memcached's answer loop, before it marks a win (and bumps: noBumpOf).
    const got = ctx.store.metaGet(f.key, now, plan.touch, plan.vivify, recacheBefore, f.casIn ?? -1, noBumpOf(f), plan.recacheFirst, f.opaqueTooLong);
    this.getAnswer(f, plan, got);
  }

  /** metaGet's outcome -> the answer. */
  private getAnswer(f: MetaFlags, plan: ExptimePlan, got: MetaGot): void {
    if (got.ref === 0) this.missAnswer(f);
    else this.hitAnswer(f, got.ref, got.bits, got.idle, got.bits & MG_CREATED ? plan.createdAtT : plan.touchedAtT ? got.exptime : got.before);
  }

  private missAnswer(f: MetaFlags): void {
    const chunks: Chunk[] = f.opaqueTooLong ? [OPAQUE_TOO_LONG] : f.quiet ? [] : f.tokens.length === 0 ? [EN] : [`EN${answerFlags(f)}\r\n`];
    if (chunks.length > 0) this.host.answerAll(chunks, []);
  }

  /**
   * A hit's answer: HD or VA and its flags, then the value (a view of the
   * item, held by `ref` until written). What may change in a published
   * item (its exptime, its marks) comes from the lookup, not the item.
   */
  private hitAnswer(f: MetaFlags, ref: number, bits: number, idle: number, exptime: number): void {
    const host = this.host;
    const v = host.ctx.views;
    const now = host.now();
    if (f.opaqueTooLong) {
      // The change (T, N, R) is made; the answer is the error (memcached).
      host.answerAll([OPAQUE_TOO_LONG], [ref]);
      return;
    }
    const ptr = host.ctx.map.valuePointer(ref);
    const length = v.length(ptr);
    const cas = v.cas(ptr);
    // C: the value only if the item changed since.
    const value = f.value && !(f.compareCas !== undefined && f.compareCas === String(cas));
    const values = { s: length, t: ttlFlag(exptime, now, host.ctx.config.startedAt), c: cas, f: v.flags(ptr), l: idle, h: bits & MG_FETCHED ? 1 : 0 };
    let line = (value ? `VA ${length}` : "HD") + answerFlags(f, values, (v.marks(ptr) & MARK_KEY_BINARY) !== 0);
    if (bits & MG_TOKEN_SENT) line += " Z";
    if (bits & MG_STALE) line += " X";
    if (bits & MG_WON) line += " W";
    const chunks: Chunk[] = [`${line}\r\n`];
    if (value) chunks.push(v.getsValueView(ptr, false));
    host.answerAll(chunks, [ref]);
  }

  // ---- md, ma ----

  private delete(f: MetaFlags): void {
    const host = this.host;
    const { ctx } = host;
    const now = host.now();
    const cas = f.compareCas ?? "";
    const casIn = f.casIn ?? -1;
    // md's T applies only with I (and x, which makes a new item).
    const touchTo = until(f.ttl, now, ctx.config.startedAt);
    const r = ctx.store.metaDelete(f.key, now, cas, casIn, touchTo, f.invalidate, f.removeValue, f.clientFlags);
    if (r === R_NO_MEMORY) host.answerAll([errorLine(REPLY.NO_MEMORY)], []);
    else if (r !== R_DELETED || !f.quiet) host.answerAll([`${CODE[r]}${answerFlags(f)}\r\n`], []);
  }

  private arith(f: MetaFlags, incr: boolean): void {
    const host = this.host;
    const { ctx } = host;
    const now = host.now();
    // An item N creates gets the last of T and N (plan.vivify); the store applies T to an item it found only.
    const plan = exptimePlan(f, until(f.ttl, now, ctx.config.startedAt), until(f.vivify, now, ctx.config.startedAt));
    const r = ctx.store.metaArith(f.key, now, incr, f.delta, f.compareCas ?? "", f.casIn ?? -1, plan.vivify, f.initial, plan.touch);
    if (typeof r === "number") {
      if (r === R_NON_NUMERIC) host.answerAll([errorLine(REPLY.NON_NUMERIC)], []);
      else if (r === R_NO_MEMORY) host.answerAll([errorLine(REPLY.NO_MEMORY)], []);
      else host.answerAll([f.opaqueTooLong ? OPAQUE_TOO_LONG : `${CODE[r]}${answerFlags(f)}\r\n`], []);
      return;
    }
    // Done, and then the opaque is found too long (memcached).
    if (f.opaqueTooLong) return host.answerAll([OPAQUE_TOO_LONG], []);
    if (f.quiet) return;
    const exptime = r.created ? plan.createdAtT : plan.touchedAtT ? r.exptime : r.before;
    const line = (f.value ? `VA ${r.value.length}` : "HD") + answerFlags(f, { c: r.cas, t: ttlFlag(exptime, now, ctx.config.startedAt) });
    host.answerAll([f.value ? `${line}\r\n${r.value}\r\n` : `${line}\r\n`], []);
  }

  // ---- me ----

  /** me: the item's metadata, read in place (nothing changes). */
  private debug(key: string): void {
    // memcached's cmd_meta counts me commands, hit or miss (the others count as gets, sets...).
    this.host.ctx.counters[STAT.cmd_meta]++;
    this.host.answerAll([this.debugLine(key)], []);
  }

  /** me's answer: ME, the key as the item's binary mark says (memcached re-encodes it so), its figures; or EN. */
  private debugLine(key: string): Chunk {
    const { ctx } = this.host;
    const now = this.host.now();
    const map = ctx.map;
    const v = ctx.views;
    const ref = map.acquire(key);
    if (ref === 0 || expired(v.exptime(map.valuePointer(ref)), now)) {
      if (ref !== 0) map.release(ref);
      return EN;
    }
    const ptr = map.valuePointer(ref);
    const binary = (v.marks(ptr) & MARK_KEY_BINARY) !== 0;
    const allocated = v.allocated(ptr);
    // The size class the item's entry came from, numbered from 1 as memcached's slab classes (beyond the last: a page span).
    let cls = 0;
    while (cls < CLASS_COUNT && classSize[cls]! < allocated) cls++;
    const line = `ME ${encodeKey(key, binary)} exp=${ttlOf(v.exptime(ptr), now)} la=${Math.max(0, now - v.accessed(ptr))} cas=${v.cas(ptr)} fetch=${v.fetched(ptr) ? "yes" : "no"} cls=${cls + 1} size=${v.itemBytes(ptr)}\r\n`;
    map.release(ref);
    return line;
  }
}

/** ms's answer, from what the store did (store.ts storeMeta); undefined: nothing (q). */
export function metaStoreAnswer(req: MetaStoreRequest, bytes: number, outcome: Stored): Chunk | undefined {
  const { result: code, cas, length } = outcome;
  if (code === R_NO_MEMORY) return errorLine(REPLY.NO_MEMORY_STORING);
  // The suite's memcached stores, then finds the opaque too long (1.6.18: before it stores).
  if (req.flags.opaqueTooLong) return OPAQUE_TOO_LONG;
  if (code === R_STORED && req.flags.quiet) return undefined;
  const stored = code === R_STORED;
  return `${CODE[code] ?? "SERVER_ERROR Unhandled storage type."}${answerFlags(req.flags, { c: stored ? cas : 0, s: stored ? length : bytes })}\r\n`;
}
