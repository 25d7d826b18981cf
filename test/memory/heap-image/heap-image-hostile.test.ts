/**
 * Heap images with a valid CRC but hostile tables: a fuzz test in a child
 * process with a small V8 heap (an unbounded allocation fails it instead of
 * hanging the runner), one case per class of attack found, `shardheap
 * report` exiting 2 with one line, and images of a running heap still read.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { crc32 } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HeapFormatError, SharedHeap, decodeHeapImage } from "../../../src/index.js";
// Shards run the built package (worker threads load dist/).
import { decodeHeapImage as decodeBuilt } from "../../../dist/index.js";
import { encodeHeapImage as encodeBuilt } from "../../../dist/memory/heap-image/heap-image-writer.js";
import {
  C_BASE,
  C_FREES,
  C_RECLAIMS,
  FRAME_STRIDE,
  FR_NAME_LENGTH,
  FR_URL,
  PM_SPAN_PAGES,
  POOL_STRIDE,
  P_PAGES_IN_USE,
  RATE_EPOCHS,
  SITE_STRIDE,
  SRF_ALLOC_SIZE,
  SRF_COUNT,
  SRF_SIZE,
  SR_FRAMES,
  SR_LABELS,
  SR_FRAME_COUNT,
  S_POOLS,
  S_PROF_FRAMES,
  S_PROF_FULL,
  S_PROF_MAX_SITES,
  S_PROF_OFFSET,
  S_PROF_RATE,
  S_PROF_SITES,
  H_PROF_SITES,
  H_VERSION,
  defaultProfilerSites,
  regionLayout,
} from "../../../src/memory/layout.js";
import { MAX_HEAP_BYTES_PER_IMAGE_BYTE, MAX_IMAGE_FILE_BYTES } from "../../../src/memory/heap-image/heap-image.js";
import { encodeHeapImage } from "../../../src/memory/heap-image/heap-image-writer.js";
import { startSmp } from "../../helpers.js";

const cli = fileURLToPath(new URL("../../../dist/cli.js", import.meta.url));
const fuzzer = fileURLToPath(new URL("../../fixtures/image-fuzz.mjs", import.meta.url));
const SHARD_BYTES = 1 << 20;

let dir: string;
let original: Buffer;
beforeAll(() => {
  process.env.SHARDHEAP_LOG = "silent";
  dir = mkdtempSync(join(tmpdir(), "shardheap-hostile-"));
  const heap = SharedHeap.create({ shards: 2, shardBytes: SHARD_BYTES });
  const a = heap.shard(1);
  a.setHeapProfilingEnabled(true);
  for (let i = 0; i < 20; i++) a.malloc(64 + i * 8);
  a.malloc(40_000);
  original = encodeHeapImage(heap);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Where heap byte `offset` sits in the image file (walking its chunk table). */
function fileOffset(image: Buffer, offset: number): number {
  for (let at = 32, i = 0; i < image.readUInt32LE(12); i++) {
    const start = image.readDoubleLE(at);
    const length = image.readDoubleLE(at + 8);
    if (offset >= start && offset < start + length) return at + 16 + offset - start;
    at += 16 + length;
  }
  throw new Error(`heap offset ${offset} is not in the image`);
}

/** Shard 1's places: a header slot, a pool slot, a page record, the profiler's records and strings (heap offsets). */
const layout = regionLayout(1, SHARD_BYTES, defaultProfilerSites(SHARD_BYTES));
const headerSlot = (slot: number): number => layout.base + 4 * slot;
const profiler = layout.base + layout.profilerOffset;
const siteRecord = (site: number): number => profiler + RATE_EPOCHS * 8 + site * SITE_STRIDE * 4;
const frameRecord = (frame: number): number => profiler + RATE_EPOCHS * 8 + layout.profiler.sites * SITE_STRIDE * 4 + frame * FRAME_STRIDE * 4;
const stringBytes = frameRecord(layout.profiler.frames);

