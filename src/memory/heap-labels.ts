/**
 * Allocation labels: who an allocation is for (a tenant, a route, a key
 * prefix), so a profile can say who holds the live heap, which stacks
 * alone cannot (every memcached item comes from one allocation site).
 *
 * withHeapLabels(labels, fn) runs fn with `labels` added to the ones in
 * force (an inner call's value wins for a key it sets, as Go's pprof.Do);
 * they follow the async work started inside fn, through an
 * AsyncLocalStorage. withHeapLabelsSync(set, fn) is the hot loop's form:
 * a module variable set for fn's synchronous run only (two assignments
 * and a try/finally, no AsyncLocalStorage frame); while it runs, its set
 * is the one in force.
 *
 * Only a profiled allocation reads the labels in force (recordSample, on
 * the allocator's slow path), so an unlabeled allocation pays nothing,
 * and a labeled one that is not sampled pays only for entering the
 * labels. A label set is validated and interned once (heapLabelSet): the
 * same labels give the same object, whose `encoded` text is what a
 * shard's site table stores (site-table.ts) and `id` what it caches by.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { InvalidValueError } from "../errors.js";

/** Labels as a caller gives them: names to values, both strings. */
export type HeapLabels = Readonly<Record<string, string>>;

/** An interned, validated label set (heapLabelSet): compare by identity. */
export interface HeapLabelSet {
  /** The labels, sorted by name, frozen. */
  readonly labels: HeapLabels;
  /** Their canonical text, as a site table stores it: JSON of [name, value] pairs sorted by name. */
  readonly encoded: string;
  /** Unique in this thread, from 1: what a site table caches the set's record by. */
  readonly id: number;
}

/** At most this many labels in one set, and these many UTF-16 units in a name or a value: a label names a group, it is not a payload. */
export const MAX_LABELS = 16;
export const MAX_LABEL_NAME = 128;
export const MAX_LABEL_VALUE = 1024;
/**
 * Distinct label sets interned in this thread, at most; past it a new set
 * is still made and used, just not remembered (so unbounded values, one
 * per user id, cannot grow this thread's memory without bound: the site
 * tables bound what is recorded, and fold the rest).
 */
export const MAX_INTERNED_SETS = 65_536;

const interned = new Map<string, HeapLabelSet>();
let nextId = 1;

/** The labels in force from withHeapLabels (async-following). */
const asyncLabels = new AsyncLocalStorage<HeapLabelSet>();
/** The set withHeapLabelsSync put in force, or undefined. */
let syncLabels: HeapLabelSet | undefined;

/** `labels` validated and interned: the same labels (in any order) give the same set. */
export function heapLabelSet(labels: HeapLabels | HeapLabelSet): HeapLabelSet {
  if (isLabelSet(labels)) return labels;
  if (labels === null || typeof labels !== "object" || Array.isArray(labels)) {
    throw new InvalidValueError("labels", `heap labels must be an object of names to string values, got ${describe(labels)}`);
  }
  const names = Object.keys(labels).sort();
  if (names.length > MAX_LABELS) throw new InvalidValueError("labels", `at most ${MAX_LABELS} heap labels in one set, got ${names.length}`);
  const pairs: Array<[string, string]> = [];
  for (const name of names) {
    const value: unknown = labels[name];
    if (name.length === 0 || name.length > MAX_LABEL_NAME) throw new InvalidValueError("labels", `a heap label name must have 1 to ${MAX_LABEL_NAME} characters, got ${JSON.stringify(name.slice(0, 40))}`);
    if (typeof value !== "string") throw new InvalidValueError("labels", `heap label ${JSON.stringify(name)} must be a string, got ${describe(value)}`);
    if (value.length > MAX_LABEL_VALUE) throw new InvalidValueError("labels", `heap label ${JSON.stringify(name)}'s value has ${value.length} characters, at most ${MAX_LABEL_VALUE}`);
    if (!name.isWellFormed() || !value.isWellFormed()) throw new InvalidValueError("labels", `heap label ${JSON.stringify(name)} holds a lone surrogate (not encodable as UTF-8)`);
    pairs.push([name, value]);
  }
  const encoded = JSON.stringify(pairs);
  const known = interned.get(encoded);
  if (known !== undefined) return known;
  const set: HeapLabelSet = Object.freeze({ labels: Object.freeze(Object.fromEntries(pairs)), encoded, id: nextId++ });
  if (interned.size < MAX_INTERNED_SETS) interned.set(encoded, set);
  return set;
}

/**
 * Run `fn` with `labels` added to those in force (its own win where both
 * name a label); every profiled allocation made inside, in fn's async
 * work too, records them. Returns what fn returns (a promise stays one).
 */
export function withHeapLabels<T>(labels: HeapLabels | HeapLabelSet, fn: () => T): T {
  const set = heapLabelSet(labels);
  const outer = currentHeapLabels();
  return asyncLabels.run(outer === undefined ? set : merged(outer, set), fn);
}

/**
 * withHeapLabels for hot synchronous code: `set` is in force while fn runs
 * (and only then: an await inside fn ends it). Give it a set from
 * heapLabelSet made once, outside the loop, to skip the validation.
 */
export function withHeapLabelsSync<T>(set: HeapLabelSet | HeapLabels, fn: () => T): T {
  const previous = enterHeapLabels(heapLabelSet(set));
  try {
    return fn();
  } finally {
    syncLabels = previous;
  }
}

/** Put `set` in force (synchronously) and return what was, for leaveHeapLabels: the no-closure form, for shardheap's own hot paths. */
export function enterHeapLabels(set: HeapLabelSet | undefined): HeapLabelSet | undefined {
  const previous = syncLabels;
  syncLabels = set;
  return previous;
}

/** Undo enterHeapLabels. */
export function leaveHeapLabels(previous: HeapLabelSet | undefined): void {
  syncLabels = previous;
}

/** The label set in force here, or undefined: what a profiled allocation records. */
export function currentHeapLabels(): HeapLabelSet | undefined {
  return syncLabels ?? asyncLabels.getStore();
}

/** The labels of an encoded set (a site table's text), or undefined when it is not one. */
export function decodeHeapLabels(encoded: string): Record<string, string> | undefined {
  let pairs: unknown;
  try {
    pairs = JSON.parse(encoded);
  } catch {
    return undefined;
  }
  if (!Array.isArray(pairs) || pairs.length === 0 || pairs.length > MAX_LABELS) return undefined;
  const out: Record<string, string> = {};
  let last = "";
  for (const pair of pairs) {
    if (!Array.isArray(pair) || pair.length !== 2 || typeof pair[0] !== "string" || typeof pair[1] !== "string") return undefined;
    const [name, value] = pair as [string, string];
    if (name.length === 0 || name <= last || name.length > MAX_LABEL_NAME || value.length > MAX_LABEL_VALUE) return undefined;
    out[name] = value;
    last = name;
  }
  return out;
}

function merged(outer: HeapLabelSet, inner: HeapLabelSet): HeapLabelSet {
  return heapLabelSet({ ...outer.labels, ...inner.labels });
}

function isLabelSet(x: unknown): x is HeapLabelSet {
  return typeof x === "object" && x !== null && interned.get((x as HeapLabelSet).encoded) === x;
}

function describe(x: unknown): string {
  if (x === null) return "null";
  if (Array.isArray(x)) return "an array";
  return typeof x === "string" ? JSON.stringify(x.slice(0, 40)) : typeof x;
}
