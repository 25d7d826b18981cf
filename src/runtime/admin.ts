/**
 * The admin HTTP API (serveAdmin(smp, options), `--admin-port`): profiles in every
 * format, run-time profiling switches per shard, statistics, diagnostics,
 * the heap image (only when allowed: it exposes the heap's contents; sent
 * as heap-image-download.ts bounds it) and Prometheus metrics; for leak
 * hunting, baselines and the growth since (baselines.ts), Go's
 * /debug/pprof/heap and /allocs (debug-pprof.ts), the memory history and
 * growing sites (memory-history.ts) and the dashboard page that shows
 * them all (dashboard.ts: its page and assets are served without the
 * token, which the page asks for and sends as a header). Reads go to
 * the buffer, so they answer while a shard is busy. Loopback by default, an
 * optional bearer token. Every error becomes a JSON `{ error, code }`
 * answer whose status is its code's row in errors.ts's ERROR_TABLE (bad
 * parameters and malformed request targets 400, no token 401, unknown
 * shard 404, ...), so no request can take the server down.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Duplex } from "node:stream";
import { timingSafeEqual } from "node:crypto";
import { HttpError, InvalidValueError, UsageError, errorRow } from "../errors.js";
import { formatMappedDiagnostics } from "../report/mapped-diagnostics.js";
import { parseReportFormat, renderProfile } from "../report/render.js";
import { SourceMapCache, mapProfileToSources } from "../report/source-map.js";
import type { Smp } from "../smp/smp.js";
import { parseBoolean, parseInteger } from "../parse.js";
import { heapprofRate } from "../smp/options.js";
import { parseSize } from "../units.js";
import { Baselines } from "./baselines.js";
import { dashboardAsset } from "./dashboard.js";
import { DebugPprof } from "./debug-pprof.js";
import { HeapImageDownloads, MAX_DOWNLOADS } from "./heap-image-download.js";
import { mapGrowingSites } from "./growing-sites.js";
import { MemoryHistory, type HistoryOptions } from "./memory-history.js";
import { memoryMetricsRegistry } from "./metrics.js";

export interface AdminOptions {
  /** Port; 0 (default) picks a free one. */
  port?: number;
  /** Address to bind; 127.0.0.1 unless told otherwise. */
  host?: string;
  /** When set, every request needs `Authorization: Bearer TOKEN`. */
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

