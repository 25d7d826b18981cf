/**
 * CRC-32 (IEEE 802.3, zlib's and PNG's) of the heap image's body.
 *
 * zlib.crc32 arrived in Node 20.15; the package runs on Node 20.0 and up,
 * and a named import of it stops the whole module graph from loading on
 * 20.0-20.14 ("does not provide an export named 'crc32'"). So zlib's is
 * looked up on the namespace and used where it exists (about 7x faster),
 * and this table-driven one, byte at a time, does the work elsewhere.
 * Measured on a 2-core VM: 8 MiB in 21-29 ms here (~330 MB/s), 3.8 ms with
 * zlib's; an image is about 1/27 of its heap, so a 1 GiB heap's takes
 * some 100 ms more on an old Node, once per save or read.
 */
import * as zlib from "node:zlib";

/** The reflected polynomial 0xEDB88320's table: the CRC of each byte value. */
const TABLE = ((): Int32Array => {
  const t = new Int32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c;
  }
  return t;
})();

/** CRC-32 of `bytes`, computed here (the fallback; exported for its test against zlib's). */
export function tableCrc32(bytes: Uint8Array): number {
  let c = -1;
  for (let i = 0; i < bytes.length; i++) c = TABLE[(c ^ bytes[i]!) & 0xff]! ^ (c >>> 8);
  return (c ^ -1) >>> 0;
}

/** zlib.crc32 where this Node has it (20.15 on). */
const native = (zlib as { crc32?: (data: Uint8Array) => number }).crc32;

/** CRC-32 of `bytes` as an unsigned 32-bit number, as zlib.crc32(bytes) gives it. */
export const crc32: (bytes: Uint8Array) => number = typeof native === "function" ? (bytes) => native(bytes) : tableCrc32;
