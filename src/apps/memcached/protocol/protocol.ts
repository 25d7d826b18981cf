/**
 * The memcached ASCII protocol's command lines: one line (its \r\n already
 * removed by reader.ts) -> a Command, or the exact answer memcached gives
 * to a malformed one. The rules follow memcached 1.6 (proto_text.c:
 * tokenize_command, the WANT_TOKENS checks, set_noreply_maybe,
 * safe_strto*), checked against Debian's memcached 1.6.18 by
 * test/apps/memcached/protocol-reference.test.ts, which sends the table
 * test/apps/memcached/protocol.test.ts sends shardheap (protocol-cases.ts):
 *   - tokens are split on spaces only; a NUL ends the line (strlen);
 *   - a wrong number of tokens, or an unknown command: "ERROR";
 *   - a malformed field: "CLIENT_ERROR bad command line format" (or the
 *     command's own words: invalid exptime / numeric delta argument);
 *   - "noreply" is the LAST token, and silences every answer of that
 *     command, errors included (memcached's out_string), except the
 *     token-count "ERROR", which comes before it is read.
 * Storage lines follow current memcached (the suite's revision, its new
 * proto_parser.c) where 1.6.18 differs: a malformed one is "CLIENT_ERROR
 * bad command line format" and its data block is swallowed once its length
 * is read (storeCommand); flags and exptimes keep their low 32 bits as
 * memcached's strtoul / strtol do (flags 2^32 stored as 0). Every other
 * number is read as its tokenizer (mcmc_tokto*) reads them: digits, a '-'
 * where signed, no '+' (incr by "+1" or "-0", gat 2147483648: refused).
 */
import { countKeys, type KeyList } from "./get-keys.js";

/** memcached's KEY_MAX_LENGTH (the store keeps keys of at most this many bytes). */
export const MAX_KEY_LENGTH = 250;

/** Answers, as memcached words them (without the \r\n). */
export const REPLY = {
  ERROR: "ERROR",
  BAD_FORMAT: "CLIENT_ERROR bad command line format",
  BAD_DATA_CHUNK: "CLIENT_ERROR bad data chunk",
  BAD_EXPTIME: "CLIENT_ERROR invalid exptime argument",
  BAD_DELTA: "CLIENT_ERROR invalid numeric delta argument",
  NON_NUMERIC: "CLIENT_ERROR cannot increment or decrement non-numeric value",
  DELETE_USAGE: "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]",
  TOO_LARGE: "SERVER_ERROR object too large for cache",
  NO_MEMORY_STORING: "SERVER_ERROR out of memory storing object",
  NO_MEMORY: "SERVER_ERROR out of memory",
  LINE_TOO_LONG: "CLIENT_ERROR line too long",
  FLUSH_REFUSED: "CLIENT_ERROR flush_all not allowed",
  STORED: "STORED",
  NOT_STORED: "NOT_STORED",
  EXISTS: "EXISTS",
  NOT_FOUND: "NOT_FOUND",
  DELETED: "DELETED",
  TOUCHED: "TOUCHED",
  OK: "OK",
  END: "END",
  RESET: "RESET",
} as const;

/** Storage modes (set, add, replace, append, prepend, cas), as the store and the wire between shards number them. */
export const MODE_SET = 0;
export const MODE_ADD = 1;
export const MODE_REPLACE = 2;
export const MODE_APPEND = 3;
export const MODE_PREPEND = 4;
export const MODE_CAS = 5;
export type StoreMode = 0 | 1 | 2 | 3 | 4 | 5;

