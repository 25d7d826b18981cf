/**
 * `shardheap memcached`: the command line (runtime flags from
 * runtime/flags.ts plus the server's own), the server (server.ts), the
 * admin API when asked, and a graceful stop on Ctrl-C (or SIGTERM) that
 * prints the server's statistics and the heap profile tree, as the seed's
 * `memcached --heapprof` example does at exit.
 */
import { readFileSync } from "node:fs";
import type { Writable } from "node:stream";
import { UsageError } from "../../errors.js";
import { parseBoolean, parseInteger } from "../../parse.js";
import { formatJsHeapRunProfile, formatRunProfile, profilerRan } from "../../report/run-profile.js";
import { mapProfileToSources } from "../../report/source-map.js";
import { serveAdmin } from "../../runtime/admin.js";
import { jsHeapProfileOf } from "../../runtime/heap-kinds.js";
import { checkProfilerSitesFlag, parseCommandFlags, type RuntimeFlags } from "../../runtime/flags.js";
import type { FlagTable } from "../../runtime/command-line.js";
import { HEAP_HEADER_BYTES, MAX_HEAP_BYTES } from "../../memory/layout.js";
import { MIN_SHARD_BYTES } from "../../memory/shared-heap.js";
import { DEFAULT_MEMORY_PER_SHARD, fillSmpOptions } from "../../smp/options.js";
import { formatCount, formatSize, parseSize } from "../../units.js";
import { shardBytesForItems } from "./store/cache-memory.js";
import { DEFAULT_MAX_ITEM_SIZE, DEFAULT_PORT, VERSION } from "./config.js";
import { MEMCACHED_FLAGS_HELP, finishMemcachedFlags, ignoredOptions, newMemcachedFlags, parseMemcachedLetter, parseMemcachedLongFlag, MEMCACHED_FLAG_TABLE } from "./memcached-flags.js";
import { removePidFile, runAs, runningAsRoot, writePidFile } from "./service.js";
import { daemonLink, daemonize } from "./daemon.js";
import { MAX_ITEM_SIZE, MIN_ITEM_SIZE, itemSizeLimit, startMemcached, type MemcachedOptions } from "./server.js";
import { totals } from "./stats/stats.js";

export const MEMCACHED_USAGE = `       shardheap memcached [--smp N] [--memory SIZE] [--port P] [--host H] [--heapprof[=RATE]]
                        [--heapprof-sites N] [--jsheapprof[=RATE]] [--admin-port P [--admin-heap-image]] [--max-item-size SIZE]
                        [memcached's: -p P -l H -U 0 -m MB -c N -t N -I SIZE -M -F -R N -D C -C
                         -b N -B auto|ascii -X -u USER -P FILE -d -v -o idle_timeout=N -h, and
                         the rest of memcached 1.6's options, checked and ignored or refused]`;

export const MEMCACHED_HELP = `memcached serves the memcached ASCII protocol from the shared heap: every item
lives in the heap of the shard that owns its key; connections are spread over
the shards. It prints "memcached: listening on HOST:PORT (N shards)" once it
accepts; Ctrl-C stops it and prints its statistics and the heap profile tree.
  --port P           TCP port (default ${DEFAULT_PORT}; 0: any free port)
  --host H           address to listen on (default 127.0.0.1; memcached has no
                     authentication, so 0.0.0.0 only on a trusted network)
  --max-item-size S  largest item, key and header included (default ${formatSize(DEFAULT_MAX_ITEM_SIZE)}, or
                     half of --memory when less; at most half of --memory, as memcached's -I)
  --smp, --memory, --heapprof, --heapprof-sites, --jsheapprof, --admin-port, --admin-heap-image: as for stress
                     (--memory is each shard's, items and all; the heap
                     profiler is off unless --heapprof is given)
${MEMCACHED_FLAGS_HELP}`;

export interface MemcachedArgs extends MemcachedOptions {
  /** --jsheapprof: each shard's JS heap profiler, one sample per N bytes (0 off). */
  jsHeapprof?: number;
  adminPort?: number;
  adminHeapImage?: boolean;
  /** -h: print the help, serve nothing. */
  help?: boolean;
  /** -V: print the version, serve nothing. */
  version?: boolean;
  /** -i: print the license, serve nothing. */
  license?: boolean;
  /** -u: the user to run as once the port is bound (only when started as root, as memcached). */
  user?: string;
  /** -P: the file the process id is written to once serving (removed at a graceful stop). */
  pidFile?: string;
  /** -d: serve from a daemon process; the command exits once it serves (daemon.ts). */
  daemon?: boolean;
  /** memcached's options taken and ignored (what they tune is not here), each once: [option, why]. */
  ignored?: Array<[option: string, why: string]>;
}

