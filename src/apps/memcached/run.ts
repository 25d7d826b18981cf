/**
 * `shardheap memcached`: the command line (runtime flags from
 * runtime/flags.ts plus the server's own), the server (server.ts), the
 * admin API when asked, and a graceful stop on Ctrl-C (or SIGTERM) that
 * prints the server's statistics and the heap profile tree, as the seed's
 * `memcached --heapprof` example does at exit.
 */
import type { Writable } from "node:stream";
import { UsageError } from "../../errors.js";
import { parseBoolean, parseInteger } from "../../parse.js";
import { formatRunProfile, profilerRan } from "../../report/run-profile.js";
import { mapProfileToSources } from "../../report/source-map.js";
import { serveAdmin } from "../../runtime/admin.js";
import { parseCommandFlags, type RuntimeFlags } from "../../runtime/flags.js";
import { DEFAULT_MEMORY_PER_SHARD } from "../../smp/options.js";
import { formatCount, formatSize, parseSize } from "../../units.js";
import { DEFAULT_MAX_ITEM_SIZE, DEFAULT_PORT } from "./config.js";
import { MAX_ITEM_SIZE, MIN_ITEM_SIZE, itemSizeLimit, startMemcached, type MemcachedOptions } from "./server.js";
import { totals } from "./stats.js";

export const MEMCACHED_USAGE = `       shardheap memcached [--smp N] [--memory SIZE] [--port P] [--host H] [--heapprof[=RATE]]
                        [--admin-port P [--admin-heap-image]] [--max-item-size SIZE]`;

export const MEMCACHED_HELP = `memcached serves the memcached ASCII protocol from the shared heap: every item
lives in the heap of the shard that owns its key; connections are spread over
the shards. It prints "memcached: listening on HOST:PORT (N shards)" once it
accepts; Ctrl-C stops it and prints its statistics and the heap profile tree.
  --port P           TCP port (default ${DEFAULT_PORT}; 0: any free port)
  --host H           address to listen on (default 127.0.0.1; memcached has no
                     authentication, so 0.0.0.0 only on a trusted network)
  --max-item-size S  largest item, key and header included (default ${formatSize(DEFAULT_MAX_ITEM_SIZE)}, or
                     half of --memory when less; at most half of --memory, as memcached's -I)
  --smp, --memory, --heapprof, --admin-port, --admin-heap-image: as for stress
                     (--memory is each shard's, items and all; the heap
                     profiler is off unless --heapprof is given)
`;

export interface MemcachedArgs extends MemcachedOptions {
  adminPort?: number;
  adminHeapImage?: boolean;
}

export function parseMemcachedArgs(argv: readonly string[]): MemcachedArgs {
  const flags: RuntimeFlags = {};
  const a: MemcachedArgs = {};
  parseCommandFlags(argv, flags, ({ arg, flag, inline, value }) => {
    switch (flag) {
      case "--port":
        a.port = parseInteger(value(), "--port", 0, 65535);
        break;
      case "--host":
        a.host = value();
        break;
      case "--max-item-size":
        a.maxItemSize = parseSize(value(), "--max-item-size", { min: MIN_ITEM_SIZE, max: MAX_ITEM_SIZE });
        break;
      case "--admin-port":
        a.adminPort = parseInteger(value(), "--admin-port", 0, 65535);
        break;
      case "--admin-heap-image":
        a.adminHeapImage = inline === undefined || parseBoolean(inline, "--admin-heap-image");
        break;
      default:
        throw new UsageError(`unknown flag for memcached: ${arg}`);
    }
  });
  // Checked here to name the flags; startMemcached checks the options again.
  if (a.maxItemSize !== undefined) itemSizeLimit(a.maxItemSize, flags.memory ?? DEFAULT_MEMORY_PER_SHARD, "--max-item-size", "--memory");
  if (flags.smp !== undefined) a.shards = flags.smp;
  if (flags.memory !== undefined) a.memoryPerShard = flags.memory;
  if (flags.heapprof !== undefined) a.heapprof = flags.heapprof;
  return a;
}

export interface RunOptions extends MemcachedArgs {
  /** Resolves to stop the server (the command wires Ctrl-C and SIGTERM to it). */
  interrupted: Promise<void>;
  out?: Writable;
}

/** Run the server until `interrupted`, then stop it and print what it held. */
export async function runMemcached(o: RunOptions): Promise<void> {
  const out = o.out ?? process.stdout;
  const say = (line: string): void => void out.write(`${line}\n`);
  const server = await startMemcached(o);
  const { smp } = server;
  smp.on("error", (e) => say(`shard ${e.shard} failed: ${e.message}`));
  let admin: { url: string; close(): Promise<void> } | undefined;
  try {
    // A server that cannot have the admin API it was asked for does not serve at all (as stress): the
    // finally below stops its shards and its port, and the error (EADDRINUSE: exit 2) says which port.
    if (o.adminPort !== undefined) admin = await serveAdmin(smp, { port: o.adminPort, allowHeapImage: o.adminHeapImage ?? false }).catch(inAdminServer);
    if (admin) say(`admin: ${admin.url}`);
    const host = server.host.includes(":") ? `[${server.host}]` : server.host;
    say(`memcached: listening on ${host}:${server.port} (${server.shards} shards)`);
    await o.interrupted;
    say("memcached: stopping");
    await server.stopAccepting();
    const t = totals(server.config);
    say(
      `${formatCount(t.total_connections)} connections, ${formatCount(t.cmd_get)} gets (${formatCount(t.get_hits)} hits), ` +
        `${formatCount(t.cmd_set)} sets, ${formatCount(t.evictions)} evictions; ${formatCount(t.curr_items)} items, ${formatSize(t.bytes)} in them`,
    );
    say("shard     items       used       free  cross-shard frees");
    for (let s = 0; s < server.shards; s++) {
      const m = smp.stats(s);
      const items = await smp.submitTo<{ items: number }>(s, "census");
      say(
        `${String(s).padStart(5)} ${formatCount(items.items).padStart(9)} ${formatSize(m.allocatedMemory).padStart(10)} ` +
          `${formatSize(m.freeMemory).padStart(10)} ${formatCount(m.crossShardFrees).padStart(18)}`,
      );
    }
    say("");
    const profile = await mapProfileToSources(smp.heapProfile());
    if (profilerRan(smp.options.heapprofRate, profile)) {
      out.write(formatRunProfile(profile));
    } else {
      say("Heap profiler was off (--heapprof to turn it on).");
    }
  } finally {
    await admin?.close();
    await server.close();
  }
}

/** The admin server's failure to start, said as its own (the memcached port fails with the same words otherwise). */
function inAdminServer(e: unknown): never {
  if (e instanceof Error) e.message = `the admin server (--admin-port): ${e.message}`;
  throw e;
}

/** The `shardheap memcached` command: flags, then the server until Ctrl-C (a second Ctrl-C leaves at once). */
export async function memcachedCommand(argv: readonly string[]): Promise<void> {
  const args = parseMemcachedArgs(argv);
  let interrupt!: () => void;
  const interrupted = new Promise<void>((r) => (interrupt = r));
  const onSignal = (): void => {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    process.once("SIGINT", () => process.exit(130));
    interrupt();
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  try {
    await runMemcached({ ...args, interrupted });
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
}