export type Command =
  /** get, gets, gat, gats (and bget, memcached's old alias of get): one key, or many (or none: gat) read in place from the line. */
  | { kind: "get"; keys: string | KeyList; withCas: boolean; touch: boolean; exptime: number }
  /** set, add, replace, append, prepend, cas: `bytes` of data and \r\n follow the line. cas: the client's value, a decimal string ("" for the others). */
  | { kind: "store"; mode: StoreMode; key: string; flags: number; exptime: number; bytes: number; cas: string; noreply: boolean }
  | { kind: "delete"; key: string; noreply: boolean }
  /** incr / decr; delta: a decimal below 2^64 (a string: it travels between shards as one). */
  | { kind: "arith"; key: string; incr: boolean; delta: string; noreply: boolean }
  | { kind: "touch"; key: string; exptime: number; noreply: boolean }
  /** delay undefined: not a number (CLIENT_ERROR invalid exptime argument, unless flush_all is refused anyway: -F). */
  | { kind: "flush"; delay: number | undefined; noreply: boolean }
  | { kind: "version" }
  | { kind: "verbosity"; noreply: boolean }
  | { kind: "stats"; args: string[] }
  /** cache_memlimit: the cache's new size in megabytes (a u32). */
  | { kind: "memlimit"; megabytes: number; noreply: boolean }
  | { kind: "quit" }
  /** mg, ms, md, ma, mn, me: the meta protocol's, its tokens for meta-protocol.ts to read. */
  | { kind: "meta"; tokens: string[] }
  /**
   * A line that gets an error (or nothing, when noreply). `swallow`: data
   * bytes (and \r\n) the client sends after the line, to be skipped
   * (a storage command too large to store); `close`: end the connection
   * after answering (memcached closes on an HTTP request line).
   */
  | { kind: "error"; reply: string; noreply: boolean; swallow: number; close: boolean }
  /** A command the line alone answers (slabs). */
  | { kind: "answer"; reply: string };

/** Seconds in 30 days: a larger exptime is a Unix time, not an offset (memcached's REALTIME_MAXDELTA). */
export const MAX_RELATIVE_EXPTIME = 60 * 60 * 24 * 30;

function error(reply: string, noreply = false, swallow = 0, close = false): Command {
  return { kind: "error", reply, noreply, swallow, close };
}

/** memcached's tokenizer: split on spaces, empty tokens dropped (a NUL has ended the line: parseCommand). */
function tokenize(line: string): string[] {
  const parts = line.split(" ");
  let n = 0;
  for (const p of parts) if (p !== "") parts[n++] = p;
  parts.length = n;
  return parts;
}

/** Current memcached's shortest line, \r\n included (proto_parser.c: a command has two letters at least). */
const MIN_LINE_BYTES = 4;

/**
 * One command line -> a Command. `bytes`: the line as sent, \n (and \r)
 * included: current memcached answers a line under 4 bytes (a blank
 * line, "x\r\n", "mn\n") CLIENT_ERROR bad command line format, where
 * 1.6.18 answered ERROR. A storage command's length is only
 * checked against what memcached itself refuses (negative, or past
 * INT_MAX - 2); the item size limit is the connection's to apply, as it
 * knows the whole item's size.
 */
