/**
 * What the admin server refuses before any route (admin-guards.ts), over
 * real HTTP with the headers forged as an attacker's browser sends them
 * (Chromium 156 sends exactly these for a form POST from http://localhost:P
 * to http://127.0.0.1:Q, checked at the end in Chromium itself):
 * - a Host that is not a name this server answers to (DNS rebinding), on
 *   every route, with and without a token; the names it does answer to;
 * - a state change from another site's page (Origin, Sec-Fetch-Site), and
 *   another site's background reads, with and without a token; what is
 *   refused is also not applied;
 * - the bearer scheme in any case.
 */
import { connect } from "node:net";
import { lookup } from "node:dns/promises";
import { existsSync } from "node:fs";
import { createServer, type IncomingHttpHeaders, type OutgoingHttpHeaders } from "node:http";
import { hostname } from "node:os";
import { chromium } from "playwright-core";
import { beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { serveAdmin, type AdminOptions, type AdminServer, type Smp } from "../dist/index.js";
import { httpRequest, startSmp } from "./helpers.js";

beforeAll(() => {
  process.env.SHARDHEAP_LOG = "silent";
});

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

const send = async (admin: AdminServer, method: string, path: string, headers: OutgoingHttpHeaders = {}): Promise<Answer> => {
  const r = await httpRequest(admin.url, method, path, headers);
  return { ...r, body: r.body.toString("utf8") };
};

/** The whole answer to raw request bytes on a connection of its own (for what node:http will not send: no Host, an absolute target). */
function sendRaw(admin: AdminServer, text: string): Promise<{ status: number; body: string }> {
  const { port } = new URL(admin.url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), "127.0.0.1");
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => socket.destroy(new Error(`no answer to ${JSON.stringify(text)}`)), 10_000);
    socket.on("data", (d) => chunks.push(d));
    socket.on("error", reject);
    socket.on("close", () => {
      clearTimeout(timer);
      const all = Buffer.concat(chunks).toString("latin1");
      resolve({ status: Number(/^HTTP\/1\.[01] (\d{3})/.exec(all)?.[1] ?? 0), body: all.slice(all.indexOf("\r\n\r\n") + 4) });
    });
    socket.end(text, "latin1");
  });
}

/** Two fresh shards (profiler off) and an admin server over them, closed when the test ends. */
async function serve(o: AdminOptions = {}): Promise<{ smp: Smp; admin: AdminServer; port: number }> {
  const smp = await startSmp({ shards: 2 });
  const admin = await serveAdmin(smp, o);
  onTestFinished(() => admin.close());
  return { smp, admin, port: Number(new URL(admin.url).port) };
}

const errorOf = (a: Answer): { error: string; code: string } => JSON.parse(a.body) as { error: string; code: string };

