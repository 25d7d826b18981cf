/**
 * The heap label of a memcached item: `prefix`, its key up to the -D
 * delimiter (":" by default), so a heap profile grouped by `prefix` gives
 * each prefix's item bytes (DESIGN "Labels"). A key without the delimiter
 * gets no label (its prefix would be the whole key: a label per key).
 *
 * The store asks only while the heap profiler is on (a label is read only
 * by a profiled allocation); each prefix's set is interned once, and at
 * most MAX_PREFIXES prefixes are remembered (memcached's own bound on
 * stats detail's prefixes): further ones are made per item, still right,
 * just not cached. Nor is a set the thread did not remember (heap-labels.ts
 * bounds them in bytes too; it records as "(other labels)"): kept here it
 * would hold the bytes that bound is for.
 */
import { heapLabelSet, type HeapLabelSet } from "../../../memory/profiler/heap-labels.js";
import { MAX_PREFIXES, keyPrefix } from "../stats/prefix-stats.js";

/** The label's name. */
export const PREFIX_LABEL = "prefix";

export class PrefixLabels {
  /** Where a key's prefix ends (-D): the store's bytesByPrefix cuts keys here too. */
  readonly delimiter: string;
  private readonly sets = new Map<string, HeapLabelSet>();

  constructor(delimiter: string) {
    this.delimiter = delimiter;
  }

  /** The label set of `key`'s item, or undefined (no delimiter in it). */
  of(key: string): HeapLabelSet | undefined {
    const prefix = keyPrefix(key, this.delimiter);
    if (prefix === undefined) return undefined;
    let set = this.sets.get(prefix);
    if (set === undefined) {
      // A key is at most 250 bytes: always a valid label value.
      set = heapLabelSet({ [PREFIX_LABEL]: prefix });
      if (set.id !== 0 && this.sets.size < MAX_PREFIXES) this.sets.set(prefix, set);
    }
    return set;
  }
}
