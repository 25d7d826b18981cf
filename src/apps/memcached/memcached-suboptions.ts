/**
 * memcached's -o options (a comma list: `-o slab_reassign,slab_automove=1`),
 * read as memcached 1.6's main reads them (getsubopt, then its checks after
 * the whole command line): idle_timeout is honoured; the options that tune
 * what shardheap does not have (slab classes and their mover, LRU threads,
 * the hash table, log buffers, `modern`/`no_modern`) are checked with
 * memcached's rules and words and then noted as ignored; extstore, TLS and
 * the proxy are refused (a feature asked for, which is not here); any
 * other name is memcached's `Illegal suboption`.
 */
import { UsageError } from "../../errors.js";

/** What the -o options leave for the checks memcached makes once every option is read (finishSuboptions). */
export interface SuboptionState {
  /** -o idle_timeout, seconds. */
  idleTimeout?: number;
  /** memcached's slab_chunk_size_max, bytes; `chunkMaxGiven`: set by slab_chunk_max (no_modern and a large -I then leave it). */
  chunkMax: number;
  chunkMaxGiven: boolean;
  /** The slab_sizes list, checked at the end against -n and the chunk size. */
  slabSizes?: string;
  lruMaintainer: boolean;
  temporaryTtl: boolean;
  hotLruPct: number;
  warmLruPct: number;
  /** Each ignored option once: its name and why it means nothing here. */
  ignored: Map<string, string>;
}

/** memcached's slab page (settings.slab_page_size): the unit its chunk size checks divide. */
const SLAB_PAGE = 1024 * 1024;

export function newSuboptionState(): SuboptionState {
  return { chunkMax: SLAB_PAGE / 2, chunkMaxGiven: false, lruMaintainer: true, temporaryTtl: false, hotLruPct: 20, warmLruPct: 40, ignored: new Map() };
}

/** C's atoi (strtol, then the low 32 bits): leading blanks and a sign, digits up to the first other character, else 0. */
export function atoi(text: string): number {
  const m = /^\s*([+-]?\d+)/.exec(text);
  if (m === null) return 0;
  const max = 2n ** 63n - 1n;
  let n = BigInt(m[1]!);
  if (n > max) n = max;
  if (n < -max - 1n) n = -max - 1n;
  return Number(BigInt.asIntN(32, n));
}

/** C's atof, for the finite decimals a command line has: the longest leading number, else 0. */
function atof(text: string): number {
  const n = Number.parseFloat(text.trimStart());
  return Number.isNaN(n) ? 0 : n;
}

/** memcached's safe_strtoul / safe_strtol: a whole number (a blank may end it), within 32 bits; undefined when not. */
function safeStrto(text: string, signed: boolean): number | undefined {
  const m = /^\s*([+-]?\d+)(?:\s|$)/.exec(text);
  if (m === null) return undefined;
  const n = Number(m[1]);
  if (signed ? n < -(2 ** 31) || n >= 2 ** 31 : n < 0 || n >= 2 ** 32) return undefined;
  return n;
}

const SLAB = "there are no slab classes here: shardheap's size classes are fixed";
const LRU = "there are no LRU threads here: each shard evicts its own least recently used items";
const HASH = "the key's hash and index are shardheap's own";
const LOG = "there are no watchers here (the watch command), so no log buffers";
const FILTER = "there is no system-call filter here to relax or tighten";

/** A required value, or memcached's words for its absence. */
function needs(value: string | undefined, missing: string): string {
  if (value === undefined) throw new UsageError(missing);
  return value;
}

function range(ok: boolean, message: string): void {
  if (!ok) throw new UsageError(message);
}

/** One option's reading: checks its value as memcached does, updates `s`; returns why it is ignored, or undefined when it is honoured. */
type Reader = (value: string | undefined, s: SuboptionState) => string | undefined;

const ignore =
  (why: string): Reader =>
  () =>
    why;

