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
 *
 * Names are what a filter can address (`label=NAME=VALUE`, `--label`: the
 * first "=" ends the name): no "=", no control character, not the fold's
 * own name. Values may hold any character (but a lone surrogate, which
 * has no UTF-8): every output escapes what its format cannot carry.
 *
 * The sets a thread remembers are bounded in count and in bytes
 * (MAX_INTERNED_SETS, MAX_INTERNED_BYTES): one per user id, or sets of
 * sixteen 1 KiB values, would otherwise grow the thread's memory without
 * end (20,000 sets of 16 values of 1 KiB held 637 MiB). A new set past the
 * bounds is still made and in force with its labels (currentHeapLabels
 * says them), but not remembered, and a profiled allocation records the
 * one fold set instead, OTHER_LABELS (recordedHeapLabels), as a full site
 * table folds stacks into "(other sites)": totals stay exact.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { InvalidValueError } from "../../errors.js";
import { logInfo } from "../../log.js";

/** Labels as a caller gives them: names to values, both strings. */
export type HeapLabels = Readonly<Record<string, string>>;

/** An interned, validated label set (heapLabelSet): compare by identity. */
export interface HeapLabelSet {
  /** The labels, sorted by name, frozen. */
  readonly labels: HeapLabels;
  /** Their canonical text, as a site table stores it: JSON of [name, value] pairs sorted by name. */
  readonly encoded: string;
  /** Unique in this thread, from 1, for a remembered set: what a site table caches the set's record by. 0 for a set made past the bounds (recorded as OTHER_LABELS). */
  readonly id: number;
}

/** At most this many labels in one set, and these many UTF-16 units in a name or a value: a label names a group, it is not a payload. */
export const MAX_LABELS = 16;
export const MAX_LABEL_NAME = 128;
export const MAX_LABEL_VALUE = 1024;
/**
 * Distinct label sets a thread remembers, at most, and the JS bytes they
 * may hold (setBytes): past either, a new set is folded (see above). 16
 * MiB holds the count's worth of small sets (65,536 sets of one short
 * label take 16 MB: 245 bytes each, measured), and about 500 sets of
 * sixteen 1 KiB values, so the bytes bind only where the sets are big.
 */
export const MAX_INTERNED_SETS = 65_536;
export const MAX_INTERNED_BYTES = 16 * 1024 * 1024;

/**
 * The label set's name, and value, that a profiled allocation records
 * when the set in force was not remembered: one set for all of them, so
 * what they hold adds up. Reports show a site of it under this value
 * whatever label they group by (report/labels.ts labelValue). No caller's
 * label may have this name.
 */
export const OTHER_LABELS = "(other labels)";

const interned = new Map<string, HeapLabelSet>();
/** The JS bytes of the interned sets, as setBytes counts them. */
let internedBytes = 0;
let nextId = 1;
let foldNoted = false;

/**
 * JS bytes a remembered set holds, over-counted a little: its record and
 * labels object (SET_BYTES), each label's property (LABEL_BYTES) and every
 * string (STRING_BYTES and one byte a character, two when one is past
 * U+00FF, as V8 stores them). Measured (node 20, heapUsed after gc, 20,000
 * or 2,000 sets): one short label 245 bytes a set (counted 285), two 301
 * (~340), sixteen values of 1 KiB 33,495 (34,279), the same of
 * two-byte characters 66,469 (67,262).
 */
function setBytes(encoded: string, pairs: ReadonlyArray<readonly [string, string]>): number {
  let bytes = SET_BYTES + stringBytes(encoded);
  for (const [name, value] of pairs) bytes += LABEL_BYTES + stringBytes(name) + stringBytes(value);
  return bytes;
}
const SET_BYTES = 160;
const LABEL_BYTES = 32;
const STRING_BYTES = 16;
const stringBytes = (s: string): number => STRING_BYTES + s.length * (/[^\u0000-\u00ff]/.test(s) ? 2 : 1);

/** A set of `pairs` (sorted by name) and their `encoded` text; `id` 0 for one not remembered. */
function labelSet(pairs: ReadonlyArray<readonly [string, string]>, encoded: string, id: number): HeapLabelSet {
  return Object.freeze({ labels: Object.freeze(Object.fromEntries(pairs)), encoded, id });
}