export function parseCommand(line: string, bytes: number): Command {
  if (bytes < MIN_LINE_BYTES) return error(REPLY.BAD_FORMAT);
  // The most common line, "get <key>", without tokenizing.
  if (line.length > 4 && line.length <= 4 + MAX_KEY_LENGTH && line.startsWith("get ") && line.indexOf(" ", 4) < 0 && line.indexOf("\0") < 0) {
    return { kind: "get", keys: line.slice(4), withCas: false, touch: false, exptime: 0 };
  }
  const nul = line.indexOf("\0");
  if (nul >= 0) line = line.slice(0, nul);
  // A get's keys are read in place (a line of 1 MiB may hold 500,000 of them: get-keys.ts), not tokenized.
  let start = 0;
  while (line.charCodeAt(start) === SPACE) start++;
  let after = line.indexOf(" ", start);
  if (after < 0) after = line.length;
  if (after - start === 3 || after - start === 4) {
    const name = line.slice(start, after);
    if (name === "get" || name === "bget" || name === "gets" || name === "gat" || name === "gats") return getLine(line, name, after);
  }
  const t = tokenize(line);
  // memcached counts a terminal token too: its WANT_TOKENS(n) is t.length + 1 here.
  const n = t.length;
  const name = t[0];
  if (name === undefined || name.length < 2) return error(REPLY.ERROR);
  switch (name) {
    case "set":
      return storeCommand(t, MODE_SET);
    case "add":
      return storeCommand(t, MODE_ADD);
    case "replace":
      return storeCommand(t, MODE_REPLACE);
    case "append":
      return storeCommand(t, MODE_APPEND);
    case "prepend":
      return storeCommand(t, MODE_PREPEND);
    case "cas":
      return storeCommand(t, MODE_CAS);
    case "delete":
      return n >= 2 && n <= 4 ? deleteCommand(t) : error(REPLY.ERROR);
    case "incr":
    case "decr":
      return n === 3 || n === 4 ? arithCommand(t, name === "incr") : error(REPLY.ERROR);
    case "touch": {
      if (n !== 3 && n !== 4) return error(REPLY.ERROR);
      const noreply = isNoreply(t);
      if (t[1]!.length > MAX_KEY_LENGTH) return error(REPLY.BAD_FORMAT, noreply);
      const exptime = parseStrictI32(t[2]!);
      if (exptime === undefined) return error(REPLY.BAD_EXPTIME, noreply);
      return { kind: "touch", key: t[1]!, exptime, noreply };
    }
    case "flush_all": {
      // Current memcached reads the delay only (no more tokens counted); -F's refusal comes first (the connection's).
      const noreply = isNoreply(t);
      let delay: number | undefined = 0;
      if (n !== (noreply ? 2 : 1)) delay = parseStrictI32(t[1]!);
      return { kind: "flush", delay, noreply };
    }
    case "version":
      return { kind: "version" };
    case "verbosity": {
      if (n !== 2 && n !== 3) return error(REPLY.ERROR);
      const noreply = isNoreply(t);
      return parseStrictU32(t[1]!) === undefined ? error(REPLY.BAD_FORMAT, noreply) : { kind: "verbosity", noreply };
    }
    case "stats":
      return { kind: "stats", args: t.slice(1) };
    case "cache_memlimit": {
      if (n !== 2 && n !== 3) return error(REPLY.ERROR);
      const noreply = isNoreply(t);
      const megabytes = parseU32(t[1]!);
      if ((n === 3 && !noreply) || megabytes < 0) return error(REPLY.ERROR, noreply);
      return { kind: "memlimit", megabytes, noreply };
    }
    case "quit":
      return { kind: "quit" };
    case "slabs":
      return { kind: "answer", reply: slabsAnswer(t) };
    case "mg":
    case "ms":
    case "md":
    case "ma":
    case "mn":
    case "me":
      return { kind: "meta", tokens: t };
    default:
      // memcached hangs up on what looks like an HTTP request line.
      return t[n - 1]!.startsWith("HTTP/") ? error(REPLY.ERROR, true, 0, true) : error(REPLY.ERROR);
  }
}

function isNoreply(t: string[]): boolean {
  return t[t.length - 1] === "noreply";
}

const SPACE = 0x20;

/** A get, bget, gets, gat or gats line (`after`: where its name ends), as memcached reads it. */
function getLine(line: string, name: string, after: number): Command {
  const withCas = name === "gets" || name === "gats";
  if (name[1] !== "a") return getCommand(line, after, withCas, false, 0, true);
  // gat, gats: the exptime first.
  let start = after;
  while (line.charCodeAt(start) === SPACE) start++;
  if (start >= line.length) return error(REPLY.ERROR);
  let end = line.indexOf(" ", start);
  if (end < 0) end = line.length;
  const exptime = parseStrictI32(line.slice(start, end));
  if (exptime === undefined) return error(REPLY.BAD_EXPTIME);
  return getCommand(line, end, withCas, true, exptime, false);
}

/** A get's keys, in `line` from `from` on; `some`: at least one is needed (get, gets; gat and gats may have none). */
function getCommand(line: string, from: number, withCas: boolean, touch: boolean, exptime: number, some: boolean): Command {
  // memcached answers a key that is too long with the error alone, whatever came before it.
  const count = countKeys(line, from, MAX_KEY_LENGTH);
  if (count < 0) return error(REPLY.BAD_FORMAT);
  if (count === 0 && some) return error(REPLY.ERROR);
  if (count !== 1) return { kind: "get", keys: { line, from, count }, withCas, touch, exptime };
  while (line.charCodeAt(from) === SPACE) from++;
  const end = line.indexOf(" ", from);
  return { kind: "get", keys: line.slice(from, end < 0 ? line.length : end), withCas, touch, exptime };
}

/**
 * A storage line, as current memcached reads it (proto_parser.c
 * _process_request_storage, then process_update_cmd_start): first the
 * data length, token 4 (fewer than 5 tokens, or a length that is not a
 * 32-bit number from 0 to INT_MAX - 2: a bad format, answered even with
 * noreply, nothing swallowed: the length is unknown); once the length is
 * known, every other error swallows the announced data block (and its
 * \r\n), so the data is never run as a command: a key too long, flags
 * or exptime that strtoul / strtol refuse, a cas token missing or not a
 * 64-bit number. Tokens past the ones read are ignored.
 */
