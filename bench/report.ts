/**
 * What a benchmark module is, what it reports, and the two output modes:
 * a readable table (human mode) or one JSON object per line (--json).
 *
 * Every record is one measured candidate; when it is compared with a
 * baseline measured in the same run, `ratio` is candidate time / baseline
 * time (below 1: the candidate is faster), and a target, when the benchmark
 * sets one, is a bound on that ratio with `pass` saying whether it held.
 */
import os from "node:os";
import type { TimingOptions } from "./timing.js";

export interface BenchRecord {
  /** The benchmark module ("pair", "churn", ...). */
  bench: string;
  /** Live-set size, for benchmarks that have one. */
  L?: number;
  candidate: string;
  /** What nsPerOp measures when it is not the plain median time per operation (e.g. "ownCost"). */
  metric?: string;
  /** Median ns per operation over the timed rounds (absent for records that measure something else, see value). */
  nsPerOp?: number;
  /** A figure that is not a time (fragmentation: smallest shard / peak live bytes), shown in the value column. */
  value?: number;
  /** The allocator's own cost: nsPerOp minus the memory floor's (churn). */
  ownNsPerOp?: number;
  minNsPerOp?: number;
  maxNsPerOp?: number;
  opsPerRound?: number;
  rounds?: number;
  baseline?: string;
  baselineNsPerOp?: number;
  /** nsPerOp / baselineNsPerOp. */
  ratio?: number;
  /** The bound the benchmark sets on `ratio`, e.g. "ratio <= 0.8". */
  target?: string;
  pass?: boolean;
  /** Latency benchmarks: median, 99th percentile and maximum, in microseconds. */
  medianUs?: number;
  p99Us?: number;
  maxUs?: number;
  /** Printed under the table in human mode. */
  note?: string;
}

export interface BenchContext {
  /** Timing options from the command line (rounds, round length...). */
  readonly timing: Partial<TimingOptions>;
  readonly json: boolean;
  /** A progress line on stderr (silent in --json mode). */
  progress(message: string): void;
  record(r: BenchRecord): void;
}

/** A benchmark module; register it in run.ts. */
export interface BenchModule {
  /** Short name, matched by --filter. */
  readonly name: string;
  /** One line saying what it measures. */
  readonly title: string;
  run(ctx: BenchContext): void | Promise<void>;
}

/** The ratio fields for `nsPerOp` against a baseline, with an optional upper bound as target. */
export function compare(
  nsPerOp: number,
  baseline: string,
  baselineNsPerOp: number,
  maxRatio?: number,
  targetText?: string,
): Pick<BenchRecord, "baseline" | "baselineNsPerOp" | "ratio" | "target" | "pass"> {
  const ratio = nsPerOp / baselineNsPerOp;
  const out: Pick<BenchRecord, "baseline" | "baselineNsPerOp" | "ratio" | "target" | "pass"> = {
    baseline,
    baselineNsPerOp,
    ratio,
  };
  if (maxRatio !== undefined) {
    out.target = targetText ?? `ratio <= ${maxRatio}`;
    out.pass = ratio <= maxRatio;
  }
  return out;
}

// ------------------------------------------------------------------ formatting

export function formatNs(ns: number | undefined): string {
  if (ns === undefined || !Number.isFinite(ns)) return "";
  if (Math.abs(ns) < 10) return ns.toFixed(2);
  if (Math.abs(ns) < 100) return ns.toFixed(1);
  return Math.round(ns).toLocaleString("en-US");
}

export function formatRatio(r: number | undefined): string {
  if (r === undefined || !Number.isFinite(r)) return "";
  if (r >= 0.01) return r.toFixed(r >= 10 ? 1 : 3);
  return r.toPrecision(3);
}

/** "3.2x faster" / "1.5x slower": the ratio read the other way. */
function formatSpeedup(r: number | undefined): string {
  if (r === undefined || !Number.isFinite(r) || r <= 0) return "";
  const x = r <= 1 ? 1 / r : r;
  const text = x >= 100 ? Math.round(x).toLocaleString("en-US") : x.toFixed(2);
  return `${text}x ${r <= 1 ? "faster" : "slower"}`;
}

const NUMERIC_COLUMNS = new Set(["L", "ns/op", "value", "p50/p99 us", "min..max", "own ns/op", "base ns/op", "ratio", "speed"]);

function formatUs(us: number | undefined): string {
  if (us === undefined || !Number.isFinite(us)) return "";
  return us < 100 ? us.toFixed(1) : Math.round(us).toLocaleString("en-US");
}

/** Render records as an aligned text table. */
export function formatTable(records: readonly BenchRecord[]): string {
  const header = ["bench", "L", "candidate", "ns/op", "min..max", "own ns/op", "baseline", "base ns/op", "ratio", "speed", "target", "result"];
  const rows = records.map((r) => [
    r.bench,
    r.L === undefined ? "" : r.L.toLocaleString("en-US"),
    r.metric ? `${r.candidate} (${r.metric})` : r.candidate,
    formatNs(r.nsPerOp),
    r.minNsPerOp === undefined ? "" : `${formatNs(r.minNsPerOp)}..${formatNs(r.maxNsPerOp)}`,
    formatNs(r.ownNsPerOp),
    r.baseline ?? "",
    formatNs(r.baselineNsPerOp),
    formatRatio(r.ratio),
    r.nsPerOp === undefined ? "" : formatSpeedup(r.ratio), // "faster" / "slower" only for times
    r.target ?? "",
    r.pass === undefined ? "" : r.pass ? "PASS" : "MISS",
  ]);
  // Figures that are not times: a value column, only in tables that have some.
  if (records.some((r) => r.value !== undefined)) {
    header.splice(3, 0, "value");
    rows.forEach((row, i) => row.splice(3, 0, formatRatio(records[i]!.value)));
  }
  // Latency records: a p50/p99 column, only in tables that have some.
  if (records.some((r) => r.p99Us !== undefined)) {
    const at = header.indexOf("ns/op") + 1;
    header.splice(at, 0, "p50/p99 us");
    rows.forEach((row, i) => {
      const r = records[i]!;
      row.splice(at, 0, r.p99Us === undefined ? "" : `${formatUs(r.medianUs)}/${formatUs(r.p99Us)}`);
    });
  }
  const numeric = new Set(header.flatMap((h, i) => (NUMERIC_COLUMNS.has(h) ? [i] : [])));
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: string[]): string =>
    cells
      .map((c, i) => (numeric.has(i) ? c.padStart(widths[i]!) : c.padEnd(widths[i]!)))
      .join("  ")
      .trimEnd();
  return [line(header), line(widths.map((w) => "-".repeat(w))), ...rows.map(line)].join("\n");
}

/** The machine's load averages (1, 5, 15 min), for the notes under a shared machine's figures. */
export function loadAverage(): string {
  return os.loadavg().map((l) => l.toFixed(2)).join(" ");
}
