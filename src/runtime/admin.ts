/**
 * The admin HTTP API (serveAdmin(smp, options), `--admin-port`): profiles in every
 * format, run-time profiling switches per shard, statistics, diagnostics,
 * the heap image (only when allowed: it exposes the heap's contents; sent
 * as heap-image-download.ts bounds it) and Prometheus metrics; for leak
 * hunting, named baselines and the growth since (baselines.ts), Go's
 * /debug/pprof/heap and /allocs (debug-pprof.ts), the memory history and
 * growing sites (memory-history.ts), a profile's label names and one
 * label's groups (GET /v1/heapprof/labels), the figures the app publishes
 * (smp.publishAppStats: GET /v1/app/stats) and the dashboard page that
 * shows them all (dashboard.ts: its page and assets are served without the
 * token, which the page asks for and sends as a header). Reads go to
 * the buffer, so they answer while a shard is busy. Loopback by default, an
 * optional bearer token; with or without it, a forged Host (DNS
 * rebinding) and a state change from another site's page are refused
 * (admin-guards.ts). Every route is a row of ROUTES (exported as
 * ADMIN_ROUTES, which the tests walk): its method, path, the query
 * parameters it reads and whether it needs the token; HEAD is answered
 * wherever GET is. Every error becomes a JSON `{ error, code }` answer
 * whose status is its code's row in errors.ts's ERROR_TABLE (bad
 * parameters, unknown or repeated ones and malformed request targets 400,
 * no token 401, refused Host or origin 403, unknown shard 404, ...), so no
 * request can take the server down.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Duplex } from "node:stream";
import { HttpError, InvalidValueError, UsageError, errorRow } from "../errors.js";
import { formatMappedDiagnostics } from "../report/mapped-diagnostics.js";
import { NO_LABEL, groupByLabel, labelNames, parseLabelFilter } from "../report/labels.js";
import { parseReportFormat, renderProfile } from "../report/render.js";
import { SourceMapCache, mapProfileToSources } from "../report/source-map.js";
import type { Smp } from "../smp/smp.js";
import { parseBoolean, parseInteger, rejectUnknownKeys } from "../parse.js";
import { heapprofRate, jsHeapprofRate } from "../smp/options.js";
import { parseSize } from "../units.js";
import { Baselines, DEFAULT_BASELINE, baselineName } from "./baselines.js";
import { allowedHostNames, authorized, checkHost, checkSite } from "./admin-guards.js";
import { DASHBOARD_PATHS, dashboardAsset } from "./dashboard.js";
import type { BaselineSetBody, GrowingBody, HistoryBody, LabelsBody, RateBody, TimelineBody } from "./dashboard/api.js";
import { DEBUG_PPROF_PARAMS, DEBUG_PPROF_PROFILES, DebugPprof } from "./debug-pprof.js";
import { HeapImageDownloads, MAX_DOWNLOADS } from "./heap-image-download.js";
import { mapGrowingSites } from "./growing-sites.js";
import { MemoryHistory, type HistoryOptions } from "./memory-history.js";
import { memoryMetricsRegistry } from "./metrics.js";
import { parseAt, profileInThePast, shownTimeline } from "./peak-views.js";
import { JsHeapBaselines, checkDiffHeap, heapParam, profileOfHeap } from "./heap-kinds.js";
import { registerJsHeapMetrics } from "./js-heap-metrics.js";

export interface AdminOptions {
  /** Port; 0 (default) picks a free one. */
  port?: number;
  /** Address to bind; 127.0.0.1 unless told otherwise. */
  host?: string;
  /**
   * Host names the server answers to besides IP addresses, `localhost`,
   * `*.localhost` and `host` (a leading dot: the name and its subdomains).
   * List a name only if you control what it resolves to; any other Host is
   * a 403, which is what stops DNS rebinding.
   */
  allowedHosts?: readonly string[];
  /** When set, every request but the dashboard's files needs `Authorization: Bearer TOKEN` (the scheme in any case). */
  token?: string;
  /** Serve GET /v1/heap/image (off by default: it exposes the heap). */
  allowHeapImage?: boolean;
  /** The memory history behind the dashboard: sample interval, how far back, the growth window. */
  dashboard?: HistoryOptions;
}

