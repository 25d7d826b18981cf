/**
 * A SharedMap key as the map sees it: its UTF-8 bytes, packed into 32-bit
 * words, and their hash. A string key is its UTF-8 encoding, so
 * `acquire("abc")` and `acquire(new Uint8Array([97, 98, 99]))` find the same
 * entry.
 *
 * What a lookup costs here is mostly reading the key: V8 keeps a string's
 * own hash out of reach, so every call reads every character (Map.get reads
 * none: the hash is cached in the string and the key compare is a pointer
 * compare when the caller passes the map's own string). One pass does all:
 * ASCII characters four at a time into a word (the UTF-8 bytes, little
 * endian), the word into this thread's scratch (the key compare later reads
 * words, not characters) and into the hash. Measured (16-character keys,
 * one run, machine under load): this word hash 93.6 ns a key, murmur3's
 * word mixing 100 ns, FNV-1a by character 129 ns; Map.get 28 ns. A
 * non-ASCII string goes through TextEncoder.encodeInto (~105 ns a call).
 *
 * The hash: per word, h = (rotl(h, 5) ^ word) * 0x9e3779b9 (FxHash's step,
 * rustc's), the last partial word mixed with the length, then murmur3's
 * fmix32, so the low bits (the slot) and the top 8 (the tag) both depend on
 * every byte. Seeded per map, at random. It is not a defence against a
 * client that chooses keys to collide (nor is memcached's own): such keys
 * make long probe paths, slower lookups, never a wrong answer.
 *
 * A string key must be valid UTF-16: a lone surrogate has no UTF-8
 * encoding (TextEncoder writes U+FFFD's EF BF BD for it), so "\uD800",
 * "\uDC00" and "\uFFFD" would all be one key. Such a key is refused
 * (ERR_SHARDHEAP_MAP_KEY) before anything is read or written. Only the
 * TextEncoder path checks: the ASCII loop leaves for it at the first
 * character above 127 (every surrogate is), so ASCII keys pay nothing.
 * isWellFormed (Node 20.0's V8 11.3 has it) answers a one-byte string
 * without reading it; on a two-byte one it is a call of ~14 ns, cheaper
 * than a charCodeAt loop in JS (~35 ns for 16 characters) or a regex
 * test (~22 ns). Measured, acquire + release (medians of 6 interleaved
 * runs, machine shared): 16-character ASCII keys 65 ns before, 63 after;
 * 16-character Cyrillic keys 111 ns before, 125 after; 300-character
 * ASCII keys 484 and 490.
 *
 * One scratch per thread (module state): JavaScript runs one call at a
 * time on a thread, and every map call that fills it reads it before it
 * returns.
 */
import { InvalidValueError, SharedMapError } from "../../errors.js";
import { MAX_KEY_BYTES } from "./layout.js";

const encoder = new TextEncoder();

export class KeyScratch {
  /** The key's bytes as words, the last one zero-padded. */
  words = new Int32Array(64);
  bytes = new Uint8Array(this.words.buffer);
  /** The key's length in bytes. */
  length = 0;

  /** Read a string key into the scratch; returns its hash. */
  ofString(key: string, seed: number): number {
    const n = key.length;
    if (n > 252) return this.ofLongString(key, seed);
    const words = this.words;
    let h = seed;
    let i = 0;
    let w = 0;
    for (const full = n & ~3; i < full; i += 4) {
      const c0 = key.charCodeAt(i);
      const c1 = key.charCodeAt(i + 1);
      const c2 = key.charCodeAt(i + 2);
      const c3 = key.charCodeAt(i + 3);
      if ((c0 | c1 | c2 | c3) > 127) return this.ofLongString(key, seed);
      const x = c0 | (c1 << 8) | (c2 << 16) | (c3 << 24);
      words[w++] = x;
      h = Math.imul(((h << 5) | (h >>> 27)) ^ x, 0x9e3779b9);
    }
    let t = 0;
    for (let shift = 0; i < n; i++, shift += 8) {
      const c = key.charCodeAt(i);
      if (c > 127) return this.ofLongString(key, seed);
      t |= c << shift;
    }
    words[w] = t;
    this.length = n;
    return finish(h, t, n);
  }

