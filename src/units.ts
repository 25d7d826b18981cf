/**
 * Byte sizes for people: parsing "64MiB" / "1g" / "65536" and printing
 * sizes the way Seastar's diagnostics do (binary units, short).
 */

const UNITS: Record<string, number> = {
  "": 1, b: 1,
  k: 2 ** 10, kb: 2 ** 10, kib: 2 ** 10,
  m: 2 ** 20, mb: 2 ** 20, mib: 2 ** 20,
  g: 2 ** 30, gb: 2 ** 30, gib: 2 ** 30,
  t: 2 ** 40, tb: 2 ** 40, tib: 2 ** 40,
};

/**
 * Parse a byte count: a non-negative integer, or a number with a binary
 * unit (K, KiB, M, MiB, G, GiB, T, TiB; KB/MB/GB are read as binary too,
 * as Seastar's --memory does). Throws RangeError naming `what`.
 */
export function parseSize(text: string | number, what = "size"): number {
  if (typeof text === "number") {
    if (!Number.isSafeInteger(text) || text < 0) {
      throw new RangeError(`${what} must be a non-negative integer number of bytes, got ${text}`);
    }
    return text;
  }
  const m = /^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$/.exec(String(text));
  const unit = m ? UNITS[m[2]!.toLowerCase()] : undefined;
  if (!m || unit === undefined) {
    throw new RangeError(`${what} must be a byte count like 65536, 64MiB or 1GiB, got ${JSON.stringify(text)}`);
  }
  const bytes = Math.floor(Number(m[1]) * unit);
  if (!Number.isSafeInteger(bytes)) throw new RangeError(`${what} is too large: ${text}`);
  return bytes;
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