describe("Host (DNS rebinding)", () => {
  it("a name the server does not answer to is a 403 on every endpoint, before the token, and changes nothing", async () => {
    for (const token of [undefined, "s3cret"]) {
      const { smp, admin, port } = await serve(token === undefined ? { allowHeapImage: true } : { allowHeapImage: true, token });
      const auth = token === undefined ? {} : { authorization: `Bearer ${token}` };
      const targets: Array<[string, string]> = [
        ["GET", "/v1/memory/stats"],
        ["GET", "/v1/heapprof?format=tree"],
        ["GET", "/v1/heap/image"],
        ["GET", "/metrics"],
        ["GET", "/debug/pprof/heap"],
        ["GET", "/"],
        ["HEAD", "/v1/memory/stats"],
        ["POST", "/v1/heapprof/baseline?shard=all"],
        ["PUT", "/v1/heapprof?shard=all&rate=1"],
      ];
      for (const [method, path] of targets) {
        const r = await send(admin, method, path, { ...auth, host: `evil.example:${port}` });
        expect(r.status, `${method} ${path}`).toBe(403);
        if (method !== "HEAD") expect(errorOf(r), path).toEqual({ error: expect.stringMatching(/^Host "evil\.example:\d+" is not a name this server answers to .*allowedHosts$/), code: "ERR_SHARDHEAP_FORBIDDEN" });
      }
      expect(JSON.parse((await send(admin, "GET", "/v1/heapprof/baseline", auth)).body)).toEqual({ baselines: [], jsBaselines: [] });
      expect(smp.heapProfile().sampleRate).toBe(0);
    }
  });

  it("names nobody else can point here are served (IP literals, loopback names, any port); look-alikes are refused; a malformed Host is a 400", async () => {
    const { admin, port } = await serve();
    const served = [`127.0.0.1:${port}`, "127.0.0.1", `localhost:${port}`, "LocalHost:8080", "localhost.", `app.localhost:${port}`, `[::1]:${port}`, "[::1]", "10.0.0.7:8080", "192.168.1.20"];
    for (const host of served) expect((await send(admin, "GET", "/v1/memory/stats", { host })).status, host).toBe(200);
    const refused = ["evil.example", "EVIL.example:80", "evil.example.", "127.0.0.1.nip.io", "localhost.evil.example", "localhostevil", "2130706433", "0x7f000001", "127.1", "xn--80ak6aa92e.com"];
    for (const host of refused) expect((await send(admin, "GET", "/v1/memory/stats", { host })).status, host).toBe(403);
    const malformed = ["", "a b", "evil.example/x", "user@127.0.0.1", "[::1", "::1", "127.0.0.1:x", "127.0.0.1:123456", "[evil.example]"];
    for (const host of malformed) {
      const r = await send(admin, "GET", "/v1/memory/stats", { host });
      expect(r.status, JSON.stringify(host)).toBe(400);
      expect(errorOf(r).error, JSON.stringify(host)).toMatch(/^malformed Host/);
    }
  });

  it("an absolute-form target's authority stands for Host (RFC 9112 3.2.2); a request without Host (HTTP/1.0) is served", async () => {
    const { admin } = await serve();
    const evil = await sendRaw(admin, "GET http://evil.example/v1/memory/stats HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n");
    expect(evil.status).toBe(403);
    expect(JSON.parse(evil.body).error).toMatch(/^Host "evil\.example"/);
    expect((await sendRaw(admin, "GET http://127.0.0.1/v1/memory/stats HTTP/1.1\r\nhost: evil.example\r\nconnection: close\r\n\r\n")).status).toBe(200);
    expect((await sendRaw(admin, "GET /v1/memory/stats HTTP/1.0\r\n\r\n")).status).toBe(200);
    expect((await sendRaw(admin, "GET /v1/memory/stats HTTP/1.0\r\nhost: evil.example\r\n\r\n")).status).toBe(403);
  });

  it("allowedHosts adds names (a leading dot: the name and its subdomains); bad entries are refused at start", async () => {
    const { admin } = await serve({ allowedHosts: ["Admin.Example", ".corp.example"] });
    for (const host of ["admin.example", "ADMIN.example:9180", "corp.example", "a.b.corp.example:443"]) expect((await send(admin, "GET", "/metrics", { host })).status, host).toBe(200);
    for (const host of ["evilcorp.example", "admin.example.evil", "xadmin.example", "corp.example.evil"]) expect((await send(admin, "GET", "/metrics", { host })).status, host).toBe(403);
    const smp = await startSmp({ shards: 1 });
    for (const allowedHosts of [[""], ["admin.example:80"], ["a b"], ["[::1]"], [".."], [3], "admin.example"]) {
      await expect(serveAdmin(smp, { allowedHosts } as unknown as AdminOptions), JSON.stringify(allowedHosts)).rejects.toThrow(TypeError);
    }
  });

  it("a server bound to ::1 answers [::1]; one bound to a name answers that name", async () => {
    const v6 = await serve({ host: "::1" }).catch(() => undefined); // no IPv6 loopback here: nothing to check
    if (v6 === undefined) console.warn("serveAdmin on ::1 SKIPPED: no IPv6 loopback");
    else {
      expect(v6.admin.url).toMatch(/^http:\/\/\[::1\]:\d+$/);
      expect((await send(v6.admin, "GET", "/v1/memory/stats")).status).toBe(200); // Host: [::1]:PORT
      expect((await send(v6.admin, "GET", "/v1/memory/stats", { host: `evil.example:${v6.port}` })).status).toBe(403);
    }
    // The machine's own name, when it resolves to loopback (binding anything else would open the server to the network).
    const name = hostname();
    const resolved = await lookup(name).catch(() => undefined);
    if (resolved === undefined || !/^127\.|^::1$/.test(resolved.address) || name === "localhost") {
      console.warn(`serveAdmin on a host name SKIPPED: ${name} does not resolve to loopback`);
      return;
    }
    const named = await serve({ host: name });
    expect((await send(named.admin, "GET", "/v1/memory/stats", { host: `${name}:${named.port}` })).status).toBe(200);
    expect((await send(named.admin, "GET", "/v1/memory/stats", { host: `${name.toUpperCase()}.` })).status).toBe(200);
    expect((await send(named.admin, "GET", "/v1/memory/stats", { host: `${name}.evil.example` })).status).toBe(403);
  });
});

