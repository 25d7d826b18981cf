/**
 * The display step of frames' files (src/frame-path.ts): a file
 * in node_modules/PKG shows as PKG/path (scoped, nested and pnpm copies
 * too), a file under the working directory relative to it, anything else
 * as recorded; file: URLs decoded; the rule idempotent; nothing a frame
 * can hold makes it throw.
 */
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { displayPath } from "../src/frame-path.js";

const APP = "/home/dev/my app";

describe("displayPath", () => {
  it("shows a file under the working directory relative to it, as a file: URL or as a path", () => {
    expect(displayPath(pathToFileURL(`${APP}/src/app.ts`).href, APP)).toBe("src/app.ts");
    expect(displayPath(`${APP}/src/app.ts`, APP)).toBe("src/app.ts");
    expect(displayPath(`${APP}/src/app.ts`, `${APP}/`)).toBe("src/app.ts");
    expect(displayPath(`${APP}/server.mjs`, APP)).toBe("server.mjs");
    // The default base is the working directory.
    expect(displayPath(pathToFileURL(join(process.cwd(), "test", "x.ts")).href)).toBe("test/x.ts");
  });

  it("decodes file: URLs: percent-escapes in the directory and in the name", () => {
    expect(displayPath("file:///home/dev/my%20app/src/a%23b%C3%A9.ts", APP)).toBe("src/a#bé.ts");
    expect(displayPath("file:///srv/x/node_modules/%40acme/util/lib/a%20b.js", APP)).toBe("@acme/util/lib/a b.js");
    // A path (as CommonJS frames give) is taken literally: "%20" there is three characters.
    expect(displayPath("/home/dev/my%20app/src/a.ts", APP)).toBe("/home/dev/my%20app/src/a.ts");
  });

  it("shows a file inside node_modules/PKG as PKG/path: scoped, nested, pnpm's store, under the working directory or not", () => {
    expect(displayPath("file:///tmp/x-1/node_modules/shardheap/src/memory/shard-allocator.ts", APP)).toBe("shardheap/src/memory/shard-allocator.ts");
    expect(displayPath("/opt/svc/node_modules/@scope/pkg/dist/index.js", APP)).toBe("@scope/pkg/dist/index.js");
    // The last node_modules names the package that holds the file.
    expect(displayPath("/opt/svc/node_modules/a/node_modules/b/lib/b.js", APP)).toBe("b/lib/b.js");
    expect(displayPath("/opt/svc/node_modules/.pnpm/shardheap@0.1.0/node_modules/shardheap/dist/cli.js", APP)).toBe("shardheap/dist/cli.js");
    // Under the working directory too: the package's name says more than node_modules/.
    expect(displayPath(`${APP}/node_modules/piscina/dist/worker.js`, APP)).toBe("piscina/dist/worker.js");
  });

  it("keeps what is not a file in a package: a package's folder alone, a scope alone", () => {
    expect(displayPath("/opt/node_modules/pkg", APP)).toBe("/opt/node_modules/pkg");
    expect(displayPath("/opt/node_modules/@scope/pkg", APP)).toBe("/opt/node_modules/@scope/pkg");
    // Under the working directory, such a path is still shown relative to it.
    expect(displayPath(`${APP}/node_modules/pkg`, APP)).toBe("node_modules/pkg");
  });

  it("keeps node: internals, other absolute files, eval origins, data: URLs and the empty url as recorded", () => {
    for (const url of [
      "node:internal/timers",
      "node:events",
      "file:///srv/app.js",
      "/srv/app.js",
      "/dev/zero",
      "/home/dev/my application/src/a.ts", // shares a prefix with the base, is not under it
      APP, // the directory itself
      "eval at run (file:///srv/app.js:3:4)",
      "data:text/javascript,export%20default%201",
      "https://example.com/app.js",
      "wasm://wasm/0012abcd",
      "",
    ]) {
      expect(displayPath(url, APP), url).toBe(url);
    }
  });

  it("shows nothing relative with base null or base /, the node_modules rule still applies", () => {
    expect(displayPath(`${APP}/src/app.ts`, null)).toBe(`${APP}/src/app.ts`);
    expect(displayPath("/srv/app.js", "/")).toBe("/srv/app.js");
    expect(displayPath(`${APP}/node_modules/pkg/a.js`, null)).toBe("pkg/a.js");
  });

  it("never throws: Windows-looking paths and URLs, other hosts, escaped slashes, bad escapes stay as they are (or as a POSIX path reads)", () => {
    const odd = [
      "C:\\app\\node_modules\\pkg\\a.js",
      "\\\\server\\share\\a.js",
      "file:///C:/app/src/a.js",
      "file://server/share/a.js",
      "file:///a%2Fb/c.js",
      "file:///a/%E0%A4%A/c.js",
      "file:",
      "file://",
      "/",
      "node_modules/pkg/a.js",
    ];
    for (const url of odd) expect(() => displayPath(url, APP), url).not.toThrow();
    expect(displayPath("C:\\app\\node_modules\\pkg\\a.js", APP)).toBe("C:\\app\\node_modules\\pkg\\a.js");
    expect(displayPath("file://server/share/a.js", APP)).toBe("file://server/share/a.js");
    expect(displayPath("file:///a%2Fb/c.js", APP)).toBe("file:///a%2Fb/c.js");
  });

  it("reports still render when the working directory is gone (process.cwd() throws): nothing relative, packages still short", () => {
    // A child process: a worker thread (vitest's) cannot chdir.
    const dist = (f: string): string => pathToFileURL(fileURLToPath(new URL(`../dist/${f}`, import.meta.url))).href;
    const script = `
      import { mkdtempSync, rmSync } from "node:fs";
      import { tmpdir } from "node:os";
      import { join } from "node:path";
      import { SharedHeap } from ${JSON.stringify(dist("index.js"))};
      import { formatTree } from ${JSON.stringify(dist("report/tree.js"))};
      import { toPprof } from ${JSON.stringify(dist("report/pprof.js"))};
      import { readPprof } from ${JSON.stringify(dist("report/pprof-read.js"))};
      const dir = mkdtempSync(join(tmpdir(), "shardheap-gone-"));
      process.chdir(dir);
      rmSync(dir, { recursive: true });
      let cwdThrows = false;
      try { process.cwd(); } catch { cwdThrows = true; }
      const heap = SharedHeap.create({ shards: 1, shardBytes: 1 << 20 });
      heap.shard(0).setHeapProfilingEnabled(true);
      heap.shard(0).malloc(100);
      const frames = [{ functionName: "f", url: "file:///x/node_modules/pkg/a.js", line: 1, column: 2 }];
      const p = { shard: 0, sampleRate: 1, totalSize: 8, totalCount: 1, sites: [{ frames, count: 1, size: 8, allocCount: 1, allocSize: 8 }] };
      console.log(JSON.stringify({ cwdThrows, tree: formatTree(p), diagnostics: /Top allocation sites/.test(heap.shard(0).diagnostics()), pathBase: readPprof(toPprof(p)).pathBase }));
    `;
    const out = execFileSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8", env: { ...process.env, SHARDHEAP_LOG: "silent" }, timeout: 30_000 });
    expect(JSON.parse(out)).toEqual({ cwdThrows: true, tree: "All (8, #1)\nf (pkg/a.js:1:2)\n", diagnostics: true, pathBase: "" });
  });

  it("is idempotent: a shown path shows as itself (a pprof file's frames go through the renderers again)", () => {
    const urls = [
      pathToFileURL(`${APP}/src/app.ts`).href,
      "file:///tmp/x/node_modules/@scope/pkg/a.js",
      "/opt/svc/node_modules/a/node_modules/b/lib/b.js",
      "node:internal/timers",
      "/srv/app.js",
      "file:///home/dev/my%20app/src/a%23b.ts",
    ];
    for (const url of urls) {
      const shown = displayPath(url, APP);
      expect(displayPath(shown, APP), url).toBe(shown);
      expect(displayPath(shown, "/elsewhere"), url).toBe(shown);
    }
  });
});
