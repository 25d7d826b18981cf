/**
 * GET /v1/heap/image with clients that never read: the server's memory
 * stays bounded (one image per client would be 1.2 GB for 30), other
 * requests still answer, and once the clients go the image is served
 * again, whole and valid.
 */
import { connect, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { decodeHeapImage, serveAdmin, Smp, type AdminServer } from "../dist/index.js";

let smp: Smp;
let admin: AdminServer;
const sockets: Socket[] = [];
beforeAll(async () => {
  process.env.SHARDHEAP_LOG = "silent";
  // An image is the heap's metadata, ~5% of it: 2 x 128 MiB gives ~14 MB,
  // far more than a loopback socket buffers for a reader that never reads.
  smp = await Smp.start({ shards: 2, memoryPerShard: "128MiB" });
  admin = await serveAdmin(smp, { allowHeapImage: true });
});
afterAll(async () => {
  for (const s of sockets) s.destroy();
  await admin?.close();
  await smp?.stop();
});

async function fetchImage(): Promise<{ status: number; bytes: Uint8Array }> {
  const r = await fetch(`${admin.url}/v1/heap/image`, { signal: AbortSignal.timeout(30_000) });
  return { status: r.status, bytes: new Uint8Array(await r.arrayBuffer()) };
}

describe("heap image downloads", () => {
  it("30 clients that never read: memory stays bounded, other requests answer, the image is served again once they go", async () => {
    const first = await fetchImage();
    expect(first.status).toBe(200);
    const imageBytes = first.bytes.length;
    expect(imageBytes).toBeGreaterThan(8 << 20);
    expect(decodeHeapImage(first.bytes).shards).toBe(2);

    const before = process.memoryUsage().arrayBuffers;
    const { port } = new URL(admin.url);
    await Promise.all(
      Array.from({ length: 30 }, () => {
        const socket = connect(Number(port), "127.0.0.1");
        sockets.push(socket);
        socket.on("error", () => undefined);
        socket.pause(); // never read: the server's writes back up
        return new Promise<void>((resolve) => socket.once("connect", () => socket.write(`GET /v1/heap/image HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\n\r\n`, () => resolve())));
      }),
    );
    // Other requests answer while the 30 hang (each answered request is
    // also proof that the server has taken the 30 earlier ones in).
    for (let i = 0; i < 3; i++) {
      const stats = await fetch(`${admin.url}/v1/memory/stats`, { signal: AbortSignal.timeout(10_000) });
      expect(stats.status).toBe(200);
      await stats.arrayBuffer();
    }
    // Every download slot is held by a client that does not read: refused, not queued.
    const busy = await fetch(`${admin.url}/v1/heap/image`, { signal: AbortSignal.timeout(10_000) });
    expect(busy.status).toBe(503);
    expect(busy.headers.get("retry-after")).toBe("1");
    expect((await busy.json()) as unknown).toEqual({ error: expect.stringMatching(/heap image downloads are already running/), code: "ERR_SHARDHEAP_BUSY" });
    // One image per client would be 30 x the image; the server keeps the
    // snapshots its few running downloads share.
    const growth = process.memoryUsage().arrayBuffers - before;
    expect(growth).toBeLessThan(3 * imageBytes);

    for (const s of sockets.splice(0)) s.destroy();
    // The slots come back as the connections close.
    let again = await fetchImage();
    for (let tries = 0; again.status === 503 && tries < 100; tries++) {
      await new Promise((r) => setTimeout(r, 50));
      again = await fetchImage();
    }
    expect(again.status).toBe(200);
    expect(again.bytes.length).toBe(imageBytes);
    expect(decodeHeapImage(again.bytes).shards).toBe(2);
  });
});
