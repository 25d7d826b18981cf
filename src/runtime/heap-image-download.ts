/**
 * GET /v1/heap/image for the admin server, with memory bounded whatever
 * the clients do. Thirty clients that asked for the image and never read
 * it would pin thirty copies (1.2 GB with a 40 MB image, measured) if each
 * response held its own copy until the socket took it.
 *
 * An image is one snapshot: its header's CRC covers the whole body and the
 * shards keep writing, so it cannot be streamed straight from the live
 * heap. So:
 *   - downloads that start within SHARE_MS of a snapshot still being sent
 *     share it (one buffer, however many readers);
 *   - at most MAX_DOWNLOADS run at once; beyond that, 503 with Retry-After
 *     (nothing is encoded for a refused request);
 *   - each download writes in CHUNK_BYTES pieces and waits for 'drain', so
 *     a slow reader holds the snapshot, not further copies of it;
 *   - a download whose reader takes nothing for STALL_MS is cut off, so
 *     clients that never read cannot keep the slots for ever.
 * Memory is therefore at most MAX_DOWNLOADS snapshots (one, when they
 * start together) plus a socket buffer each.
 */
import type { ServerResponse } from "node:http";
import type { SharedHeap } from "../memory/shared-heap.js";
import { encodeHeapImage } from "../memory/heap-image/heap-image-writer.js";

/** Concurrent downloads; an image is a few percent of the heap (46 MB for 4 x 256 MiB), so four stay modest. */
export const MAX_DOWNLOADS = 4;
/** A snapshot this young is good enough for a download that starts now. */
const SHARE_MS = 1000;
/** Large enough that the write loop costs nothing, small enough that a stalled socket holds little beyond the snapshot. */
const CHUNK_BYTES = 256 * 1024;
/** A reader that takes nothing for this long loses its download. */
const STALL_MS = 30_000;

interface Snapshot {
  readonly bytes: Buffer;
  readonly takenAt: number;
  readers: number;
}

export class HeapImageDownloads {
  private running = 0;
  private shared: Snapshot | undefined;

  constructor(private readonly heap: SharedHeap) {}

  /** Send the heap image on `res`; false (nothing sent) when MAX_DOWNLOADS are already running. */
  serve(res: ServerResponse): boolean {
    if (this.running >= MAX_DOWNLOADS) return false;
    this.running++;
    const snapshot = this.take();
    let released = false;
    let stall: NodeJS.Timeout | undefined;
    const release = (): void => {
      if (released) return;
      released = true;
      clearTimeout(stall);
      this.running--;
      if (--snapshot.readers === 0 && this.shared === snapshot) this.shared = undefined;
    };
    res.once("close", release);
    res.writeHead(200, {
      "content-type": "application/octet-stream",
      "content-length": snapshot.bytes.length,
      "cache-control": "no-store",
    });
    let at = 0;
    const pump = (): void => {
      clearTimeout(stall);
      while (at < snapshot.bytes.length) {
        const chunk = snapshot.bytes.subarray(at, at + CHUNK_BYTES);
        at += chunk.length;
        if (!res.write(chunk)) {
          stall = setTimeout(() => res.destroy(), STALL_MS);
          stall.unref();
          res.once("drain", pump);
          return;
        }
      }
      res.end();
    };
    pump();
    return true;
  }

  /** The snapshot to send: the one being sent, when it is young enough, else a new one. */
  private take(): Snapshot {
    const now = performance.now();
    if (this.shared === undefined || now - this.shared.takenAt > SHARE_MS) {
      this.shared = { bytes: encodeHeapImage(this.heap), takenAt: now, readers: 0 };
    }
    this.shared.readers++;
    return this.shared;
  }
}
