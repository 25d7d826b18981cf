/**
 * Every route the admin server knows, walked from its own route table
 * (ADMIN_ROUTES, the table it routes by), so a route added later is
 * covered here the day it exists (token tests that listed paths by hand
 * still passed with the check taken off the baseline routes or
 * /debug/pprof/allocs):
 * - the token: 401 without it and with a wrong one, success with it, for
 *   every route and every method it takes (HEAD too); only the dashboard's
 *   files go without it;
 * - HEAD wherever GET: same status and type, no body;
 * - query parameters: one the route does not read, or one given twice, is a
 *   400 that names it; a method a path does not take is a 405 with Allow.
 */
import type { OutgoingHttpHeaders } from "node:http";
import { beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { serveAdmin, type AdminOptions, type AdminServer } from "../dist/index.js";
import { ADMIN_ROUTES, type AdminRoute } from "../dist/runtime/admin.js";
import { httpRequest, startSmp, type HttpAnswer } from "./helpers.js";

beforeAll(() => {
  process.env.SHARDHEAP_LOG = "silent";
});

const send = (admin: AdminServer, method: string, path: string, headers: OutgoingHttpHeaders = {}): Promise<HttpAnswer> => httpRequest(admin.url, method, path, headers);

async function serve(o: AdminOptions): Promise<AdminServer> {
  const smp = await startSmp({ shards: 2 });
  const admin = await serveAdmin(smp, o);
  onTestFinished(() => admin.close());
  return admin;
}

/** A query that the route serves with success; routes not named here succeed without one (a new route that does not is a failure below, to be named here). */
const SUCCESS_QUERY: Record<string, string> = { "PUT /v1/heapprof": "?shard=all&rate=0", "DELETE /v1/heapprof/baseline": "?name=default" }; // the POST before it in the table set "default"
const key = (r: AdminRoute): string => `${r.method} ${r.path}`;
const target = (r: AdminRoute): string => r.path + (SUCCESS_QUERY[key(r)] ?? "");
/** Each route with each method it is served by: HEAD wherever GET. */
const calls = (): Array<[string, AdminRoute]> => ADMIN_ROUTES.flatMap((r): Array<[string, AdminRoute]> => (r.method === "GET" ? [["GET", r], ["HEAD", r]] : [[r.method, r]]));
/** The dashboard's page and files: the only routes that need no token. */
const DASHBOARD_FILES = [
  "/", "/index.html", "/dashboard.css", "/vendor/uPlot.iife.min.js", "/vendor/uPlot.min.css",
  ...["main", "lib", "text", "charts", "profiler", "flamegraphs", "sites", "labels", "baselines", "growing", "apps", "downloads", "peaks", "js-heap"].map((m) => `/dashboard/${m}.js`),
];

describe("the route table", () => {
  it("holds every endpoint of the contract, and only the dashboard's files go without the token", () => {
    const contract = [
      "GET /v1/heapprof", "PUT /v1/heapprof", "GET /v1/memory/stats", "GET /v1/memory/diagnostics", "GET /v1/heap/image", "GET /metrics", "GET /",
      "POST /v1/heapprof/baseline", "GET /v1/heapprof/baseline", "DELETE /v1/heapprof/baseline", "GET /v1/app/stats", "GET /debug/pprof/heap", "GET /debug/pprof/allocs", "GET /debug/pprof/delta_heap", "GET /v1/memory/history", "GET /v1/heapprof/growing",
      "GET /v1/heapprof/timeline", "POST /v1/heapprof/peak/reset",
    ];
    expect(ADMIN_ROUTES.map(key)).toEqual(expect.arrayContaining(contract));
    expect(new Set(ADMIN_ROUTES.map(key)).size).toBe(ADMIN_ROUTES.length);
    expect(ADMIN_ROUTES.filter((r) => !r.token).map(key).sort()).toEqual(DASHBOARD_FILES.map((p) => `GET ${p}`).sort());
  });

  it("with a token: every route and method is 401 without it and with a wrong one, and succeeds with it", async () => {
    const admin = await serve({ token: "s3cret", allowHeapImage: true });
    for (const [method, route] of calls()) {
      const what = `${method} ${target(route)}`;
      if (route.token) {
        for (const authorization of [undefined, "Bearer wrong", "Bearer s3cret-and-more", "Bearer S3CRET"]) {
          const r = await send(admin, method, target(route), authorization === undefined ? {} : { authorization });
          expect(r.status, `${what} with ${String(authorization)}`).toBe(401);
          expect(r.headers["www-authenticate"], what).toBe("Bearer");
        }
      }
      const ok = await send(admin, method, target(route), { authorization: "Bearer s3cret" });
      expect(ok.status, `${what} with the token: ${ok.body.toString("utf8", 0, 300)}`).toBe(200);
      if (!route.token) expect((await send(admin, method, target(route))).status, `${what} without the token`).toBe(200);
    }
  });

  it("HEAD answers wherever GET does: the same status, type and length, and no body", async () => {
    const admin = await serve({ allowHeapImage: true });
    for (const route of ADMIN_ROUTES.filter((r) => r.method === "GET")) {
      const get = await send(admin, "GET", target(route));
      const head = await send(admin, "HEAD", target(route));
      expect([head.status, head.headers["content-type"]], route.path).toEqual([get.status, get.headers["content-type"]]);
      expect(head.status, route.path).toBe(200);
      expect(head.body.length, route.path).toBe(0);
      expect(Number(head.headers["content-length"]), route.path).toBeGreaterThan(0);
      // The same bytes each time for files, statistics, the image's size: those lengths must agree (profiles and history change as the server samples).
      if (!route.token || ["/metrics", "/v1/heap/image", "/v1/memory/stats", "/v1/heapprof/baseline"].includes(route.path)) {
        expect(Number(head.headers["content-length"]), route.path).toBe(get.body.length);
      }
    }
  });

  it("a parameter the route does not read, or one given twice, is a 400 that names it; nothing is applied", async () => {
    const admin = await serve({ allowHeapImage: true });
    for (const [method, route] of calls()) {
      const base = target(route);
      const join = (extra: string): string => base + (base.includes("?") ? "&" : "?") + extra;
      const unknown = await send(admin, method, join("shrad=1"));
      expect(unknown.status, `${method} ${route.path}`).toBe(400);
      if (method !== "HEAD") {
        expect(JSON.parse(unknown.body.toString()), route.path).toEqual({ error: `unknown parameter "shrad" for ${route.method} ${route.path}: it takes ${route.params.length === 0 ? "none" : route.params.join(", ")}`, code: "ERR_SHARDHEAP_USAGE" });
      }
      for (const param of route.params) {
        const twice = await send(admin, method, join(`${param}=0&${param}=1`));
        expect(twice.status, `${method} ${route.path} ${param} twice`).toBe(400);
        if (method !== "HEAD") expect(JSON.parse(twice.body.toString()).error, route.path).toBe(`parameter "${param}" is given twice: give it once`);
      }
    }
    expect(JSON.parse((await send(admin, "GET", "/v1/heapprof/baseline")).body.toString())).toEqual({ baselines: [], jsBaselines: [] });
    expect(JSON.parse((await send(admin, "GET", "/v1/heapprof?shard=0")).body.toString()).sampleRate).toBe(0);
  });

  it("a method a path does not take is a 405 whose Allow lists the ones it does", async () => {
    const admin = await serve({});
    const paths = [...new Set(ADMIN_ROUTES.map((r) => r.path))];
    for (const path of paths) {
      const methods = ADMIN_ROUTES.filter((r) => r.path === path).map((r) => r.method);
      const allowed = methods.includes("GET") ? [...methods, "HEAD"] : methods;
      for (const method of ["GET", "PUT", "POST", "DELETE", "PATCH", "OPTIONS"].filter((m) => !allowed.includes(m as AdminRoute["method"]))) {
        const r = await send(admin, method, path);
        expect(r.status, `${method} ${path}`).toBe(405);
        expect(r.headers.allow?.split(", ").sort(), `${method} ${path}`).toEqual(allowed.sort());
      }
    }
  });
});
