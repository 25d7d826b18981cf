/**
 * Frames whose script is a device or a FIFO (code with `//# sourceURL=/dev/zero`):
 * the admin API and `shardheap report` answer within a bound and leave those
 * frames as recorded. The Smp and its admin server run in a child process, so
 * a regression to a blocking read fails the bounded waits here instead of
 * freezing the test runner.
 */
import { spawn, spawnSync, execFileSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { HeapProfile } from "../../src/index.js";

const cli = fileURLToPath(new URL("../../dist/cli.js", import.meta.url));
const serverScript = fileURLToPath(new URL("../fixtures/sourceurl-admin.mjs", import.meta.url));
const ANSWER_WITHIN_MS = 15_000;

let dir: string;
let fifo: string;
let image: string;
let child: ChildProcess | undefined;
let adminUrl: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "shardheap-sourceurl-"));
  fifo = join(dir, "fifo");
  execFileSync("mkfifo", [fifo]);
  image = join(dir, "heap.img");
  const c = spawn(process.execPath, [serverScript, fifo, image], { stdio: ["pipe", "pipe", "pipe"] });
  child = c;
  let stderr = "";
  c.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
  adminUrl = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the admin server did not start within 30 s: ${stderr}`)), 30_000);
    let out = "";
    c.stdout!.on("data", (d: Buffer) => {
      out += d.toString();
      const m = /^admin: (\S+)$/m.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    c.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`the admin server exited with ${code}: ${stderr}`));
    });
  });
});

afterAll(async () => {
  const c = child;
  if (c && c.exitCode === null && c.signalCode === null) {
    const exited = new Promise<void>((resolve) => c.once("exit", () => resolve()));
    c.stdin!.end(); // asks it to stop its Smp
    const timer = setTimeout(() => c.kill("SIGKILL"), 10_000);
    await exited;
    clearTimeout(timer);
  }
  rmSync(dir, { recursive: true, force: true });
});

async function get(path: string): Promise<{ status: number; body: Buffer }> {
  const r = await fetch(adminUrl + path, { signal: AbortSignal.timeout(ANSWER_WITHIN_MS) });
  return { status: r.status, body: Buffer.from(await r.arrayBuffer()) };
}

const urlsOf = (p: HeapProfile): string[] => p.sites.flatMap((s) => s.frames.map((f) => f.url));

describe("frames named after a device or a FIFO", () => {
  it("GET /v1/heapprof answers in every format, frames as recorded, and the server keeps serving", async () => {
    const json = await get("/v1/heapprof?format=json");
    expect(json.status).toBe(200);
    const urls = urlsOf(JSON.parse(json.body.toString()) as HeapProfile);
    expect(urls).toContain("/dev/zero");
    expect(urls).toContain(fifo);
    for (const format of ["tree", "collapsed", "svg", "pprof", "heapprofile"]) {
      expect((await get(`/v1/heapprof?format=${format}`)).status, format).toBe(200);
    }
    // Again: the second time answers from the cache, and other endpoints still answer.
    expect((await get("/v1/heapprof?format=tree")).body.toString()).toContain("/dev/zero");
    expect((await get("/v1/memory/stats")).status).toBe(200);
  });

  it("shardheap report on an image of that heap exits, frames as recorded", () => {
    for (const format of ["tree", "json", "collapsed"]) {
      const r = spawnSync(process.execPath, [cli, "report", image, "--format", format], { encoding: "utf8", timeout: ANSWER_WITHIN_MS, killSignal: "SIGKILL" });
      expect(r.status, `${format}: ${r.stderr}`).toBe(0);
      expect(r.stdout, format).toContain("/dev/zero");
      expect(r.stdout, format).toContain(fifo);
    }
  });
});
