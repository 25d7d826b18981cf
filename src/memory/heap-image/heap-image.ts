/**
 * Heap images: what a report needs of a heap, saved to a file and read back
 * without the process that wrote it (`shardheap report FILE`). An image
 * holds the heap header and, per shard, everything before its object pages
 * (shard header, page metadata, bitmaps, the profiler's tables), not the
 * objects themselves: statistics, diagnostics and profiles read only those.
 *
 *   "SHARDIMG" | u32 version | u32 chunks | f64 heap bytes | u32 crc32 | u32 0
 *   then per chunk: f64 offset | f64 length | bytes
 *
 * The CRC-32 covers everything after the 32-byte header, so a truncated or
 * damaged file is refused with a HeapFormatError, as is a foreign one. A
 * valid CRC proves nothing about intent, so a file is also checked against
 * the format before anything it declares is believed (decodeHeapImage).
 *
 * This file reads images; heap-image-writer.ts writes them (SharedHeap
 * reaches the writer through the allocator's hooks, hooks.ts). Reading one
 * builds a SharedHeap, so this file plugs the profiler and the writer in
 * first, as every maker of a heap does.
 */
import { constants } from "node:fs";
import { open } from "node:fs/promises";
import { HeapFormatError } from "../../errors.js";
import { plural } from "../../units.js";
import { crc32 } from "./crc32.js";
import { IMAGE_HEADER_BYTES as HEADER_BYTES, IMAGE_MAGIC as MAGIC, IMAGE_VERSION as VERSION, chunksOfGeometry } from "./heap-image-writer.js";
import { HEAP_HEADER_BYTES, H_PROF_SITES, MAX_HEAP_BYTES } from "../layout.js";
import { regionProblem } from "./region-validation.js";
import { heapPeakProblem } from "../profiler/peaks.js";
import { MAX_SHARDS, SharedHeap, headerFields, headerProblem, type HeapHeader } from "../shared-heap.js";
import "../profiler/plug-in.js";
import "./plug-in.js";

/**
 * The largest heap an image may rebuild, per byte of image. A valid image
 * holds every region's metadata, which is at least 1/27 of the region
 * (161 bytes of page state per 4 KiB page plus the profiler's tables;
 * regionLayout over shard sizes from 128 KiB to 4 GiB gives at most 26.4,
 * at 4 GiB shards with a one-site profiler), so a declared heap size
 * beyond this is a lie, refused before anything is allocated.
 */
export const MAX_HEAP_BYTES_PER_IMAGE_BYTE = 32;

/**
 * A heap rebuilt from an image's bytes; HeapFormatError, with what is wrong,
 * for anything that is not a whole, valid image. Nothing in the file is
 * trusted: the chunk table must be exactly the one encodeHeapImage writes
 * for the geometry the heap header declares (so the buffer allocated is
 * proportional to the file), and every table the readers follow (the
 * shard headers, page metadata, counters and the profiler's sites, frames
 * and strings) is checked against its bounds before the heap is returned.
 */
export function decodeHeapImage(bytes: Uint8Array, name = "image"): SharedHeap {
  const fail = (why: string): never => {
    throw new HeapFormatError(`${name} is not a shardheap heap image: ${why}`);
  };
  const b = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (b.length < HEADER_BYTES) fail(`${b.length} bytes is shorter than its header`);
  if (b.toString("latin1", 0, 8) !== MAGIC) fail("wrong magic");
  if (b.readUInt32LE(8) !== VERSION) fail(`version ${b.readUInt32LE(8)} is not supported (this is version ${VERSION})`);
  if (b.readUInt32LE(28) !== 0) fail(`reserved header word is ${b.readUInt32LE(28)}, not 0`);
  const body = b.subarray(HEADER_BYTES);
  if (crc32(body) !== b.readUInt32LE(24)) fail("checksum mismatch (truncated or damaged)");
  const total = b.readDoubleLE(16);
  if (!Number.isSafeInteger(total) || total < HEAP_HEADER_BYTES || total > MAX_HEAP_BYTES) fail(`bad heap size ${total}`);
  if (total > MAX_HEAP_BYTES_PER_IMAGE_BYTE * b.length) fail(`a heap of ${total} bytes cannot have a ${b.length}-byte image`);
  const chunks = readChunkTable(body, b.readUInt32LE(12), fail);
  const geometry = geometryOf(body.subarray(chunks[0]!.at, chunks[0]!.at + chunks[0]!.length), fail);
  if (HEAP_HEADER_BYTES + geometry.shards * geometry.shardBytes !== total) {
    fail(`heap size ${total} disagrees with its header (${plural(geometry.shards, "shard")} of ${geometry.shardBytes} bytes)`);
  }
  const expected = chunksOfGeometry(geometry.shards, geometry.shardBytes, geometry.profilerSites, geometry.version);
  if (chunks.length !== expected.length) fail(`${chunks.length} chunks, a heap of ${plural(geometry.shards, "shard")} has ${expected.length}`);
  expected.forEach(([offset, length], i) => {
    if (chunks[i]!.offset !== offset || chunks[i]!.length !== length) {
      fail(`chunk ${i} holds bytes ${chunks[i]!.offset}+${chunks[i]!.length}, the layout puts ${offset}+${length} there`);
    }
  });
  const buffer = new SharedArrayBuffer(total);
  const target = new Uint8Array(buffer);
  for (const c of chunks) target.set(body.subarray(c.at, c.at + c.length), c.offset);
  let heap: SharedHeap;
  try {
    heap = SharedHeap.attach(buffer);
  } catch (e) {
    return fail((e as Error).message);
  }
  const peak = heapPeakProblem(heap.regions[0]!.f64);
  if (peak) fail(peak);
  for (const r of heap.regions) {
    const problem = regionProblem(r, heap.shardBytes, heap.profilerSites, heap.regions);
    if (problem) fail(`shard ${r.id}: ${problem}`);
  }
  return heap;
}