describe("state changes from other sites' pages", () => {
  /** The state changes, each as a browser's form would send it: a POST form, and a PUT or DELETE as only fetch can (which a browser preflights, but a forged one must be refused too). */
  const changes = (): Array<[string, string]> => [
    ["POST", "/v1/heapprof/baseline?shard=all"],
    ["PUT", "/v1/heapprof?shard=all&rate=1"],
    ["DELETE", "/v1/heapprof/baseline?name=default"],
  ];

  it("refused when Origin or Sec-Fetch-Site say another site sent them, with or without a token; nothing is applied", async () => {
    for (const token of [undefined, "s3cret"]) {
      const { smp, admin, port } = await serve(token === undefined ? {} : { token });
      const auth = token === undefined ? {} : { authorization: `Bearer ${token}` };
      const form = { "content-type": "application/x-www-form-urlencoded", "sec-fetch-mode": "navigate", "sec-fetch-dest": "document" };
      const forged: Array<[string, OutgoingHttpHeaders, RegExp]> = [
        ["Chromium's form POST from http://localhost:P", { ...form, origin: "http://localhost:36745", "sec-fetch-site": "cross-site" }, /Sec-Fetch-Site: "cross-site"/],
        ["from another port of 127.0.0.1 (same site, another origin)", { ...form, origin: `http://127.0.0.1:${port + 1}`, "sec-fetch-site": "same-site" }, /Sec-Fetch-Site: "same-site"/],
        ["Origin alone (a browser without Sec-Fetch-*)", { origin: "https://evil.example" }, /Origin: "https:\/\/evil\.example"/],
        ["Origin alone, this host on another port", { origin: `http://127.0.0.1:${port + 1}` }, /another origin/],
        ["Origin alone, another scheme's default port", { origin: "https://127.0.0.1" }, /another origin/],
        ["Origin null (a sandboxed frame, a data: page)", { origin: "null" }, /Origin: "null"/],
        ["Origin null from another site", { origin: "null", "sec-fetch-site": "cross-site" }, /cross-site/],
        ["Sec-Fetch-Site alone", { "sec-fetch-site": "cross-site" }, /cross-site/],
        ["an Origin that is not a URL", { origin: "evil" }, /another origin/],
      ];
      for (const [method, path] of changes()) {
        for (const [what, headers, message] of forged) {
          const r = await send(admin, method, path, { ...auth, ...headers });
          expect(r.status, `${method}: ${what}`).toBe(403);
          expect(errorOf(r), `${method}: ${what}`).toEqual({ error: expect.stringMatching(message), code: "ERR_SHARDHEAP_FORBIDDEN" });
          expect(errorOf(r).error).toMatch(new RegExp(`^a ${method} from another`));
        }
      }
      expect(JSON.parse((await send(admin, "GET", "/v1/heapprof/baseline", auth)).body)).toEqual({ baselines: [], jsBaselines: [] });
      expect([0, 1].map((s) => smp.heapProfile(s).sampleRate)).toEqual([0, 0]);
    }
  });

  it("served from this server's own pages and from clients that send no Origin", async () => {
    const { smp, admin, port } = await serve();
    const own: Array<[string, OutgoingHttpHeaders]> = [
      ["curl (no Origin, no Sec-Fetch-*)", {}],
      ["the dashboard (same origin)", { origin: `http://127.0.0.1:${port}`, "sec-fetch-site": "same-origin" }],
      ["the dashboard in a browser without Sec-Fetch-*", { origin: `http://127.0.0.1:${port}` }],
      ["the dashboard through localhost", { host: `localhost:${port}`, origin: `http://LOCALHOST:${port}`, "sec-fetch-site": "same-origin" }],
      ["through a tunnel (ssh -L 8080:...)", { host: "localhost:8080", origin: "http://localhost:8080" }],
      ["behind a TLS proxy", { host: "127.0.0.1", origin: "https://127.0.0.1" }],
      ["Origin null that the browser says is same-origin", { origin: "null", "sec-fetch-site": "same-origin" }],
      ["the user's own action (Sec-Fetch-Site: none)", { "sec-fetch-site": "none" }],
    ];
    for (const [what, headers] of own) {
      expect((await send(admin, "POST", "/v1/heapprof/baseline?shard=1", headers)).status, what).toBe(200);
      expect((await send(admin, "PUT", "/v1/heapprof?shard=0&rate=4096", headers)).status, what).toBe(200);
    }
    expect(JSON.parse((await send(admin, "GET", "/v1/heapprof/baseline")).body).baselines.map((b: { shard: number }) => b.shard)).toEqual([1]);
    expect(smp.heapProfile(0).sampleRate).toBe(4096);
  });

  it("another site's background reads (an <img>, a <script>, a no-cors fetch) are refused; navigations to the server load", async () => {
    const { admin, port } = await serve({ allowHeapImage: true });
    const refused: OutgoingHttpHeaders[] = [
      { "sec-fetch-site": "cross-site", "sec-fetch-mode": "no-cors", "sec-fetch-dest": "image" },
      { "sec-fetch-site": "same-site", "sec-fetch-mode": "no-cors", "sec-fetch-dest": "script" },
      { "sec-fetch-site": "cross-site", "sec-fetch-mode": "cors", "sec-fetch-dest": "empty" },
      { "sec-fetch-site": "cross-site", "sec-fetch-mode": "navigate", "sec-fetch-dest": "embed" },
      { "sec-fetch-site": "cross-site" },
    ];
    for (const path of ["/debug/pprof/heap?seconds=900", "/v1/heap/image", "/v1/memory/stats"]) {
      for (const headers of refused) {
        const r = await send(admin, "GET", path, headers);
        expect(r.status, `${path} ${JSON.stringify(headers)}`).toBe(403);
        expect(errorOf(r).error).toMatch(/^a background request from another site's page/);
      }
    }
    const navigation = { "sec-fetch-site": "cross-site", "sec-fetch-mode": "navigate", "sec-fetch-dest": "document" };
    expect((await send(admin, "GET", "/", navigation)).status).toBe(200);
    expect((await send(admin, "GET", "/v1/memory/stats", { ...navigation, "sec-fetch-dest": "iframe" })).status).toBe(200);
    expect((await send(admin, "GET", "/v1/memory/stats", { "sec-fetch-site": "same-origin", "sec-fetch-mode": "cors", origin: `http://127.0.0.1:${port}` })).status).toBe(200);
    expect((await send(admin, "GET", "/v1/memory/stats", { origin: "https://evil.example" })).status).toBe(200); // a read it cannot see (no CORS)
  });
});

describe("bearer token", () => {
  it("the scheme is case-insensitive (RFC 9110 11.1); the token must match exactly", async () => {
    const { admin } = await serve({ token: "s3cret" });
    for (const authorization of ["Bearer s3cret", "bearer s3cret", "BEARER s3cret", "bEaReR s3cret", "Bearer  s3cret", "Bearer\ts3cret"]) {
      expect((await send(admin, "GET", "/v1/memory/stats", { authorization })).status, authorization).toBe(200);
    }
    for (const authorization of ["Bearer s3cre", "Bearer s3cretx", "Bearer S3CRET", "Bearer", "Bearers3cret", "s3cret", "Basic czNjcmV0", "Bearer s3cret s3cret"]) {
      const r = await send(admin, "GET", "/v1/memory/stats", { authorization });
      expect(r.status, authorization).toBe(401);
      expect(r.headers["www-authenticate"]).toBe("Bearer");
    }
  });
});

const CHROMIUM = "/usr/bin/chromium";
const hasChromium = existsSync(CHROMIUM);
if (!hasChromium) console.warn(`cross-site form check in a browser SKIPPED: ${CHROMIUM} is not installed (apt-get install chromium)`);

describe.runIf(hasChromium)("in Chromium", () => {
  it("another site's form POST and no-cors fetch change nothing; the server's own page changes what it asks", async () => {
    const { smp, admin } = await serve();
    // The attacker's page, on another site (localhost is not 127.0.0.1's site).
    const evil = createServer((_req, res) => {
      res.writeHead(200, { "content-type": "text/html" });
      res.end(
        `<form id="f" method="POST" action="${admin.url}/v1/heapprof/baseline?shard=all"><input name="a" value="b"></form>` +
          `<script>fetch("${admin.url}/v1/heapprof?shard=all&rate=1", { method: "PUT" }).catch(() => 0);` +
          `fetch("${admin.url}/v1/heapprof/baseline?shard=0", { method: "POST", mode: "no-cors" }).finally(() => document.getElementById("f").submit());</script>`,
      );
    });
    await new Promise<void>((resolve) => evil.listen(0, "127.0.0.1", resolve));
    onTestFinished(() => new Promise<void>((resolve) => evil.close(() => resolve())));
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"] });
    onTestFinished(() => browser.close());
    const page = await browser.newPage();
    const answers: number[] = [];
    page.on("response", (r) => {
      if (r.url().startsWith(admin.url)) answers.push(r.status());
    });
    const { port } = evil.address() as { port: number };
    const submitted = page.waitForURL(`${admin.url}/v1/heapprof/baseline?shard=all`, { timeout: 15_000 });
    await page.goto(`http://localhost:${port}/`);
    await submitted;
    expect(JSON.parse((await page.textContent("body")) ?? "")).toEqual({ error: expect.stringMatching(/^a POST from another site's page \(Sec-Fetch-Site: "cross-site"\) is refused/), code: "ERR_SHARDHEAP_FORBIDDEN" });
    expect(answers).toContain(403);
    expect(JSON.parse((await send(admin, "GET", "/v1/heapprof/baseline")).body)).toEqual({ baselines: [], jsBaselines: [] });
    expect(smp.heapProfile().sampleRate).toBe(0);
    // The server's own page: its fetches are same-origin and served.
    await page.goto(`${admin.url}/`);
    const statuses = await page.evaluate(`Promise.all([fetch("/v1/heapprof/baseline?shard=1", { method: "POST" }), fetch("/v1/heapprof?shard=0&rate=1", { method: "PUT" })]).then((rs) => rs.map((r) => r.status))`);
    expect(statuses).toEqual([200, 200]);
    expect(smp.heapProfile(0).sampleRate).toBe(1);
  });
});