const READERS: Record<string, Reader> = {
  idle_timeout: (v, s) => {
    const n = atoi(needs(v, "Missing numeric argument for idle_timeout"));
    range(n >= 0, `-o idle_timeout=${v}: idle_timeout must be 0 or more seconds`);
    s.idleTimeout = n;
    return undefined;
  },
  maxconns_fast: ignore("a connection past -c is always told and closed here"),
  no_maxconns_fast: ignore("a connection past -c is always told and closed here"),
  hashpower: (v) => {
    const n = atoi(needs(v, "Missing numeric argument for hashpower"));
    range(n >= 12, `Initial hashtable multiplier of ${n} is too low`);
    range(n <= 32, `Initial hashtable multiplier of ${n} is too high\nChoose a value based on "STAT hash_power_level" from a running instance`);
    return HASH;
  },
  no_hashexpand: ignore(HASH),
  hash_algorithm: (v) => {
    range(["jenkins", "murmur3", "xxh3"].includes(needs(v, "Missing hash_algorithm argument")), "Unknown hash_algorithm option (jenkins, murmur3, xxh3)");
    return HASH;
  },
  slab_reassign: ignore(SLAB),
  no_slab_reassign: ignore(SLAB),
  slab_automove: (v) => {
    if (v !== undefined) range(atoi(v) >= 0 && atoi(v) <= 2, "slab_automove must be between 0 and 2");
    return SLAB;
  },
  no_slab_automove: ignore(SLAB),
  slab_automove_ratio: (v) => {
    const n = atof(needs(v, "Missing slab_automove_ratio argument"));
    range(n > 0 && n <= 1, "slab_automove_ratio must be > 0 and < 1");
    return SLAB;
  },
  slab_automove_window: (v) => {
    const n = atoi(needs(v, "Missing slab_automove_window argument"));
    range(n >= 3 && n <= 1800, "slab_automove_window must be > 2 and < 1800");
    return SLAB;
  },
  slab_automove_freeratio: (v) => {
    needs(v, "Missing slab_automove_freeratio argument");
    return SLAB;
  },
  slab_chunk_max: (v, s) => {
    const n = safeStrto(needs(v, "Missing slab_chunk_max argument"), true);
    if (n === undefined) throw new UsageError("could not parse argument to slab_chunk_max");
    range(n > 0, "slab_chunk_max must be >= 0");
    range(n <= 1024, "slab_chunk_max must be specified in kilobytes.");
    s.chunkMax = n * 1024;
    s.chunkMaxGiven = true;
    return SLAB;
  },
  slab_sizes: (v, s) => {
    s.slabSizes = needs(v, "Missing slab_sizes argument");
    return SLAB;
  },
  no_chunked_items: (_v, s) => {
    s.chunkMax = SLAB_PAGE;
    return SLAB;
  },
  tail_repair_time: (v) => {
    range(atoi(needs(v, "Missing numeric argument for tail_repair_time")) >= 10, "Cannot set tail_repair_time to less than 10 seconds");
    return LRU;
  },
  lru_crawler: ignore(LRU),
  no_lru_crawler: ignore(LRU),
  lru_crawler_sleep: (v) => {
    const n = atoi(needs(v, "Missing lru_crawler_sleep value"));
    range(n >= 0 && n <= 1_000_000, "LRU crawler sleep must be between 0 and 1 second");
    return LRU;
  },
  lru_crawler_tocrawl: (v) => {
    range(safeStrto(needs(v, "Missing lru_crawler_tocrawl value"), false) !== undefined, "lru_crawler_tocrawl takes a numeric 32bit value");
    return LRU;
  },
  lru_maintainer: (_v, s) => {
    s.lruMaintainer = true;
    return LRU;
  },
  no_lru_maintainer: (_v, s) => {
    s.lruMaintainer = false;
    return LRU;
  },
  hot_lru_pct: (v, s) => {
    s.hotLruPct = atoi(needs(v, "Missing hot_lru_pct argument"));
    range(s.hotLruPct >= 1 && s.hotLruPct < 80, "hot_lru_pct must be > 1 and < 80");
    return LRU;
  },
  warm_lru_pct: (v, s) => {
    s.warmLruPct = atoi(needs(v, "Missing warm_lru_pct argument"));
    range(s.warmLruPct >= 1 && s.warmLruPct < 80, "warm_lru_pct must be > 1 and < 80");
    return LRU;
  },
  hot_max_factor: (v) => {
    range(atof(needs(v, "Missing hot_max_factor argument")) > 0, "hot_max_factor must be > 0");
    return LRU;
  },
  warm_max_factor: (v) => {
    range(atof(needs(v, "Missing warm_max_factor argument")) > 0, "warm_max_factor must be > 0");
    return LRU;
  },
  temporary_ttl: (v, s) => {
    needs(v, "Missing temporary_ttl argument");
    s.temporaryTtl = true;
    return LRU;
  },
  watcher_logbuf_size: (v) => {
    range(safeStrto(needs(v, "Missing watcher_logbuf_size argument"), false) !== undefined, "could not parse argument to watcher_logbuf_size");
    return LOG;
  },
  worker_logbuf_size: (v) => {
    range(safeStrto(needs(v, "Missing worker_logbuf_size argument"), false) !== undefined, "could not parse argument to worker_logbuf_size");
    return LOG;
  },
  read_buf_mem_limit: (v) => {
    range(safeStrto(needs(v, "Missing read_buf_mem_limit argument"), false) !== undefined, "could not parse argument to read_buf_mem_limit");
    return "each connection's buffers are bounded on their own here (4 MiB of answers, 256 KiB read)";
  },
  resp_obj_mem_limit: ignore("no longer used by memcached either (read_buf_mem_limit took its place)"),
  track_sizes: ignore("no size histogram is tracked here (stats sizes: sizes_status disabled)"),
  inline_ascii_resp: ignore("no effect in memcached 1.6 either"),
  no_inline_ascii_resp: ignore("no effect in memcached 1.6 either"),
  modern: ignore("memcached's switch to its newer defaults (no effect in 1.6)"),
  no_modern: (_v, s) => {
    if (!s.chunkMaxGiven) s.chunkMax = SLAB_PAGE;
    s.lruMaintainer = false;
    return "memcached's 1.4 slab, LRU and hash defaults: there are no slab classes or LRU threads here";
  },
  drop_privileges: ignore(FILTER),
  no_drop_privileges: ignore(FILTER),
  // memcached's debug build (memcached-debug, which its test suite runs) only.
  relaxed_privileges: ignore(FILTER),
  sock_cookie_id: ignore("sockets get no cookie here (SO_MARK)"),
};

