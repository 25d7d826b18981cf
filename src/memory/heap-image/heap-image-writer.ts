/**
 * Heap images, the writing side (the format is drawn in heap-image.ts,
 * which reads them). It needs only the heap's geometry and buffer
 * (hooks.ts ImageSource), not the SharedHeap class: SharedHeap.saveImage
 * reaches it through the hooks (plug-in.ts), and reading an image builds a
 * SharedHeap (heap-image.ts).
 */
import { rename, writeFile } from "node:fs/promises";
import type { ImageSource } from "../hooks.js";
import { HEAP_HEADER_BYTES, regionLayout } from "../layout.js";
import { crc32 } from "./crc32.js";

export const IMAGE_MAGIC = "SHARDIMG";
export const IMAGE_VERSION = 1;
export const IMAGE_HEADER_BYTES = 32;

/**
 * Byte ranges of a heap that an image keeps: the heap header, then each
 * region up to its object pages. The reader demands exactly these.
 */
export function chunksOfGeometry(shards: number, shardBytes: number, profilerSites: number, version: number): Array<[offset: number, length: number]> {
  const chunks: Array<[number, number]> = [[0, HEAP_HEADER_BYTES]];
  for (let id = 0; id < shards; id++) {
    const layout = regionLayout(id, shardBytes, profilerSites, version);
    chunks.push([layout.base, layout.dataOffset]);
  }
  return chunks;
}

/** The image of `heap` as bytes. */
export function encodeHeapImage(heap: ImageSource): Buffer {
  const chunks = chunksOfGeometry(heap.shards, heap.shardBytes, heap.profilerSites, heap.version);
  const body = Buffer.alloc(chunks.reduce((n, [, len]) => n + 16 + len, 0));
  let at = 0;
  for (const [offset, length] of chunks) {
    body.writeDoubleLE(offset, at);
    body.writeDoubleLE(length, at + 8);
    body.set(new Uint8Array(heap.buffer, offset, length), at + 16);
    at += 16 + length;
  }
  const header = Buffer.alloc(IMAGE_HEADER_BYTES);
  header.write(IMAGE_MAGIC, 0, "latin1");
  header.writeUInt32LE(IMAGE_VERSION, 8);
  header.writeUInt32LE(chunks.length, 12);
  header.writeDoubleLE(HEAP_HEADER_BYTES + heap.shards * heap.shardBytes, 16); // the heap, not its buffer's padding
  header.writeUInt32LE(crc32(body), 24);
  return Buffer.concat([header, body]);
}

/** Write `heap`'s image to `path` (through a temporary file, so a reader never sees half of it). */
export async function saveHeapImage(heap: ImageSource, path: string): Promise<void> {
  const temporary = `${path}.${process.pid}.tmp`;
  await writeFile(temporary, encodeHeapImage(heap));
  await rename(temporary, path);
}
