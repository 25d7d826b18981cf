/**
 * What every shard of `shardheap memcached` is told at start (the main
 * thread's server.ts fills it, shard.ts keeps it): limits, identity and
 * the shared statistics block. Plain data: it travels to each shard as a
 * task argument (the SharedArrayBuffer arrives shared).
 */
import { readFileSync } from "node:fs";

/** memcached's default port. */
export const DEFAULT_PORT = 11211;
/** memcached's default item size limit (-I), header and key included. */
export const DEFAULT_MAX_ITEM_SIZE = 1024 * 1024;
/**
 * What `version` answers (and `stats`' version, and -V): the memcached
 * release whose protocol this server speaks, in memcached's own numeric
 * form, as Debian's 1.6.18 answers. Clients parse it: libmemcached reads
 * major.minor.micro from the front, and the npm `memcached` client
 * matches /(\d+)\.(\d+)\.(\d+)$/ and threw on "1.6.18-shardheap".
 * What the server is, is said where no client parses it: `stats`'
 * shardheap_version (shardheapVersion).
 */
export const VERSION = "1.6.18";

let packageVersion: string | undefined;
/** shardheap's own version, from the package.json that ships beside src/ and dist/. */
export function shardheapVersion(): string {
  packageVersion ??= (JSON.parse(readFileSync(new URL("../../../package.json", import.meta.url), "utf8")) as { version: string }).version;
  return packageVersion;
}

/** memcached's -R default: requests one connection may run per event before it yields. */
export const DEFAULT_REQUESTS_PER_EVENT = 20;
/** memcached's -c default. */
export const DEFAULT_MAX_CONNECTIONS = 1024;
/** memcached's -b default: the listen backlog (the kernel caps it at net.core.somaxconn). */
export const DEFAULT_TCP_BACKLOG = 1024;
/** memcached's -D default (stats detail, the `prefix` label). */
export const DEFAULT_PREFIX_DELIMITER = ":";

export interface ServerConfig {
  /** Largest item (header, key and value), bytes. */
  maxItemSize: number;
  shards: number;
  /** Bytes of each shard's heap region (--memory, or what -m's share needs: cache-memory.ts). */
  memoryPerShard: number;
  /** Bytes each shard's items may take (-m's share: memcached's limit_maxbytes); 0 under --memory: 90% of the region, the index's bytes counted with the items'. */
  itemMemoryPerShard: number;
  /** Unix seconds when the server started (stats: uptime). */
  startedAt: number;
  /** Where it listens (stats settings). */
  host: string;
  port: number;
  /** The per-shard counters (stats.ts), shared by every shard. */
  statsBuffer: SharedArrayBuffer;
  /** Every shard's inbox of items other shards replaced or deleted (hand-over.ts), shared by every shard. */
  inboxes: SharedArrayBuffer;
  /** Evict the least recently used items when memory is full (memcached's default); false: -M, answer an error instead. */
  evict: boolean;
  /** flush_all is allowed (false: -F). */
  flushAllowed: boolean;
  /** stats cachedump and stats detail are allowed (false: -X). */
  dumpEnabled: boolean;
  /** Close connections idle this many seconds (-o idle_timeout); 0: never. */
  idleTimeout: number;
  /** Requests one connection runs per event before it yields to others (-R). */
  requestsPerEvent: number;
  /** Connections open at once, at most (-c). */
  maxConnections: number;
  /** Where a key's prefix ends (-D): stats detail, the `prefix` label. */
  prefixDelimiter: string;
  /** `stats detail` counts from the start (memcached's -D turns it on); `stats detail on|off` changes it. */
  statsDetail: boolean;
  /** -v (1), -vv (2), -vvv (3); the verbosity command changes nothing else. */
  verbosity: number;
  /** Items get cas values (false: -C, every cas is 0). */
  casEnabled: boolean;
  /** The listen backlog (-b). */
  tcpBacklog: number;
  /**
   * -B: "auto" (memcached's default) reads a connection's first byte: 0x80
   * opens the binary protocol, answered with a binary "not supported" and
   * the end (binary is not spoken here); "ascii" reads every byte as text.
   */
  protocol: "auto" | "ascii";
}

/** What the cache's size means for limit_maxbytes and cache_memlimit, per shard: -m's share, or the region (--memory). */
export function cacheBytesPerShard(config: Pick<ServerConfig, "memoryPerShard" | "itemMemoryPerShard">): number {
  return config.itemMemoryPerShard || config.memoryPerShard;
}
