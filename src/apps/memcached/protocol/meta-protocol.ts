/**
 * The memcached meta protocol's command lines (mg, ms, md, ma, mn, me):
 * one line, already split into tokens by protocol.ts, -> a MetaCommand,
 * or the error memcached answers. The rules follow memcached 1.6's
 * doc/protocol.txt and the suite's revision (proto_parser.c,
 * _meta_flag_preparse), checked against it by t/metaget.t and against
 * Debian's 1.6.18 by test/apps/memcached/protocol-reference.test.ts:
 *   - `<cm> <key> [<datalen>] <flag>*`: a flag is one character, its
 *     token (if any) the rest of the word ("T30", "Oabc");
 *   - a flag twice: "CLIENT_ERROR duplicate flag"; a flag it does not
 *     know: "CLIENT_ERROR invalid flag" (ma words both as "invalid or
 *     duplicate flag"); a bad token: "CLIENT_ERROR bad token in command
 *     line format"; more than 20 tokens in the line: "CLIENT_ERROR options
 *     flags are too long";
 *   - a line ms cannot even read its length from (fewer than 3 tokens, a
 *     length that is not a number): "CLIENT_ERROR bad command line
 *     format", nothing swallowed (there is no length to swallow); any
 *     other ms error swallows the announced bytes and their \r\n, so a
 *     value is never run as a command;
 *   - errors are always answered: q silences only the nominal answers
 *     (the connection's: meta-commands.ts).
 * Answers are built by meta-commands.ts, in the order the flags came.
 */
import { MAX_KEY_LENGTH, MODE_ADD, MODE_APPEND, MODE_CAS, MODE_PREPEND, MODE_REPLACE, MODE_SET, REPLY, parseI32, parseU32, parseU64, type Command, type StoreMode } from "./protocol.js";

/** memcached's MFLAG_MAX_OPT_LENGTH: tokens a meta line may have, command and key included. */
export const MAX_META_TOKENS = 20;
/** memcached's MFLAG_MAX_OPAQUE_LENGTH: an O token's bytes, the O included. */
export const MAX_OPAQUE_LENGTH = 32;
/**
 * The largest CAS value a client may set (E): cas values are kept as
 * doubles (item.ts), exact below 2^53; memcached takes any 64-bit value.
 */
export const MAX_CAS_IN = Number.MAX_SAFE_INTEGER;

export const META_REPLY = {
  BAD_TOKEN: "CLIENT_ERROR bad token in command line format",
  INVALID_FLAG: "CLIENT_ERROR invalid flag",
  DUPLICATE_FLAG: "CLIENT_ERROR duplicate flag",
  ARITH_FLAG: "CLIENT_ERROR invalid or duplicate flag",
  TOO_MANY_TOKENS: "CLIENT_ERROR options flags are too long",
  BAD_KEY: "CLIENT_ERROR error decoding key",
  OPAQUE_TOO_LONG: "CLIENT_ERROR opaque token too long",
  MS_MODE: "CLIENT_ERROR invalid mode for ms M token",
  MA_MODE: "CLIENT_ERROR invalid mode for ma M token",
  BAD_INITIAL: "CLIENT_ERROR invalid numeric initial value",
  BAD_DELTA: "CLIENT_ERROR invalid numeric delta value",
  NOOP: "MN",
  MISS: "EN",
} as const;

/** A meta command's flags, as parsed (tokens kept as the client wrote them where they are echoed). */
export interface MetaFlags {
  /** The key as the store keys it (base64-decoded with b: latin1, one char a byte). */
  key: string;
  /** b: the key came base64-encoded (and is answered so). */
  binary: boolean;
  /** The flag tokens after the key (ms: after the length), in order: the answer echoes them in this order. */
  tokens: string[];
  quiet: boolean; // q
  value: boolean; // v
  noBump: boolean; // u
  invalidate: boolean; // I
  removeValue: boolean; // x
  /** T: a new TTL (a client exptime, relative or absolute as memcached reads it), or undefined. */
  ttl: number | undefined;
  /** N: vivify on a miss with this TTL, or undefined. */
  vivify: number | undefined;
  /** R: win the recache when the remaining TTL is below this, or undefined. */
  recache: number | undefined;
  /** C: the CAS value to compare with (a decimal below 2^64), or undefined. */
  compareCas: string | undefined;
  /** E: the CAS value the change gives the item, or undefined. */
  casIn: number | undefined;
  /** F: client flags (ms, md x). */
  clientFlags: number;
  /** M: the mode character, or "". */
  mode: string;
  /** ma: J, the initial value (decimal) and D, the delta (decimal). */
  initial: string;
  delta: string;
  /**
   * O's token is past 32 bytes. memcached finds it as it writes the
   * answer, after the command ran (md: before it looks the key up), so
   * every error of the line comes first and a change is made (meta-commands.ts).
   */
  opaqueTooLong: boolean;
}