const MIB = 1024 * 1024;

/** Both spellings of one setting given (shardheap's and memcached's): which one was meant is not for us to guess. */
function oneOf(ours: string, given: unknown, theirs: string, alsoGiven: unknown): void {
  if (given !== undefined && alsoGiven !== undefined) throw new UsageError(`${ours} and ${theirs} say the same thing: give one of them`);
}

/** shardheap memcached's own flags beside memcached's (--port and --max-item-size shardheap's: memcached's long --port is -p's). */
const MEMCACHED_ARGS: FlagTable = {
  ...MEMCACHED_FLAG_TABLE,
  "--port": "value", "--host": "value", "--max-item-size": "value", "--admin-port": "value", "--admin-heap-image": "switch",
};

export function parseMemcachedArgs(argv: readonly string[]): MemcachedArgs {
  const flags: RuntimeFlags = {};
  const a: MemcachedArgs = {};
  const m = newMemcachedFlags();
  parseCommandFlags(argv, flags, ({ arg, flag, short, inline, value }) => {
    // memcached's own options: one "-" and a letter (getopt's way).
    if (short) {
      parseMemcachedLetter(flag.slice(1), value, m);
      return;
    }
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
        // memcached's long names (--user, --pidfile=...); --port and --max-item-size are shardheap's own, above.
        if (!parseMemcachedLongFlag(flag, inline, value, m)) throw new UsageError(`unknown flag for memcached: ${arg}`);
    }
  }, { flags: MEMCACHED_ARGS, clusters: true });
  if (m.help) return { help: true };
  if (m.version) return { version: true };
  if (m.license) return { license: true };
  finishMemcachedFlags(m);
  oneOf("--smp", flags.smp, "-t", m.threads);
  oneOf("--memory", flags.memory, "-m", m.memoryTotal);
  oneOf("--port", a.port, "-p", m.port);
  oneOf("--host", a.host, "-l", m.host);
  oneOf("--max-item-size", a.maxItemSize, "-I", m.maxItemSize);
  const shards = flags.smp ?? m.threads;
  if (shards !== undefined) a.shards = shards;
  if (m.port !== undefined) a.port = m.port;
  if (m.host !== undefined) a.host = m.host;
  if (m.evict !== undefined) a.evict = m.evict;
  if (m.flushAllowed !== undefined) a.flushAllowed = m.flushAllowed;
  if (m.sub.idleTimeout !== undefined) a.idleTimeout = m.sub.idleTimeout;
  if (m.dumpEnabled !== undefined) a.dumpEnabled = m.dumpEnabled;
  if (m.user !== undefined) a.user = m.user;
  if (m.pidFile !== undefined) a.pidFile = m.pidFile;
  if (m.daemon !== undefined) a.daemon = m.daemon;
  const ignored = ignoredOptions(m);
  if (ignored.size > 0) a.ignored = [...ignored];
  if (m.requestsPerEvent !== undefined) a.requestsPerEvent = m.requestsPerEvent;
  if (m.maxConnections !== undefined) a.maxConnections = m.maxConnections;
  if (m.prefixDelimiter !== undefined) a.prefixDelimiter = m.prefixDelimiter;
  if (m.verbosity !== undefined) a.verbosity = m.verbosity;
  if (m.casEnabled !== undefined) a.casEnabled = m.casEnabled;
  if (m.tcpBacklog !== undefined) a.tcpBacklog = m.tcpBacklog;
  if (m.protocol !== undefined) a.protocol = m.protocol;
  let memory = flags.memory;
  let memoryFlag = "--memory";
  let region = memory;
  if (m.memoryTotal !== undefined) {
    // memcached's -m is the whole cache's items: each shard's items take their share, its region more (cache-memory.ts).
    const split = shards ?? fillSmpOptions({}).shards;
    memory = Math.floor(m.memoryTotal / split);
    memoryFlag = "-m";
    if (memory < MIN_SHARD_BYTES) {
      throw new UsageError(`-m ${m.memoryTotal / MIB}: ${formatSize(memory)} for each of ${split} shards, below the ${formatSize(MIN_SHARD_BYTES)} a shard needs`);
    }
    if (m.maxItemSize !== undefined && m.maxItemSize > m.memoryTotal / 2) {
      throw new UsageError(`-I ${formatSize(m.maxItemSize)}: Cannot set item size limit higher than 1/2 of memory max (-m ${m.memoryTotal / MIB}).`);
    }
    region = shardBytesForItems(memory, split, flags.heapprofSites);
    if (HEAP_HEADER_BYTES + split * region > MAX_HEAP_BYTES) {
      throw new UsageError(
        `-m ${m.memoryTotal / MIB}: the items' ${formatSize(m.memoryTotal)} need ${formatSize(split * region)} of heap with their index and slack, above the 4 GiB one heap holds`,
      );
    }
    a.itemMemory = m.memoryTotal;
  }
  const itemFlag = m.maxItemSize === undefined ? "--max-item-size" : "-I";
  const maxItemSize = a.maxItemSize ?? m.maxItemSize;
  if (maxItemSize !== undefined) a.maxItemSize = maxItemSize;
  // Checked here to name the flags; startMemcached checks the options again.
  if (maxItemSize !== undefined) itemSizeLimit(maxItemSize, memory ?? DEFAULT_MEMORY_PER_SHARD, itemFlag, memoryFlag);
  if (flags.memory !== undefined) a.memoryPerShard = flags.memory;
  checkProfilerSitesFlag(flags, region ?? DEFAULT_MEMORY_PER_SHARD, memoryFlag === "-m" ? "each shard's region for its share of -m" : memoryFlag);
  if (flags.heapprof !== undefined) a.heapprof = flags.heapprof;
  if (flags.heapprofSites !== undefined) a.heapprofSites = flags.heapprofSites;
  if (flags.jsHeapprof !== undefined) a.jsHeapprof = flags.jsHeapprof;
  return a;
}