  /** Read `length` bytes of `src` from `start` into the scratch; returns their hash. */
  ofBytes(src: Uint8Array, start: number, end: number, seed: number): number {
    const n = end - start;
    if (n > MAX_KEY_BYTES) throw tooLong(n);
    if (n + 8 > this.bytes.length) this.grow(n);
    const words = this.words;
    let h = seed;
    let i = start;
    let w = 0;
    for (const full = start + (n & ~3); i < full; i += 4) {
      const x = src[i]! | (src[i + 1]! << 8) | (src[i + 2]! << 16) | (src[i + 3]! << 24);
      words[w++] = x;
      h = Math.imul(((h << 5) | (h >>> 27)) ^ x, 0x9e3779b9);
    }
    let t = 0;
    for (let shift = 0; i < end; i++, shift += 8) t |= src[i]! << shift;
    words[w] = t;
    this.length = n;
    return finish(h, t, n);
  }

  /** A string that is long or not ASCII: its UTF-8 bytes through TextEncoder. */
  private ofLongString(key: string, seed: number): number {
    if (key.length > MAX_KEY_BYTES) throw tooLong(Buffer.byteLength(key, "utf8"));
    if (!key.isWellFormed()) throw notWellFormed(key);
    // UTF-8 takes at most 3 bytes per UTF-16 code unit.
    if (3 * key.length + 8 > this.bytes.length) this.grow(3 * key.length);
    const written = encoder.encodeInto(key, this.bytes).written;
    if (written > MAX_KEY_BYTES) throw tooLong(written);
    return this.ofBytes(this.bytes, 0, written, seed);
  }

  private grow(bytes: number): void {
    this.words = new Int32Array(Math.ceil((bytes + 8) / 4));
    this.bytes = new Uint8Array(this.words.buffer);
  }

  /** Whether the key in the scratch is the one whose bytes start at word index `at` of `i32` (the stored key is zero-padded). */
  equalsAt(i32: Int32Array, at: number): boolean {
    const words = this.words;
    for (let j = 0, n = (this.length + 3) >>> 2; j < n; j++) if (i32[at + j] !== words[j]) return false;
    return true;
  }

  /** Write the key at word index `at` of `i32`, zero-padded to a multiple of 8 bytes. */
  writeAt(i32: Int32Array, at: number): void {
    const n = (this.length + 3) >>> 2;
    for (let j = 0; j < n; j++) i32[at + j] = this.words[j]!;
    if ((n & 1) !== 0) i32[at + n] = 0;
  }
}

function finish(h: number, tail: number, length: number): number {
  h = Math.imul(((h << 5) | (h >>> 27)) ^ tail ^ length, 0x9e3779b9);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return h ^ (h >>> 16);
}

function tooLong(bytes: number): InvalidValueError {
  return new InvalidValueError("key", `SharedMap: a key is at most ${MAX_KEY_BYTES} bytes, this one is ${bytes}`);
}

/** A string key with a lone surrogate: where the first one is. */
function notWellFormed(key: string): SharedMapError {
  let i = 0;
  for (; i < key.length; i++) {
    const c = key.charCodeAt(i);
    if (c < 0xd800 || c > 0xdfff) continue;
    if (c <= 0xdbff && i + 1 < key.length && (key.charCodeAt(i + 1) & 0xfc00) === 0xdc00) i++;
    else break;
  }
  const code = key.charCodeAt(i).toString(16).toUpperCase();
  return new SharedMapError("ERR_SHARDHEAP_MAP_KEY", `SharedMap: a string key must be valid UTF-16, ${JSON.stringify(key.slice(0, 40))} has a lone surrogate (\\u${code}) at index ${i}, which has no UTF-8 encoding`);
}

/** A key that is neither a string nor a Uint8Array. */
export function badKey(key: unknown): TypeError {
  return new TypeError(`SharedMap: a key must be a string or a Uint8Array, got ${key === null ? "null" : typeof key}`);
}
