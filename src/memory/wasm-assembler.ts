/**
 * A small assembler from WebAssembly's text form to its binary module
 * format, for the few modules this package writes by hand (atomics.ts:
 * the heap's read-modify-writes; shared-map/atomics.ts: the SharedMap's
 * probe and reference counts). The instructions are written as WAT's flat
 * form, one per line (`local.get $d`, `i32.atomic.load offset=4`,
 * `loop $retry`, `br_if $held`, `end`), so the source a reader checks is
 * the program itself, not a list of opcodes; labels and locals are named
 * and resolved here. Only what those modules use is supported: i32 values
 * (and a few i64 instructions on the stack), one imported shared memory,
 * mutable i32 globals, functions.
 *
 * Why not a WebAssembly toolchain: nothing is compiled at build time
 * (the package ships TypeScript's output only) and no dependency is added;
 * the modules are a few dozen instructions each. The encoding follows the
 * WebAssembly core specification, section 5, and the threads proposal
 * (atomic opcodes after the 0xfe prefix, a shared memory's limits flag 3).
 */

/** A function of the module: i32 parameters and locals by name, an optional i32 result, a flat WAT body. */
export interface WasmFunction {
  readonly name: string;
  readonly params: readonly string[];
  readonly locals?: readonly string[];
  readonly result: boolean;
  /** Exported under its name. */
  readonly exported: boolean;
  readonly body: string;
}

export interface WasmModuleSource {
  /** Mutable i32 globals, initialized to 0, by name. */
  readonly globals?: readonly string[];
  readonly functions: readonly WasmFunction[];
}

const I32 = 0x7f;
const VOID_BLOCK = 0x40;

/** Opcodes of the instructions that take no immediate. */
const PLAIN: Readonly<Record<string, number>> = {
  unreachable: 0x00,
  return: 0x0f,
  drop: 0x1a,
  select: 0x1b,
  else: 0x05,
  "i32.eqz": 0x45,
  "i32.eq": 0x46,
  "i32.ne": 0x47,
  "i32.lt_s": 0x48,
  "i32.lt_u": 0x49,
  "i32.gt_s": 0x4a,
  "i32.gt_u": 0x4b,
  "i32.le_s": 0x4c,
  "i32.le_u": 0x4d,
  "i32.ge_s": 0x4e,
  "i32.ge_u": 0x4f,
  "i32.clz": 0x67,
  "i32.add": 0x6a,
  "i32.sub": 0x6b,
  "i32.mul": 0x6c,
  "i32.and": 0x71,
  "i32.or": 0x72,
  "i32.xor": 0x73,
  "i32.shl": 0x74,
  "i32.shr_s": 0x75,
  "i32.shr_u": 0x76,
  // i64 values live on the stack only (every local is an i32): the pair
  // compareExchange of shared-map/atomics.ts builds its operands there.
  "i64.eq": 0x51,
  "i64.or": 0x84,
  "i64.shl": 0x86,
  "i32.wrap_i64": 0xa7,
  "i64.extend_i32_u": 0xad,
};

/** Memory instructions (a memarg: alignment 2, i.e. 4 bytes, and an offset): [prefix?, opcode]. */
const MEMORY: Readonly<Record<string, readonly number[]>> = {
  "i32.load": [0x28],
  "i32.store": [0x36],
  "i32.atomic.load": [0xfe, 0x10],
  "i32.atomic.store": [0xfe, 0x17],
  "i32.atomic.rmw.add": [0xfe, 0x1e],
  "i32.atomic.rmw.sub": [0xfe, 0x25],
  "i32.atomic.rmw.and": [0xfe, 0x2c],
  "i32.atomic.rmw.or": [0xfe, 0x33],
  "i32.atomic.rmw.xchg": [0xfe, 0x41],
  "i32.atomic.rmw.cmpxchg": [0xfe, 0x48],
  // 8-byte accesses: alignment 3 (an atomic's must be its natural one).
  "i64.atomic.load": [0xfe, 0x11],
  "i64.atomic.rmw.cmpxchg": [0xfe, 0x49],
};

/** Unsigned LEB128. */
export function leb(n: number): number[] {
  const out: number[] = [];
  do {
    let byte = n & 0x7f;
    n >>>= 7;
    if (n !== 0) byte |= 0x80;
    out.push(byte);
  } while (n !== 0);
  return out;
}

/** Signed LEB128 of a 32-bit integer. */
export function sleb(n: number): number[] {
  n |= 0;
  const out: number[] = [];
  for (;;) {
    const byte = n & 0x7f;
    n >>= 7;
    const done = (n === 0 && (byte & 0x40) === 0) || (n === -1 && (byte & 0x40) !== 0);
    out.push(done ? byte : byte | 0x80);
    if (done) return out;
  }
}

const name = (s: string): number[] => [...leb(s.length), ...Buffer.from(s, "latin1")];
const vector = (items: readonly number[][]): number[] => [...leb(items.length), ...items.flat()];
const section = (id: number, body: number[]): number[] => [id, ...leb(body.length), ...body];

