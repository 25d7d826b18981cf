/**
 * The free spans of a shard by address: one bit per page, set on the head
 * page of every free span, and a summary bit per word of those, so the
 * lowest free span at or after a page is found in two bit searches.
 * page-spans.ts keeps it beside its size-segregated lists, which know
 * sizes but not places, to put pool spans at the lowest address that
 * holds them (see allocatePageSpan).
 *
 * It lives in the JS heap of the thread that allocates in the shard, not
 * in the shared buffer: it is derived from the page records (the truth,
 * which check() and heap images see), built from them on that thread's
 * first page allocation (a walk of the spans), and kept by the same calls
 * that change the free lists. A reader never trusts it blindly: a bit on
 * a page that no longer heads a free span (another ShardRegion object of
 * the same shard in this thread changed the records) is dropped when met,
 * and a free span missing from it is still found by the lists. So it
 * decides where a span goes, never whether an allocation succeeds.
 */
export class FreeSpanIndex {
  private readonly heads: Int32Array;
  private readonly summary: Int32Array;

  constructor(pages: number) {
    this.heads = new Int32Array(Math.ceil(pages / 32));
    this.summary = new Int32Array(Math.ceil(this.heads.length / 32));
  }

  add(p: number): void {
    const w = p >>> 5;
    if (this.heads[w] === 0) this.summary[w >>> 5]! |= 1 << (w & 31);
    this.heads[w]! |= 1 << (p & 31);
  }

  remove(p: number): void {
    const w = p >>> 5;
    const bits = this.heads[w]! & ~(1 << (p & 31));
    this.heads[w] = bits;
    if (bits === 0) this.summary[w >>> 5]! &= ~(1 << (w & 31));
  }

  /** The lowest page at or after `p` with its bit set, or -1. */
  next(p: number): number {
    const heads = this.heads;
    let w = p >>> 5;
    if (w >= heads.length) return -1;
    let bits = heads[w]! & (-1 << (p & 31));
    if (bits === 0) {
      // The next non-empty word, through the summary.
      const summary = this.summary;
      w++;
      let s = w >>> 5;
      if (s >= summary.length) return -1;
      let sbits = summary[s]! & (-1 << (w & 31));
      while (sbits === 0) {
        if (++s >= summary.length) return -1;
        sbits = summary[s]!;
      }
      w = (s << 5) + lowestBit(sbits);
      bits = heads[w]!;
    }
    return (w << 5) + lowestBit(bits);
  }
}

/** Index of the lowest set bit of a non-zero word (page-spans.ts's list bitmaps use it too). */
export function lowestBit(x: number): number {
  return 31 - Math.clz32(x & -x);
}