function storeCommand(t: string[], mode: StoreMode): Command {
  if (t.length < 5) return error(REPLY.BAD_FORMAT);
  const bytes = parseStrictI32(t[4]!);
  // memcached: vlen < 0 || vlen > INT_MAX - 2.
  if (bytes === undefined || bytes < 0 || bytes > 0x7fffffff - 2) return error(REPLY.BAD_FORMAT);
  const noreply = isNoreply(t);
  const swallow = bytes + 2;
  const key = t[1]!;
  if (key.length > MAX_KEY_LENGTH) return error(REPLY.BAD_FORMAT, noreply, swallow);
  const flags = strtoulFlags(t[2]!);
  const exptime = strtolI32(t[3]!);
  if (flags === undefined || exptime === undefined) return error(REPLY.BAD_FORMAT, noreply, swallow);
  let cas = "";
  if (mode === MODE_CAS) {
    const c = t.length > 5 ? parseStrictU64(t[5]!) : undefined;
    if (c === undefined) return error(REPLY.BAD_FORMAT, noreply, swallow);
    cas = c.toString();
  }
  return { kind: "store", mode, key, flags, exptime, bytes, cas, noreply };
}

// The meta protocol's numbers (meta-protocol.ts) and cache_memlimit's, read
// as memcached 1.6's safe_strto* there: digits with an optional sign where
// it reads one, within the field's width.
const U32 = /^\+?\d{1,10}$/;
const I32 = /^[+-]?\d{1,10}$/;
const U64 = /^\+?\d{1,20}$/;

/** `token` as a number when it matches `form` and lies in [min, max], else undefined. */
function integerIn(token: string, form: RegExp, min: number, max: number): number | undefined {
  if (!form.test(token)) return undefined;
  const n = Number(token === "-" ? "0" : token);
  return n >= min && n <= max ? n : undefined;
}

/** `token` as a bigint when it matches `form` and lies below 2^64, else undefined. */
function u64In(token: string, form: RegExp): bigint | undefined {
  if (!form.test(token)) return undefined;
  const n = BigInt(token);
  return n < TWO_64 ? n : undefined;
}

/** A token as an unsigned 32-bit number, or -1. */
export function parseU32(token: string): number {
  return integerIn(token, U32, 0, 0xffffffff) ?? -1;
}

/** A token as a signed 32-bit number, or undefined. */
export function parseI32(token: string): number | undefined {
  return integerIn(token, I32, -0x80000000, 0x7fffffff);
}

/** A token as an unsigned 64-bit number, or undefined. */
export function parseU64(token: string): bigint | undefined {
  return u64In(token, U64);
}

const DECIMAL = /^[+-]?\d+$/;
const TWO_64 = 2n ** 64n;

/**
 * Client flags as memcached's safe_strtoul reads them on a 64-bit build:
 * strtoul (a sign allowed; a negative number wraps), refused past 2^64 or
 * when the wrapped value reads negative as a long and a '-' was written;
 * then kept to its low 32 bits (flags 4294967296 are stored as 0).
 */
export function strtoulFlags(token: string): number | undefined {
  if (!DECIMAL.test(token)) return undefined;
  const negative = token.startsWith("-");
  let v = BigInt(token.replace(/^[+-]/, ""));
  if (v >= TWO_64) return undefined; // ERANGE
  if (negative) v = (TWO_64 - v) % TWO_64;
  if (negative && v >= 2n ** 63n) return undefined;
  return Number(BigInt.asUintN(32, v));
}

/**
 * A number as memcached's safe_strtol reads it on a 64-bit build: strtol
 * (a sign allowed), refused outside a long, then kept to its low 32 bits
 * as a signed int (an exptime of 2^31 is -2^31, already expired; 2^32 is 0,
 * never).
 */
export function strtolI32(token: string): number | undefined {
  if (!DECIMAL.test(token)) return undefined;
  const v = BigInt(token);
  if (v < -(2n ** 63n) || v >= 2n ** 63n) return undefined; // ERANGE
  return Number(BigInt.asIntN(32, v));
}

// memcached's tokenizer (mcmc_tokto32, mcmc_toktou32, mcmc_toktou64): at most 11 (22) characters.
const STRICT_I32 = /^(?=.{0,11}$)-?\d*$/;
const STRICT_U32 = /^\d{1,11}$/;
const STRICT_U64 = /^\d{1,22}$/;

