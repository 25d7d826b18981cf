/**
 * What the test files share, so each does it one way:
 * - heaps and Smp runtimes made inside a test are checked (heap.check()
 *   is []) and stopped when that test ends, pass or fail;
 * - waitFor: every wait has a bound and says what it waited for;
 * - look-ups and builders for profiles;
 * - the stack capture and stack interning the site-table tests use
 *   (shardheap itself only captures raw V8 CallSites, at allocation);
 * - the `shardheap` command as a child process, killed when the test ends;
 * - one HTTP request with exactly the headers given (forged Host, Origin).
 */
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { request, type IncomingHttpHeaders, type OutgoingHttpHeaders } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { expect, onTestFinished } from "vitest";
import { Smp } from "../dist/index.js";
import { SharedHeap, type AllocationSite, type HeapProfile } from "../src/index.js";
import { PROF_MAX_DEPTH } from "../src/memory/layout.js";
import type { SiteTable } from "../src/memory/profiler/site-table.js";
import { captureRawCallSites, frameOf, isOwnFrame } from "../src/memory/profiler/stack-capture.js";
import type { Frame } from "../src/memory/heap-profile.js";

/** The tasks module most Smp tests load (test/fixtures/shard-tasks.mjs). */
export const TASKS = new URL("./fixtures/shard-tasks.mjs", import.meta.url);

/** The built command (npm test builds first). */
export const CLI = fileURLToPath(new URL("../dist/cli.js", import.meta.url));

/** A fresh temp directory for whatever a test writes. */
export function tempDir(prefix = "shardheap-test-"): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

/** What `f` throws (a test failure if it returns). */
export function thrown(f: () => unknown): Error & { code?: string } {
  try {
    f();
  } catch (e) {
    return e as Error & { code?: string };
  }
  throw new Error("did not throw");
}

/**
 * A heap for one test (default 1 shard of 8 MiB); when the test ends its
 * metadata must be consistent (heap.check() is []), whatever the test did.
 */
export function newHeap(o: { shards?: number; shardBytes?: number | string } = {}): SharedHeap {
  const heap = SharedHeap.create({ shards: o.shards ?? 1, shardBytes: o.shardBytes ?? 8 << 20 });
  onTestFinished(() => {
    expect(heap.check()).toEqual([]);
  });
  return heap;
}

/**
 * Smp for one test: 16 MiB shards running TASKS unless told otherwise,
 * stopped when the test ends (a stuck shard is cut off after 5 s).
 */
export async function startSmp(o: Parameters<typeof Smp.start>[0] = {}): Promise<Smp> {
  const smp = await Smp.start({ memoryPerShard: "16MiB", module: TASKS, ...o });
  onTestFinished(() => smp.stop({ timeoutMs: 5000 }));
  return smp;
}

