/**
 * What the admin server refuses before it looks at a route (admin.ts calls
 * these first, for every request, with or without a token):
 *
 * - A Host that no one but an attacker would send (DNS rebinding). A page
 *   on evil.example whose name the attacker then points at 127.0.0.1
 *   reads the admin server as its own origin, with Host
 *   `evil.example:PORT`. A rebinding needs a name the attacker controls in
 *   DNS, so the names accepted are those nobody else can point anywhere:
 *   IP literals (v4, or v6 in brackets), `localhost` and `*.localhost`
 *   (RFC 6761: browsers resolve them to loopback without asking DNS), the
 *   name the server was told to bind (`host`) and the names listed in
 *   `allowedHosts` (a leading dot takes the name and its subdomains), as
 *   Vite's `server.allowedHosts` does. The port is not compared: behind
 *   `ssh -L 8080:127.0.0.1:9180` or a container's port mapping the Host
 *   carries the forwarded port, and the name alone is what rebinding forges.
 *   An absolute-form target's authority stands for Host (RFC 9112 3.2.2);
 *   a request with neither (HTTP/1.0) has nothing forged to refuse. A Host
 *   that is not `name[:port]` is a 400, as RFC 9112 3.2 says.
 * - A state change (PUT, POST: any method but GET and HEAD) that a page of
 *   another origin sent. A form POST is a "simple" request: the browser
 *   sends it without asking first, so the server must refuse it itself.
 *   Browsers mark such a request: `Sec-Fetch-Site` (anything but
 *   `same-origin` or `none`, the user's own action) and `Origin` (not this
 *   server's, or `null`, the origin of sandboxed frames and data: pages);
 *   Chromium 156 sends both for a form POST from http://localhost:P to
 *   http://127.0.0.1:Q (`cross-site`, and `same-site` from another port of
 *   127.0.0.1). curl and scripts send neither and are served.
 * - A background request from another site's page (Sec-Fetch-Site
 *   `cross-site` or `same-site`, not a navigation): an `<img>` or
 *   `<script>` pointed at /debug/pprof/heap?seconds=900 or the heap image
 *   cannot read the answer, but it would hold the server's wait and
 *   download slots. Navigations (a link to the dashboard) still load.
 *
 * Each refusal is a 403 (ERR_SHARDHEAP_FORBIDDEN) that says what was
 * refused and how to be served. With a token they stay on: a token keeps
 * out those who lack it, and these keep a page in a browser that has it
 * (the dashboard, a tab left open) from being used by another site.
 *
 * The bearer token: the scheme is case-insensitive (RFC 9110 11.1:
 * `bearer`, `BEARER`), and the token is compared by SHA-256 digest with
 * timingSafeEqual, so neither its bytes nor its length show in the timing.
 */
import type { IncomingMessage } from "node:http";
import { createHash, timingSafeEqual } from "node:crypto";
import { isIP } from "node:net";
import { HttpError, UsageError } from "../errors.js";

/** A request's authority as parsed: the hostname (lower case, no trailing dot; v6 in brackets) and the port when given. */
interface Authority {
  readonly hostname: string;
  readonly port: string | undefined;
}

