/**
 * The heap image's CRC-32 where zlib has none (Node before 20.15:
 * memory/heap-image/crc32.ts): the same value as zlib.crc32 for every length and
 * content, and the function the images use agrees with both.
 */
import { randomBytes } from "node:crypto";
import { crc32 as zlibCrc32 } from "node:zlib";
import { describe, expect, it } from "vitest";
import { crc32, tableCrc32 } from "../../../dist/memory/heap-image/crc32.js";

describe("CRC-32 without zlib's", () => {
  it("matches zlib.crc32 on the check value, empty input, every short length and 1 MiB of random bytes", () => {
    expect(tableCrc32(Buffer.from("123456789"))).toBe(0xcbf43926); // the standard check value
    expect(tableCrc32(new Uint8Array(0))).toBe(0);
    const bytes = randomBytes(1 << 20);
    for (let n = 1; n <= 64; n++) expect(tableCrc32(bytes.subarray(0, n)), `${n} bytes`).toBe(zlibCrc32(bytes.subarray(0, n)));
    expect(tableCrc32(bytes)).toBe(zlibCrc32(bytes));
    expect(tableCrc32(new Uint8Array(1000).fill(0xff))).toBe(zlibCrc32(new Uint8Array(1000).fill(0xff)));
    expect(crc32(bytes)).toBe(zlibCrc32(bytes));
  });
});
