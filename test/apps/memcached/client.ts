/**
 * Test helpers for `shardheap memcached`: a raw memcached connection
 * (bytes in, bytes out, every wait bounded), and Debian's reference
 * memcached and libmemcached tools when they are installed.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { createServer, connect, type Socket } from "node:net";

/** When a reply is complete: it ends with this text, matches this pattern, or satisfies this test. */
export type End = string | RegExp | ((text: string) => boolean);

/** A reply complete once it holds `count` lines `line` (pipelined answers). */
export function lines(line: string, count: number): (text: string) => boolean {
  return (text) => text.split(`${line}\r\n`).length - 1 >= count;
}

/** Bytes a connection has received, and ways to wait for more, each bounded. */
export class RawClient {
  readonly socket: Socket;
  private pieces: Buffer[] = [];
  private length = 0;
  private ended = false;
  private wake: (() => void) | undefined;

  private constructor(socket: Socket) {
    this.socket = socket;
    socket.on("data", (d: Buffer) => {
      this.pieces.push(d);
      this.length += d.length;
      this.wake?.();
    });
    socket.on("end", () => {
      this.ended = true;
      this.wake?.();
    });
    socket.on("close", () => {
      this.ended = true;
      this.wake?.();
    });
    socket.on("error", () => {});
  }

  static async open(port: number, host = "127.0.0.1", timeoutMs = 5000): Promise<RawClient> {
    const socket = connect(port, host);
    socket.setNoDelay(true);
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`connect to ${host}:${port} timed out`)), timeoutMs);
      socket.once("connect", () => {
        clearTimeout(timer);
        resolve();
      });
      socket.once("error", (e) => {
        clearTimeout(timer);
        reject(e);
      });
    });
    return new RawClient(socket);
  }

  send(data: string | Buffer): void {
    this.socket.write(typeof data === "string" ? Buffer.from(data, "latin1") : data);
  }

  /** What has arrived, as one buffer. */
  private get received(): Buffer {
    if (this.pieces.length !== 1) this.pieces = [Buffer.concat(this.pieces, this.length)];
    return this.pieces[0]!;
  }

  private set received(b: Buffer) {
    this.pieces = [b];
    this.length = b.length;
  }

  /** Wait until at least `n` bytes have arrived (without joining them on every packet); all of them. */
  async untilBytes(n: number, timeoutMs = 10_000): Promise<Buffer> {
    await this.wait(() => this.length >= n, timeoutMs);
    return this.received;
  }

  /** Wait until `done(received)` holds (or the connection ends); the bytes received so far. */
  async until(done: (received: Buffer) => boolean, timeoutMs = 10_000): Promise<Buffer> {
    await this.wait(() => done(this.received), timeoutMs);
    return this.received;
  }

  private async wait(done: () => boolean, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!done() && !this.ended) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out after ${timeoutMs} ms waiting; received so far: ${JSON.stringify(this.received.toString("latin1").slice(-300))}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wake = undefined;
    }
  }

  /**
   * Send `request`, then wait for a reply ending with `end` (default \r\n;
   * or matching a RegExp, or holding for a predicate): that reply, removed
   * from what was received.
   */
  async request(request: string | Buffer, end: End = "\r\n", timeoutMs?: number): Promise<string> {
    this.send(request);
    return this.take(end, timeoutMs);
  }

  /** Wait for received text ending with `end`, and take it. */
  async take(end: End = "\r\n", timeoutMs?: number): Promise<string> {
    const matches = (b: Buffer): boolean => {
      const text = b.toString("latin1");
      return typeof end === "string" ? text.endsWith(end) : typeof end === "function" ? end(text) : end.test(text);
    };
    const got = await this.until(matches, timeoutMs);
    this.received = Buffer.alloc(0);
    return got.toString("latin1");
  }

  /** Everything received until the server closes the connection. */
  async untilClosed(timeoutMs = 10_000): Promise<string> {
    const got = await this.until(() => false, timeoutMs);
    return got.toString("latin1");
  }

  /** Whatever has arrived within `ms` (for requests that must get no answer). */
  async quiet(ms = 200): Promise<string> {
    await new Promise((r) => setTimeout(r, ms));
    const got = this.received.toString("latin1");
    this.received = Buffer.alloc(0);
    return got;
  }

  get closed(): boolean {
    return this.ended;
  }

  close(): void {
    this.socket.destroy();
  }
}

/** A free TCP port on 127.0.0.1 (for programs that cannot be told to pick one). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (typeof address !== "object" || address === null) throw new Error("no port");
  return address.port;
}

/** Whether a program is installed (found on PATH and runs). */
export function installed(program: string, args: string[] = ["--help"]): boolean {
  const r = spawnSync(program, args, { stdio: "ignore", timeout: 5000 });
  return r.error === undefined;
}

/** Debian's memcached on a free port, the reference server (`extra`: more of its options); stop() ends it. */
export async function startReferenceMemcached(threads = 1, extra: readonly string[] = []): Promise<{ port: number; process: ChildProcess; stop(): Promise<void> }> {
  const port = await freePort();
  const args = ["-p", String(port), "-U", "0", "-l", "127.0.0.1", "-t", String(threads), "-m", "64", ...extra];
  if (process.getuid?.() === 0) args.push("-u", "root");
  const child = spawn("memcached", args, { stdio: "ignore" });
  const stop = async (): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    child.kill("SIGTERM");
    await Promise.race([exited, new Promise((r) => setTimeout(r, 3000))]);
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  };
  // Ready once it accepts.
  const deadline = Date.now() + 5000;
  for (;;) {
    try {
      const c = await RawClient.open(port, "127.0.0.1", 1000);
      c.close();
      break;
    } catch (e) {
      if (Date.now() > deadline || child.exitCode !== null) {
        await stop();
        throw e;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  return { port, process: child, stop };
}