/** `name[:port]`, `v4[:port]` or `[v6][:port]` (RFC 9110 7.2's uri-host and port), else undefined. */
function parseAuthority(text: string): Authority | undefined {
  const m = /^(\[[0-9A-Fa-f:.]+\]|[^\s[\]:/?#@\\]+)(?::(\d{1,5}))?$/.exec(text);
  if (!m) return undefined;
  const hostname = m[1]!.toLowerCase().replace(/\.$/, "");
  return hostname === "" ? undefined : { hostname, port: m[2] };
}

const shown = (text: string): string => JSON.stringify(text.length > 100 ? `${text.slice(0, 100)}...` : text);

/**
 * The host names a server accepts besides IP literals and loopback names:
 * its bind `host` when that is a name, and `allowedHosts`. Checked once, at
 * serveAdmin, so a bad entry is a TypeError there and not a refusal later.
 */
export function allowedHostNames(host: string, allowedHosts: readonly string[] | undefined): readonly string[] {
  if (allowedHosts !== undefined && !Array.isArray(allowedHosts)) throw new TypeError("serveAdmin: allowedHosts must be an array of host names");
  const names: string[] = [];
  const bound = isIP(host) === 0 ? parseAuthority(host) : undefined; // a bind address is an IP literal, accepted anyway
  if (bound !== undefined && bound.port === undefined) names.push(bound.hostname);
  for (const entry of (allowedHosts ?? []) as unknown[]) {
    const subdomains = typeof entry === "string" && entry.startsWith(".");
    const name = typeof entry === "string" ? parseAuthority(subdomains ? entry.slice(1) : entry) : undefined;
    if (name === undefined || name.port !== undefined || name.hostname.startsWith("[")) {
      throw new TypeError(`serveAdmin: allowedHosts entries are host names without a port (".example.com" for its subdomains too), got ${JSON.stringify(entry)}`);
    }
    names.push(subdomains ? `.${name.hostname}` : name.hostname);
  }
  return names;
}

function isIPLiteral(hostname: string): boolean {
  return hostname.startsWith("[") ? isIP(hostname.slice(1, -1)) === 6 : isIP(hostname) === 4;
}

function hostAllowed(hostname: string, names: readonly string[]): boolean {
  if (isIPLiteral(hostname) || hostname === "localhost" || hostname.endsWith(".localhost")) return true;
  return names.some((n) => (n.startsWith(".") ? hostname === n.slice(1) || hostname.endsWith(n) : hostname === n));
}

/**
 * The authority the request addresses (an absolute-form target's, else
 * Host's), refused when its name is not one this server answers to;
 * undefined when there is none (HTTP/1.0 without Host).
 */
export function checkHost(req: IncomingMessage, targetAuthority: string | undefined, names: readonly string[]): Authority | undefined {
  const text = targetAuthority ?? req.headers.host;
  if (text === undefined) return undefined;
  const authority = parseAuthority(text);
  if (authority === undefined) throw new UsageError(`malformed Host ${shown(text)}: expected a host name or address with an optional :port`);
  if (!hostAllowed(authority.hostname, names)) {
    throw new HttpError(
      "ERR_SHARDHEAP_FORBIDDEN",
      `Host ${shown(text)} is not a name this server answers to (a page that rebinds its name to this address would send it): use an IP address or localhost, or list the name in serveAdmin's allowedHosts`,
    );
  }
  return authority;
}

/** Whether `origin` (an Origin header) is the origin of `authority`: same name, and the same port when Host gives one. */
function sameOrigin(origin: string, authority: Authority): boolean {
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return false;
  }
  if (url.origin === "null" || url.hostname.toLowerCase().replace(/\.$/, "") !== authority.hostname) return false;
  // A Host without a port is the scheme's default port, as the Origin then shows none (a TLS proxy sends `Host: name`, `Origin: https://name`).
  return authority.port === undefined ? url.port === "" : (url.port || (url.protocol === "https:" ? "443" : "80")) === authority.port;
}

/** Refuse a state change another origin's page sent, and another site's background requests (see the file's opening). */
export function checkSite(req: IncomingMessage, method: string, authority: Authority | undefined): void {
  const site = req.headers["sec-fetch-site"];
  const origin = req.headers.origin;
  if (method !== "GET" && method !== "HEAD") {
    const how = "state changes are taken from this server's own pages and from clients that send no Origin (curl, scripts)";
    if (site !== undefined && site !== "same-origin" && site !== "none") {
      throw new HttpError("ERR_SHARDHEAP_FORBIDDEN", `a ${method} from another site's page (Sec-Fetch-Site: ${shown(site)}) is refused: ${how}`);
    }
    // `Origin: null` (a sandboxed frame, a data: page) is taken only when the browser vouches that the request is same-origin.
    const fromHere = origin === undefined || (origin === "null" ? site === "same-origin" : authority !== undefined && sameOrigin(origin, authority));
    if (!fromHere) throw new HttpError("ERR_SHARDHEAP_FORBIDDEN", `a ${method} from another origin (Origin: ${shown(origin!)}) is refused: ${how}`);
    return;
  }
  if (site === "cross-site" || site === "same-site") {
    const dest = req.headers["sec-fetch-dest"];
    const navigation = req.headers["sec-fetch-mode"] === "navigate" && dest !== "object" && dest !== "embed";
    if (!navigation) throw new HttpError("ERR_SHARDHEAP_FORBIDDEN", `a background request from another site's page (Sec-Fetch-Site: ${site}, Sec-Fetch-Dest: ${shown(String(dest))}) is refused: open the page on this server, or use curl`);
  }
}

const digest = (text: string): Buffer => createHash("sha256").update(text, "utf8").digest();

/** `Authorization: Bearer TOKEN`, the scheme in any case; true when there is no token to check. */
export function authorized(req: IncomingMessage, token: string | undefined): boolean {
  if (token === undefined) return true;
  const given = /^bearer[ \t]+(.+)$/i.exec(req.headers.authorization ?? "")?.[1];
  return given !== undefined && timingSafeEqual(digest(given), digest(token));
}