/** The fold set: remembered from the start, so it is always a set a site table can record. */
const FOLDED = rememberSet([[OTHER_LABELS, OTHER_LABELS]]);

/**
 * Remember the set of `pairs`. Its labels are read back from its encoded
 * text: a caller's value may be a slice of a larger string (a key cut from
 * a network read), which V8 keeps whole while the slice lives.
 */
function rememberSet(pairs: ReadonlyArray<readonly [string, string]>, encoded = JSON.stringify(pairs), bytes = setBytes(encoded, pairs)): HeapLabelSet {
  const set = labelSet(JSON.parse(encoded) as Array<[string, string]>, encoded, nextId++);
  interned.set(encoded, set);
  internedBytes += bytes;
  return set;
}

/** How many label sets this thread remembers, and the JS bytes they hold (as counted against MAX_INTERNED_BYTES). */
export function rememberedHeapLabels(): { sets: number; bytes: number } {
  return { sets: interned.size, bytes: internedBytes };
}

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
    checkName(name);
    if (typeof value !== "string") throw new InvalidValueError("labels", `heap label ${JSON.stringify(name)} must be a string, got ${describe(value)}`);
    if (value.length > MAX_LABEL_VALUE) throw new InvalidValueError("labels", `heap label ${JSON.stringify(name)}'s value has ${value.length} characters, at most ${MAX_LABEL_VALUE}`);
    if (!name.isWellFormed() || !value.isWellFormed()) throw new InvalidValueError("labels", `heap label ${JSON.stringify(name)} holds a lone surrogate (not encodable as UTF-8)`);
    pairs.push([name, value]);
  }
  const encoded = JSON.stringify(pairs);
  const known = interned.get(encoded);
  if (known !== undefined) return known;
  const bytes = setBytes(encoded, pairs);
  if (interned.size < MAX_INTERNED_SETS && internedBytes + bytes <= MAX_INTERNED_BYTES) return rememberSet(pairs, encoded, bytes);
  if (!foldNoted) {
    foldNoted = true;
    logInfo(`heap labels: this thread remembers ${interned.size} label sets (${internedBytes} bytes), its bound; profiled allocations under new ones record "${OTHER_LABELS}"`);
  }
  return labelSet(pairs, encoded, 0);
}

/**
 * What a label name must be, so that every filter can address it
 * (`label=NAME=VALUE` and `--label` end the name at the first "="): 1 to
 * MAX_LABEL_NAME characters, no "=", no control character (C0, DEL, C1,
 * U+2028, U+2029: a name is shown in trees and tables), not OTHER_LABELS.
 * As Go's pprof.Labels, any other string: Prometheus' [a-zA-Z_][a-zA-Z0-9_]*
 * would refuse `http.route`, which OpenTelemetry names its attributes.
 */
function checkName(name: string): void {
  const shown = JSON.stringify(name.slice(0, 40));
  if (name.length === 0 || name.length > MAX_LABEL_NAME) throw new InvalidValueError("labels", `a heap label name must have 1 to ${MAX_LABEL_NAME} characters, got ${shown}`);
  if (name.includes("=")) throw new InvalidValueError("labels", `heap label name ${shown} holds "=", which ends a name in a filter (label=NAME=VALUE)`);
  if (/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/.test(name)) throw new InvalidValueError("labels", `heap label name ${shown} holds a control character`);
  if (name === OTHER_LABELS) throw new InvalidValueError("labels", `heap label name ${shown} is reserved: profiles record it for the label sets past a thread's bound`);
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

/** The label set in force here, or undefined. */
export function currentHeapLabels(): HeapLabelSet | undefined {
  return syncLabels ?? asyncLabels.getStore();
}

/** What a profiled allocation records: the set in force, the fold set when that one is not remembered, or undefined. */
export function recordedHeapLabels(): HeapLabelSet | undefined {
  const set = syncLabels ?? asyncLabels.getStore();
  return set === undefined || set.id !== 0 ? set : FOLDED;
}

/**
 * The labels of an encoded set (a site table's text), or undefined when it
 * is not one. Names are not held to checkName: an image written before that
 * rule reads as it was written (every output escapes what it cannot carry).
 */
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
