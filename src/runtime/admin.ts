/**
 * The admin HTTP API (serveAdmin(smp, options), `--admin-port`): profiles in every
 * format, run-time profiling switches per shard, statistics, diagnostics,
 * the heap image (only when allowed: it exposes the heap's contents) and
 * Prometheus metrics. Reads go to the buffer, so they answer while a shard
 * is busy. Loopback by default, an optional bearer token. Every error
 * becomes a JSON `{ error, code }` answer whose status is its code's row in
 * errors.ts's ERROR_TABLE (bad parameters 400, no token 401, unknown shard
 * 404, ...), so no request can take the server down.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { timingSafeEqual } from "node:crypto";
import { HttpError, InvalidValueError, UsageError, errorRow } from "../errors.js";
import { formatDiagnostics } from "../memory/diagnostics.js";
import { encodeHeapImage } from "../memory/heap-image-writer.js";
import { parseReportFormat, renderProfile } from "../report/render.js";
import { SourceMapCache, mapProfileToSources } from "../report/source-map.js";
import type { Smp } from "../smp/smp.js";
import { parseBoolean } from "../parse.js";
import { heapprofRate } from "../smp/options.js";
import { parseSize } from "../units.js";
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
  const metrics = memoryMetricsRegistry(smp.heap);
  const server = createServer((req, res) => {
    handle(smp, o, metrics, req, res).catch((e: unknown) => {
      const { httpStatus } = errorRow(e);
      const message = e instanceof Error ? e.message : String(e);
      const code = (e as { code?: unknown })?.code;
      const body = typeof code === "string" ? { error: message, code } : { error: message };
      if (!res.headersSent) send(res, httpStatus, JSON.stringify(body), "application/json");
      else res.destroy();
    });
  });
  server.on("clientError", (_e, socket) => socket.destroy()); // malformed HTTP: drop the connection, keep serving
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
  const address = server.address() as AddressInfo;
  const shownHost = address.family === "IPv6" ? `[${address.address}]` : address.address;
  return {
    url: `http://${shownHost}:${address.port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
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

async function handle(smp: Smp, o: AdminOptions, metrics: ReturnType<typeof memoryMetricsRegistry>, req: IncomingMessage, res: ServerResponse): Promise<void> {
  if (!authorized(req, o.token)) {
    res.setHeader("www-authenticate", "Bearer");
    throw new HttpError("ERR_SHARDHEAP_UNAUTHORIZED");
  }
  const url = new URL(req.url ?? "/", "http://admin");
  const q = url.searchParams;
  const route = `${req.method} ${url.pathname}`;
  switch (route) {
    case "GET /v1/heapprof": {
      const shard = shardParam(q, smp) as number | undefined;
      const format = parseReportFormat(q.get("format") ?? "json", "format");
      const inverted = q.has("inverted") && parseBoolean(q.get("inverted")!, "inverted");
      const minSize = q.has("min") ? parseSize(q.get("min")!, "min") : 0;
      const profile = await mapProfileToSources(smp.heapProfile(shard), sourceMaps);
      const out = renderProfile(profile, format, { inverted, minSize });
      send(res, 200, out.body, out.contentType);
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
      send(res, 200, shards.map((s) => formatDiagnostics(smp.heap.regions[s]!)).join("\n"), "text/plain; charset=utf-8");
      return;
    }
    case "GET /v1/heap/image": {
      if (!o.allowHeapImage) throw new HttpError("ERR_SHARDHEAP_FORBIDDEN", "the heap image endpoint is off (serveAdmin(smp, { allowHeapImage: true }) or --admin-heap-image)");
      send(res, 200, encodeHeapImage(smp.heap), "application/octet-stream");
      return;
    }
    case "GET /metrics": {
      send(res, 200, await metrics.metrics(), metrics.contentType);
      return;
    }
    default: {
      const known = ["/v1/heapprof", "/v1/memory/stats", "/v1/memory/diagnostics", "/v1/heap/image", "/metrics"];
      if (known.includes(url.pathname)) throw new HttpError("ERR_SHARDHEAP_METHOD_NOT_ALLOWED", `${req.method} is not allowed on ${url.pathname}`);
      throw new HttpError("ERR_SHARDHEAP_NOT_FOUND", `no such endpoint: ${url.pathname}`);
    }
  }
}
