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
 * further ones not counted.
 */

/** memcached's MAX_PREFIX_COUNT. */
const MAX_PREFIXES = 1 << 16;
const GET = 0;
const HIT = 1;
const SET = 2;
const DEL = 3;

/** One prefix's counts: get, hit, set, del. */
export type PrefixCounts = [string, number, number, number, number];

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

  /** This shard's counts, prefix by prefix. */
  list(): PrefixCounts[] {
    return [...this.counts].map(([p, c]) => [p, c[GET]!, c[HIT]!, c[SET]!, c[DEL]!]);
  }

  private of(key: string): Float64Array | undefined {
    const end = key.indexOf(this.delimiter);
    if (end < 0) return undefined;
    const prefix = key.slice(0, end);
    let c = this.counts.get(prefix);
    if (c === undefined && this.counts.size < MAX_PREFIXES) {
      c = new Float64Array(4);
      this.counts.set(prefix, c);
    }
    return c;
  }
}

/** `stats detail dump`: every shard's counts added up, prefix by prefix (in the order first seen), then END. */
export function formatPrefixDump(perShard: readonly PrefixCounts[][]): string {
  const sum = new Map<string, PrefixCounts>();
  for (const list of perShard) {
    for (const [p, get, hit, set, del] of list) {
      const s = sum.get(p);
      if (s === undefined) sum.set(p, [p, get, hit, set, del]);
      else {
        s[1] += get;
        s[2] += hit;
        s[3] += set;
        s[4] += del;
      }
    }
  }
  let out = "";
  for (const [p, get, hit, set, del] of sum.values()) out += `PREFIX ${p} get ${get} hit ${hit} set ${set} del ${del}\r\n`;
  return out + "END\r\n";
}