/** Encode a module that imports one shared memory as heap.memory (any size: limits 0 to 65536 pages). */
export function assembleModule(source: WasmModuleSource): Uint8Array {
  const globals = source.globals ?? [];
  const fns = source.functions;
  const fnIndex = new Map(fns.map((f, i) => [f.name, i]));
  const signature = (f: WasmFunction): string => `${f.params.length}:${f.result ? 1 : 0}`;
  const signatures = [...new Set(fns.map(signature))];
  const types = signatures.map((s) => {
    const [params, results] = s.split(":").map(Number) as [number, number];
    return [0x60, ...vector(Array.from({ length: params }, () => [I32])), ...vector(Array.from({ length: results }, () => [I32]))];
  });
  const bodies = fns.map((f) => {
    const code = [...encodeLocals(f), ...encodeBody(f, fnIndex, globals), 0x0b];
    return [...leb(code.length), ...code];
  });
  const exportsOf = fns.flatMap((f, i) => (f.exported ? [[...name(f.name), 0x00, ...leb(i)]] : []));
  return new Uint8Array([
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // "\0asm", version 1
    ...section(1, vector(types)),
    // memory import, limits flag 3: shared, with a maximum
    ...section(2, vector([[...name("heap"), ...name("memory"), 0x02, 0x03, ...leb(0), ...leb(65536)]])),
    ...section(3, vector(fns.map((f) => leb(signatures.indexOf(signature(f)))))),
    ...(globals.length === 0 ? [] : section(6, vector(globals.map(() => [I32, 0x01, 0x41, 0x00, 0x0b])))),
    ...section(7, vector(exportsOf)),
    ...section(10, vector(bodies)),
  ]);
}

function encodeLocals(f: WasmFunction): number[] {
  const n = f.locals?.length ?? 0;
  return n === 0 ? leb(0) : [...leb(1), ...leb(n), I32];
}

/** The flat body: one instruction per line; `;;` starts a comment. */
function encodeBody(f: WasmFunction, fnIndex: ReadonlyMap<string, number>, globals: readonly string[]): number[] {
  const locals = [...f.params, ...(f.locals ?? [])];
  const out: number[] = [];
  /** Open blocks, innermost last: their labels (or "" when unnamed). */
  const labels: string[] = [];
  const fail = (line: string, why: string): never => {
    throw new Error(`wasm assembler: ${f.name}: ${why}: ${line}`);
  };
  const indexOf = (list: readonly string[], id: string | undefined, line: string, what: string): number => {
    const i = id === undefined ? -1 : list.indexOf(id.replace(/^\$/, ""));
    return i >= 0 ? i : fail(line, `unknown ${what}`);
  };
  for (const raw of f.body.split("\n")) {
    const line = raw.replace(/;;.*/, "").trim();
    if (line === "") continue;
    const [op, arg, ...rest] = line.split(/\s+/);
    if (rest.length > 0) fail(line, "one instruction per line");
    if (op === undefined) continue;
    if (op === "block" || op === "loop" || op === "if") {
      out.push(op === "block" ? 0x02 : op === "loop" ? 0x03 : 0x04, VOID_BLOCK);
      labels.push(arg?.replace(/^\$/, "") ?? "");
    } else if (op === "end") {
      if (labels.pop() === undefined) fail(line, "end without a block");
      out.push(0x0b);
    } else if (op === "br" || op === "br_if") {
      const depth = labels.length - 1 - labels.lastIndexOf(arg?.replace(/^\$/, "") ?? "\0");
      if (depth >= labels.length) fail(line, "unknown label");
      out.push(op === "br" ? 0x0c : 0x0d, ...leb(depth));
    } else if (op === "local.get" || op === "local.set" || op === "local.tee") {
      out.push(op === "local.get" ? 0x20 : op === "local.set" ? 0x21 : 0x22, ...leb(indexOf(locals, arg, line, "local")));
    } else if (op === "global.get" || op === "global.set") {
      out.push(op === "global.get" ? 0x23 : 0x24, ...leb(indexOf(globals, arg, line, "global")));
    } else if (op === "call") {
      const i = fnIndex.get(arg?.replace(/^\$/, "") ?? "");
      out.push(0x10, ...leb(i ?? fail(line, "unknown function")));
    } else if (op === "i32.const") {
      const v = Number(arg);
      if (!Number.isInteger(v) || v < -(2 ** 31) || v >= 2 ** 32) fail(line, "not a 32-bit integer");
      out.push(0x41, ...sleb(v));
    } else if (op === "i64.const") {
      const v = Number(arg);
      if (!Number.isInteger(v) || v < -(2 ** 31) || v >= 2 ** 31) fail(line, "an i64.const here is a 32-bit signed integer");
      out.push(0x42, ...sleb(v));
    } else if (MEMORY[op] !== undefined) {
      const offset = arg === undefined ? 0 : Number(/^offset=(\d+)$/.exec(arg)?.[1] ?? NaN);
      const align = op.startsWith("i64.") ? 3 : 2;
      if (!Number.isInteger(offset) || offset % (1 << align) !== 0) fail(line, `offset must be offset=N, a multiple of ${1 << align}`);
      out.push(...MEMORY[op]!, align, ...leb(offset));
    } else if (PLAIN[op] !== undefined && arg === undefined) {
      out.push(PLAIN[op]!);
    } else {
      fail(line, "unsupported instruction");
    }
  }
  if (labels.length > 0) fail(`(${labels.length} open)`, "block not ended");
  return out;
}
