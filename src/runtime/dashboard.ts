/**
 * The dashboard's files on the admin server: `GET /` (the page), its
 * script and style sheet, and uPlot's script and style sheet read from the
 * installed `uplot` package (a dependency, so they ship with shardheap and
 * nothing is fetched from elsewhere). They hold no data, so they are served
 * without the token; every request for data goes through the API with it.
 *
 * The page's Content Security Policy is the proof of "nothing from
 * elsewhere": scripts, styles and requests only from this server; frames
 * only blob: (the flamegraphs, fetched with the token and shown from
 * memory), whose inline script is allowed by its hash alone
 * (FLAMEGRAPH_SCRIPT, and `init(evt)` for its onload attribute).
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { FLAMEGRAPH_ONLOAD, FLAMEGRAPH_SCRIPT } from "../report/flamegraph.js";
import { DASHBOARD_CSS, dashboardHtml } from "./dashboard-page.js";
import { DASHBOARD_SCRIPT } from "./dashboard-script.js";
import { DASHBOARD_PEAKS_SCRIPT } from "./dashboard-peaks-script.js";
import { JS_HEAP_SCRIPT } from "./dashboard-js-heap.js";

export interface DashboardAsset {
  body: string | Buffer;
  headers: Record<string, string>;
}

const sha256 = (text: string): string => `'sha256-${createHash("sha256").update(text, "utf8").digest("base64")}'`;

export const DASHBOARD_CSP = [
  "default-src 'none'",
  `script-src 'self' 'unsafe-hashes' ${sha256(FLAMEGRAPH_SCRIPT)} ${sha256(FLAMEGRAPH_ONLOAD)}`,
  // uPlot and the flamegraph style their elements inline.
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data: blob:",
  "connect-src 'self'",
  "frame-src blob:",
  "base-uri 'none'",
  // No other site may frame the page: a framed dashboard's buttons would send same-origin requests for it (clickjacking).
  "frame-ancestors 'none'",
  "form-action 'none'",
].join("; ");

const require = createRequire(import.meta.url);
const vendored = new Map<string, Buffer>();
/** A file of the uplot package, read once. */
function uplotFile(name: string): Buffer {
  let body = vendored.get(name);
  if (!body) vendored.set(name, (body = readFileSync(require.resolve(`uplot/dist/${name}`))));
  return body;
}

const JS = "text/javascript; charset=utf-8";
const CSS = "text/css; charset=utf-8";

const HEADERS = (contentType: string): Record<string, string> => ({ "content-type": contentType, "cache-control": "no-cache", "x-content-type-options": "nosniff" });

/**
 * The page's referrer policy is same-origin, not no-referrer: under
 * no-referrer the Fetch standard sends `Origin: null` with the page's own
 * PUT and POST, which the admin server refuses as a possible cross-site
 * request (admin-guards.ts). The page requests nothing from elsewhere, so
 * no referrer leaves it either way.
 */
const page = (tokenRequired: boolean): DashboardAsset => ({ body: dashboardHtml(tokenRequired), headers: { ...HEADERS("text/html; charset=utf-8"), "content-security-policy": DASHBOARD_CSP, "referrer-policy": "same-origin" } });

const ASSETS: Readonly<Record<string, (tokenRequired: boolean) => DashboardAsset>> = {
  "/": page,
  "/index.html": page,
  "/dashboard.js": () => ({ body: DASHBOARD_SCRIPT, headers: HEADERS(JS) }),
  "/dashboard-peaks.js": () => ({ body: DASHBOARD_PEAKS_SCRIPT, headers: HEADERS(JS) }),
  "/dashboard-js-heap.js": () => ({ body: JS_HEAP_SCRIPT, headers: HEADERS(JS) }),
  "/dashboard.css": () => ({ body: DASHBOARD_CSS, headers: HEADERS(CSS) }),
  "/vendor/uPlot.iife.min.js": () => ({ body: uplotFile("uPlot.iife.min.js"), headers: HEADERS(JS) }),
  "/vendor/uPlot.min.css": () => ({ body: uplotFile("uPlot.min.css"), headers: HEADERS(CSS) }),
};

/** The paths of the page and its files (the admin server's routes without the token). */
export const DASHBOARD_PATHS: readonly string[] = Object.keys(ASSETS);

/** The asset at `pathname`, or undefined when it is not one. */
export function dashboardAsset(pathname: string, tokenRequired: boolean): DashboardAsset | undefined {
  return Object.hasOwn(ASSETS, pathname) ? ASSETS[pathname]!(tokenRequired) : undefined;
}
