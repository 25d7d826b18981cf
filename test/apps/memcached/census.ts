/**
 * Test helpers for what `shardheap memcached` connections hold
 * (backpressure.ts): each shard's census (shard.ts), the most one
 * connection held, clients that send and never read, and a bounded wait.
 */
import type { Holding } from "../../../dist/apps/memcached/network/backpressure.js";
import type { MemcachedServer } from "../../../dist/apps/memcached/server.js";
import type { SharedMapStats } from "../../../dist/index.js";
import { RawClient } from "./client.js";

/** A shard's census task's answer (shard.ts census). */
export interface Census {
  connections: number;
  index: SharedMapStats;
  holding: Holding;
  jsMemoryBytes: number;
}

/** Both shards' census, in shard order (a server of two shards). */
export const census = (server: MemcachedServer): Promise<Census[]> => Promise.all([0, 1].map((s) => server.smp.submitTo<Census>(s, "census")));

/** Poll `check` (bounded) until it holds. */
export async function until(check: () => Promise<boolean>, what: string, timeoutMs = 20_000): Promise<void> {
  const t0 = performance.now();
  while (!(await check())) {
    if (performance.now() - t0 > timeoutMs) throw new Error(`waited ${timeoutMs} ms for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Clients that send `script` and never read (their sockets paused). */
export async function hogs(server: MemcachedServer, n: number, script: Buffer): Promise<RawClient[]> {
  const clients = await Promise.all(Array.from({ length: n }, () => RawClient.open(server.port)));
  for (const c of clients) {
    c.socket.pause();
    c.send(script);
  }
  return clients;
}

/** The most any connection held, over both shards, and the sums now. */
export function worst(shards: Census[]): Holding {
  const h = shards.map((s) => s.holding);
  return {
    unsentBytes: h.reduce((a, x) => a + x.unsentBytes, 0),
    unsentPieces: h.reduce((a, x) => a + x.unsentPieces, 0),
    peakUnsentBytes: Math.max(...h.map((x) => x.peakUnsentBytes)),
    peakUnsentPieces: Math.max(...h.map((x) => x.peakUnsentPieces)),
    stopped: h.reduce((a, x) => a + x.stopped, 0),
    heldBytes: h.reduce((a, x) => a + x.heldBytes, 0),
    peakHeldBytes: Math.max(...h.map((x) => x.peakHeldBytes)),
  };
}

/**
 * Until `n` connections have stopped reading, twice alike (while the
 * kernel's socket buffers take the answers, a connection stops and goes on
 * again), or one holds `far` times the bounds (without them: return at
 * once, the caller's checks fail on the bound itself).
 */
export async function untilStopped(server: MemcachedServer, n: number, maxBytes: number, maxPieces: number, far = 4): Promise<void> {
  let last = "";
  await until(async () => {
    const h = worst(await census(server));
    if (h.peakUnsentBytes > far * maxBytes || h.peakUnsentPieces > far * maxPieces) return true;
    const now = `${h.stopped} ${h.unsentBytes} ${h.unsentPieces}`;
    const steady = h.stopped === n && now === last;
    last = now;
    return steady;
  }, `${n} connections to stop reading`);
}

/**
 * One client per shard of a two-shard server, in shard order: connections
 * opened one at a time, each kept once the census shows it on a shard
 * that has none of these yet (the kernel or the shards' turns decide where
 * a connection goes; a write is made on the connection's shard, so a test
 * of two shards' writes needs one of each). At most 32 tries.
 */
export async function clientPerShard(server: MemcachedServer): Promise<RawClient[]> {
  const mine: Array<RawClient | undefined> = [undefined, undefined];
  const extra: RawClient[] = [];
  let before = (await census(server)).map((c) => c.connections);
  try {
    for (let tries = 0; tries < 32 && (mine[0] === undefined || mine[1] === undefined); tries++) {
      const c = await RawClient.open(server.port);
      let now = before;
      await until(async () => {
        now = (await census(server)).map((x) => x.connections);
        return now[0]! + now[1]! > before[0]! + before[1]!;
      }, "the new connection counted on a shard");
      const on = now[0]! > before[0]! ? 0 : 1;
      before = now;
      if (mine[on] === undefined) mine[on] = c;
      else extra.push(c);
    }
  } finally {
    for (const c of extra) c.close();
  }
  if (mine[0] === undefined || mine[1] === undefined) {
    for (const c of mine) c?.close();
    throw new Error("32 connections all went to one shard");
  }
  return [mine[0], mine[1]];
}
