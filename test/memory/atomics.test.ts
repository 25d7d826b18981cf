/**
 * The heap's atomics (memory/atomics.ts): the WebAssembly module is valid,
 * and its operations and the Atomics fallback do the same to the same
 * words, returning the old value, at any address (past 2^31 included).
 */
import { describe, expect, it } from "vitest";
import { allocateHeapMemory, encodeAtomicsModule, heapAtomics, isWasmMemory } from "../../src/memory/atomics.js";

describe("heap atomics", () => {
  it("the module validates", () => {
    const wasm = (globalThis as unknown as { WebAssembly: { validate(b: Uint8Array): boolean } }).WebAssembly;
    expect(wasm.validate(encodeAtomicsModule())).toBe(true);
  });

  it("WebAssembly and Atomics give the same results on the same words", () => {
    const { buffer, memory } = allocateHeapMemory(100_000);
    expect(isWasmMemory(memory)).toBe(true);
    expect(buffer.byteLength % 65536).toBe(0);
    expect(buffer.byteLength).toBeGreaterThanOrEqual(100_000);
    const i32 = new Int32Array(buffer);
    for (const a of [heapAtomics(buffer, memory), heapAtomics(buffer, undefined)]) {
      i32[10] = 0b1010;
      i32[i32.length - 1] = 0;
      expect(a.or(40, 0b0101)).toBe(0b1010);
      expect(i32[10]).toBe(0b1111);
      expect(a.and(40, ~0b0011)).toBe(0b1111);
      expect(i32[10]).toBe(0b1100);
      expect(a.compareExchange(40, 0b1100, -7)).toBe(0b1100);
      expect(a.compareExchange(40, 0b1100, 5)).toBe(-7); // no match: unchanged
      expect(i32[10]).toBe(-7);
      expect(a.exchange(40, 0x80000000)).toBe(-7); // an unsigned value is stored as its 32 bits
      expect(i32[10]).toBe(-0x80000000);
      expect(a.exchange(buffer.byteLength - 4, 3)).toBe(0); // the last word
      expect(i32[i32.length - 1]).toBe(3);
    }
  });
});
