/**
 * The dashboard's files on the admin server: `GET /` (the page), its style
 * sheet and its script's modules, read from the package's
 * dist/runtime/dashboard/ (the build compiles src/runtime/dashboard/*.ts
 * there with tsconfig.dashboard.json and copies the page and its style),
 * and uPlot's script and style sheet read from the installed `uplot`
 * package (a dependency, so they ship with shardheap and nothing is
 * fetched from elsewhere). Each file is read once and kept. They hold no
 * data, so they are served without the token; every request for data goes
 * through the API with it.
 *
 * The page's Content Security Policy is the proof of "nothing from
 * elsewhere": scripts, styles and requests only from this server; frames
 * only blob: (the flamegraphs, fetched with the token and shown from
 * memory), whose inline script is allowed by its hash alone
 * (FLAMEGRAPH_SCRIPT, and `init(evt)` for its onload attribute).
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { FLAMEGRAPH_ONLOAD, FLAMEGRAPH_SCRIPT } from "../report/flamegraph.js";

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

/**
 * The modules of the page's script (src/runtime/dashboard/NAME.ts), each
 * served as /dashboard/NAME.js: the page loads main.js, the browser the
 * others by its imports. api.ts is types only, imported by none at run time.
 */
export const DASHBOARD_MODULES = ["main", "lib", "text", "charts", "profiler", "flamegraphs", "sites", "labels", "baselines", "growing", "apps", "downloads", "peaks", "js-heap"] as const;

const require = createRequire(import.meta.url);
/**
 * The compiled page: beside this module, dist/runtime/dashboard/. Run from
 * the sources (src/runtime/, under tsx or vitest), this module's folder
 * holds the TypeScript only, so the build's output is read.
 */
const PAGE_FOLDER = [new URL("./dashboard/", import.meta.url), new URL("../../dist/runtime/dashboard/", import.meta.url)].find((u) => existsSync(new URL("main.js", u))) ?? new URL("./dashboard/", import.meta.url);
const read = new Map<string, Buffer>();
/** A file, read once. */
function kept(path: string | URL): Buffer {
  const key = String(path);
  let body = read.get(key);
  if (!body) read.set(key, (body = readFileSync(path)));
  return body;
}
const pageFile = (name: string): Buffer => kept(new URL(name, PAGE_FOLDER));
/** A file of the uplot package. */
const uplotFile = (name: string): Buffer => kept(require.resolve(`uplot/dist/${name}`));

const JS = "text/javascript; charset=utf-8";
const CSS = "text/css; charset=utf-8";

const HEADERS = (contentType: string): Record<string, string> => ({ "content-type": contentType, "cache-control": "no-cache", "x-content-type-options": "nosniff" });

/**
 * The page, its body marked with whether the server needs a token, so the
 * page asks for it before its first request.
 *
 * The page's referrer policy is same-origin, not no-referrer: under
 * no-referrer the Fetch standard sends `Origin: null` with the page's own
 * PUT and POST, which the admin server refuses as a possible cross-site
 * request (admin-guards.ts). The page requests nothing from elsewhere, so
 * no referrer leaves it either way.
 */
const page = (tokenRequired: boolean): DashboardAsset => ({
  body: pageFile("index.html").toString("utf8").replace('data-token="TOKEN_STATE"', `data-token="${tokenRequired ? "required" : "none"}"`),
  headers: { ...HEADERS("text/html; charset=utf-8"), "content-security-policy": DASHBOARD_CSP, "referrer-policy": "same-origin" },
});

const ASSETS: Readonly<Record<string, (tokenRequired: boolean) => DashboardAsset>> = {
  "/": page,
  "/index.html": page,
  "/dashboard.css": () => ({ body: pageFile("dashboard.css"), headers: HEADERS(CSS) }),
  ...Object.fromEntries(DASHBOARD_MODULES.map((name) => [`/dashboard/${name}.js`, (): DashboardAsset => ({ body: pageFile(`${name}.js`), headers: HEADERS(JS) })])),
  "/vendor/uPlot.iife.min.js": () => ({ body: uplotFile("uPlot.iife.min.js"), headers: HEADERS(JS) }),
  "/vendor/uPlot.min.css": () => ({ body: uplotFile("uPlot.min.css"), headers: HEADERS(CSS) }),
};

/** The paths of the page and its files (the admin server's routes without the token). */
export const DASHBOARD_PATHS: readonly string[] = Object.keys(ASSETS);

/** The asset at `pathname`, or undefined when it is not one. */
export function dashboardAsset(pathname: string, tokenRequired: boolean): DashboardAsset | undefined {
  return Object.hasOwn(ASSETS, pathname) ? ASSETS[pathname]!(tokenRequired) : undefined;
}