export type MetaCommand =
  | { kind: "mn" }
  | { kind: "me"; key: string; binary: boolean }
  | { kind: "mg"; flags: MetaFlags }
  | { kind: "md"; flags: MetaFlags }
  | { kind: "ma"; flags: MetaFlags; incr: boolean }
  /** ms: `bytes` of data and \r\n follow the line; `mode` as the store numbers it (cas when a C flag came with set or replace). */
  | { kind: "ms"; flags: MetaFlags; bytes: number; mode: StoreMode }
  /** An error; `swallow`: the bytes (data and its \r\n) to skip after the line. */
  | { kind: "meta-error"; reply: string; swallow: number };

const metaError = (reply: string, swallow = 0): MetaCommand => ({ kind: "meta-error", reply, swallow });

/** memcached's base64 alphabet and "=", each character's value (its dtable: -1 for the characters it skips). */
const BASE64_VALUE = new Int8Array(256).fill(-1);
for (const [i, c] of [..."ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"].entries()) BASE64_VALUE[c.charCodeAt(0)] = i;
BASE64_VALUE["=".charCodeAt(0)] = 0;

/**
 * A base64 key -> its bytes as a latin1 string, or undefined where
 * memcached's base64_decode fails (returns 0). As it decodes: characters
 * outside the alphabet are skipped, those left must be a non-zero
 * multiple of four, and the first block with padding ends the key (one
 * "=" drops a byte, two drop two, more fail).
 */
export function decodeKey(token: string): string | undefined {
  let count = 0;
  for (let i = 0; i < token.length; i++) if (BASE64_VALUE[token.charCodeAt(i) & 0xff]! >= 0) count++;
  if (count === 0 || count % 4 !== 0) return undefined;
  const out: number[] = [];
  const block = [0, 0, 0, 0];
  let n = 0;
  let pad = 0;
  for (let i = 0; i < token.length; i++) {
    const c = token.charCodeAt(i) & 0xff;
    const v = BASE64_VALUE[c]!;
    if (v < 0) continue;
    if (c === 0x3d) pad++;
    block[n++] = v;
    if (n < 4) continue;
    out.push(((block[0]! << 2) | (block[1]! >> 4)) & 0xff, ((block[1]! << 4) | (block[2]! >> 2)) & 0xff, ((block[2]! << 6) | block[3]!) & 0xff);
    n = 0;
    if (pad > 0) {
      if (pad > 2) return undefined;
      out.length -= pad;
      break;
    }
  }
  return out.length === 0 ? undefined : String.fromCharCode(...out);
}

/** A key as the answer's k flag writes it: base64 again for a binary key. */
export function encodeKey(key: string, binary: boolean): string {
  return binary ? Buffer.from(key, "latin1").toString("base64") : key;
}

/**
 * A meta command line, its tokens `t` (t[0]: mg, ms, md, ma, mn or me),
 * -> a MetaCommand.
 */
export function parseMeta(t: readonly string[]): MetaCommand {
  const name = t[0]!;
  if (name === "mn") return { kind: "mn" };
  if (t.length < 2) return metaError(REPLY.BAD_FORMAT);
  switch (name) {
    case "me": {
      // me <key> [b]: the key's bytes, or its base64 with b.
      if (t[1]!.length > MAX_KEY_LENGTH) return metaError(REPLY.BAD_FORMAT);
      if (t.length >= 3 && t[2] === "b") {
        const key = decodeKey(t[1]!);
        return key === undefined ? metaError(REPLY.BAD_FORMAT) : { kind: "me", key, binary: true };
      }
      return { kind: "me", key: t[1]!, binary: false };
    }
    case "mg":
    case "md": {
      const f = parseFlags(t, 2);
      if (typeof f === "string") return metaError(f);
      if (name === "mg") return { kind: "mg", flags: f };
      // md looks at O before it looks the key up: nothing is deleted.
      return f.opaqueTooLong ? metaError(META_REPLY.OPAQUE_TOO_LONG) : { kind: "md", flags: f };
    }
    case "ma": {
      const f = parseFlags(t, 2);
      // memcached words every flag error of ma so (a key too long too).
      if (typeof f === "string") return metaError(META_REPLY.ARITH_FLAG);
      switch (f.mode) {
        case "":
        case "I":
        case "+":
          return { kind: "ma", flags: f, incr: true };
        case "D":
        case "-":
          return { kind: "ma", flags: f, incr: false };
        default:
          return metaError(META_REPLY.MA_MODE);
      }
    }
    case "ms":
      return parseMetaSet(t);
    default:
      return metaError(REPLY.ERROR);
  }
}