export interface AdminServer {
  url: string;
  close(): Promise<void>;
}

/** Parsed source maps, shared by every request: each script is read and parsed once (bounded LRU). */
const sourceMaps = new SourceMapCache();

/** Every key AdminOptions has (the type makes sure none is missing): any other key is refused. */
const ADMIN_OPTION_KEYS: Readonly<Record<keyof AdminOptions, true>> = { port: true, host: true, allowedHosts: true, token: true, allowHeapImage: true, dashboard: true };

export async function serveAdmin(smp: Smp, o: AdminOptions = {}): Promise<AdminServer> {
  if (o === null || typeof o !== "object") throw new TypeError("serveAdmin: options must be an object");
  rejectUnknownKeys(o, Object.keys(ADMIN_OPTION_KEYS), "serveAdmin: options");
  const host = o.host ?? "127.0.0.1";
  const port = o.port ?? 0;
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new RangeError(`serveAdmin: port must be 0..65535, got ${String(port)}`);
  if (o.token !== undefined && (typeof o.token !== "string" || o.token.length === 0)) throw new TypeError("serveAdmin: token must be a non-empty string");
  const hostNames = allowedHostNames(host, o.allowedHosts);
  const history = new MemoryHistory(smp, o.dashboard);
  const parts: Parts = {
    hostNames,
    metrics: registerJsHeapMetrics(memoryMetricsRegistry(smp.heap), smp),
    images: new HeapImageDownloads(smp.heap),
    baselines: new Baselines(smp.heap),
    jsBaselines: new JsHeapBaselines(smp),
    debugPprof: new DebugPprof(smp, sourceMaps),
    history,
  };
  const server = createServer((req, res) => {
    handle(smp, o, parts, req, res).catch((e: unknown) => {
      const { httpStatus } = errorRow(e);
      const message = e instanceof Error ? e.message : String(e);
      const code = (e as { code?: unknown })?.code;
      const body = typeof code === "string" ? { error: message, code } : { error: message };
      if (!res.headersSent) send(res, httpStatus, JSON.stringify(body), "application/json");
      else res.destroy();
    });
  });
  server.on("clientError", answerClientError);
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
  history.start();
  const address = server.address() as AddressInfo;
  const shownHost = address.family === "IPv6" ? `[${address.address}]` : address.address;
  return {
    url: `http://${shownHost}:${address.port}`,
    close: () =>
      new Promise<void>((resolve) => {
        history.stop();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/**
 * Requests the HTTP parser refused (a request target with bytes no URL
 * may hold, a malformed header, a request that took too long): answer
 * with the status and JSON error the API promises, as Node's docs show,
 * and close; a connection already gone is just let go.
 */
function answerClientError(e: Error & { code?: string }, socket: Duplex): void {
  if (!socket.writable || e.code === "ECONNRESET") {
    socket.destroy();
    return;
  }
  const [status, reason] =
    e.code === "ERR_HTTP_REQUEST_TIMEOUT" ? [408, "Request Timeout"] : e.code === "HPE_HEADER_OVERFLOW" ? [431, "Request Header Fields Too Large"] : [400, "Bad Request"];
  const body = JSON.stringify({ error: `malformed request (${e.code ?? e.message})` });
  socket.end(`HTTP/1.1 ${status} ${reason}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
}

/**
 * The path and query of a request target (RFC 9112, section 3.2): the
 * origin form `/path?query`, or the absolute form `http://host/path?query`
 * that a server must accept. Anything else, an absolute form that is not a
 * URL among them, is a 400 (it was a 500: `new URL` threw). The absolute
 * form's authority stands for Host (RFC 9112 3.2.2).
 */
function parseTarget(target: string): { pathname: string; query: URLSearchParams; authority?: string } {
  const shown = JSON.stringify(target.length > 200 ? `${target.slice(0, 200)}...` : target);
  if (target.startsWith("/")) {
    const q = target.indexOf("?");
    return q < 0 ? { pathname: target, query: new URLSearchParams() } : { pathname: target.slice(0, q), query: new URLSearchParams(target.slice(q + 1)) };
  }
  if (/^https?:\/\//i.test(target)) {
    let url: URL;
    try {
      url = new URL(target);
    } catch {
      throw new UsageError(`malformed request target: ${shown} is not a URL`);
    }
    return { pathname: url.pathname, query: url.searchParams, authority: url.host };
  }
  throw new UsageError(`malformed request target: ${shown} (expected a path such as /v1/memory/stats)`);
}

/** The whole answer at once; its length is in the head, so a HEAD (whose body Node drops) tells the same length as the GET. */
function send(res: ServerResponse, status: number, body: string | Uint8Array, contentType: string): void {
  res.writeHead(status, { "content-type": contentType, "cache-control": "no-store", "content-length": String(Buffer.byteLength(body)) });
  res.end(body);
}

/**
 * ?shard=N: a shard number (404 when out of range), or undefined when
 * absent. The shards are the heap's regions: the workers' and, with
 * Smp.start({ mainShard: true }), the main thread's (the last, id
 * smp.mainShard), listed as one more shard everywhere (stats, profiles,
 * switches, baselines, history, /metrics).
 */
function shardParam(q: URLSearchParams, smp: Smp, allowAll = false): number | "all" | undefined {
  const v = q.get("shard");
  if (v === null || v === "") return undefined;
  if (allowAll && v === "all") return "all";
  if (!/^\d+$/.test(v)) throw new InvalidValueError("shard", `shard must be a shard number${allowAll ? ' or "all"' : ""}, got ${JSON.stringify(v)}`);
  const shard = Number(v);
  const count = smp.heap.shards;
  if (shard >= count) {
    const main = smp.mainShard === undefined ? "" : ` (${smp.mainShard}: the main thread's)`;
    throw new HttpError("ERR_SHARDHEAP_NOT_FOUND", `no shard ${shard}: shards are 0 to ${count - 1}${main}`);
  }
  return shard;
}

/** What one server holds besides the Smp and its options. */
interface Parts {
  /** The Host names allowed besides IP literals and loopback names (admin-guards.ts). */
  hostNames: readonly string[];
  metrics: ReturnType<typeof memoryMetricsRegistry>;
  images: HeapImageDownloads;
  baselines: Baselines;
  /** The JS heaps' baselines (heap=js), apart from the shared heap's. */
  jsBaselines: JsHeapBaselines;
  debugPprof: DebugPprof;
  history: MemoryHistory;
}


/** What a route's handler is given. */
interface Request {
  readonly smp: Smp;
  readonly o: AdminOptions;
  readonly parts: Parts;
  readonly q: URLSearchParams;
  readonly res: ServerResponse;
}

/** One route: a method and a path, the query parameters it reads (any other, or one given twice, is a 400), whether it needs the token. HEAD is served wherever GET is. */
export interface AdminRoute {
  readonly method: "GET" | "PUT" | "POST" | "DELETE";
  readonly path: string;
  readonly params: readonly string[];
  /** False only for the dashboard's page and files: they hold no data, so they load without the token and the page then asks for it. */
  readonly token: boolean;
}

interface Route extends AdminRoute {
  handle(r: Request): Promise<void> | void;
}

/** `fullpaths=1`: frames' files as recorded instead of shown short (report/display-paths.ts). */
const fullPathsParam = (q: URLSearchParams): boolean => q.has("fullpaths") && parseBoolean(q.get("fullpaths")!, "fullpaths");

const json = (res: ServerResponse, body: unknown): void => send(res, 200, JSON.stringify(body), "application/json");
const data = (method: AdminRoute["method"], path: string, params: readonly string[], handle: Route["handle"]): Route => ({ method, path, params, token: true, handle });

const ROUTES: readonly Route[] = [
  ...DASHBOARD_PATHS.map(
    (path): Route => ({
      method: "GET",
      path,
      params: [],
      token: false,
      handle({ o, res }) {
        const asset = dashboardAsset(path, o.token !== undefined)!;
        res.writeHead(200, { ...asset.headers, "content-length": String(Buffer.byteLength(asset.body)) });
        res.end(asset.body);
      },
    }),
  ),
  data("GET", "/v1/heapprof", ["shard", "format", "inverted", "min", "diff", "baseline", "by", "label", "fullpaths", "heap", "at", "from"], async ({ smp, parts, q, res }) => {
    const shard = shardParam(q, smp) as number | undefined;
    const format = parseReportFormat(q.get("format") ?? "json", "format");
    const inverted = q.has("inverted") && parseBoolean(q.get("inverted")!, "inverted");
    const fullPaths = fullPathsParam(q);
    const minSize = q.has("min") ? parseSize(q.get("min")!, "min") : 0;
    const diff = q.get("diff");
    if (diff !== null && diff !== "baseline") throw new InvalidValueError("diff", `diff must be "baseline", got ${JSON.stringify(diff)}`);
    if (diff === null && q.has("baseline")) throw new UsageError("baseline=NAME names the baseline of diff=baseline: give diff=baseline too");
    const name = baselineName(q.get("baseline"), "baseline");
    const heap = heapParam(q);
    if (diff !== null) checkDiffHeap(heap);
    // at=peak | at=T [&from=T0]: a peak, a timeline tick, or the growth between two ticks (peak-views.ts), of the shared heap.
    const at = q.has("at") ? parseAt(q.get("at")!, "at") : undefined;
    const from = q.has("from") ? parseInteger(q.get("from")!, "from", 0, Number.MAX_SAFE_INTEGER) : undefined;
    if (at !== undefined && diff !== null) throw new UsageError("at= and diff=baseline each name a profile: give one");
    if (at === undefined && from !== undefined) throw new UsageError("from=T0 needs at=T: the growth from one timeline tick to another");
    if (at !== undefined && heap !== "shared") throw new UsageError("at= names a peak or a timeline tick of the shared heap: not with heap=js or heap=all");
    const past = at === undefined ? undefined : profileInThePast(smp.heap, shard, at, from);
    const raw = past?.profile ?? (diff === null ? await profileOfHeap(smp, heap, shard) : heap === "js" ? await parts.jsBaselines.growth(name, shard) : parts.baselines.growth(name, shard));
    const profile = await mapProfileToSources(raw, sourceMaps);
    const since = name === DEFAULT_BASELINE ? "the baseline" : `baseline ${name}`;
    const of = `${heap === "js" ? "the JS heap of " : ""}${shard === undefined ? "all shards" : `shard ${shard}`}`;
    const title = past?.title ?? (diff === null ? undefined : `Growth of ${of} since ${since} (widths: live bytes now; red grew, blue shrank)`);
    const by = q.get("by");
    if (by === "") throw new InvalidValueError("by", "by must name a heap label (by=prefix)");
    const labelText = q.get("label");
    const label = labelText === null ? undefined : parseLabelFilter(labelText);
    if (labelText !== null && label === undefined) throw new InvalidValueError("label", `label must be NAME=VALUE (label=prefix=user; VALUE ${NO_LABEL}: without the label), got ${JSON.stringify(labelText)}`);
    const out = renderProfile(profile, format, { inverted, minSize, fullPaths, ...(title === undefined ? {} : { title }), ...(by === null ? {} : { by }), ...(label === undefined ? {} : { label }) });
    send(res, 200, out.body, out.contentType);
  }),
  data("PUT", "/v1/heapprof", ["shard", "rate", "enabled", "heap"], async ({ smp, q, res }) => {
    const shard = shardParam(q, smp, true);
    if (shard === undefined) throw new UsageError('shard is required: a shard number or "all"');
    const heap = heapParam(q, ["shared", "js"]);
    const r = q.get("rate");
    const enabled = q.get("enabled");
    if ((r === null) === (enabled === null)) throw new UsageError(`give one of rate=BYTES (0 off, ${heap === "js" ? "N one sample per N bytes" : "1 every allocation"}) or enabled=1|0`);
    // heap=js: enabled=1 is the JS heap profiler's default interval (512 KiB), not every allocation.
    const parseRate = heap === "js" ? jsHeapprofRate : heapprofRate;
    const rate = r !== null ? parseRate(r, "rate") : parseRate(parseBoolean(enabled!, "enabled"), "enabled");
    await (heap === "js" ? smp.setJsHeapProfiling(shard, rate) : smp.setHeapProfiling(shard, rate));
    json(res, (heap === "js" ? { shard, rate, heap } : { shard, rate }) satisfies RateBody);
  }),
  data("POST", "/v1/heapprof/peak/reset", ["shard"], async ({ smp, q, res }) => {
    const shard = shardParam(q, smp, true) ?? "all";
    await smp.resetPeak(shard);
    json(res, { shard });
  }),
  data("GET", "/v1/heapprof/timeline", ["shard", "fullpaths"], async ({ smp, q, res }) => {
    const shard = shardParam(q, smp) as number | undefined;
    json(res, { ...(await shownTimeline(smp.timeline(shard), sourceMaps, { fullPaths: fullPathsParam(q) })), intervalMs: smp.options.timelineIntervalMs } satisfies TimelineBody);
  }),
  data("POST", "/v1/heapprof/baseline", ["shard", "name", "heap"], async ({ smp, parts, q, res }) => {
    const shard = shardParam(q, smp, true) ?? "all";
    const name = baselineName(q.get("name"));
    json(res, heapParam(q, ["shared", "js"]) === "js" ? { jsBaselines: await parts.jsBaselines.set(name, shard) } : ({ baselines: parts.baselines.set(name, shard) } satisfies BaselineSetBody));
  }),
  data("GET", "/v1/heapprof/baseline", [], ({ parts, res }) => json(res, { baselines: parts.baselines.list(), jsBaselines: parts.jsBaselines.list() })),
  data("DELETE", "/v1/heapprof/baseline", ["name", "shard", "heap"], ({ smp, parts, q, res }) => {
    // The name is required here: a bare DELETE forgetting "default" would surprise whoever meant "all of them".
    if (!q.get("name")) throw new UsageError("name is required: DELETE /v1/heapprof/baseline?name=NAME (GET /v1/heapprof/baseline lists them)");
    const store = heapParam(q, ["shared", "js"]) === "js" ? parts.jsBaselines : parts.baselines;
    json(res, { deleted: store.delete(baselineName(q.get("name")), shardParam(q, smp) as number | undefined) });
  }),
  // The dashboard's label view, apart from the profile: names and one label's groups are a few hundred bytes where
  // format=json&by= sends every site too (20,000 sites under 3 values: 16.6 MB in 370-640 ms against 369 B in 16-31 ms).
  data("GET", "/v1/heapprof/labels", ["shard", "by"], ({ smp, q, res }) => {
    const p = smp.heapProfile(shardParam(q, smp) as number | undefined);
    const by = q.get("by");
    if (by === "") throw new InvalidValueError("by", "by must name a heap label (by=prefix)");
    json(res, { names: labelNames(p), totalSize: p.totalSize, totalCount: p.totalCount, ...(by === null ? {} : { by, groups: groupByLabel(p, by) }) } satisfies LabelsBody);
  }),
  data("GET", "/v1/heapprof/growing", ["shard", "limit", "fullpaths", "by"], async ({ smp, parts, q, res }) => {
    const shard = shardParam(q, smp) as number | undefined;
    const limit = q.has("limit") ? parseInteger(q.get("limit")!, "limit", 1, 1000) : 20;
    const by = q.get("by") ?? "bytes";
    if (by !== "bytes" && by !== "count") throw new InvalidValueError("by", `by must be "bytes" or "count", got ${JSON.stringify(by)}`);
    const sites = await mapGrowingSites(parts.history.growing(shard, limit, by), sourceMaps, { fullPaths: fullPathsParam(q) });
    json(res, { windowSeconds: parts.history.options.growthWindowSeconds, by, sites } satisfies GrowingBody);
  }),
  data("GET", "/v1/memory/history", ["since"], ({ smp, o, parts, q, res }) => {
    const since = q.has("since") ? parseInteger(q.get("since")!, "since", 0, Number.MAX_SAFE_INTEGER) : 0;
    const { sampleIntervalMs, historySeconds, growthWindowSeconds } = parts.history.options;
    json(res, {
      shards: smp.heap.shards,
      mainShard: smp.mainShard ?? null,
      sampleIntervalMs,
      historySeconds,
      growthWindowSeconds,
      heapImage: o.allowHeapImage === true,
      lastSampleMs: parts.history.lastSampleMs,
      baselines: parts.baselines.list(),
      apps: smp.appStats(),
      samples: parts.history.since(since),
    } satisfies HistoryBody);
  }),
  data("GET", "/v1/app/stats", [], ({ smp, res }) => json(res, { apps: smp.appStats() })),
  data("GET", "/v1/memory/stats", ["shard"], ({ smp, q, res }) => json(res, smp.stats(shardParam(q, smp) as number | undefined))),
  data("GET", "/v1/memory/diagnostics", ["shard"], async ({ smp, q, res }) => {
    const shard = shardParam(q, smp) as number | undefined;
    const shards = shard === undefined ? [...Array(smp.heap.shards).keys()] : [shard];
    const reports = await Promise.all(shards.map((s) => formatMappedDiagnostics(smp.heap.regions[s]!, sourceMaps)));
    send(res, 200, reports.join("\n"), "text/plain; charset=utf-8");
  }),
  data("GET", "/v1/heap/image", [], ({ o, parts, res }) => {
    if (!o.allowHeapImage) throw new HttpError("ERR_SHARDHEAP_FORBIDDEN", "the heap image endpoint is off (serveAdmin(smp, { allowHeapImage: true }) or --admin-heap-image)");
    if (!parts.images.serve(res)) {
      res.setHeader("retry-after", "1");
      throw new HttpError("ERR_SHARDHEAP_BUSY", `${MAX_DOWNLOADS} heap image downloads are already running; retry when one ends`);
    }
  }),
  data("GET", "/metrics", [], async ({ parts, res }) => send(res, 200, await parts.metrics.metrics(), parts.metrics.contentType)),
  data("GET", "/debug/pprof/", [], ({ parts, q, res }) => parts.debugPprof.serve("/debug/pprof/", q, res)),
  ...DEBUG_PPROF_PROFILES.map((name) => data("GET", `/debug/pprof/${name}`, DEBUG_PPROF_PARAMS, ({ parts, q, res }) => parts.debugPprof.serve(`/debug/pprof/${name}`, q, res))),
];

/** Every route the server knows, the very table it routes by: the tests walk it, so a new route is covered by them as soon as it exists. */
export const ADMIN_ROUTES: readonly AdminRoute[] = ROUTES;

const ROUTES_BY_PATH = new Map<string, Route[]>();
for (const route of ROUTES) ROUTES_BY_PATH.set(route.path, [...(ROUTES_BY_PATH.get(route.path) ?? []), route]);

/** Only the parameters the route reads, each at most once: `shard=0&shard=1` used to take the first, `shrad=1` to be ignored. */
function checkParams(route: Route, q: URLSearchParams): void {
  const seen = new Set<string>();
  for (const name of q.keys()) {
    if (!route.params.includes(name)) {
      throw new UsageError(`unknown parameter ${JSON.stringify(name)} for ${route.method} ${route.path}: it takes ${route.params.length === 0 ? "none" : route.params.join(", ")}`);
    }
    if (seen.has(name)) throw new UsageError(`parameter ${JSON.stringify(name)} is given twice: give it once`);
    seen.add(name);
  }
}

/**
 * Host and cross-site refusals first (admin-guards.ts), then the token
 * (except for the dashboard's files), then the route: unknown path 404,
 * known path but not this method 405 with `Allow`, then its parameters.
 */
async function handle(smp: Smp, o: AdminOptions, parts: Parts, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const target = parseTarget(req.url ?? "/");
  const method = req.method ?? "GET";
  checkSite(req, method, checkHost(req, target.authority, parts.hostNames));
  const routes = ROUTES_BY_PATH.get(target.pathname);
  const route = routes?.find((r) => r.method === (method === "HEAD" ? "GET" : method));
  if (route?.token !== false && !authorized(req, o.token)) {
    res.setHeader("www-authenticate", "Bearer");
    throw new HttpError("ERR_SHARDHEAP_UNAUTHORIZED");
  }
  if (routes === undefined) throw new HttpError("ERR_SHARDHEAP_NOT_FOUND", `no such endpoint: ${target.pathname}`);
  if (route === undefined) {
    const methods = routes.map((r) => r.method);
    res.setHeader("allow", (methods.includes("GET") ? [...methods, "HEAD"] : methods).join(", "));
    throw new HttpError("ERR_SHARDHEAP_METHOD_NOT_ALLOWED", `${method} is not allowed on ${target.pathname}`);
  }
  checkParams(route, target.query);
  await route.handle({ smp, o, parts, q: target.query, res });
}