export async function serveAdmin(smp: Smp, o: AdminOptions = {}): Promise<AdminServer> {
  const host = o.host ?? "127.0.0.1";
  const port = o.port ?? 0;
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new RangeError(`serveAdmin: port must be 0..65535, got ${String(port)}`);
  if (o.token !== undefined && (typeof o.token !== "string" || o.token.length === 0)) throw new TypeError("serveAdmin: token must be a non-empty string");
  const history = new MemoryHistory(smp, o.dashboard);
  const parts: Parts = {
    metrics: memoryMetricsRegistry(smp.heap),
    images: new HeapImageDownloads(smp.heap),
    baselines: new Baselines(smp),
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
 * URL among them, is a 400 (it was a 500: `new URL` threw).
 */
function parseTarget(target: string): { pathname: string; query: URLSearchParams } {
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
    return { pathname: url.pathname, query: url.searchParams };
  }
  throw new UsageError(`malformed request target: ${shown} (expected a path such as /v1/memory/stats)`);
}

function send(res: ServerResponse, status: number, body: string | Uint8Array, contentType: string): void {
  res.writeHead(status, { "content-type": contentType, "cache-control": "no-store" });
  res.end(body);
}

function authorized(req: IncomingMessage, token: string | undefined): boolean {
  if (token === undefined) return true;
  const given = Buffer.from(req.headers.authorization ?? "");
  const wanted = Buffer.from(`Bearer ${token}`);
  return given.length === wanted.length && timingSafeEqual(given, wanted);
}

/** ?shard=N: a shard number (404 when out of range), or undefined when absent. */
function shardParam(q: URLSearchParams, smp: Smp, allowAll = false): number | "all" | undefined {
  const v = q.get("shard");
  if (v === null || v === "") return undefined;
  if (allowAll && v === "all") return "all";
  if (!/^\d+$/.test(v)) throw new InvalidValueError("shard", `shard must be a shard number${allowAll ? ' or "all"' : ""}, got ${JSON.stringify(v)}`);
  const shard = Number(v);
  if (shard >= smp.shards) throw new HttpError("ERR_SHARDHEAP_NOT_FOUND", `no shard ${shard}: shards are 0 to ${smp.shards - 1}`);
  return shard;
}

/** What one server holds besides the Smp and its options. */
interface Parts {
  metrics: ReturnType<typeof memoryMetricsRegistry>;
  images: HeapImageDownloads;
  baselines: Baselines;
  debugPprof: DebugPprof;
  history: MemoryHistory;
}

async function handle(smp: Smp, o: AdminOptions, parts: Parts, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const { metrics, images } = parts;
  const url = parseTarget(req.url ?? "/");
  // The dashboard's page and scripts hold no data: they load without the token, then ask for it.
  const asset = req.method === "GET" ? dashboardAsset(url.pathname, o.token !== undefined) : undefined;
  if (asset) {
    res.writeHead(200, asset.headers);
    res.end(asset.body);
    return;
  }
  if (!authorized(req, o.token)) {
    res.setHeader("www-authenticate", "Bearer");
    throw new HttpError("ERR_SHARDHEAP_UNAUTHORIZED");
  }
  const q = url.query;
  if (req.method === "GET" && url.pathname.startsWith("/debug/pprof/")) {
    await parts.debugPprof.serve(url.pathname, q, res);
    return;
  }
  const route = `${req.method} ${url.pathname}`;
  switch (route) {
    case "GET /v1/heapprof": {
      const shard = shardParam(q, smp) as number | undefined;
      const format = parseReportFormat(q.get("format") ?? "json", "format");
      const inverted = q.has("inverted") && parseBoolean(q.get("inverted")!, "inverted");
      const minSize = q.has("min") ? parseSize(q.get("min")!, "min") : 0;
      const diff = q.get("diff");
      if (diff !== null && diff !== "baseline") throw new InvalidValueError("diff", `diff must be "baseline", got ${JSON.stringify(diff)}`);
      const raw = diff === null ? smp.heapProfile(shard) : parts.baselines.growth(shard);
      const profile = await mapProfileToSources(raw, sourceMaps);
      const title = diff === null ? undefined : `Growth of ${shard === undefined ? "all shards" : `shard ${shard}`} since the baseline (widths: live bytes now; red grew, blue shrank)`;
      const out = renderProfile(profile, format, { inverted, minSize, ...(title === undefined ? {} : { title }) });
      send(res, 200, out.body, out.contentType);
      return;
    }
    case "POST /v1/heapprof/baseline": {
      const shard = shardParam(q, smp, true) ?? "all";
      send(res, 200, JSON.stringify({ baselines: parts.baselines.set(shard) }), "application/json");
      return;
    }
    case "GET /v1/heapprof/baseline": {
      send(res, 200, JSON.stringify({ baselines: parts.baselines.list() }), "application/json");
      return;
    }
    case "GET /v1/heapprof/growing": {
      const shard = shardParam(q, smp) as number | undefined;
      const limit = q.has("limit") ? parseInteger(q.get("limit")!, "limit", 1, 1000) : 20;
      const sites = await mapGrowingSites(parts.history.growing(shard, limit), sourceMaps);
      send(res, 200, JSON.stringify({ windowSeconds: parts.history.options.growthWindowSeconds, sites }), "application/json");
      return;
    }
    case "GET /v1/memory/history": {
      const since = q.has("since") ? parseInteger(q.get("since")!, "since", 0, Number.MAX_SAFE_INTEGER) : 0;
      const { sampleIntervalMs, historySeconds, growthWindowSeconds } = parts.history.options;
      const body = {
        shards: smp.shards,
        sampleIntervalMs,
        historySeconds,
        growthWindowSeconds,
        heapImage: o.allowHeapImage === true,
        lastSampleMs: parts.history.lastSampleMs,
        baselines: parts.baselines.list(),
        samples: parts.history.since(since),
      };
      send(res, 200, JSON.stringify(body), "application/json");
      return;
    }
    case "PUT /v1/heapprof": {
      const shard = shardParam(q, smp, true);
      if (shard === undefined) throw new UsageError('shard is required: a shard number or "all"');
      const r = q.get("rate");
      const enabled = q.get("enabled");
      if ((r === null) === (enabled === null)) throw new UsageError("give one of rate=BYTES (0 off, 1 every allocation) or enabled=1|0");
      const rate = r !== null ? heapprofRate(r, "rate") : heapprofRate(parseBoolean(enabled!, "enabled"), "enabled");
      await smp.setHeapProfiling(shard, rate);
      send(res, 200, JSON.stringify({ shard, rate }), "application/json");
      return;
    }
    case "GET /v1/memory/stats": {
      const shard = shardParam(q, smp) as number | undefined;
      send(res, 200, JSON.stringify(smp.stats(shard)), "application/json");
      return;
    }
    case "GET /v1/memory/diagnostics": {
      const shard = shardParam(q, smp) as number | undefined;
      const shards = shard === undefined ? [...Array(smp.shards).keys()] : [shard];
      const reports = await Promise.all(shards.map((s) => formatMappedDiagnostics(smp.heap.regions[s]!, sourceMaps)));
      send(res, 200, reports.join("\n"), "text/plain; charset=utf-8");
      return;
    }
    case "GET /v1/heap/image": {
      if (!o.allowHeapImage) throw new HttpError("ERR_SHARDHEAP_FORBIDDEN", "the heap image endpoint is off (serveAdmin(smp, { allowHeapImage: true }) or --admin-heap-image)");
      if (!images.serve(res)) {
        res.setHeader("retry-after", "1");
        throw new HttpError("ERR_SHARDHEAP_BUSY", `${MAX_DOWNLOADS} heap image downloads are already running; retry when one ends`);
      }
      return;
    }
    case "GET /metrics": {
      send(res, 200, await metrics.metrics(), metrics.contentType);
      return;
    }
    default: {
      const known = ["/v1/heapprof", "/v1/heapprof/baseline", "/v1/heapprof/growing", "/v1/memory/history", "/v1/memory/stats", "/v1/memory/diagnostics", "/v1/heap/image", "/metrics", "/"];
      if (known.includes(url.pathname)) throw new HttpError("ERR_SHARDHEAP_METHOD_NOT_ALLOWED", `${req.method} is not allowed on ${url.pathname}`);
      throw new HttpError("ERR_SHARDHEAP_NOT_FOUND", `no such endpoint: ${url.pathname}`);
    }
  }
}