/** Resolve once `condition()` holds; reject naming `what` after `timeoutMs`. */
export async function waitFor(condition: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const t0 = performance.now();
  while (!condition()) {
    if (performance.now() - t0 > timeoutMs) throw new Error(`waited ${timeoutMs} ms for ${what}`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

/** The site whose leaf frame is function `name`. */
export function siteNamed(p: HeapProfile, name: string): AllocationSite | undefined {
  return p.sites.find((s) => s.frames[0]?.functionName === name);
}

/** A hand-built site: `names` leaf first, no positions; cumulative figures as the live ones unless given. */
export function siteOf(names: readonly string[], size: number, count = 1, alloc = { count, size }): AllocationSite {
  return {
    frames: names.map((functionName) => ({ functionName, url: "", line: 0, column: 0 })),
    size,
    count,
    allocCount: alloc.count,
    allocSize: alloc.size,
  };
}

/** A hand-built profile of `sites`, with its totals. */
export function profileOf(sites: AllocationSite[], o: { shard?: number | "all"; sampleRate?: number } = {}): HeapProfile {
  return {
    shard: o.shard ?? 0,
    sampleRate: o.sampleRate ?? 1,
    sites,
    totalSize: sites.reduce((n, s) => n + s.size, 0),
    totalCount: sites.reduce((n, s) => n + s.count, 0),
  };
}

/** The caller's stack, leaf first, at most `maxDepth` frames, without shardheap's own frames. */
export function captureStack(maxDepth: number): Frame[] {
  return captureRawCallSites(maxDepth, captureStack)
    .filter((site) => !isOwnFrame(site.getFileName() ?? ""))
    .map(frameOf);
}

/** Intern `frames` (leaf first) in `table`, as an allocation with that stack would: its site id. */
export function internStack(table: SiteTable, frames: readonly Frame[]): number {
  return table.siteOfCallSites(frames.map(callSiteOf), PROF_MAX_DEPTH);
}

/** A frame's stand-in position: the site table caches frames by (script, position). */
const positions = new Map<string, number>();

/** A V8 CallSite that reads as `f` (what the site table asks of one). */
function callSiteOf(f: Frame): NodeJS.CallSite {
  const key = `${f.url}\0${f.line}\0${f.column}\0${f.functionName}`;
  if (!positions.has(key)) positions.set(key, positions.size);
  const position = positions.get(key)!;
  const site = {
    getFileName: () => f.url,
    getFunctionName: () => f.functionName,
    getMethodName: () => null,
    getEvalOrigin: () => undefined,
    getLineNumber: () => f.line,
    getColumnNumber: () => f.column,
    getPosition: () => position,
    isEval: () => false,
  };
  return site as unknown as NodeJS.CallSite;
}

/**
 * `shardheap memcached ...` run as root gets `-u root` unless it names a
 * user, as memcached's own test harness adds it: memcached, and shardheap
 * memcached after it, refuse to serve as root without -u
 * (apps/memcached/service.test.ts tests the refusal itself, with asRootAsIs).
 */
export function withRootUser(args: readonly string[]): readonly string[] {
  if (args[0] !== "memcached" || process.getuid?.() !== 0 || args.includes("-u") || args.includes("--user") || args.some((a) => a.startsWith("--user="))) return args;
  return [...args, "-u", "root"];
}

/** `shardheap ARGS` run to its end (at most `timeoutMs`), logging silenced; `asIs` leaves a root memcached without -u (withRootUser). */
export function runCli(args: readonly string[], o: { cwd?: string; timeoutMs?: number; env?: NodeJS.ProcessEnv; asIs?: boolean } = {}): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, ...(o.asIs === true ? args : withRootUser(args))], {
    encoding: "utf8",
    cwd: o.cwd,
    env: { ...process.env, SHARDHEAP_LOG: "silent", ...o.env },
    timeout: o.timeoutMs ?? 60_000,
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** A running `shardheap` child: its output so far, bounded waits, killed when the test ends. */
export interface CliChild {
  readonly child: ChildProcessWithoutNullStreams;
  stdout(): string;
  stderr(): string;
  /** Resolve with the first match of `pattern` in stdout; reject after `timeoutMs` or when the child exits first. */
  output(pattern: RegExp, timeoutMs?: number): Promise<RegExpExecArray>;
  /** Resolve with the exit code; reject after `timeoutMs`. */
  exit(timeoutMs?: number): Promise<number | null>;
}

export function spawnCli(args: readonly string[]): CliChild {
  const child = spawn(process.execPath, [CLI, ...withRootUser(args)], { env: { ...process.env, SHARDHEAP_LOG: "silent" } });
  let stdout = "";
  let stderr = "";
  let exitCode: number | null | undefined;
  child.stdout.on("data", (d: Buffer) => (stdout += d));
  child.stderr.on("data", (d: Buffer) => (stderr += d));
  // 'close', not 'exit': by then all of its output has been read.
  const exited = new Promise<number | null>((resolve) => child.on("close", (code) => resolve((exitCode = code))));
  onTestFinished(() => {
    if (exitCode === undefined) child.kill("SIGKILL");
  });
  const bounded = <T>(what: string, timeoutMs: number, run: (resolve: (v: T) => void, reject: (e: Error) => void) => () => void): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      const fail = (why: string): void => reject(new Error(`shardheap ${args.join(" ")}: ${why} waiting for ${what}\nstdout:\n${stdout}\nstderr:\n${stderr}`));
      const timer = setTimeout(() => {
        cleanup();
        fail(`${timeoutMs} ms passed`);
      }, timeoutMs);
      const cleanup = run(
        (v) => {
          clearTimeout(timer);
          cleanup();
          resolve(v);
        },
        (e) => {
          clearTimeout(timer);
          cleanup();
          fail(e.message);
        },
      );
    });
  return {
    child,
    stdout: () => stdout,
    stderr: () => stderr,
    output: (pattern, timeoutMs = 30_000) =>
      bounded(String(pattern), timeoutMs, (resolve, reject) => {
        const look = (): void => {
          const m = pattern.exec(stdout);
          if (m) resolve(m);
        };
        const early = (): void => reject(new Error(`it exited (code ${String(exitCode)})`));
        child.stdout.on("data", look);
        void exited.then(early);
        queueMicrotask(() => {
          look();
          if (exitCode !== undefined) early();
        });
        return () => child.stdout.off("data", look);
      }),
    exit: (timeoutMs = 60_000) =>
      bounded("its exit", timeoutMs, (resolve) => {
        void exited.then(resolve);
        return () => undefined;
      }),
  };
}

export interface HttpAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/**
 * One request to the server at `base` (http://HOST:PORT) with exactly these
 * headers: Host is `base`'s unless `headers.host` forges another, and none
 * is added (`setHost: false`). The whole answer, or an error after 20 s.
 */
export function httpRequest(base: string, method: string, path: string, headers: OutgoingHttpHeaders = {}): Promise<HttpAnswer> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const req = request({ host: url.hostname.replace(/^\[|\]$/g, ""), port: url.port, method, path, headers: { host: url.host, ...headers }, setHost: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (d: Buffer) => chunks.push(d));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
    });
    req.setTimeout(20_000, () => req.destroy(new Error(`no answer to ${method} ${path} in 20 s`)));
    req.on("error", reject);
    req.end();
  });
}
