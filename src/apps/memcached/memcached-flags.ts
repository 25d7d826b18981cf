/**
 * memcached's own command line on `shardheap memcached` (run.ts hands it
 * every argument that is not one of shardheap's --flags), so an operator
 * can swap the binary: -p -l -U 0 -m -c -t -I -M -F -R -D -C -b
 * -B auto|ascii -v[v[v]] -o idle_timeout=N, as getopt reads them (`-p 11211`, `-p11211`, switches
 * clustered: `-Mv`). Values are checked with memcached's rules and words
 * (memcached.c's main); every other memcached option is refused with a
 * line naming it and why it has no meaning here, never ignored.
 */
import { UsageError } from "../../errors.js";
import { MAX_SHARDS } from "../../memory/shared-heap.js";
import { DEFAULT_MAX_ITEM_SIZE } from "./config.js";

/** What memcached's flags asked for (undefined: not given). */
export interface MemcachedFlags {
  port?: number;
  host?: string;
  /** -m: bytes for the whole cache (memcached's megabytes), split over the shards. */
  memoryTotal?: number;
  maxConnections?: number;
  /** -t: shards. */
  threads?: number;
  /** -I, bytes. */
  maxItemSize?: number;
  /** -M: false. */
  evict?: boolean;
  /** -F: false. */
  flushAllowed?: boolean;
  requestsPerEvent?: number;
  prefixDelimiter?: string;
  idleTimeout?: number;
  verbosity?: number;
  /** -C: false. */
  casEnabled?: boolean;
  /** -b: the listen backlog. */
  tcpBacklog?: number;
  /** -B auto|ascii. */
  protocol?: "auto" | "ascii";
  /** -h: print the help and stop. */
  help?: boolean;
  /** -V: print the version and stop. */
  version?: boolean;
}

/** memcached's -I bounds (memcached.c: ITEM_SIZE_MAX_LOWER_LIMIT, ITEM_SIZE_MAX_UPPER_LIMIT). */
export const MEMCACHED_MIN_ITEM_SIZE = 1024;
export const MEMCACHED_MAX_ITEM_SIZE = 1024 * 1024 * 1024;
const MIB = 1024 * 1024;

/** memcached's options that take a value, so `-b 10` is refused as one option (not `-b` and an operand). */
const TAKES_VALUE = new Set("pslaUmcRtDIoPfnBbuYeN".split(""));

/** memcached's options with no meaning here, and why. */
const NOT_HERE: Record<string, string> = {
  d: "daemon mode: run it under a service manager",
  s: "unix sockets: shardheap memcached listens on TCP only",
  a: "unix sockets: shardheap memcached listens on TCP only",
  S: "SASL: shardheap memcached has no authentication",
  Y: "authentication: shardheap memcached has none",
  Z: "TLS: shardheap memcached speaks plain TCP only",
  B: "the binary protocol: shardheap memcached speaks the ASCII protocol only (-B auto and -B ascii are taken)",
  f: "there are no slab classes: shardheap's size classes are fixed",
  n: "there are no slab classes: shardheap's size classes are fixed",
  L: "large pages: the heap is one SharedArrayBuffer",
  k: "locking memory down: the heap is one SharedArrayBuffer",
  e: "memory files (warm restart): the heap lives in the process",
  r: "core file limits: set them with ulimit",
  u: "changing user: run it as the user it should run as",
  P: "pid files: the service manager knows the pid",
  A: "the shutdown command: stop it with SIGTERM or Ctrl-C",
  X: "stats cachedump and lru_crawler metadump cannot be turned off",
  W: "watchers (the watch command)",
  N: "NAPI ids",
};

/**
 * memcached's -o options with no meaning here, and why (a prefix ends
 * with "_"). Only idle_timeout is taken.
 */
const O_NOT_HERE: Array<[prefix: string, why: string]> = [
  ["ext_", "extstore: shardheap memcached keeps items in memory only"],
  ["ssl_", "TLS: shardheap memcached speaks plain TCP only"],
  ["proxy_", "the proxy: shardheap memcached is a cache, not a proxy"],
  ["slab_", "there are no slab classes: shardheap's size classes are fixed"],
  ["lru_", "there are no LRU threads: each shard evicts its own least recently used items"],
  ["no_lru_", "there are no LRU threads: each shard evicts its own least recently used items"],
  ["modern", "memcached's slab and LRU defaults: shardheap has neither"],
  ["no_modern", "memcached's slab and LRU defaults: shardheap has neither"],
  ["hash", "the key hash is shardheap's"],
  ["relaxed_privileges", "shardheap changes no privileges"],
  ["drop_privileges", "shardheap changes no privileges"],
  ["memory_file", "memory files (warm restart): the heap lives in the process"],
  ["watcher_", "watchers (the watch command)"],
];

/** memcached's -I value: bytes, or a count with k/K or m/M (memcached.c reads no other unit). */
export function parseItemSize(value: string): number {
  const m = /^(\d{1,10})([kKmM]?)$/.exec(value);
  if (m === null) throw new UsageError(`-I ${value}: the item size is bytes, or a number with k or m (512k, 2m)`);
  const n = Number(m[1]) * (m[2] === "" ? 1 : m[2]!.toLowerCase() === "k" ? 1024 : MIB);
  if (n < MEMCACHED_MIN_ITEM_SIZE) throw new UsageError(`-I ${value}: Item max size cannot be less than 1024 bytes.`);
  if (n > MEMCACHED_MAX_ITEM_SIZE) throw new UsageError(`-I ${value}: Cannot set item size limit higher than 1 GB.`);
  return n;
}