function parseMetaSet(t: readonly string[]): MetaCommand {
  if (t.length < 3) return metaError(REPLY.BAD_FORMAT);
  const bytes = parseI32(t[2]!);
  // memcached: vlen < 0 || vlen > INT_MAX - 2; nothing to swallow, as the length is unknown.
  if (bytes === undefined || bytes < 0 || bytes > 0x7fffffff - 2) return metaError(REPLY.BAD_FORMAT);
  const swallow = bytes + 2;
  const f = parseFlags(t, 3);
  if (typeof f === "string") return metaError(f, swallow);
  let mode: StoreMode;
  switch (f.mode) {
    case "":
    case "S":
      mode = MODE_SET;
      break;
    case "E":
      mode = MODE_ADD;
      break;
    case "A":
      mode = MODE_APPEND;
      break;
    case "P":
      mode = MODE_PREPEND;
      break;
    case "R":
      mode = MODE_REPLACE;
      break;
    default:
      return metaError(META_REPLY.MS_MODE, swallow);
  }
  // A compared CAS makes set and replace the cas command (memcached: NREAD_CAS); append and prepend compare it themselves.
  if (f.compareCas !== undefined && (mode === MODE_SET || mode === MODE_REPLACE)) mode = MODE_CAS;
  return { kind: "ms", flags: f, bytes, mode };
}

/** A flag's token as an exptime (a signed 32-bit number), or undefined. */
const ttlToken = (token: string): number | undefined => parseI32(token.slice(1));

/**
 * The flags from t[first] on -> MetaFlags, or the error's answer. As
 * memcached: a duplicate or unknown flag ends the parse at once; a bad
 * token is noted and the parse goes on (the last one noted is answered).
 */
export function parseFlags(t: readonly string[], first: number): MetaFlags | string {
  const raw = t[1]!;
  if (raw.length > MAX_KEY_LENGTH) return REPLY.BAD_FORMAT;
  if (t.length > MAX_META_TOKENS) return META_REPLY.TOO_MANY_TOKENS;
  const f: MetaFlags = {
    key: raw,
    binary: false,
    tokens: t.slice(first),
    quiet: false,
    value: false,
    noBump: false,
    invalidate: false,
    removeValue: false,
    ttl: undefined,
    vivify: undefined,
    recache: undefined,
    compareCas: undefined,
    casIn: undefined,
    clientFlags: 0,
    mode: "",
    initial: "0",
    delta: "1",
    opaqueTooLong: false,
  };
  let failed: string | undefined;
  let seen = "";
  for (const token of f.tokens) {
    const o = token[0]!;
    if (seen.includes(o)) return META_REPLY.DUPLICATE_FLAG;
    seen += o;
    switch (o) {
      case "b": {
        const key = decodeKey(raw);
        if (key === undefined) failed = META_REPLY.BAD_KEY;
        else f.key = key;
        f.binary = true;
        break;
      }
      case "N":
        f.vivify = ttlToken(token);
        if (f.vivify === undefined) failed = META_REPLY.BAD_TOKEN;
        break;
      case "T":
        f.ttl = ttlToken(token);
        if (f.ttl === undefined) failed = META_REPLY.BAD_TOKEN;
        break;
      case "R":
        f.recache = ttlToken(token);
        if (f.recache === undefined) failed = META_REPLY.BAD_TOKEN;
        break;
      case "O":
        // memcached checks this as it writes the answer: after every other error of the line.
        if (token.length > MAX_OPAQUE_LENGTH) f.opaqueTooLong = true;
        break;
      case "P":
      case "L":
      case "k":
      case "s":
      case "t":
      case "c":
      case "f":
      case "l":
      case "h":
        break;
      case "v":
        f.value = true;
        break;
      case "u":
        f.noBump = true;
        break;
      case "q":
        f.quiet = true;
        break;
      case "x":
        f.removeValue = true;
        break;
      case "I":
        f.invalidate = true;
        break;
      case "F": {
        const flags = parseU32(token.slice(1));
        if (flags < 0) failed ??= REPLY.BAD_FORMAT;
        else f.clientFlags = flags;
        break;
      }
      case "C": {
        const cas = parseU64(token.slice(1));
        if (cas === undefined) failed = META_REPLY.BAD_TOKEN;
        else f.compareCas = cas.toString();
        break;
      }
      case "E": {
        const cas = parseU64(token.slice(1));
        if (cas === undefined || cas > BigInt(MAX_CAS_IN)) failed = META_REPLY.BAD_TOKEN;
        else f.casIn = Number(cas);
        break;
      }
      case "M":
        // memcached reads the byte after the M: for a bare M, the blank or line end after it, no mode it knows.
        f.mode = token.length > 1 ? token[1]! : " ";
        break;
      case "J": {
        const n = parseU64(token.slice(1));
        if (n === undefined) failed = META_REPLY.BAD_INITIAL;
        else f.initial = n.toString();
        break;
      }
      case "D": {
        const n = parseU64(token.slice(1));
        if (n === undefined) failed = META_REPLY.BAD_DELTA;
        else f.delta = n.toString();
        break;
      }
      default:
        return META_REPLY.INVALID_FLAG;
    }
  }
  return failed ?? f;
}

