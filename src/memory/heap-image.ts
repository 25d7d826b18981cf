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
 * damaged file is refused with a HeapFormatError, as is a foreign one.
 *
 * This file reads images; heap-image-writer.ts writes them. They are two
 * files because SharedHeap.saveImage writes an image and reading one
 * builds a SharedHeap: one file doing both would import shared-heap.ts
 * while shared-heap.ts imports it, an import circle.
 */
import { readFile } from "node:fs/promises";
import { crc32 } from "node:zlib";
import { HeapFormatError } from "../errors.js";
import { HEAP_HEADER_BYTES } from "./layout.js";
import { IMAGE_HEADER_BYTES as HEADER_BYTES, IMAGE_MAGIC as MAGIC, IMAGE_VERSION as VERSION } from "./heap-image-writer.js";
import { SharedHeap } from "./shared-heap.js";

/** A heap rebuilt from an image's bytes; HeapFormatError for anything that is not a whole, valid image. */
export function decodeHeapImage(bytes: Uint8Array, name = "image"): SharedHeap {
  const fail = (why: string): never => {
    throw new HeapFormatError(`${name} is not a shardheap heap image: ${why}`);
  };
  const b = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (b.length < HEADER_BYTES) fail(`${b.length} bytes is shorter than its header`);
  if (b.toString("latin1", 0, 8) !== MAGIC) fail("wrong magic");
  if (b.readUInt32LE(8) !== VERSION) fail(`version ${b.readUInt32LE(8)} is not supported (this is version ${VERSION})`);
  const chunks = b.readUInt32LE(12);
  const total = b.readDoubleLE(16);
  if (!Number.isSafeInteger(total) || total < HEAP_HEADER_BYTES || total > 2 ** 32) fail(`bad heap size ${total}`);
  const body = b.subarray(HEADER_BYTES);
  if (crc32(body) !== b.readUInt32LE(24)) fail("checksum mismatch (truncated or damaged)");
  const buffer = new SharedArrayBuffer(total);
  const target = new Uint8Array(buffer);
  let at = 0;
  for (let i = 0; i < chunks; i++) {
    if (at + 16 > body.length) fail("truncated chunk table");
    const offset = body.readDoubleLE(at);
    const length = body.readDoubleLE(at + 8);
    if (!Number.isSafeInteger(offset) || !Number.isSafeInteger(length) || offset < 0 || length < 0 || offset + length > total || at + 16 + length > body.length) {
      fail(`chunk ${i} is out of bounds`);
    }
    target.set(body.subarray(at + 16, at + 16 + length), offset);
    at += 16 + length;
  }
  if (at !== body.length) fail("trailing bytes after the last chunk");
  return SharedHeap.attach(buffer);
}

/** Read an image file; HeapFormatError when it is not one. */
export async function readHeapImage(path: string): Promise<SharedHeap> {
  return decodeHeapImage(await readFile(path), path);
}