/** mcmc_tokto32 (memcached's tokenizer): an optional '-', then digits, no more than 11 characters, within an int32. */
export function parseStrictI32(token: string): number | undefined {
  return integerIn(token, STRICT_I32, -0x80000000, 0x7fffffff);
}

/** mcmc_toktou32: digits only, no more than 11 characters, below 2^32. */
export function parseStrictU32(token: string): number | undefined {
  return integerIn(token, STRICT_U32, 0, 0xffffffff);
}

/** mcmc_toktou64: digits only, no more than 22 characters, below 2^64. */
export function parseStrictU64(token: string): bigint | undefined {
  return u64In(token, STRICT_U64);
}

/** memcached's answer when its slab mover is off, as it always is here: no slab pages to move (a free span serves any class). */
const NO_REASSIGN = "CLIENT_ERROR slab reassignment disabled";
const DOUBLE = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/;

/**
 * `slabs reassign SRC DST` and `slabs automove ...`, read as current
 * memcached reads them (a subcommand may be abbreviated: strncmp over
 * the token's length), answered as memcached with its mover off: moving
 * pages is refused, automove 0 (what happens here) is OK, turning it on
 * is refused; a malformed number as memcached answers it.
 */
function slabsAnswer(t: string[]): string {
  const n = t.length;
  const sub = t[1];
  const abbreviates = (word: string, token: string | undefined): boolean => token !== undefined && word.startsWith(token);
  if (n === 4 && abbreviates("reassign", sub)) {
    return parseStrictI32(t[2]!) === undefined || parseStrictI32(t[3]!) === undefined ? REPLY.BAD_FORMAT : NO_REASSIGN;
  }
  if (n < 3 || !abbreviates("automove", sub)) return REPLY.ERROR;
  const what = t[2]!;
  if (abbreviates("ratio", what) || abbreviates("freeratio", what)) return n < 4 || !DOUBLE.test(t[3]!) ? REPLY.ERROR : NO_REASSIGN;
  if (abbreviates("window", what)) {
    const window = n < 4 ? undefined : parseStrictU32(t[3]!);
    if (window === undefined) return REPLY.BAD_FORMAT;
    return window < 3 || window > 1800 ? "CLIENT_ERROR automove window too low or too high" : NO_REASSIGN;
  }
  const level = parseStrictU32(what);
  if (level === undefined) return REPLY.BAD_FORMAT;
  if (level === 0) return REPLY.OK;
  return level <= 2 ? NO_REASSIGN : REPLY.ERROR;
}

function deleteCommand(t: string[]): Command {
  let noreply = false;
  if (t.length > 2) {
    // memcached still takes the old "delete <key> 0" (a hold time of zero).
    const holdIsZero = t[2] === "0";
    noreply = isNoreply(t);
    const valid = (t.length === 3 && (holdIsZero || noreply)) || (t.length === 4 && holdIsZero && noreply);
    if (!valid) return error(REPLY.DELETE_USAGE, noreply);
  }
  if (t[1]!.length > MAX_KEY_LENGTH) return error(REPLY.BAD_FORMAT, noreply);
  return { kind: "delete", key: t[1]!, noreply };
}

function arithCommand(t: string[], incr: boolean): Command {
  const noreply = isNoreply(t);
  if (t[1]!.length > MAX_KEY_LENGTH) return error(REPLY.BAD_FORMAT, noreply);
  // Current memcached (mcmc_toktou64): digits only; 1.6.18's strtoull also took "-0" and "+1".
  const delta = parseStrictU64(t[2]!);
  if (delta === undefined) return error(REPLY.BAD_DELTA, noreply);
  return { kind: "arith", key: t[1]!, incr, delta: delta.toString(), noreply };
}

/**
 * A client's exptime -> the absolute Unix second it expires at (0: never),
 * as memcached's realtime(): 0 never; negative: already expired; up to 30
 * days: an offset from now; more: a Unix time (already past: expired).
 */
export function absoluteExptime(exptime: number, now: number): number {
  if (exptime === 0) return 0;
  if (exptime < 0) return 1;
  if (exptime <= MAX_RELATIVE_EXPTIME) return now + exptime;
  return exptime;
}

/** Whether an item with this absolute exptime has expired at `now` (Unix seconds). */
export function expired(exptime: number, now: number): boolean {
  return exptime !== 0 && exptime <= now;
}
