/**
 * Servers a benchmark runs as child processes (bench/memcached.ts): each
 * started on a free port, ready once it accepts a TCP connection, stopped
 * with SIGINT (SIGKILL when it has not exited 15 s later). The tail of
 * what a server writes to stderr is kept, so a server that dies says why.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { connect } from "node:net";
import { freePort } from "../test/apps/memcached/client.js";

const START_MS = 30_000;
const STOP_MS = 15_000;
const STDERR_TAIL = 2000;

/** What a memcached command line (memcached's or shardheap's) needs as root: both refuse root without -u. */
export const ROOT_USER_ARGS: readonly string[] = process.getuid?.() === 0 ? ["-u", "root"] : [];

export interface ServerProcess {
  readonly port: number;
  readonly process: ChildProcess;
  /** The last STDERR_TAIL characters it wrote to stderr. */
  stderr(): string;
}

const accepts = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const c = connect(port, "127.0.0.1");
    c.once("connect", () => {
      c.destroy();
      resolve(true);
    });
    c.once("error", () => resolve(false));
  });

/** `program args(port)` on a free port, resolved once it accepts; rejects (the process stopped) when it exits or does not accept within 30 s. */
export async function startServer(program: string, args: (port: number) => string[], env: NodeJS.ProcessEnv = {}): Promise<ServerProcess> {
  const port = await freePort();
  const argv = args(port);
  const child = spawn(program, argv, { stdio: ["ignore", "ignore", "pipe"], env: { ...process.env, ...env } });
  let tail = "";
  child.stderr!.setEncoding("utf8");
  child.stderr!.on("data", (s: string) => {
    tail = (tail + s).slice(-STDERR_TAIL);
  });
  let spawnError: Error | undefined;
  child.once("error", (e) => {
    spawnError = e;
  });
  const server: ServerProcess = { port, process: child, stderr: () => tail };
  const deadline = Date.now() + START_MS;
  while (!(await accepts(port))) {
    const why = spawnError?.message ?? (child.exitCode !== null || child.signalCode !== null ? `exited (${child.exitCode ?? child.signalCode})` : Date.now() > deadline ? `not accepting after ${START_MS / 1000} s` : undefined);
    if (why !== undefined) {
      await stopServer(server);
      throw new Error(`${program} ${argv.join(" ")}: ${why}${tail ? `: ${tail.trim()}` : ""}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return server;
}

export async function stopServer(server: ServerProcess): Promise<void> {
  const child = server.process;
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  child.kill("SIGINT");
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([exited, new Promise<void>((r) => (timer = setTimeout(r, STOP_MS)))]);
  clearTimeout(timer);
  if (child.exitCode === null && child.signalCode === null) {
    child.kill("SIGKILL");
    await exited;
  }
}
