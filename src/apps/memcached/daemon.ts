/**
 * memcached's -d, as a service manager expects it (systemd's
 * Type=forking, an init script's start-stop-daemon): the command starts
 * the server as a process of its own, in a session of its own, and exits
 * 0 once that process serves (its port bound, its user changed, its pid
 * file written), or with the server's error and exit code when it could
 * not start. memcached forks before it binds, and its parent exits 0
 * whatever happens next; Node cannot fork a process that runs threads,
 * so the server is a new process of the same command, told by
 * SHARDHEAP_MEMCACHED_DAEMON that it is the daemon, its standard streams
 * /dev/null (with -v they stay the command's, as memcached keeps them).
 */
import { spawn } from "node:child_process";

const DAEMON_ENV = "SHARDHEAP_MEMCACHED_DAEMON";

/** What the daemon tells the command that started it. */
type Report = { ready: true } | { ready: false; message: string; code?: string; syscall?: string; stack?: string };

/** In the daemon: how it reports to the command that started it; undefined in any other process. */
export interface DaemonLink {
  /** Serving: the command exits 0, and the channel closes. */
  ready(): void;
  /** Could not start: the command exits with this error's exit code. */
  failed(e: unknown): void;
}

export function daemonLink(): DaemonLink | undefined {
  const send = process.send?.bind(process);
  if (process.env[DAEMON_ENV] !== "1" || send === undefined) return undefined;
  let done = false;
  const report = (r: Report): void => {
    if (done) return;
    done = true;
    send(r, () => process.disconnect());
  };
  return {
    ready: () => report({ ready: true }),
    failed: (e) => {
      const err: NodeJS.ErrnoException = e instanceof Error ? e : new Error(String(e));
      report({ ready: false, message: err.message, ...(err.code === undefined ? {} : { code: err.code }), ...(err.syscall === undefined ? {} : { syscall: err.syscall }), ...(err.stack === undefined ? {} : { stack: err.stack }) });
    },
  };
}

/**
 * The command's side of -d: start this command again as the daemon and
 * wait for its report. Resolves once it serves; rejects with its error
 * (its code kept, so the exit code is the server's) when it could not.
 */
export function daemonize(verbose: boolean): Promise<void> {
  const streams = verbose ? "inherit" : "ignore";
  const child = spawn(process.execPath, [...process.execArgv, process.argv[1]!, ...process.argv.slice(2)], {
    detached: true,
    stdio: ["ignore", streams, streams, "ipc"],
    env: { ...process.env, [DAEMON_ENV]: "1" },
  });
  return new Promise<void>((resolve, reject) => {
    const ended = (code: number | null, signal: NodeJS.Signals | null): void =>
      reject(new Error(`the memcached daemon ended before it served (${signal ?? `exit code ${String(code)}`})`));
    child.once("exit", ended);
    child.once("error", reject);
    child.once("message", (r: Report) => {
      child.off("exit", ended);
      child.unref();
      if (child.connected) child.disconnect();
      if (r.ready) {
        resolve();
        return;
      }
      const e = Object.assign(new Error(r.message), r.code === undefined ? {} : { code: r.code }, r.syscall === undefined ? {} : { syscall: r.syscall });
      if (r.stack !== undefined) e.stack = r.stack;
      reject(e);
    });
  });
}
