/**
 * What every part of the page shares: its state, the API call with the
 * token, the page's elements, and figures, times and names written as the
 * reports write them. Nothing here runs as the module loads (main.ts
 * starts the page), so a test may load any module of the folder.
 *
 * The token lives in a variable of this module, goes only into an
 * Authorization header, never into a URL. Errors show in the status line,
 * never as console errors.
 */
import type UPlot from "uplot";
import type { AppStats, BaselineInfo, Frame, HistorySample } from "./api.js";
import { shown } from "./text.js";

declare global {
  interface Window {
    /** The page's state, for the browser tests to read. */
    shardheapDashboard: DashboardState;
  }
}

export const PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
/** How often the views other than the charts refresh. */
export const REFRESH_MS = 5000;

/**
 * A panel with a module of its own (the peaks', the whole memory's): main.ts
 * calls each of its hooks it has, in turn, awaited; a panel's failure is its
 * own, in the status line.
 */
export interface Panel {
  /** Once, after the first poll. */
  start?(): Promise<unknown> | void;
  /** Every REFRESH_MS. */
  refresh?(): Promise<unknown> | void;
  /** After each poll, the new samples in state.samples. */
  polled?(): Promise<unknown> | void;
  /** When another shard (or all) is chosen. */
  shardChanged?(): Promise<unknown> | void;
}

export interface DashboardState {
  shards: number;
  mainShard: number | null;
  intervalMs: number;
  historySeconds: number;
  growthWindowSeconds: number;
  heapImage: boolean;
  samples: HistorySample[];
  /** The last sample's time: the next poll asks for those after it. */
  lastT: number;
  baselines: BaselineInfo[];
  baselineName: string;
  /** Whether the page's user chose the baseline (set one, or picked one): until then the newest is shown. */
  baselineChosen: boolean;
  apps: AppStats[];
  /** Each app's counters at the previous poll ("app\nfigure"), for their rates. */
  appsBefore: Record<string, { value: number; t: number }>;
  /** "all", or a shard's number as the chooser's value says it. */
  shard: string;
  labelName: string | null;
  labelFilter: { name: string; value: string } | null;
  /** When each shard's profiler switch was set here (ms; Infinity while the answer is awaited). */
  rateSetAt: Record<number, number>;
  charts: UPlot[];
  /** While the mouse is on a flamegraph: its refresh waits. */
  paused: boolean;
  started: boolean;
  panels: Panel[];
  /** The peak panel's own state (peaks.ts), for the tests. */
  peakPanel?: unknown;
}

export const state: DashboardState = {
  shards: 0,
  mainShard: null,
  intervalMs: 1000,
  historySeconds: 900,
  growthWindowSeconds: 300,
  heapImage: false,
  samples: [],
  lastT: 0,
  baselines: [],
  baselineName: "default",
  baselineChosen: false,
  apps: [],
  appsBefore: {},
  shard: "all",
  labelName: null,
  labelFilter: null,
  rateSetAt: {},
  charts: [],
  paused: false,
  started: false,
  panels: [],
};

// ---- the page's elements ----
export function $(id: string): HTMLElement {
  const e = document.getElementById(id);
  if (e === null) throw new Error(`the page has no #${id}`);
  return e;
}
/** The element `id`, checked to be a `kind` (HTMLInputElement, ...). */
export function element<T extends HTMLElement>(id: string, kind: { new (): T; prototype: T }): T {
  const e = $(id);
  if (!(e instanceof kind)) throw new Error(`#${id} is a ${e.tagName.toLowerCase()}`);
  return e;
}
export const input = (id: string): HTMLInputElement => element(id, HTMLInputElement);
export const select = (id: string): HTMLSelectElement => element(id, HTMLSelectElement);
export const frame = (id: string): HTMLIFrameElement => element(id, HTMLIFrameElement);

export function el<K extends keyof HTMLElementTagNameMap>(tag: K, attrs?: Record<string, string> | null, text?: string): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  if (attrs) Object.keys(attrs).forEach((k) => e.setAttribute(k, attrs[k]!));
  if (text !== undefined) e.textContent = text;
  return e;
}
export function status(text: string, bad?: boolean): void {
  const s = $("status");
  s.textContent = text;
  s.className = bad ? "bad" : "";
}
export function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
/** Shows a failure in the status line, unless it was a refused token (the token box says so already). */
export function report(e: unknown, what = ""): void {
  if (messageOf(e) !== "unauthorized") status(what + messageOf(e), true);
}

// ---- the API, with the token ----
let token: string | null = null;

