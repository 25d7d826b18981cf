/**
 * memcached's own command line on `shardheap memcached` (run.ts hands it
 * every argument that is not one of shardheap's --flags), so the binary
 * can be swapped in a service file or a test harness unchanged. Read as
 * memcached 1.6's main reads it: getopt's way (`-p 11211`, `-p11211`,
 * switches clustered: `-Mv`; util.parseArgs cuts a cluster as getopt does
 * once told which letters take a value), and its long names
 * (`--port=11211`, `--user memcache`). Three kinds of option:
 *   - honoured: -p -l -U 0 -m -c -t -I -M -F -R -D -C -b -B auto|ascii
 *     -v -X -u -P -d -h -i -V, -o idle_timeout;
 *   - accepted, checked with memcached's rules and words, and noted once
 *     on stderr as ignored (run.ts prints `ignored`): what tunes what
 *     shardheap does not have (-f -n -L -k -r -a -N, and the slab, LRU,
 *     hash and log -o options: memcached-suboptions.ts); -W, which turns
 *     off watchers, there being none here, is taken silently;
 *   - refused, naming why: a feature asked for that is not here (-s, -S,
 *     -Y, -Z, -e, -A, -B binary, a UDP port, TLS, extstore, the proxy);
 *     an option memcached refuses, in memcached's words.
 */
import { UsageError } from "../../errors.js";
import { MAX_SHARDS } from "../../memory/shared-heap.js";
import type { FlagTable } from "../../runtime/command-line.js";
import { DEFAULT_MAX_ITEM_SIZE } from "./config.js";
import { atoi, finishSuboptions, newSuboptionState, readSuboptions, type SuboptionState } from "./memcached-suboptions.js";

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
  verbosity?: number;
  /** -C: false. */
  casEnabled?: boolean;
  /** -b: the listen backlog. */
  tcpBacklog?: number;
  /** -B auto|ascii. */
  protocol?: "auto" | "ascii";
  /** -X: false (stats cachedump and stats detail refused). */
  dumpEnabled?: boolean;
  /** -u: the user to run as once the port is bound (when started as root). */
  user?: string;
  /** -P: where to write the process id. */
  pidFile?: string;
  /** -d: run as a daemon (daemon.ts). */
  daemon?: boolean;
  /** -h: print the help and stop. */
  help?: boolean;
  /** -V: print the version and stop. */
  version?: boolean;
  /** -i: print the license and stop. */
  license?: boolean;
  /** -n (memcached's chunk_size), for the slab_sizes check. */
  chunkSize: number;
  /** -N, checked against the threads once every option is read. */
  napiIds?: number;
  /** The -o options' state: idle_timeout, and what memcached checks at the end. */
  sub: SuboptionState;
}

export function newMemcachedFlags(): MemcachedFlags {
  return { chunkSize: 48, sub: newSuboptionState() };
}

/** Each option accepted and ignored, once, and why (run.ts prints them on stderr). */
export function ignoredOptions(m: MemcachedFlags): ReadonlyMap<string, string> {
  return m.sub.ignored;
}

/** memcached's -I bounds (memcached.c: ITEM_SIZE_MAX_LOWER_LIMIT, ITEM_SIZE_MAX_UPPER_LIMIT). */
export const MEMCACHED_MIN_ITEM_SIZE = 1024;
export const MEMCACHED_MAX_ITEM_SIZE = 1024 * 1024 * 1024;
const MIB = 1024 * 1024;

/** memcached's options that take a value (getopt's "x:"), so `-b 10` is one option, not `-b` and an operand. */
const TAKES_VALUE = new Set("pslaUmcRtDIoPfnBbuYeN".split(""));

/** memcached 1.6's long options (getopt_long), by the letter they stand for; --verbose may take a value, which memcached ignores. */
const LONG_OPTIONS: Record<string, string> = {
  "--unix-mask": "a", "--enable-shutdown": "A", "--enable-ssl": "Z", "--port": "p", "--unix-socket": "s", "--udp-port": "U",
  "--memory-limit": "m", "--disable-evictions": "M", "--conn-limit": "c", "--lock-memory": "k", "--help": "h", "--license": "i",
  "--version": "V", "--enable-coredumps": "r", "--verbose": "v", "--daemon": "d", "--listen": "l", "--user": "u", "--pidfile": "P",
  "--slab-growth-factor": "f", "--slab-min-size": "n", "--threads": "t", "--enable-largepages": "L", "--max-reqs-per-event": "R",
  "--disable-cas": "C", "--listen-backlog": "b", "--protocol": "B", "--max-item-size": "I", "--enable-sasl": "S",
  "--disable-flush-all": "F", "--disable-dumping": "X", "--disable-watch": "W", "--auth-file": "Y", "--memory-file": "e",
  "--extended": "o", "--napi-ids": "N", "--napi_ids": "N",
};