/** Families refused: a feature asked for that shardheap memcached does not have. */
const REFUSED: Array<[prefix: string, why: string]> = [
  ["ext_", "extstore: shardheap memcached keeps items in memory only"],
  ["ssl_", "TLS: shardheap memcached speaks plain TCP only"],
  ["proxy_", "the proxy: shardheap memcached is a cache, not a proxy"],
  ["memory_file", "memory files (warm restart): the heap lives in the process"],
];

/** One -o argument, a comma list, read into `s`. */
export function readSuboptions(list: string, s: SuboptionState): void {
  for (const opt of list.split(",")) {
    if (opt === "") continue;
    const eq = opt.indexOf("=");
    const name = eq < 0 ? opt : opt.slice(0, eq);
    const value = eq < 0 ? undefined : opt.slice(eq + 1);
    const reader = Object.hasOwn(READERS, name) ? READERS[name] : undefined;
    if (reader === undefined) {
      const why = REFUSED.find(([prefix]) => name.startsWith(prefix))?.[1];
      if (why !== undefined) throw new UsageError(`memcached's -o ${name} is not supported by shardheap memcached: ${why}`);
      throw new UsageError(`Illegal suboption "${opt}"`);
    }
    const why = reader(value, s);
    if (why !== undefined && !s.ignored.has(`-o ${name}`)) s.ignored.set(`-o ${name}`, why);
  }
}

/**
 * The checks memcached makes once every option is read, in its order:
 * the slab chunk size against -I (`itemSizeMax`, bytes) and memcached's
 * 1 MiB slab page, the slab_sizes list against -n (`chunkSize`), the LRU
 * percentages, temporary_ttl's need of the LRU maintainer.
 */
export function finishSuboptions(s: SuboptionState, itemSizeMax: number, chunkSize: number): void {
  // memcached: an -I past 1 MiB halves the chunk size unless slab_chunk_max set it.
  if (itemSizeMax > SLAB_PAGE && !s.chunkMaxGiven) s.chunkMax = SLAB_PAGE / 2;
  range(s.chunkMax <= itemSizeMax, `slab_chunk_max (bytes: ${s.chunkMax}) cannot be larger than -I (item_size_max ${itemSizeMax})`);
  range(itemSizeMax % s.chunkMax === 0, `-I (item_size_max: ${itemSizeMax}) must be evenly divisible by slab_chunk_max (bytes: ${s.chunkMax})`);
  range(SLAB_PAGE % s.chunkMax === 0, `slab_chunk_max (bytes: ${s.chunkMax}) must divide evenly into ${SLAB_PAGE} (slab_page_size)`);
  if (s.slabSizes !== undefined) checkSlabSizes(s.slabSizes, chunkSize, s.chunkMax);
  range(s.hotLruPct + s.warmLruPct <= 80, "hot_lru_pct + warm_lru_pct cannot be more than 80% combined");
  range(!s.temporaryTtl || s.lruMaintainer, "temporary_ttl requires lru_maintainer to be enabled");
}

/** memcached's _parse_slab_sizes: sizes split by "-", each in [-n, chunk size], each more than 8 bytes past the one before, at most 62. */
function checkSlabSizes(list: string, chunkSize: number, chunkMax: number): void {
  const sizes = list.split("-").filter((p) => p !== "");
  range(sizes.length > 0, "slab size 0 is out of valid range");
  let last = 0;
  for (const [i, p] of sizes.entries()) {
    const size = safeStrto(p, false);
    range(size !== undefined && size >= chunkSize && size <= chunkMax, `slab size ${size ?? 0} is out of valid range`);
    range(last < size!, `slab size ${size!} cannot be lower than or equal to a previous class size`);
    range(size! > last + 8, `slab size ${size!} must be at least 8 bytes larger than previous class`);
    range(i + 1 < 63, "too many slab classes specified");
    last = size!;
  }
}