export interface RunOptions extends MemcachedArgs {
  /** Resolves to stop the server (the command wires Ctrl-C and SIGTERM to it). */
  interrupted: Promise<void>;
  out?: Writable;
  /** Called once the server serves (its "listening" line written): -d's daemon tells its command. */
  ready?: () => void;
}

/** Run the server until `interrupted`, then stop it and print what it held. */
export async function runMemcached(o: RunOptions): Promise<void> {
  // memcached's rule and words: root serves only as a user it was told to become (-u root included), so
  // a service line that forgot -u does not serve the network as root.
  if (o.user === undefined && runningAsRoot()) throw new UsageError("can't run as root without the -u switch");
  const out = o.out ?? process.stdout;
  const say = (line: string): void => void out.write(`${line}\n`);
  const server = await startMemcached(o);
  const { smp } = server;
  smp.on("error", (e) => say(`shard ${e.shard} failed: ${e.message}`));
  let admin: { url: string; close(): Promise<void> } | undefined;
  let pidWritten = false;
  try {
    if (o.jsHeapprof) await smp.setJsHeapProfiling("all", o.jsHeapprof);
    // A server that cannot have the admin API it was asked for does not serve at all (as stress): the
    // finally below stops its shards and its port, and the error (EADDRINUSE: exit 2) says which port.
    if (o.adminPort !== undefined) admin = await serveAdmin(smp, { port: o.adminPort, allowHeapImage: o.adminHeapImage ?? false }).catch(inAdminServer);
    if (admin) say(`admin: ${admin.url}`);
    // As memcached: the user changes once the ports are bound (a port below 1024 needs root), then the pid file is written, as that user.
    if (o.user !== undefined) runAs(o.user);
    if (o.pidFile !== undefined) pidWritten = writePidFile(o.pidFile);
    const host = server.host.includes(":") ? `[${server.host}]` : server.host;
    say(`memcached: listening on ${host}:${server.port} (${server.shards} shards)`);
    o.ready?.();
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
    if (o.jsHeapprof) out.write(`\n${formatJsHeapRunProfile(await mapProfileToSources(await jsHeapProfileOf(smp, undefined)))}`);
  } finally {
    if (pidWritten) removePidFile(o.pidFile!);
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
  if (args.help) {
    process.stdout.write(`usage:${MEMCACHED_USAGE.slice(6)}\n\n${MEMCACHED_HELP}`);
    return;
  }
  if (args.version) {
    process.stdout.write(`memcached ${VERSION}\n`);
    return;
  }
  if (args.license) {
    process.stdout.write(readFileSync(new URL("../../../LICENSE", import.meta.url), "utf8"));
    return;
  }
  for (const [option, why] of args.ignored ?? []) process.stderr.write(`shardheap memcached: ignoring memcached's ${option}: ${why}\n`);
  const daemon = daemonLink();
  if (args.daemon && daemon === undefined) {
    await daemonize((args.verbosity ?? 0) > 0);
    return;
  }
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
    await runMemcached({ ...args, interrupted, ...(daemon === undefined ? {} : { ready: daemon.ready }) });
  } catch (e) {
    daemon?.failed(e);
    throw e;
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
}
