/**
 * The admin HTTP API against real shard threads: every endpoint, the error
 * codes, a storm of bad requests. Each test starts its own shards and
 * servers (serve()), so none depends on what another did.
 */
import { gunzipSync } from "node:zlib";
import { request } from "node:http";
import { connect } from "node:net";
import { Profile } from "pprof-format";
import { beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { serveAdmin, type AdminOptions, type AdminServer, type HeapProfile, type Smp } from "../../dist/index.js";
import { ERROR_TABLE, type ErrorCode } from "../../src/errors.js";
import { siteNamed, startSmp } from "../helpers.js";

beforeAll(() => {
  process.env.SHARDHEAP_LOG = "silent";
});

type Answer = { status: number; text: string; bytes: Uint8Array; type: string };

/** Two fresh shards and an admin server over them (options as given; the heap image allowed unless told otherwise), closed when the test ends. */
async function serve(o: AdminOptions = { allowHeapImage: true }): Promise<{ smp: Smp; admin: AdminServer; call(path: string, init?: RequestInit): Promise<Answer> }> {
  const smp = await startSmp({ shards: 2 });
  const admin = await serveAdmin(smp, o);
  onTestFinished(() => admin.close());
  const call = async (path: string, init: RequestInit = {}): Promise<Answer> => {
    const r = await fetch(admin.url + path, init);
    const bytes = new Uint8Array(await r.arrayBuffer());
    return { status: r.status, text: Buffer.from(bytes).toString("utf8"), bytes, type: r.headers.get("content-type") ?? "" };
  };
  return { smp, admin, call };
}
const site = (p: HeapProfile) => siteNamed(p, "allocateForProfile");

describe("admin API", () => {
  it("binds loopback and switches profiling on one shard only", async () => {
    const { smp, admin, call } = await serve();
    expect(admin.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect((await call("/v1/heapprof?shard=1&rate=1", { method: "PUT" })).text).toBe('{"shard":1,"rate":1}');
    await Promise.all([0, 1].map((s) => smp.submitTo(s, "allocateForProfile", { count: 20, size: 256 })));
    const p0 = JSON.parse((await call("/v1/heapprof?shard=0&format=json")).text) as HeapProfile;
    const p1 = JSON.parse((await call("/v1/heapprof?shard=1")).text) as HeapProfile;
    expect(site(p0)).toBeUndefined();
    expect(site(p1)).toMatchObject({ count: 20, size: 20 * 256 });
    expect(p1.sampleRate).toBe(1);
    expect((await call("/v1/heapprof?shard=all&enabled=false", { method: "PUT" })).status).toBe(200);
    expect(smp.heapProfile().sampleRate).toBe(0);
  });

  it("serves the profile in every format", async () => {
    const { smp, call } = await serve();
    await smp.setHeapProfiling(1, true);
    await smp.submitTo(1, "allocateForProfile", { count: 20, size: 256 });
    const tree = await call("/v1/heapprof?format=tree&min=1K");
    expect(tree.text).toMatch(/^All \(\d+, #\d+\)$/m);
    expect((await call("/v1/heapprof?format=tree&inverted=1")).status).toBe(200);
    // Frames' files shown short (the tasks module is under the working directory), as recorded with fullpaths=1.
    expect((await call("/v1/heapprof?format=collapsed")).text).toMatch(/^\S.*allocateForProfile \(test\/fixtures\/shard-tasks\.mjs:\d+:\d+\) 5120$/m);
    expect((await call("/v1/heapprof?format=collapsed&fullpaths=1")).text).toMatch(/allocateForProfile \(file:\/\/\/.*\/test\/fixtures\/shard-tasks\.mjs:\d+:\d+\) 5120$/m);
    const leafUrl = async (query: string): Promise<string | undefined> => site(JSON.parse((await call(`/v1/heapprof?shard=1${query}`)).text) as HeapProfile)?.frames[0]!.url;
    expect(await leafUrl("")).toBe("test/fixtures/shard-tasks.mjs");
    expect(await leafUrl("&fullpaths=1")).toBe(site(smp.heapProfile(1))!.frames[0]!.url);
    expect(await leafUrl("&fullpaths=0")).toBe("test/fixtures/shard-tasks.mjs");
    expect((await call("/v1/heapprof?fullpaths=maybe")).status).toBe(400);
    const svg = await call("/v1/heapprof?format=svg");
    expect(svg.type).toBe("image/svg+xml");
    const pprof = Profile.decode(gunzipSync((await call("/v1/heapprof?format=pprof")).bytes));
    expect(pprof.sample.length).toBeGreaterThan(0);
    expect(JSON.parse((await call("/v1/heapprof?format=heapprofile")).text).head.callFrame.functionName).toBe("(root)");
  });

  it("serves stats, diagnostics, metrics and the heap image", async () => {
    const { smp, call } = await serve();
    await smp.submitTo(1, "allocMany", { count: 10, size: 100 });
    const stats = JSON.parse((await call("/v1/memory/stats?shard=1")).text);
    expect(stats).toEqual(smp.stats(1));
    expect(JSON.parse((await call("/v1/memory/stats")).text).mallocs).toBe(smp.stats().mallocs);
    expect((await call("/v1/memory/diagnostics?shard=0")).text).toMatch(/^Used memory: /m);
    const metrics = (await call("/metrics")).text;
    for (const name of ["malloc_operations_total", "free_operations_total", "cross_cpu_free_operations_total", "malloc_live_objects", "free_memory_bytes", "total_memory_bytes", "allocated_memory_bytes", "reclaims_operations_total", "malloc_failed_total"]) {
      expect(metrics).toMatch(new RegExp(`^shardheap_memory_${name}\\{shard="1"\\} \\d+`, "m"));
    }
    expect(metrics).toMatch(/^# TYPE shardheap_memory_malloc_operations_total counter$/m);
    const image = await call("/v1/heap/image");
    expect(image.status).toBe(200);
    expect(Buffer.from(image.bytes.subarray(0, 8)).toString("latin1")).toBe("SHARDIMG");
  });

  it("diagnostics name the top allocation sites in their sources, as the tree does; the allocator's own report stays raw", async () => {
    // The stress workload: compiled TypeScript with a source map in dist/.
    const smp = await startSmp({ shards: 1, heapprof: true, module: new URL("../../dist/apps/stress/workload.js", import.meta.url) });
    const admin = await serveAdmin(smp);
    onTestFinished(() => admin.close());
    await smp.submitTo(0, "runSlice", { ms: 20, crossShard: 0, incoming: [], liveBytes: 1 << 20 });
    const text = await (await fetch(`${admin.url}/v1/memory/diagnostics?shard=0`)).text();
    expect(text).toMatch(/^Top allocation sites \(heap profiler, every allocation\):$/m);
    // Files shown as every report shows them: relative to the working directory (this repository), the line visible.
    expect(text).toMatch(/^ +\S+ +\S+  allocate\w+ \(src\/apps\/stress\/workload\.ts:\d+:\d+\)$/m);
    expect(text).not.toMatch(/workload\.js|file:/);
    expect(smp.heap.diagnostics(0)).toMatch(/allocate\w+ \(dist\/apps\/stress\/workload\.js:\d+:\d+\)$/m);
  });

  it("answers errors with the right codes and JSON", async () => {
    const { call } = await serve();
    const cases: Array<[string, RequestInit, number]> = [
      ["/v1/heapprof?shard=9", {}, 404],
      ["/v1/heapprof?shard=x", {}, 400],
      ["/v1/heapprof?format=png", {}, 400],
      ["/v1/heapprof?min=lots", {}, 400],
      ["/v1/heapprof?inverted=maybe", {}, 400],
      ["/v1/heapprof?shard=1", { method: "PUT" }, 400],
      ["/v1/heapprof?rate=5", { method: "PUT" }, 400],
      ["/v1/heapprof?shard=0&rate=-1", { method: "PUT" }, 400],
      ["/v1/heapprof", { method: "DELETE" }, 405],
      ["/v1/memory/stats?shard=2", {}, 404],
      ["/nope", {}, 404],
    ];
    for (const [path, init, status] of cases) {
      const r = await call(path, init);
      expect(r.status, path).toBe(status);
      const body = JSON.parse(r.text) as { error: string; code: ErrorCode };
      expect(body.error, path).toEqual(expect.any(String));
      expect(ERROR_TABLE[body.code]?.httpStatus, path).toBe(status); // the status is the code's row
    }
  });

  it("the heap image endpoint is off unless allowed: 403 with the JSON error", async () => {
    const off = await serve({});
    const r = await off.call("/v1/heap/image");
    expect(r.status).toBe(403);
    expect(JSON.parse(r.text)).toEqual({ error: expect.stringMatching(/heap image endpoint is off/), code: "ERR_SHARDHEAP_FORBIDDEN" });
    expect((await (await serve({ allowHeapImage: true })).call("/v1/heap/image")).status).toBe(200);
  });

  it("reads rates, sizes and switches with the package's one parser", async () => {
    const { smp, call } = await serve();
    const put = async (query: string): Promise<{ status: number; body: { error?: string; rate?: number } }> => {
      const r = await call(`/v1/heapprof?${query}`, { method: "PUT" });
      return { status: r.status, body: JSON.parse(r.text) };
    };
    const refused: Array<[string, RegExp]> = [
      ["shard=0&rate=1.5", /^rate must be a whole number of bytes: "1.5" is 1.5 bytes$/], // was silently exact
      ["shard=0&rate=0.5", /^rate must be a whole number of bytes/], // was silently off
      ["shard=0&rate=2147483648", /^rate must be at most 2147483647 bytes/],
      ["shard=0&rate=2GiB", /^rate must be at most 2147483647 bytes/],
      ["shard=0&rate=", /^rate must be a byte count/],
      ["shard=0&enabled=maybe", /^enabled must be 1, true, yes, on or 0, false, no, off; got "maybe"$/],
      ["shard=0&enabled=", /^enabled must be/],
      ["shard=0&rate=1&enabled=1", /^give one of rate=/],
    ];
    for (const [query, message] of refused) {
      const r = await put(query);
      expect(r.status, query).toBe(400);
      expect(r.body.error, query).toMatch(message);
    }
    expect(smp.heapProfile(0).sampleRate).toBe(0); // nothing refused was applied
    expect(await put("shard=0&rate=64KiB")).toEqual({ status: 200, body: { shard: 0, rate: 65536 } });
    expect(smp.heapProfile(0).sampleRate).toBe(65536);
    expect(await put("shard=0&enabled=1")).toEqual({ status: 200, body: { shard: 0, rate: 1 } });
    expect(await put("shard=0&enabled=off")).toEqual({ status: 200, body: { shard: 0, rate: 0 } });
    expect((await call("/v1/heapprof?format=tree&inverted=yes&min=1.5K")).status).toBe(200);
    expect((await call("/v1/heapprof?format=tree&min=1.3K")).status).toBe(400);
  });

  it("profile and stats endpoints answer while a shard is busy", async () => {
    const { smp, call } = await serve();
    const busy = smp.submitTo(0, "busy", 3000);
    await new Promise((r) => setTimeout(r, 100)); // shard 0 is now inside its task
    const answered = Promise.all([call("/v1/heapprof?shard=0&format=tree"), call("/v1/memory/stats?shard=0")]);
    const first = await Promise.race([answered.then(() => "http"), busy.then(() => "task")]);
    expect(first).toBe("http"); // answered while the shard was still busy
    expect((await answered).map((r) => r.status)).toEqual([200, 200]);
    await expect(busy).resolves.toBe("done");
  });

  it("survives a storm of malformed requests", async () => {
    const { admin, call } = await serve();
    const { port } = new URL(admin.url);
    const raw = (line: string) =>
      new Promise<void>((resolve) => {
        const req = request({ host: "127.0.0.1", port, method: "GET", path: line, headers: { "x-junk": "\u00ff".repeat(10) } }, (res) => {
          res.resume();
          res.on("end", resolve);
        });
        req.on("error", () => resolve());
        req.end();
      });
    const bad = ["/v1/heapprof?shard=%zz", "/v1/heapprof?format=%00", "/v1/memory/stats?shard=99999999999999999999", "/%2e%2e/etc/passwd", "/v1/heapprof?min=1e400", "/metrics?x=" + "a".repeat(4000)];
    await Promise.all(Array.from({ length: 300 }, (_, i) => raw(bad[i % bad.length]!)));
    expect((await call("/v1/memory/stats")).status).toBe(200);
  });

  it("every malformed request target gets 400 with a JSON error, never 500; the absolute form is served", async () => {
    const { smp, admin, call } = await serve();
    const { port } = new URL(admin.url);
    // One raw request on its own connection; the whole answer, read until the server closes.
    const raw = (target: string) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const socket = connect(Number(port), "127.0.0.1");
        const chunks: Buffer[] = [];
        const timer = setTimeout(() => {
          socket.destroy();
          reject(new Error(`no answer for ${JSON.stringify(target)}`));
        }, 5000);
        socket.on("data", (d) => chunks.push(d));
        socket.on("error", () => undefined);
        socket.on("close", () => {
          clearTimeout(timer);
          const text = Buffer.concat(chunks).toString("latin1");
          const head = text.slice(0, text.indexOf("\r\n\r\n"));
          let body = text.slice(head.length + 4);
          if (/^transfer-encoding: chunked$/im.test(head)) {
            let joined = "";
            for (let at = 0; ; ) {
              const eol = body.indexOf("\r\n", at);
              const size = parseInt(body.slice(at, eol), 16);
              if (!(size > 0)) break;
              joined += body.slice(eol + 2, eol + 2 + size);
              at = eol + 2 + size + 2;
            }
            body = joined;
          }
          resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0), body });
        });
        socket.end(`GET ${target} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n`, "latin1");
      });
    const malformed = ["http://[bad/", "http://[::1/v1/memory/stats", "http://x:99999/metrics", "https://exa mple/", "*", "v1/memory/stats", "?shard=0", "\u0001/metrics", "/v1/memory/stats\u007f"];
    for (const target of malformed) {
      const r = await raw(target);
      expect(r.status, JSON.stringify(target)).toBe(400);
      expect(JSON.parse(r.body).error, JSON.stringify(target)).toEqual(expect.any(String));
    }
    const absolute = await raw("http://127.0.0.1/v1/memory/stats?shard=1");
    expect(absolute.status).toBe(200);
    expect(JSON.parse(absolute.body)).toEqual(smp.stats(1));
    expect((await raw("//v1/memory/stats")).status).toBe(404); // a path, not an authority
    expect((await call("/v1/memory/stats")).status).toBe(200);
  });
});
