/**
 * A storage command's two ends, for the classic ones (set, add, replace,
 * append, prepend, cas) and ms alike: at its line, an entry reserved in
 * this shard's memory for the item its data block fills (the connection
 * copies the data straight from the socket's buffers into it:
 * network/connection.ts); at the block's end, the item published by the
 * store (store/store.ts) and the answer. Between the two the entry is
 * the connection's, given up if it closes.
 */
import { MARK_KEY_BINARY, itemSize } from "../store/item.js";
import { R_DELETED, R_EXISTS, R_NO_MEMORY, R_NOT_FOUND, R_NOT_STORED, R_STORED, R_TOUCHED } from "../store/store.js";
import { word } from "../protocol/answers.js";
import type { MetaStoreCommand } from "../protocol/meta-protocol.js";
import { MODE_SET, REPLY, absoluteExptime } from "../protocol/protocol.js";
import { STAT } from "../stats/stats.js";
import type { CommandHost } from "./command-host.js";
import { metaStoreAnswer } from "./meta-commands.js";

/** Store results (store.ts R_*) -> the classic commands' answers. */
export const STORE_ANSWER: Record<number, string> = {
  [R_STORED]: REPLY.STORED,
  [R_NOT_STORED]: REPLY.NOT_STORED,
  [R_EXISTS]: REPLY.EXISTS,
  [R_NOT_FOUND]: REPLY.NOT_FOUND,
  [R_DELETED]: REPLY.DELETED,
  [R_TOUCHED]: REPLY.TOUCHED,
  [R_NO_MEMORY]: REPLY.NO_MEMORY_STORING,
};

/**
 * A storage command's line: the entry reserved for its item, its head
 * written (key, flags, exptime, length), and the item's pointer; or 0 and
 * 0 when refused (too large, or no memory: answered here unless noreply).
 */
export function reserveItem(host: CommandHost, cmd: MetaStoreCommand): { ptr: number; ref: number } {
  const { ctx } = host;
  const size = itemSize(cmd.key.length, cmd.flags, cmd.bytes);
  if (size > ctx.config.maxItemSize) {
    ctx.counters[STAT.store_too_large]++;
    if (!cmd.noreply) host.answer(word(REPLY.TOO_LARGE));
    return refused(host, cmd);
  }
  const ref = ctx.store.reserve(cmd.key, size);
  const ptr = ref === 0 ? 0 : ctx.map.valuePointer(ref);
  if (ptr === 0) {
    ctx.counters[STAT.store_no_memory]++;
    if (!cmd.noreply) host.answer(word(REPLY.NO_MEMORY_STORING));
    return refused(host, cmd);
  }
  // The allocated size is the store's to write when it links the item (item-cache.ts link).
  ctx.views.writeHead(ptr, 0, cmd.key, cmd.flags, absoluteExptime(cmd.exptime, host.now()), cmd.bytes);
  if (cmd.meta?.flags.binary) ctx.views.setMarks(ptr, MARK_KEY_BINARY);
  return { ptr, ref };
}

/** Nowhere for the data to go; memcached: a set that fails leaves no stale value behind. */
function refused(host: CommandHost, cmd: MetaStoreCommand): { ptr: number; ref: number } {
  if (cmd.mode === MODE_SET) host.ctx.store.forget(cmd.key);
  return { ptr: 0, ref: 0 };
}

/** The data block of the item at `ptr` (entry `ref`) has ended: store it and answer, or give it up if its \r\n is missing. */
export function storeReceived(host: CommandHost, cmd: MetaStoreCommand, ptr: number, ref: number): void {
  const { ctx } = host;
  if (!ctx.views.terminated(ptr)) {
    ctx.store.giveUp(ref);
    if (!cmd.noreply) host.answer(word(REPLY.BAD_DATA_CHUNK));
    return;
  }
  const now = host.now();
  const meta = cmd.meta;
  if (meta === undefined) {
    const result = ctx.store.storeReserved(cmd.mode, cmd.key, ref, cmd.cas, now);
    if (!cmd.noreply) host.answer(word(STORE_ANSWER[result]!));
    return;
  }
  const stored = ctx.store.storeMeta(cmd.mode, cmd.key, ref, cmd.cas, now, { casIn: meta.casIn, invalidate: meta.invalidate, vivify: meta.vivify });
  const chunk = metaStoreAnswer(meta, cmd.bytes, stored);
  if (chunk !== undefined) host.answer(chunk);
}
