/**
 * The heap label of a memcached item: `prefix`, its key up to the -D
 * delimiter (":" by default), so a heap profile grouped by `prefix` gives
 * each prefix's item bytes (DESIGN "Labels"). A key without the delimiter
 * gets no label (its prefix would be the whole key: a label per key).
 *
 * The store asks only while the heap profiler is on (a label is read only
 * by a profiled allocation); each prefix's set is interned once, and at
 * most MAX_PREFIX_LABELS prefixes are remembered (memcached's own bound on
 * stats detail's prefixes): further ones are made per item, still right,
 * just not cached.
 */
import { heapLabelSet, type HeapLabelSet } from "../../memory/heap-labels.js";

/** The label's name. */
export const PREFIX_LABEL = "prefix";
const MAX_PREFIX_LABELS = 1 << 16;

export class PrefixLabels {
  private readonly delimiter: string;
  private readonly sets = new Map<string, HeapLabelSet>();

  constructor(delimiter: string) {
    this.delimiter = delimiter;
  }

  /** The label set of `key`'s item, or undefined (no delimiter in it). */
  of(key: string): HeapLabelSet | undefined {
    const end = key.indexOf(this.delimiter);
    if (end < 0) return undefined;
    const prefix = key.slice(0, end);
    let set = this.sets.get(prefix);
    if (set === undefined) {
      // A key is at most 250 bytes: always a valid label value.
      set = heapLabelSet({ [PREFIX_LABEL]: prefix });
      if (this.sets.size < MAX_PREFIX_LABELS) this.sets.set(prefix, set);
    }
    return set;
  }
}