/** memcached's options refused here, and why: each asks for something shardheap memcached does not have. */
const NOT_HERE: Record<string, string> = {
  s: "unix sockets: shardheap memcached listens on TCP only",
  S: "SASL: shardheap memcached has no authentication",
  Y: "authentication: shardheap memcached has none",
  Z: "TLS: shardheap memcached speaks plain TCP only",
  B: "the binary protocol: shardheap memcached speaks the ASCII protocol only (-B auto and -B ascii are taken)",
  e: "memory files (warm restart): the heap lives in the process",
  A: "the shutdown command: stop it with SIGTERM or Ctrl-C",
};

/** memcached's options accepted and ignored here, and why. */
const IGNORED: Record<string, string> = {
  f: "there are no slab classes here: shardheap's size classes are fixed",
  n: "there are no slab classes here: shardheap's size classes are fixed",
  L: "the heap is one SharedArrayBuffer: its pages are the system's to size",
  k: "the heap is one SharedArrayBuffer: Node cannot lock it in memory",
  r: "Node sets no core file limit: set it with ulimit -c",
  a: "the mask of a unix socket, and there are none here (-s is refused)",
  N: "NAPI ids: connections are spread over the shards by the kernel or the accept balancer",
};

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

/**
 * memcached's options as readArgs reads them (runtime/command-line.ts),
 * clustered getopt's way: every letter getopt knows, with or without a
 * value, so parseArgs takes a value where getopt does (`-vp 11211`,
 * `-p11211`, `-c -1`), and the long names. A letter outside it is refused
 * as getopt does, in parseMemcachedLetter.
 */
export const MEMCACHED_FLAG_TABLE: FlagTable = Object.fromEntries([
  ..."pslaUmcRtDIoPfnBbuYeNMFCXdWvhViLkrSZA".split("").map((letter) => [`-${letter}`, TAKES_VALUE.has(letter) ? "value" : "switch"] as const),
  ...Object.entries(LONG_OPTIONS).map(([flag, letter]) => [flag, TAKES_VALUE.has(letter) ? "value" : "switch"] as const),
]);

/** One of memcached's letters (`-p`, or the `p` of `-vp11211`); `value` takes its value (after it, else the next argument). */
export function parseMemcachedLetter(letter: string, value: () => string, into: MemcachedFlags): void {
  // memcached skips blanks before a value.
  if (TAKES_VALUE.has(letter)) valueOption(letter, value().trimStart(), into);
  else switchOption(letter, into);
}

/**
 * One of memcached's long options (`--user memcache`, `--port=11211`):
 * false when `flag` is not one. `inline`: the value after "=".
 */
export function parseMemcachedLongFlag(flag: string, inline: string | undefined, value: () => string, into: MemcachedFlags): boolean {
  const letter = Object.hasOwn(LONG_OPTIONS, flag) ? LONG_OPTIONS[flag]! : undefined;
  if (letter === undefined) return false;
  if (TAKES_VALUE.has(letter)) valueOption(letter, value().trimStart(), into);
  else if (inline !== undefined && letter !== "v") throw new UsageError(`option '${flag}' doesn't allow an argument`);
  else switchOption(letter, into);
  return true;
}

function switchOption(letter: string, into: MemcachedFlags): void {
  switch (letter) {
    case "M":
      into.evict = false;
      return;
    case "F":
      into.flushAllowed = false;
      return;
    case "C":
      into.casEnabled = false;
      return;
    case "X":
      into.dumpEnabled = false;
      return;
    case "d":
      into.daemon = true;
      return;
    case "W":
      // Watchers turned off: there are none here.
      return;
    case "v":
      into.verbosity = Math.min(3, (into.verbosity ?? 0) + 1);
      return;
    case "h":
      into.help = true;
      return;
    case "V":
      into.version = true;
      return;
    case "i":
      into.license = true;
      return;
    default:
      ignoreOrRefuse(letter, into);
  }
}

