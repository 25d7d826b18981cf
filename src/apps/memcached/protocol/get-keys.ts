/**
 * The keys of a get, gets, gat or gats line, read in place: a get line may
 * be 1 MiB (reader.ts MAX_GET_LINE), some 500,000 one-byte keys, and a
 * multi-key get may wait between two keys (multi-get.ts), so its keys stay
 * in the line, read one at a time from a position in it, never split into
 * a string each up front. memcached's tokenizer splits on spaces only,
 * empty tokens dropped (protocol.ts tokenize); a NUL has already ended the
 * line there.
 */

const SPACE = 0x20;

/** The keys of a multi-key get: `count` of them, in `line` from `from` on. */
export interface KeyList {
  readonly line: string;
  readonly from: number;
  readonly count: number;
}

/** How many keys `line` holds from `from` on, or -1 if one is longer than `maxLength`. */
export function countKeys(line: string, from: number, maxLength: number): number {
  const n = line.length;
  let count = 0;
  let at = from;
  while (at < n) {
    if (line.charCodeAt(at) === SPACE) {
      at++;
      continue;
    }
    let end = line.indexOf(" ", at);
    if (end < 0) end = n;
    if (end - at > maxLength) return -1;
    count++;
    at = end;
  }
  return count;
}

/** A position in a KeyList's line: the keys after it, one at a time. */
export class KeyCursor {
  private readonly line: string;
  private at: number;

  constructor(keys: KeyList) {
    this.line = keys.line;
    this.at = keys.from;
  }

  /** The next key, or undefined past the last. */
  next(): string | undefined {
    if (this.done) return undefined;
    const line = this.line;
    const start = this.at;
    let end = line.indexOf(" ", start);
    if (end < 0) end = line.length;
    this.at = end;
    return line.slice(start, end);
  }

  /** Whether no key is left. */
  get done(): boolean {
    const line = this.line;
    let at = this.at;
    while (at < line.length && line.charCodeAt(at) === SPACE) at++;
    this.at = at;
    return at >= line.length;
  }
}
