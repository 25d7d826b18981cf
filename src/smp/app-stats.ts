/**
 * Figures an app running on Smp publishes about itself (memcached: hit
 * rate, items, evictions, connections), for whoever watches the runtime:
 * `smp.publishAppStats(app, read)` registers a reader under the app's
 * name, `smp.appStats()` calls every reader and returns what they said,
 * checked. The admin server (runtime/admin.ts) serves that as
 * `GET /v1/app/stats` and in the memory history the dashboard polls, whose
 * app panel shows it; an app that publishes nothing has no panel.
 *
 * A reader runs on the thread that called publishAppStats (the main
 * thread, where Smp lives) each time someone asks, about once a second
 * with a dashboard open, so it should be cheap and synchronous: read
 * counters the shards keep in shared memory, as memcached's stats block
 * (apps/memcached/stats/stats.ts totals(): 36 float64 slots per shard, a few
 * microseconds), never a round trip to the shards. A reader that throws,
 * returns a promise or gives something that is not a figure does not reach
 * the caller: that app's answer carries `error` instead (and the figures
 * that were fine), so a broken reader never takes the admin server down.
 *
 * Bounded: at most MAX_APPS apps, MAX_FIGURES figures each (the rest are
 * left out, saying so in `error`), names of at most MAX_NAME_LENGTH
 * printable characters.
 */
import { InvalidValueError } from "../errors.js";

/** Apps that may publish at once. */
export const MAX_APPS = 16;
/** Figures kept per app per read; further ones are left out (and `error` says so). */
export const MAX_FIGURES = 64;
/** Longest app or figure name, in characters. */
export const MAX_NAME_LENGTH = 64;

/** How a figure is shown: a plain number, bytes (1.5M), or a ratio from 0 to 1 (shown as a percentage). */
export type AppFigureUnit = "count" | "bytes" | "ratio";
/** A counter only grows (the dashboard also shows its rate per second); a gauge is a level. */
export type AppFigureKind = "counter" | "gauge";

export interface AppFigure {
  value: number;
  /** Default "count". */
  unit?: AppFigureUnit;
  /** Default "gauge". */
  kind?: AppFigureKind;
  /** One line on what it counts (the panel's tooltip). */
  help?: string;
}

/** What a reader returns: figure names to a number (a gauge counting things) or a described figure. */
export type AppFigures = Readonly<Record<string, number | AppFigure>>;
export type AppStatsReader = () => AppFigures;

/** One figure as published: every field filled. */
export interface AppFigureReading {
  name: string;
  value: number;
  unit: AppFigureUnit;
  kind: AppFigureKind;
  help?: string;
}

/** One app's answer. */
export interface AppStats {
  app: string;
  /** When it was read, ms since the epoch. */
  t: number;
  figures: AppFigureReading[];
  /** What went wrong with the reader or some of its figures; absent when nothing did. */
  error?: string;
}

const UNITS: readonly AppFigureUnit[] = ["count", "bytes", "ratio"];
const KINDS: readonly AppFigureKind[] = ["counter", "gauge"];
/** Printable, no control characters, not blank: a name reads the same in a table, a JSON answer and a log. */
const PRINTABLE = /^[^\p{C}]+$/u;

/** Why `name` cannot name an app or a figure, or undefined when it can. */
function nameProblem(name: unknown): string | undefined {
  if (typeof name === "string" && name.trim() !== "" && name.length <= MAX_NAME_LENGTH && PRINTABLE.test(name)) return undefined;
  return `must be 1 to ${MAX_NAME_LENGTH} printable characters, got ${typeof name === "string" ? JSON.stringify(name.slice(0, 80)) : typeof name}`;
}

/** One figure checked, or the reason it is left out. */
function readingOf(name: string, figure: unknown): AppFigureReading | string {
  const badName = nameProblem(name);
  if (badName !== undefined) return `a figure name ${badName}`;
  if (typeof figure === "number") return Number.isFinite(figure) ? { name, value: figure, unit: "count", kind: "gauge" } : `${name}: not a finite number (${String(figure)})`;
  if (figure === null || typeof figure !== "object") return `${name}: a figure is a number or { value, unit?, kind?, help? }, got ${figure === null ? "null" : typeof figure}`;
  const f = figure as Partial<Record<keyof AppFigure, unknown>>;
  if (typeof f.value !== "number" || !Number.isFinite(f.value)) return `${name}: value must be a finite number, got ${String(f.value)}`;
  const unit = f.unit ?? "count";
  if (!UNITS.includes(unit as AppFigureUnit)) return `${name}: unit must be one of ${UNITS.join(", ")}, got ${JSON.stringify(unit)}`;
  const kind = f.kind ?? "gauge";
  if (!KINDS.includes(kind as AppFigureKind)) return `${name}: kind must be counter or gauge, got ${JSON.stringify(kind)}`;
  const reading: AppFigureReading = { name, value: f.value, unit: unit as AppFigureUnit, kind: kind as AppFigureKind };
  if (typeof f.help === "string" && f.help !== "") reading.help = f.help.slice(0, 200);
  return reading;
}

/** One app's figures read now, never throwing. */
function readApp(app: string, read: AppStatsReader): AppStats {
  const t = Date.now();
  let given: unknown;
  try {
    given = read();
  } catch (e) {
    return { app, t, figures: [], error: `its reader threw: ${e instanceof Error ? e.message : String(e)}` };
  }
  if (given === null || typeof given !== "object" || Array.isArray(given)) {
    return { app, t, figures: [], error: `its reader must return an object of figures, got ${given === null ? "null" : Array.isArray(given) ? "an array" : typeof given}` };
  }
  if (typeof (given as { then?: unknown }).then === "function") return { app, t, figures: [], error: "its reader returned a promise: figures are read synchronously (from shared memory)" };
  const figures: AppFigureReading[] = [];
  const problems: string[] = [];
  const entries = Object.entries(given);
  for (const [name, figure] of entries.slice(0, MAX_FIGURES)) {
    const reading = readingOf(name, figure);
    if (typeof reading === "string") problems.push(reading);
    else figures.push(reading);
  }
  if (entries.length > MAX_FIGURES) problems.push(`${entries.length - MAX_FIGURES} figures past the first ${MAX_FIGURES} left out`);
  return problems.length === 0 ? { app, t, figures } : { app, t, figures, error: problems.join("; ") };
}

/** The apps publishing on one Smp, by name, in the order they first published. */
export class AppStatsSources {
  private readonly readers = new Map<string, AppStatsReader>();

  /**
   * Publish `read` under `app` (replacing what that name published before);
   * returns the function that withdraws it (a no-op once another reader
   * took the name).
   */
  publish(app: string, read: AppStatsReader): () => void {
    const badName = nameProblem(app);
    if (badName !== undefined) throw new InvalidValueError("publishAppStats: app", `publishAppStats: app ${badName}`);
    if (typeof read !== "function") throw new TypeError(`publishAppStats: read must be a function returning figures, got ${typeof read}`);
    if (!this.readers.has(app) && this.readers.size >= MAX_APPS) {
      throw new InvalidValueError("publishAppStats: app", `at most ${MAX_APPS} apps publish figures at once (${[...this.readers.keys()].join(", ")}): withdraw one first`);
    }
    this.readers.set(app, read);
    return () => {
      if (this.readers.get(app) === read) this.readers.delete(app);
    };
  }

  /** Every app's figures, read now. */
  read(): AppStats[] {
    return [...this.readers].map(([app, read]) => readApp(app, read));
  }

  clear(): void {
    this.readers.clear();
  }
}