function ignoreOrRefuse(letter: string, into: MemcachedFlags): void {
  const why = IGNORED[letter];
  if (why !== undefined) {
    if (!into.sub.ignored.has(`-${letter}`)) into.sub.ignored.set(`-${letter}`, why);
    return;
  }
  const not = NOT_HERE[letter];
  // getopt's word for a letter memcached does not know.
  if (not === undefined) throw new UsageError(`unknown flag for memcached: -${letter} (memcached: invalid option -- '${letter}')`);
  throw new UsageError(`memcached's -${letter} is not supported by shardheap memcached: ${not}`);
}

function valueOption(letter: string, value: string, into: MemcachedFlags): void {
  switch (letter) {
    case "p":
      into.port = whole("-p", value, 0, 65535, "the port");
      return;
    case "l":
      if (value.includes(",")) throw new UsageError(`-l ${value}: shardheap memcached listens on one address`);
      if (into.host !== undefined && into.host !== value) throw new UsageError(`-l ${into.host} -l ${value}: shardheap memcached listens on one address`);
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
      if (value.length !== 1) throw new UsageError(value === "" ? "No delimiter specified" : `-D ${value}: the prefix delimiter is one character`);
      into.prefixDelimiter = value;
      return;
    case "b":
      // memcached takes any positive int (the kernel caps the backlog at net.core.somaxconn).
      into.tcpBacklog = whole("-b", value, 1, 2 ** 31 - 1, "the listen backlog");
      return;
    case "B":
      if (value === "auto" || value === "ascii") into.protocol = value;
      else if (value === "binary") ignoreOrRefuse(letter, into);
      else throw new UsageError(`-B ${value}: Invalid value for binding protocol: ${value} -- should be one of auto, binary, or ascii`);
      return;
    case "o":
      readSuboptions(value, into.sub);
      return;
    case "u":
      if (value === "") throw new UsageError("-u needs a user name");
      into.user = value;
      return;
    case "P":
      if (value === "") throw new UsageError("-P needs a file name");
      into.pidFile = value;
      return;
    case "f":
      // memcached: atof; a factor of 1 or less is refused.
      if (!(Number.parseFloat(value) > 1)) throw new UsageError("Factor must be greater than 1");
      return ignoreOrRefuse(letter, into);
    case "n":
      into.chunkSize = atoi(value);
      if (into.chunkSize <= 0) throw new UsageError("Chunk size must be greater than 0");
      return ignoreOrRefuse(letter, into);
    case "N":
      into.napiIds = atoi(value);
      if (into.napiIds <= 0) throw new UsageError("Maximum number of NAPI IDs must be greater than 0");
      return ignoreOrRefuse(letter, into);
    case "a":
      return ignoreOrRefuse(letter, into);
    default:
      ignoreOrRefuse(letter, into);
  }
}

/**
 * What memcached checks once every option is read: -N against the
 * threads (memcached's default 4 when -t is not given), and the -o
 * options against -I (memcached's default 1 MiB when not given) and -n.
 */
export function finishMemcachedFlags(m: MemcachedFlags): void {
  const threads = m.threads ?? 4;
  if (m.napiIds !== undefined && m.napiIds > threads) throw new UsageError(`Number of napi_ids(${m.napiIds}) cannot be greater than number of threads(${threads})`);
  finishSuboptions(m.sub, m.maxItemSize ?? DEFAULT_MAX_ITEM_SIZE, m.chunkSize);
}

/** What `-h` prints: memcached's options this server takes (the suite's harness reads it for features: it names only these). */
export const MEMCACHED_FLAGS_HELP = `memcached's own options (as memcached 1.6 reads them, its long names too):
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
  -X                    refuse stats cachedump and stats detail
  -u USER               run as USER once the port is bound (when started as root)
  -P FILE               write the process id to FILE (removed at a graceful stop)
  -d                    run as a daemon: the command exits once the server serves
  -v, -vv, -vvv         verbosity
  -o idle_timeout=N     close connections idle N seconds
  -o ...                memcached's slab, LRU, hash and log tuning: checked, then ignored
  -f, -n, -L, -k, -r, -N, -W: checked, then ignored (what they tune is not here)
  -h                    this help; -V the version; -i the license
`;
