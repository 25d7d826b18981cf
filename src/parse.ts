/**
 * Reading the other values people type: whole numbers (shard counts, shard
 * ids, ports) and on/off switches, with the same rules on the command line,
 * in options objects and in the admin API's query strings. Sizes and rates
 * are units.ts's parseSize. Every refusal is an InvalidValueError whose
 * message names the field, the rule and what was given.
 */
import { InvalidValueError } from "./errors.js";

const SWITCH_WORDS: Readonly<Record<string, boolean>> = {
  "1": true, true: true, yes: true, on: true,
  "0": false, false: false, no: false, off: false,
};

/**
 * A switch: a boolean as it is, or one of 1/true/yes/on and 0/false/no/off
 * (case and surrounding blanks ignored). Anything else is refused rather
 * than read as off, so `enabled=ture` never silently disables a thing.
 */
export function parseBoolean(value: boolean | string, what: string): boolean {
  if (typeof value === "boolean") return value;
  const word = typeof value === "string" ? SWITCH_WORDS[value.trim().toLowerCase()] : undefined;
  if (word === undefined) {
    throw new InvalidValueError(what, `${what} must be 1, true, yes, on or 0, false, no, off; got ${JSON.stringify(value)}`);
  }
  return word;
}

/**
 * A whole number from `min` to `max`: a safe integer, or a string of
 * decimal digits (blanks around ignored; no sign, fraction, exponent or hex,
 * so "1e3" and "0x10" are refused rather than read as 1000 and 16).
 */
export function parseInteger(value: number | string, what: string, min: number, max: number): number {
  const n = typeof value === "number" ? value : typeof value === "string" && /^\s*\d+\s*$/.test(value) ? Number(value) : NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max) {
    throw new InvalidValueError(what, `${what} must be a whole number from ${min} to ${max}, got ${typeof value === "string" ? JSON.stringify(value) : String(value)}`);
  }
  return n;
}

/**
 * A decimal number from `min` to `max` (seconds, ratios): digits with an
 * optional fraction ("1.5", "0.25", ".5" refused: write "0.5"); no sign,
 * exponent or hex, and an empty value is refused rather than read as 0.
 */
export function parseDecimal(value: string, what: string, min: number, max: number): number {
  const n = typeof value === "string" && /^\s*\d+(?:\.\d+)?\s*$/.test(value) ? Number(value) : NaN;
  if (!(n >= min && n <= max)) {
    throw new InvalidValueError(what, `${what} must be a number from ${min} to ${max}, got ${JSON.stringify(value)}`);
  }
  return n;
}

/**
 * Refuse the keys of an options object that are not among `known`: a
 * misspelt option (`memoryPerShrad`) would otherwise be ignored and its
 * default used without a word. InvalidValueError naming the key as
 * `${what}.${key}`, the known key it most likely meant (a case slip, or at
 * most two letters added, dropped, changed or swapped), and the keys there
 * are.
 */
export function rejectUnknownKeys(given: object, known: readonly string[], what: string): void {
  for (const key of Object.keys(given)) {
    if (known.includes(key)) continue;
    const meant = closestKey(key, known);
    const hint = meant === undefined ? "" : ` (did you mean ${meant}?)`;
    throw new InvalidValueError(`${what}.${key}`, `${what}.${key} is not an option${hint}; the options are ${known.join(", ")}`);
  }
}

/** The key of `known` nearest `key`, if near enough to be a slip: same letters but case, or Damerau-Levenshtein distance <= 2. */
function closestKey(key: string, known: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = 3;
  for (const k of known) {
    const d = k.toLowerCase() === key.toLowerCase() ? 0 : editDistance(key, k, bestDistance);
    if (d < bestDistance) {
      best = k;
      bestDistance = d;
    }
  }
  return best;
}

/** Optimal-string-alignment distance of `a` and `b` (insertions, deletions, substitutions, adjacent swaps), or `cap` once it is that large. */
function editDistance(a: string, b: string, cap: number): number {
  if (Math.abs(a.length - b.length) >= cap) return cap;
  let before: number[] = [];
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(previous[j]! + 1, row[j - 1]! + 1, previous[j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, before[j - 2]! + 1);
      row.push(d);
    }
    before = previous;
    previous = row;
  }
  return Math.min(previous[b.length]!, cap);
}
