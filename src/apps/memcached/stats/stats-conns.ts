/**
 * `stats conns`: one block of lines per listening socket and per client
 * connection, as memcached prints them ("STAT <fd>:addr tcp:IP:PORT",
 * listen_addr, state, secs_since_last_cmd). Connections live on every
 * shard: each shard lists its own (shard.ts connectionList), the asking
 * one merges them. The id is the socket's file descriptor, as memcached's
 * (threads share one descriptor table, so ids are unique across shards);
 * a socket whose descriptor Node does not expose gets a number past every
 * descriptor instead. A listening descriptor shared by the shards is
 * listed once.
 */
import type { Server, Socket } from "node:net";

/** One socket's lines, without the "STAT <id>:" part. */
export interface ConnEntry {
  id: number;
  lines: Array<[string, string | number]>;
}

/** Ids for sockets without a descriptor: far above any descriptor (Linux allows at most 2^20 open by default). */
let syntheticId = 1 << 30;

/** A socket's (or listening server's) file descriptor, or a stable stand-in. */
export function descriptorOf(handleOwner: Socket | Server): number {
  // Node keeps the libuv handle, and its descriptor, on a field it does not document.
  const fd = (handleOwner as unknown as { _handle?: { fd?: unknown } })._handle?.fd;
  return typeof fd === "number" && fd >= 0 ? fd : syntheticId++;
}

/** memcached's address text: tcp:1.2.3.4:PORT, tcp6:[::1]:PORT. */
export function addressText(address: string | undefined, port: number | undefined, family: string | undefined): string {
  if (address === undefined) return "unknown";
  return family === "IPv6" ? `tcp6:[${address}]:${port ?? 0}` : `tcp:${address}:${port ?? 0}`;
}

/** Every shard's entries, in descriptor order, a descriptor once, then END. */
export function formatConns(perShard: readonly ConnEntry[][]): string {
  const byId = new Map<number, ConnEntry>();
  for (const list of perShard) for (const e of list) if (!byId.has(e.id)) byId.set(e.id, e);
  let out = "";
  for (const e of [...byId.values()].sort((a, b) => a.id - b.id)) for (const [k, v] of e.lines) out += `STAT ${e.id}:${k} ${v}\r\n`;
  return out + "END\r\n";
}
