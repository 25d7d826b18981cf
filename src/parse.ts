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