interface Chunk {
  offset: number;
  length: number;
  /** Where its bytes start in the body. */
  at: number;
}

/** The chunk table, each entry inside the body and the entries filling it exactly. */
function readChunkTable(body: Buffer, count: number, fail: (why: string) => never): Chunk[] {
  // One chunk for the heap header and one per shard.
  if (count < 2 || count > 1 + MAX_SHARDS) fail(`${count} chunks (a heap image has 2 to ${1 + MAX_SHARDS})`);
  const chunks: Chunk[] = [];
  let at = 0;
  for (let i = 0; i < count; i++) {
    if (at + 16 > body.length) fail(`chunk table ends after ${i} of ${count} chunks`);
    const offset = body.readDoubleLE(at);
    const length = body.readDoubleLE(at + 8);
    if (!Number.isSafeInteger(offset) || !Number.isSafeInteger(length) || offset < 0 || length < 0 || at + 16 + length > body.length) {
      fail(`chunk ${i} (offset ${offset}, length ${length}) does not fit the file`);
    }
    chunks.push({ offset, length, at: at + 16 });
    at += 16 + length;
  }
  if (at !== body.length) fail(`${body.length - at} trailing bytes after the last chunk`);
  return chunks;
}

/**
 * Shards, shard size and profiler capacity from the heap header's bytes,
 * checked as SharedHeap.attach checks them, before any buffer is made for
 * them or any layout computed from them.
 */
function geometryOf(header: Buffer, fail: (why: string) => never): HeapHeader {
  if (header.length < 4 * (H_PROF_SITES + 1)) fail(`the first chunk (${header.length} bytes) is not a heap header`);
  const words = Array.from({ length: H_PROF_SITES + 1 }, (_, i) => header.readInt32LE(4 * i));
  const problem = headerProblem(words);
  if (problem) fail(problem);
  return headerFields(words);
}

/**
 * The largest file read as an image: 1.25 GiB. An image holds a heap's
 * metadata, not its objects, and the largest any heap has is 1.13 GiB
 * (1009 shards of 4.06 MiB whose profilers keep the most sites a shard
 * may, maxProfilerSites: a quarter of each shard). Under the 2 GiB that
 * one readFile reads.
 */
export const MAX_IMAGE_FILE_BYTES = 1280 << 20;

/**
 * Read an image file; HeapFormatError when it is not one. Only a regular
 * file of at most MAX_IMAGE_FILE_BYTES is read (opened non-blocking, so a
 * FIFO cannot hang it, and checked once open): /dev/zero or a FIFO given as
 * an image is refused, not read forever.
 */
export async function readHeapImage(path: string): Promise<SharedHeap> {
  const handle = await open(path, constants.O_RDONLY | (constants.O_NONBLOCK ?? 0));
  let bytes: Buffer;
  try {
    const st = await handle.stat();
    if (!st.isFile()) throw new HeapFormatError(`${path} is not a shardheap heap image: not a regular file`);
    if (st.size > MAX_IMAGE_FILE_BYTES) {
      throw new HeapFormatError(`${path} is not a shardheap heap image: ${st.size} bytes is more than any heap's image (${MAX_IMAGE_FILE_BYTES})`);
    }
    bytes = await handle.readFile();
  } finally {
    await handle.close();
  }
  return decodeHeapImage(bytes, path);
}
