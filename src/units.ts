/**
 * Byte sizes for people: reading "64MiB" / "1.5K" / "65536" (one parser for
 * the CLI, Smp.start, SharedHeap.create and the admin API) and printing
 * sizes the way Seastar's diagnostics do (binary units, short).
 */
import { InvalidValueError } from "./errors.js";

const UNITS: Record<string, number> = {
  "": 1, b: 1,
  k: 2 ** 10, kb: 2 ** 10, kib: 2 ** 10,
  m: 2 ** 20, mb: 2 ** 20, mib: 2 ** 20,
  g: 2 ** 30, gb: 2 ** 30, gib: 2 ** 30,
  t: 2 ** 40, tb: 2 ** 40, tib: 2 ** 40,
};

/** Decimal digits, an optional fraction, an optional unit; blanks around and between. */
const SIZE_TEXT = /^\s*(\d+)(?:\.(\d+))?\s*([a-zA-Z]*)\s*$/;

export interface SizeLimits {
  /** Smallest accepted value, in bytes. */
  min?: number;
  /** Largest accepted value, in bytes. */
  max?: number;
}

/**
 * Read a byte count. Rules, the same wherever a size or a rate is taken:
 *   - a number: a non-negative safe integer;
 *   - a string: decimal digits with an optional binary unit, case ignored:
 *     B, K/KB/KiB, M/MB/MiB, G/GB/GiB, T/TB/TiB (KB, MB... are binary too,
 *     as Seastar's --memory reads them); blanks around are ignored;
 *   - a fraction only when the result is a whole number of bytes: "1.5K"
 *     is 1536, "1.3K" (1331.2 bytes) and "0.5" are refused, so a rate of
 *     0.5 never silently becomes 0 (off) and 1.5 never becomes 1 (exact);
 *   - nothing else: no sign, exponent, hex, separators or unknown unit;
 *   - then `limits` (min, max) when given.
 * Anything else throws InvalidValueError (a RangeError) whose message names
 * `what` and the rule. The arithmetic is exact (BigInt), not floating point.
 */
export function parseSize(value: number | string, what = "size", limits: SizeLimits = {}): number {
  const bytes = typeof value === "number" ? sizeOfNumber(value, what) : sizeOfText(value, what);
  if (limits.min !== undefined && bytes < limits.min) throw new InvalidValueError(what, `${what} must be at least ${limits.min} bytes, got ${bytes}`);
  if (limits.max !== undefined && bytes > limits.max) throw new InvalidValueError(what, `${what} must be at most ${limits.max} bytes, got ${bytes}`);
  return bytes;
}

function sizeOfNumber(value: number, what: string): number {
  if (!Number.isInteger(value) || value < 0) {
    throw new InvalidValueError(what, `${what} must be a whole number of bytes, 0 or more, got ${value}`);
  }
  if (!Number.isSafeInteger(value)) throw new InvalidValueError(what, `${what} is too large: ${value} bytes`);
  return value;
}

function sizeOfText(value: unknown, what: string): number {
  if (typeof value !== "string") {
    throw new InvalidValueError(what, `${what} must be a byte count (a number, or a string like "64MiB"), got ${typeof value}`);
  }
  const m = SIZE_TEXT.exec(value);
  const unit = m ? UNITS[m[3]!.toLowerCase()] : undefined;
  if (!m || unit === undefined) {
    throw new InvalidValueError(what, `${what} must be a byte count like 65536, 64MiB or 1.5GiB, got ${JSON.stringify(value)}`);
  }
  const fraction = m[2] ?? "";
  const scaled = BigInt(m[1]! + fraction) * BigInt(unit);
  const divisor = 10n ** BigInt(fraction.length);
  if (scaled % divisor !== 0n) {
    throw new InvalidValueError(what, `${what} must be a whole number of bytes: ${JSON.stringify(value)} is ${Number(scaled) / Number(divisor)} bytes`);
  }
  const bytes = scaled / divisor;
  if (bytes > BigInt(Number.MAX_SAFE_INTEGER)) throw new InvalidValueError(what, `${what} is too large: ${JSON.stringify(value)}`);
  return Number(bytes);
}

/** "0B", "512B", "4K", "1.5M", "2G": at most one decimal, binary units. */
export function formatSize(bytes: number): string {
  const units = ["B", "K", "M", "G", "T"];
  let v = bytes;
  let u = 0;
  while (Math.abs(v) >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  const text = u === 0 || Number.isInteger(v) || v >= 100 ? String(Math.round(v)) : v.toFixed(1).replace(/\.0$/, "");
  return text + units[u];
}

/** A count and its noun: "1 shard", "2 shards". */
export function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? "" : "s"}`;
}

/** "10", "12k", "1.2M": counts in SI units, as Seastar's to_hr_number. */
export function formatCount(n: number): string {
  const units = ["", "k", "M", "G", "T"];
  let v = n;
  let u = 0;
  while (Math.abs(v) >= 10000 && u < units.length - 1) {
    v /= 1000;
    u++;
  }
  return String(Math.round(v)) + units[u];
}
