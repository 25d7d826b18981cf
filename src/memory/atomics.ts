/**
 * The read-modify-writes the claims and chains make (cross-shard.ts), as
 * WebAssembly atomics where the heap's memory allows it, else as Atomics.
 *
 * Why WebAssembly: in Node 20's V8 an Atomics call is a builtin call, not
 * an instruction: Atomics.or costs ~123 machine instructions (callgrind,
 * one call in a loop) and ~20 ns here; the same `i32.atomic.rmw.or` from a
 * WebAssembly function, called from optimized JavaScript, costs ~44
 * instructions and ~7.6 ns. A free makes one of them (its claim), so this
 * is most of what exactness costs the malloc/free pair.
 *
 * WebAssembly can only address a WebAssembly.Memory, and a memory cannot be
 * made over an existing SharedArrayBuffer, so SharedHeap.create makes the
 * heap's buffer as a shared WebAssembly.Memory (its `buffer` is an ordinary,
 * fixed-length SharedArrayBuffer, rounded up to 64 KiB pages). A thread that
 * attaches with that Memory gets these; one that attaches with the buffer
 * alone gets the Atomics versions, which operate on the same words with the
 * same effect (both are the processor's atomic instructions), only slower.
 *
 * Every operation takes a byte address (a multiple of 4) and returns the
 * word's previous value as a signed 32-bit integer, as Atomics does on an
 * Int32Array. Addresses are below 2^32: WebAssembly reads its i32 address
 * operand as unsigned, so an address past 2^31 arrives intact.
 */

import { assembleModule, type WasmFunction } from "./wasm-assembler.js";

/**
 * The part of WebAssembly used here. TypeScript declares WebAssembly only in
 * its DOM and web-worker libraries, which a Node package should not pull
 * into its users' builds, so the few members are declared here.
 */
interface WebAssemblyApi {
  Memory: new (descriptor: { initial: number; maximum: number; shared: boolean }) => WasmMemory;
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object, imports: object) => { exports: object };
}
const WA = (globalThis as unknown as { WebAssembly: WebAssemblyApi }).WebAssembly;

/** A WebAssembly.Memory, as far as a heap uses one: its buffer. */
export interface WasmMemory {
  readonly buffer: ArrayBuffer | SharedArrayBuffer;
}

/** Whether `x` is a WebAssembly.Memory. */
export function isWasmMemory(x: unknown): x is WasmMemory {
  return x instanceof (WA.Memory as unknown as new () => object);
}

/** The atomic operations on the heap's 32-bit words. */
export interface HeapAtomics {
  /** The heap-wide peak's sum (peaks.ts): every profiled allocation and free adds to it. */
  add(address: number, value: number): number;
  or(address: number, bits: number): number;
  and(address: number, bits: number): number;
  compareExchange(address: number, expected: number, replacement: number): number;
  exchange(address: number, value: number): number;
}

/** A heap's buffer, and the WebAssembly.Memory it is the buffer of (when it is one). */
export interface HeapMemory {
  readonly buffer: SharedArrayBuffer;
  readonly memory: WasmMemory | undefined;
}

const WASM_PAGE_BYTES = 65536;

/**
 * A fresh zeroed buffer of at least `bytes` bytes for a heap: a shared
 * WebAssembly.Memory's when this runtime makes one, else a plain
 * SharedArrayBuffer of exactly `bytes`.
 */
export function allocateHeapMemory(bytes: number): HeapMemory {
  const pages = Math.ceil(bytes / WASM_PAGE_BYTES);
  try {
    const memory = new WA.Memory({ initial: pages, maximum: pages, shared: true });
    if (memory.buffer instanceof SharedArrayBuffer) return { buffer: memory.buffer, memory };
  } catch {
    // No shared WebAssembly memory here (or not this large): Atomics will do.
  }
  return { buffer: new SharedArrayBuffer(bytes), memory: undefined };
}

/** The heap's atomics: WebAssembly's over `memory`, when given, else Atomics over `buffer`. */
export function heapAtomics(buffer: SharedArrayBuffer, memory: WasmMemory | undefined): HeapAtomics {
  if (memory !== undefined) {
    const e = new WA.Instance(atomicsModule(), { heap: { memory } }).exports as HeapAtomics;
    return { add: e.add, or: e.or, and: e.and, compareExchange: e.compareExchange, exchange: e.exchange };
  }
  const i32 = new Int32Array(buffer);
  return {
    add: (address, value) => Atomics.add(i32, address >>> 2, value),
    or: (address, bits) => Atomics.or(i32, address >>> 2, bits),
    and: (address, bits) => Atomics.and(i32, address >>> 2, bits),
    compareExchange: (address, expected, replacement) => Atomics.compareExchange(i32, address >>> 2, expected, replacement),
    exchange: (address, value) => Atomics.exchange(i32, address >>> 2, value),
  };
}

let compiled: object | undefined;

/**
 * The module, compiled once per thread. In the text format:
 *
 *   (module
 *     (import "heap" "memory" (memory 0 65536 shared))
 *     (func (export "or") (param i32 i32) (result i32)
 *       local.get 0 local.get 1 i32.atomic.rmw.or)
 *     (func (export "add") ...                i32.atomic.rmw.add)
 *     (func (export "and") ...                i32.atomic.rmw.and)
 *     (func (export "exchange") ...           i32.atomic.rmw.xchg)
 *     (func (export "compareExchange") (param i32 i32 i32) (result i32)
 *       local.get 0 local.get 1 local.get 2 i32.atomic.rmw.cmpxchg))
 *
 * The import's limits (0 to 65536 pages) accept any shared memory of any
 * size, so one module serves every heap.
 */
function atomicsModule(): object {
  compiled ??= new WA.Module(encodeAtomicsModule());
  return compiled;
}

/** The binary encoding of the module above (wasm-assembler.ts). */
export function encodeAtomicsModule(): Uint8Array {
  const rmw = (op: "add" | "or" | "and" | "exchange", instruction: string): WasmFunction => ({
    name: op, params: ["address", "value"], result: true, exported: true,
    body: `local.get $address\nlocal.get $value\n${instruction}`,
  });
  return assembleModule({
    functions: [
      rmw("add", "i32.atomic.rmw.add"),
      rmw("or", "i32.atomic.rmw.or"),
      rmw("and", "i32.atomic.rmw.and"),
      rmw("exchange", "i32.atomic.rmw.xchg"),
      {
        name: "compareExchange", params: ["address", "expected", "replacement"], result: true, exported: true,
        body: "local.get $address\nlocal.get $expected\nlocal.get $replacement\ni32.atomic.rmw.cmpxchg",
      },
    ],
  });
}