/** A whole number in [min, max], in memcached's words when it is not (`what`: what memcached calls it). */
function whole(flag: string, value: string, min: number, max: number, what: string): number {
  if (!/^-?\d{1,15}$/.test(value)) throw new UsageError(`${flag} ${value}: ${what} must be a whole number`);
  const n = Number(value);
  if (n < min) throw new UsageError(`${flag} ${value}: ${what} must be greater than ${min - 1}`);
  if (n > max) throw new UsageError(`${flag} ${value}: ${what} must be at most ${max}`);
  return n;
}

/** One -o option (a comma list: `-o idle_timeout=5`). */
function extendedOption(opt: string, into: MemcachedFlags): void {
  const eq = opt.indexOf("=");
  const name = eq < 0 ? opt : opt.slice(0, eq);
  if (name === "idle_timeout") {
    if (eq < 0) throw new UsageError("-o idle_timeout needs a value: -o idle_timeout=SECONDS");
    into.idleTimeout = whole("-o idle_timeout=", opt.slice(eq + 1), 0, 2 ** 31 - 1, "idle_timeout");
    return;
  }
  const why = O_NOT_HERE.find(([prefix]) => (prefix.endsWith("_") ? name.startsWith(prefix) : name === prefix))?.[1];
  throw new UsageError(`memcached's -o ${name} is not supported by shardheap memcached${why === undefined ? "" : `: ${why}`}`);
}

/**
 * One argument of memcached's options (it starts with a single "-");
 * `next` takes the argument after it, for an option whose value is there.
 */
export function parseMemcachedFlag(arg: string, next: () => string, into: MemcachedFlags): void {
  for (let c = 1; c < arg.length; c++) {
    const letter = arg[c]!;
    if (TAKES_VALUE.has(letter)) {
      // getopt: the rest of this argument, else the next one.
      const value = arg.slice(c + 1);
      valueOption(letter, value === "" ? next() : value, into);
      return;
    }
    switch (letter) {
      case "M":
        into.evict = false;
        break;
      case "F":
        into.flushAllowed = false;
        break;
      case "C":
        into.casEnabled = false;
        break;
      case "v":
        into.verbosity = Math.min(3, (into.verbosity ?? 0) + 1);
        break;
      case "h":
        into.help = true;
        break;
      case "V":
        into.version = true;
        break;
      default:
        refuse(letter);
    }
  }
}

function refuse(letter: string): never {
  const why = NOT_HERE[letter];
  if (why === undefined) throw new UsageError(`unknown flag for memcached: -${letter}`);
  throw new UsageError(`memcached's -${letter} is not supported by shardheap memcached: ${why}`);
}

function valueOption(letter: string, value: string, into: MemcachedFlags): void {
  switch (letter) {
    case "p":
      into.port = whole("-p", value, 0, 65535, "the port");
      return;
    case "l":
      if (value.includes(",")) throw new UsageError(`-l ${value}: shardheap memcached listens on one address`);
      into.host = value;
      return;
    case "U":
      if (value !== "0") throw new UsageError(`-U ${value}: shardheap memcached speaks TCP only, no UDP (-U 0, memcached's default, is accepted)`);
      return;
    case "m":
      into.memoryTotal = whole("-m", value, 1, 4096, "the memory limit (megabytes)") * MIB;
      return;
    case "c":
      into.maxConnections = whole("-c", value, 1, 2 ** 31 - 1, "Maximum connections");
      return;
    case "R":
      into.requestsPerEvent = whole("-R", value, 1, 2 ** 31 - 1, "Number of requests per event");
      return;
    case "t":
      into.threads = whole("-t", value, 1, MAX_SHARDS, "Number of threads");
      return;
    case "I":
      into.maxItemSize = parseItemSize(value);
      return;
    case "D":
      if (value.length !== 1) throw new UsageError(`-D ${value}: the prefix delimiter is one character`);
      into.prefixDelimiter = value;
      return;
    case "b":
      // memcached takes any positive int (the kernel caps the backlog at net.core.somaxconn).
      into.tcpBacklog = whole("-b", value, 1, 2 ** 31 - 1, "the listen backlog");
      return;
    case "B":
      if (value === "auto" || value === "ascii") into.protocol = value;
      else if (value === "binary") refuse(letter);
      else throw new UsageError(`-B ${value}: Invalid value for binding protocol: ${value} -- should be one of auto, binary, or ascii`);
      return;
    case "o":
      for (const opt of value.split(",")) if (opt !== "") extendedOption(opt, into);
      return;
    default:
      refuse(letter);
  }
}

/** What `-h` prints: memcached's options this server takes (the suite's harness reads it for features: it names only these). */
export const MEMCACHED_FLAGS_HELP = `memcached's own options (as memcached 1.6 reads them):
  -p P                  TCP port (default 11211)
  -l H                  the address to listen on (one)
  -U 0                  no UDP (the only value taken: TCP only)
  -m MB                 memory for the whole cache, megabytes, split over the shards
  -c N                  connections open at once, at most (default 1024)
  -t N                  shards (memcached's threads)
  -I SIZE               largest item: bytes, or with k or m (default ${DEFAULT_MAX_ITEM_SIZE / MIB}m; from 1024
                        bytes to 1 GB, at most half of -m, and of a shard's memory)
  -M                    answer an error when memory is full instead of evicting
  -F                    refuse flush_all
  -R N                  requests one connection runs before others get a turn (default 20)
  -D C                  the prefix delimiter of stats detail (default :)
  -C                    no cas values (every item's cas is 0)
  -b N                  the listen backlog (default 1024)
  -B auto|ascii         auto (default): a binary-protocol client is told "not supported"
                        in the binary protocol; ascii: every byte is read as text
  -v, -vv, -vvv         verbosity
  -o idle_timeout=N     close connections idle N seconds
  -h                    this help; -V the version
`;
