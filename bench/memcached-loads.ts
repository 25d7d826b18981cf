/**
 * The loads of bench/memcached.ts: client programs run to their end
 * against one server, each printing its requests, requests/s and get
 * misses in memcaslap's words. Every load writes new keys of 64 B with
 * 1 KiB values, so a full cache evicts on every set, as one in production
 * does:
 *   steady      memcaslap -T 2 -c 16, half sets, half gets (a config file:
 *               memcaslap's default mix is 9:1); the load that fills the
 *               caches and on which the targets are set
 *   mix         memcaslap -T 2 -c 16 with its default mix (90% gets, 10%
 *               sets), given as a config file too (not ~/.memaslap.cnf)
 *   pipelined   bench/fixtures/memcached-pipeline.mjs: 2 threads x 4
 *               connections x 32 requests in flight, half sets of new
 *               keys, gets of the 1,250 keys each connection set last (set
 *               before the run starts); a quarter of memcaslap's seconds
 *               (it makes 2-4x the requests per second)
 * memcaslap makes new keys in every run, every set a new one (against
 * memcached -m 64, half sets: 350,879 sets, 56,640 items held, 294,239
 * evictions), and its gets read keys of its own window, which miss once
 * they were evicted.
 */
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { installed } from "../test/apps/memcached/client.js";

export const fixture = (name: string): string => fileURLToPath(new URL(`../../bench/fixtures/${name}`, import.meta.url));

export const KEY_BYTES = 64;
export const VALUE_BYTES = 1024;
const MEMCASLAP_ARGS = ["-T", "2", "-c", "16"];
const PIPELINE_ARGS = ["--threads", "2", "--connections", "4", "--depth", "32", "--keys", "1250"];
/** How long a client may run past its seconds (starting, connecting, draining) before it counts as hung. */
const CLIENT_GRACE_MS = 60_000;

export interface ClientRun {
  ops: number;
  tps: number;
  misses: number;
  /** Sets answered SERVER_ERROR (the pipelined load counts them; memcaslap does not say). */
  setErrors: number;
}

export interface Load {
  readonly name: string;
  /** Why it cannot run here; undefined when it can. */
  readonly missing: string | undefined;
  /** The share of its requests that are sets of new keys (what it writes into a cache: ops x share x item). */
  readonly setShare: number;
  seconds(roundSeconds: number): number;
  /** The load for `seconds` against the server on `port`; `started` is called when the load begins (the server's CPU is read from there). */
  run(port: number, seconds: number, started?: () => void): Promise<ClientRun>;
}

/**
 * A client program run to its end: the ops, TPS, get misses and set
 * errors it printed (memcaslap's words). `started` is called when its load begins: at once,
 * or with `handshake` when it prints "ready" (it is then told to start).
 */
function client(program: string, args: string[], seconds: number, started: () => void, handshake = false): Promise<ClientRun> {
  return new Promise((resolve, reject) => {
    if (!handshake) started();
    const child = spawn(program, args, { stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    let ready = !handshake;
    child.stdout.setEncoding("utf8");
    child.stderr.setEncoding("utf8");
    child.stdout.on("data", (text: string) => {
      stdout += text;
      if (!ready && stdout.includes("ready\n")) {
        ready = true;
        started();
        child.stdin.end("go\n");
      }
    });
    child.stderr.on("data", (text: string) => (stderr += text));
    child.stdin.on("error", () => {}); // a client that exits early: its exit says why
    const timer = setTimeout(() => child.kill("SIGKILL"), seconds * 1000 + CLIENT_GRACE_MS);
    child.once("error", (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.once("close", (status, signal) => {
      clearTimeout(timer);
      const figures = /Ops: (\d+) TPS: (\d+)/.exec(stdout);
      const misses = /get_misses: (\d+)/.exec(stdout);
      const setErrors = /set_errors: (\d+)/.exec(stdout);
      if (status === 0 && ready && figures !== null && misses !== null) {
        resolve({ ops: Number(figures[1]), tps: Number(figures[2]), misses: Number(misses[1]), setErrors: Number(setErrors?.[1] ?? 0) });
        return;
      }
      const said = `${stdout}${stderr}`.trim().slice(-500).replace(/\s*\n\s*/g, " | ");
      reject(new Error(`${program} ${args.join(" ")} exited ${signal === "SIGKILL" ? `hung, killed after ${seconds} s + ${CLIENT_GRACE_MS / 1000} s` : (status ?? signal)}${said ? `: ${said}` : ""}`));
    });
  });
}

/** memcaslap's config file (-F): one key length, one value length, the set (0) and get (1) shares. */
function memcaslapConfig(file: string, setShare: number): string {
  writeFileSync(file, `key\n${KEY_BYTES} ${KEY_BYTES} 1\nvalue\n${VALUE_BYTES} ${VALUE_BYTES} 1\ncmd\n0 ${setShare}\n1 ${1 - setShare}\n`);
  return file;
}

/** The three loads; memcaslap's config files are written into `dir` (the caller's temporary directory). */
export function loads(dir: string): { steady: Load; mix: Load; pipelined: Load } {
  const noMemcaslap = installed("memcaslap", ["-V"]) ? undefined : "memcaslap is not installed (apt-get install libmemcached-tools)";
  const memcaslap = (name: string, setShare: number): Load => {
    const config = memcaslapConfig(path.join(dir, `memcaslap-${setShare}.cnf`), setShare);
    return {
      name: `memcaslap ${MEMCASLAP_ARGS.join(" ")}, ${name}`,
      missing: noMemcaslap,
      setShare,
      seconds: (round) => round,
      run: (port, seconds, started = () => {}) => client("memcaslap", ["-s", `127.0.0.1:${port}`, ...MEMCASLAP_ARGS, "-F", config, "-t", `${seconds}s`], seconds, started),
    };
  };
  const setShare = 0.5;
  const pipelineArgs = [...PIPELINE_ARGS, "--set-share", String(setShare), "--new-keys", "1", "--key-bytes", String(KEY_BYTES), "--value", String(VALUE_BYTES)];
  return {
    steady: memcaslap("half sets", 0.5),
    mix: memcaslap("90% gets", 0.1),
    pipelined: {
      name: "pipelined 8 x 32, half sets",
      missing: undefined,
      setShare,
      seconds: (round) => Math.max(1, Math.round(round / 4)),
      run: (port, seconds, started = () => {}) =>
        client(process.execPath, [fixture("memcached-pipeline.mjs"), "--port", String(port), ...pipelineArgs, "--seconds", String(seconds), "--start-on-stdin"], seconds, started, true),
    },
  };
}