/** What an answer's flags report (s, t, c, f, l, h: each flag's value, where the command reports it). */
export type FlagValues = Partial<Record<"s" | "t" | "c" | "f" | "l" | "h", number | string>>;

/**
 * The flags of an answer, in the order they came: O echoed, k the key
 * (`binary`: answered in base64, with " b"), each of `values` that was
 * asked for; the other flags answer nothing.
 */
export function answerFlags(f: MetaFlags, values: FlagValues = {}, binary = f.binary): string {
  let out = "";
  for (const token of f.tokens) {
    const o = token[0]!;
    if (o === "O") out += ` ${token}`;
    else if (o === "k") out += keyFlag(f.key, binary);
    else if (o in values) out += ` ${o}${values[o as keyof FlagValues]!}`;
  }
  return out;
}

/**
 * What memcached's mg and ma do with T and N, applied as it reads the
 * flags, in their order: an item the command created starts with no
 * exptime, then T sets it, and N; an item found gets T's. `t` reports
 * the exptime of its place. An O too long ends the reading where it
 * stands (memcached's answer loop stops there with the error): the flags
 * after it do nothing. Exptimes absolute, -1 for a flag not given.
 */
export interface ExptimePlan {
  /** T's exptime for an item found, or -1 (no T, or one after an O too long). */
  touch: number;
  /** The exptime of an item the command creates (N on a miss): the last of T and N read. */
  created: number;
  /** What the store is given for N: `created` when the command has N, else -1 (it creates nothing). */
  vivify: number;
  /** t's exptime on an item the command created, at t's place (0 before T and N). */
  createdAtT: number;
  /** Whether t comes after T: it reports T's exptime on an item found, else the item's own. */
  touchedAtT: boolean;
  /** Whether R comes before T: mg's recache check reads the item's own exptime, not T's. */
  recacheFirst: boolean;
}

export function exptimePlan(f: MetaFlags, touchTo: number, vivifyTo: number): ExptimePlan {
  let exptime = 0;
  let touched = false;
  const plan: ExptimePlan = { touch: -1, created: 0, vivify: -1, createdAtT: 0, touchedAtT: false, recacheFirst: false };
  for (const token of f.tokens) {
    if (token[0] === "O" && f.opaqueTooLong) break;
    switch (token[0]) {
      case "T":
        exptime = plan.touch = touchTo;
        touched = true;
        break;
      case "N":
        exptime = vivifyTo;
        break;
      case "R":
        plan.recacheFirst = !touched && f.ttl !== undefined;
        break;
      case "t":
        plan.createdAtT = exptime;
        plan.touchedAtT = touched;
        break;
    }
  }
  plan.created = exptime;
  if (f.vivify !== undefined) plan.vivify = exptime;
  return plan;
}

/** The k flag of an answer. */
export function keyFlag(key: string, binary: boolean): string {
  return binary ? ` k${encodeKey(key, true)} b` : ` k${key}`;
}

/** An ms: a storage command with the meta protocol's part. */
export type MetaStoreCommand = Extract<Command, { kind: "store" }> & { meta?: MetaStoreRequest };

export interface MetaStoreRequest {
  flags: MetaFlags;
  /** E, or -1. */
  casIn: number;
  /** I with a cas command: a lower compared CAS stores the value as stale. */
  invalidate: boolean;
  /** N with append / prepend: a miss stores the value as a new item. */
  vivify: boolean;
}
