/**
 * `stats detail`: per-prefix counts of gets, hits, sets and deletes, as
 * memcached keeps them when detail is on (`stats detail on`, or -D). A
 * key's prefix is what comes before the first delimiter (-D, ":" by
 * default); a key without one is not counted. Each shard counts the
 * commands its own connections receive, so no message is needed per
 * request; `stats detail dump` adds up every shard's (shard.ts), and
 * `stats detail on|off` and `stats reset` reach every shard.
 *
 * As memcached: a get counts once per key asked (a hit when found), a
 * set (any storage command) and a delete when the command is read,
 * whatever their outcome; at most 65,536 prefixes (MAX_PREFIX_COUNT),
 * further ones not counted. `stats detail dump bytes` adds what
 * memcached's dump has not: the bytes of the live items under each prefix
 * (`... del D bytes N`, the store's count at the time of the dump, whether
 * detail was on or not), and the prefixes that hold items but were never
 * counted. A plain `stats detail dump` stays memcached's, line for line
 * (its t/stats-detail.t pins every line; memcached itself ignores the
 * extra argument, so a client may always ask for bytes).
 */

/** memcached's MAX_PREFIX_COUNT. */
export const MAX_PREFIXES = 1 << 16;

/** A key's prefix: what comes before the first `delimiter` (-D), or undefined when it has none (stats detail counts no such key). */
export function keyPrefix(key: string, delimiter: string): string | undefined {
  const end = key.indexOf(delimiter);
  return end < 0 ? undefined : key.slice(0, end);
}
const GET = 0;
const HIT = 1;
const SET = 2;
const DEL = 3;

/** One prefix's counts: get, hit, set, del, and the bytes of its live items (-1: not asked for). */
export type PrefixCounts = [string, number, number, number, number, number];

export class PrefixStats {
  /** Whether commands are counted now. */
  enabled: boolean;
  private readonly delimiter: string;
  private readonly counts = new Map<string, Float64Array>();

  constructor(delimiter: string, enabled: boolean) {
    this.delimiter = delimiter;
    this.enabled = enabled;
  }

  get(key: string, hit: boolean): void {
    const c = this.of(key);
    if (c === undefined) return;
    c[GET]!++;
    if (hit) c[HIT]!++;
  }

  set(key: string): void {
    const c = this.of(key);
    if (c !== undefined) c[SET]!++;
  }

  delete(key: string): void {
    const c = this.of(key);
    if (c !== undefined) c[DEL]!++;
  }

  /** `stats reset`: every prefix forgotten. */
  reset(): void {
    this.counts.clear();
  }

  /**
   * This shard's counts, prefix by prefix; with `bytes` (the store's
   * bytesByPrefix) each with its bytes, and the prefixes never counted
   * after the counted ones.
   */
  list(bytes?: ReadonlyMap<string, number>): PrefixCounts[] {
    const out: PrefixCounts[] = [...this.counts].map(([p, c]) => [p, c[GET]!, c[HIT]!, c[SET]!, c[DEL]!, bytes === undefined ? -1 : (bytes.get(p) ?? 0)]);
    if (bytes !== undefined) for (const [p, b] of bytes) if (!this.counts.has(p)) out.push([p, 0, 0, 0, 0, b]);
    return out;
  }

  private of(key: string): Float64Array | undefined {
    const prefix = keyPrefix(key, this.delimiter);
    if (prefix === undefined) return undefined;
    let c = this.counts.get(prefix);
    if (c === undefined && this.counts.size < MAX_PREFIXES) {
      c = new Float64Array(4);
      this.counts.set(prefix, c);
    }
    return c;
  }
}

/** `stats detail dump [bytes]`: every shard's counts added up, prefix by prefix (in the order first seen), then END. */
export function formatPrefixDump(perShard: readonly PrefixCounts[][]): string {
  const sum = new Map<string, PrefixCounts>();
  for (const list of perShard) {
    for (const [p, get, hit, set, del, bytes] of list) {
      const s = sum.get(p);
      if (s === undefined) sum.set(p, [p, get, hit, set, del, bytes]);
      else {
        s[1] += get;
        s[2] += hit;
        s[3] += set;
        s[4] += del;
        s[5] += bytes;
      }
    }
  }
  let out = "";
  for (const [p, get, hit, set, del, bytes] of sum.values()) out += `PREFIX ${p} get ${get} hit ${hit} set ${set} del ${del}${bytes < 0 ? "" : ` bytes ${bytes}`}\r\n`;
  return out + "END\r\n";
}