/** The image with `edit` applied and its CRC recomputed, as an attacker would. */
function crafted(edit: (b: Buffer, at: (heapOffset: number) => number) => void, from = original): Buffer {
  const b = Buffer.from(from);
  edit(b, (offset) => fileOffset(b, offset));
  if (b.length >= 32) b.writeUInt32LE(crc32(b.subarray(32)), 24);
  return b;
}
const i32At = (heapOffset: number, value: number) => (b: Buffer, at: (o: number) => number) => b.writeInt32LE(value, at(heapOffset));
const f64At = (heapOffset: number, value: number) => (b: Buffer, at: (o: number) => number) => b.writeDoubleLE(value, at(heapOffset));

/** Each class of hostile image found by the fuzz test and the attack report, with the message it gets. */
function hostileImages(): Array<[what: string, image: Buffer, message: RegExp]> {
  const thirtyTwoBytes = Buffer.alloc(32);
  thirtyTwoBytes.write("SHARDIMG", 0, "latin1");
  thirtyTwoBytes.writeUInt32LE(1, 8);
  thirtyTwoBytes.writeDoubleLE(2 ** 32, 16); // "a 4 GiB heap", no chunks; crc32 of nothing is 0
  // Frame 0's name may be empty ("" for an anonymous function); its url never is.
  const urlOfFrame0 = original.readInt32LE(fileOffset(original, frameRecord(0) + 4 * FR_URL));
  return [
    ["a 32-byte file declaring a 4 GiB heap", thirtyTwoBytes, /a heap of 4294967296 bytes cannot have a 32-byte image/],
    ["a reserved header word that is not 0", crafted((b) => b.writeUInt32LE(7, 28)), /reserved header word is 7, not 0/],
    ["a chunk count of 2^32-1", crafted((b) => b.writeUInt32LE(0xffffffff, 12)), /4294967295 chunks/],
    ["a chunk placed elsewhere than the layout says", crafted((b) => b.writeDoubleLE(2 ** 20 + 4096, 32 + 16 + 4096)), /chunk 1 holds bytes 1052672\+\d+, the layout puts 4096\+/],
    ["a heap size its header disagrees with", crafted((b) => b.writeDoubleLE(original.readDoubleLE(16) + 2 * SHARD_BYTES, 16)), /disagrees with its header \(2 shards/],
    ["2^31-1 sites", crafted(i32At(headerSlot(S_PROF_SITES), 2 ** 31 - 1)), /shard 1: 2147483647 profiler sites/],
    ["2^31-1 frames", crafted(i32At(headerSlot(S_PROF_FRAMES), 2 ** 31 - 1)), /shard 1: 2147483647 profiler frames/],
    ["profiler tables moved", crafted(i32At(headerSlot(S_PROF_OFFSET), layout.profilerOffset + 4096)), /profiler offset is \d+, the layout says/],
    ["a site of 2^30 frames", crafted(i32At(siteRecord(1) + 4 * SR_FRAME_COUNT, 2 ** 30)), /site 1 has 1073741824 frames/],
    ["a site naming a frame that is not there", crafted(i32At(siteRecord(1) + 4 * SR_FRAMES, 9999)), /site 1 names frame 9999/],
    ["a site naming a label set that is not there", crafted(i32At(siteRecord(1) + 4 * SR_LABELS, 9999)), /site 1 names label set 9998/],
    ["a site whose label set is a stack frame", crafted(i32At(siteRecord(1) + 4 * SR_LABELS, 1)), /site 1's label set \(frame 0\) is not one/],
    ["a name longer than the string table", crafted(i32At(frameRecord(0) + 4 * FR_NAME_LENGTH, 2 ** 31 - 1)), /frame 0's name \(bytes \d+\+2147483647\) is outside/],
    ["a negative string offset", crafted(i32At(frameRecord(0) + 4 * FR_URL, -17_979_583)), /frame 0's url \(bytes -17979583\+/],
    ["a url that is not UTF-8", crafted((b, at) => (b[at(stringBytes + urlOfFrame0)] = 0xff)), /frame 0's url is not UTF-8/],
    ["a NaN live size", crafted(f64At(siteRecord(1) + 8 * SRF_SIZE, NaN)), /site 1's size is NaN/],
    ["a negative live count", crafted(f64At(siteRecord(1) + 8 * SRF_COUNT, -1)), /site 1's count is -1/],
    ["an infinite cumulative size", crafted(f64At(siteRecord(1) + 8 * SRF_ALLOC_SIZE, Infinity)), /site 1's allocSize is Infinity/],
    ["a negative sample rate", crafted(i32At(headerSlot(S_PROF_RATE), -5)), /sample rate -5/],
    ["a NaN shard counter", crafted(f64At(layout.base + 8 * (C_BASE + C_RECLAIMS), NaN)), /counter 4 is NaN/],
    ["more frees than mallocs", crafted(f64At(layout.base + 8 * (C_BASE + C_FREES), 1e6)), /1000000 frees but \d+ mallocs/],
    ["a span longer than the shard", crafted(i32At(layout.base + layout.metaOffset + 4 * PM_SPAN_PAGES, 2 ** 31 - 1)), /page 0 heads a span of 2147483647 pages/],
    ["a pool holding negative pages", crafted(i32At(layout.base + 4 * (S_POOLS + 3 * POOL_STRIDE + P_PAGES_IN_USE), -9)), /size-class pool 3: -9 pages in use/],
    // The profiler's capacity (heapprofSites) in the heap header: the layout of every region follows from it.
    ["a heap header keeping 0 profiler sites", crafted(i32At(4 * H_PROF_SITES, 0)), /corrupt shardheap header: a profiler of 0 sites \(shards of 1048576 bytes hold 1 to 408\)/],
    ["a heap header keeping -1 profiler sites", crafted(i32At(4 * H_PROF_SITES, -1)), /a profiler of -1 sites/],
    ["a heap header keeping 2^31-1 profiler sites", crafted(i32At(4 * H_PROF_SITES, 2 ** 31 - 1)), /a profiler of 2147483647 sites \(shards of 1048576 bytes hold 1 to 408\)/],
    // One site fewer: its tables would still end on the same page, so only the profiler's own check can tell.
    ["a heap header keeping one site fewer than its tables were made for", crafted(i32At(4 * H_PROF_SITES, defaultProfilerSites(SHARD_BYTES) - 1)), /shard 0: profiler site capacity is 65, the layout says 64/],
    ["a heap header keeping 100 sites more than its tables were made for", crafted(i32At(4 * H_PROF_SITES, defaultProfilerSites(SHARD_BYTES) + 100)), /chunk 1 holds bytes 4096\+\d+, the layout puts 4096\+\d+ there/],
    ["a version 3 header (its capacity the shard's) over version 5 tables", crafted(i32At(4 * H_VERSION, 3)), /chunk 1 holds bytes 4096\+\d+, the layout puts 4096\+\d+ there/],
    ["a shard header whose site capacity disagrees with the heap's", crafted(i32At(headerSlot(S_PROF_MAX_SITES), defaultProfilerSites(SHARD_BYTES) + 2)), /shard 1: profiler site capacity is 66, the layout says 65/],
    ["full-table bits naming no table", crafted(i32At(headerSlot(S_PROF_FULL), 8)), /shard 1: full-table bits 8 name no profiler table/],
  ];
}

describe("hostile heap images", () => {
  it("fuzz: every variant of a real image reads and renders every format with sane figures, or is refused; memory stays bounded", () => {
    // 64 MiB of V8 heap: the reader needs a few; a table followed past its bounds needed 1.5 GB.
    const r = spawnSync(process.execPath, ["--max-old-space-size=64", fuzzer, "400", "42"], { encoding: "utf8", timeout: 60_000, killSignal: "SIGKILL" });
    expect(r.status, r.stderr).toBe(0);
    const outcome = JSON.parse(r.stdout.trim().split("\n").pop()!) as { accepted: number; refused: number; messages: Record<string, number>; maxRssBytes: number };
    // Both sides of the property ran, and the refusals cover every kind of table.
    expect(outcome.accepted).toBeGreaterThan(40);
    expect(outcome.refused).toBeGreaterThan(40);
    const kinds = Object.keys(outcome.messages).join("\n");
    for (const kind of [/chunk/, /profiler (sites|frames|string bytes|offset)/, /site N/, /frame N's/, /page N/, /pool N/, /counter N/]) expect(kinds).toMatch(kind);
    expect(outcome.maxRssBytes).toBeLessThan(512 << 20);
  });

  it("refuses each class of hostile image with a specific HeapFormatError, before allocating from what it declares", () => {
    const RealSharedArrayBuffer = globalThis.SharedArrayBuffer;
    let largest = 0;
    globalThis.SharedArrayBuffer = class extends RealSharedArrayBuffer {
      constructor(length: number) {
        largest = Math.max(largest, length);
        super(length);
      }
    } as SharedArrayBufferConstructor;
    try {
      for (const [what, image, message] of hostileImages()) {
        largest = 0;
        const error = (() => {
          try {
            decodeHeapImage(image);
          } catch (e) {
            return e;
          }
          return undefined;
        })();
        expect(error, what).toBeInstanceOf(HeapFormatError);
        expect((error as Error).message, what).toMatch(/^image is not a shardheap heap image: /);
        expect((error as Error).message, what).toMatch(message);
        expect(largest, what).toBeLessThanOrEqual(MAX_HEAP_BYTES_PER_IMAGE_BYTE * image.length);
      }
    } finally {
      globalThis.SharedArrayBuffer = RealSharedArrayBuffer;
    }
    // The untouched image still reads, so the refusals above are the edits'.
    expect(decodeHeapImage(original).heapProfile(1).totalCount).toBe(21);
  });

  it("shardheap report exits 2 with one line for each of them", () => {
    for (const [what, image, message] of hostileImages().filter((_, i) => i % 3 === 0)) {
      const path = join(dir, "hostile.img");
      writeFileSync(path, image);
      const r = spawnSync(process.execPath, [cli, "report", path], { encoding: "utf8", timeout: 20_000, killSignal: "SIGKILL" });
      expect(r.status, `${what}: ${r.stderr}`).toBe(2);
      expect(r.stderr, what).toMatch(/^shardheap: [^\n]+\n$/);
      expect(r.stderr, what).toMatch(message);
      expect(r.stdout, what).toBe("");
    }
  });

  it("shardheap report refuses a device, a FIFO, a directory or an oversized file without reading it", () => {
    const fifo = join(dir, "fifo.img");
    execFileSync("mkfifo", [fifo]);
    const huge = join(dir, "huge.img");
    writeFileSync(huge, original);
    truncateSync(huge, MAX_IMAGE_FILE_BYTES + 1); // sparse: nothing to read unless the reader tries
    for (const [path, message] of [
      ["/dev/zero", /not a regular file/],
      [fifo, /not a regular file/],
      [dir, /not a regular file/],
      [huge, new RegExp(`${MAX_IMAGE_FILE_BYTES + 1} bytes is more than any heap's image`)],
    ] as const) {
      const r = spawnSync(process.execPath, [cli, "report", path], { encoding: "utf8", timeout: 20_000, killSignal: "SIGKILL" });
      expect(r.status, `${path}: ${r.stderr}`).toBe(2);
      expect(r.stderr, path).toMatch(/^shardheap: [^\n]+\n$/);
      expect(r.stderr, path).toMatch(message);
    }
  });

  it("images of a heap whose shards are allocating and freeing still read", async () => {
    const smp = await startSmp({ shards: 2, memoryPerShard: "8MiB", heapprof: 256 });
    let running = true;
    const churn = async (shard: number): Promise<void> => {
      while (running) {
        const ptrs = await smp.submitTo(shard, "allocMany", { count: 200, size: 48 + shard * 700 });
        await smp.submitTo(1 - shard, "freeAll", ptrs); // cross-shard frees too
      }
    };
    const churning = Promise.all([churn(0), churn(1)]);
    // At least 30 images, and on until the shards have done 10k allocations
    // between the first image and the last (a slow machine takes longer).
    const deadline = Date.now() + 40_000;
    let first = -1;
    let images = 0;
    try {
      for (;;) {
        const heap = decodeBuilt(encodeBuilt(smp.heap));
        const mallocs = heap.stats().mallocs;
        if (first < 0) first = mallocs;
        images++;
        if ((images >= 30 && mallocs - first > 10_000) || Date.now() > deadline) break;
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    } finally {
      running = false;
      await churning;
    }
    expect(images).toBeGreaterThanOrEqual(30);
    expect(smp.stats().mallocs - first, "the images were taken while the shards worked").toBeGreaterThan(10_000);
  });
});