/** Every request: same origin, the token (when there is one) as a bearer header, never in the URL. */
export async function api(path: string, init: RequestInit = {}): Promise<Response> {
  const headers = new Headers(init.headers || {});
  if (token !== null) headers.set("Authorization", "Bearer " + token);
  const r = await fetch(path, { ...init, headers });
  if (r.status === 401) {
    askToken("the token was refused");
    throw new Error("unauthorized");
  }
  if (!r.ok) {
    const text = await r.text();
    let message = text;
    try {
      message = (JSON.parse(text) as { error: string }).error;
    } catch {
      /* not JSON: the text itself */
    }
    throw new Error(message || r.statusText);
  }
  return r;
}
/** An answer's JSON, as the route's type in api.ts says it is. */
export async function apiJson<T>(path: string, init?: RequestInit): Promise<T> {
  return (await (await api(path, init)).json()) as T;
}

export function askToken(why: string): void {
  $("token-box").hidden = false;
  $("token-why").textContent = why || "";
  input("token").focus();
}
/** Takes the token typed into the box (and empties the box). */
export function takeToken(): void {
  token = input("token").value;
  input("token").value = "";
  $("token-box").hidden = true;
}

// ---- formatting, as the reports print ----
export function size(n: number): string {
  const units = ["B", "K", "M", "G", "T"];
  let v = Math.abs(n);
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  const text = u === 0 || Number.isInteger(v) || v >= 100 ? String(Math.round(v)) : v.toFixed(1).replace(/\.0$/, "");
  return (n < 0 ? "-" : "") + text + units[u];
}
export function signedSize(n: number): string {
  return (n > 0 ? "+" : "") + size(n);
}
export function count(n: number): string {
  const units = ["", "k", "M", "G"];
  let v = Math.abs(n);
  let u = 0;
  while (v >= 10000 && u < units.length - 1) {
    v /= 1000;
    u++;
  }
  return (n < 0 ? "-" : "") + Math.round(v) + units[u];
}
export function exact(n: number): string {
  return n.toLocaleString("en-US", { maximumFractionDigits: 2 });
}
export function frameName(f: Frame): string {
  const name = f.functionName || "(anonymous)";
  return shown(f.url ? name + " (" + f.url + ":" + f.line + ":" + f.column + ")" : name);
}
/** A frame as the tables' short form reads it: the function and the file's last part with the line. */
export function shortFrame(f: Frame): string {
  const name = shown(f.functionName || "(anonymous)");
  if (!f.url) return name;
  const file = shown(f.url.slice(f.url.lastIndexOf("/") + 1));
  return name + " (" + file + ":" + f.line + ")";
}
/** A chart's time (seconds since the epoch, as uPlot's) as the time of day. */
export function clock(t: number): string {
  return new Date(t * 1000).toLocaleTimeString();
}

// ---- the chosen shards ----
function shardQuery(): string {
  return state.shard === "all" ? "" : "shard=" + state.shard;
}
export function withShard(path: string): string {
  const q = shardQuery();
  return q ? path + (path.indexOf("?") < 0 ? "?" : "&") + q : path;
}
/** How a shard is named: the main thread's own region says so. */
export function shardName(s: number | string): string {
  return Number(s) === state.mainShard ? "main thread (shard " + s + ")" : "shard " + s;
}
/** The shards "all" or one stands for. */
export function chosenShards(shard: string): number[] {
  return shard === "all" ? Array.from({ length: state.shards }, (_, i) => i) : [Number(shard)];
}
/** The newest sample, if any came yet. */
export function latestSample(): HistorySample | undefined {
  return state.samples[state.samples.length - 1];
}

// ---- charts ----
/**
 * A legend value: the point under the mouse, else the latest one (uPlot
 * asks with idx null when the mouse is off the chart: it showed "-").
 */
export function legendValue(format: (v: number) => string): (u: UPlot, v: number | null, sidx: number, idx: number | null) => string {
  return (u, v, sidx, idx) => {
    if (idx == null) {
      const column = u.data[sidx];
      v = column && column.length ? (column[column.length - 1] ?? null) : null;
    }
    return v == null ? "-" : format(v);
  };
}
/*
 * Every chart's time axis (the panels' too): one row per label, the time of
 * day (14:52:10), ticks whole seconds apart and 70 px apart at least (a
 * label is ~52 px at the axis font). uPlot's own choice crowded the first
 * seconds of a page: sub-second ticks (":04.000", ":04.500", ...) 56 px
 * apart on a 600 px chart, the labels touching, and a date row under the first.
 */
function timeOfDay(t: number): string {
  const d = new Date(t * 1000);
  return [d.getHours(), d.getMinutes(), d.getSeconds()].map((n) => String(n).padStart(2, "0")).join(":");
}
export function timeAxis(): UPlot.Axis {
  return { space: 70, incrs: [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 43200, 86400], values: (_u, splits) => splits.map(timeOfDay) };
}
/** The time scale: one sample alone spans 2 s (uPlot's own range for it was years). */
export function timeScale(): UPlot.Scale {
  return { time: true, range: (_u, min, max) => (min != null && min === max ? [min - 1, max + 1] : [min, max]) };
}
export function chartWidth(id: string): number {
  return Math.max(280, $(id).clientWidth - 8);
}
