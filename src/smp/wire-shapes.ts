/**
 * Object shapes on a channel (an ordered pair of threads): the sender's
 * ShapeTable gives each distinct list of keys an id, sent with the keys
 * the first time (SHAPE_DEF) and alone afterwards (SHAPED); the
 * receiver's ShapeCache keeps the keys by id and, for a shape in use, a
 * compiled object literal that builds the object with its final hidden
 * class at once. The encoder (wire-writer.ts) consults a ShapeTable, the
 * decoder (wire-reader.ts) fills a ShapeCache; Outgoing and Incoming
 * (outgoing.ts, incoming.ts) keep one per peer, and reset them when the
 * peer's incarnation ends.
 */

/** Shapes per channel, at most (further key sets travel inline). */
const MAX_SHAPES = 4096;
/** Objects with more keys than this travel with their keys inline. */
export const MAX_SHAPE_KEYS = 32;
/** A shape's object builder is compiled on its second use (a one-off key set is not worth ~20 us of compiling). */
const COMPILE_AFTER_USES = 2;

/**
 * The sender's half of a channel's object shapes: each distinct list of
 * keys (Object.keys order) gets an id the first time an object with those
 * keys is sent, with its definition inline; afterwards objects of that
 * shape carry only the id and their values. Per ordered pair of threads,
 * in the same order as the records, so the receiver's ShapeCache always
 * has a definition before its first use. Keys are compared by identity
 * first: Object.keys of objects built by the same code returns the same
 * internalized strings.
 */
export class ShapeTable {
  private readonly byFirstKey = new Map<string, number[]>();
  private readonly shapes: string[][] = [];

  /** The shape found last (objects come in runs of one shape). */
  private lastId = -1;

  /** The id of `keys`' shape, or -1. */
  find(keys: readonly string[]): number {
    if (this.lastId >= 0 && sameKeys(this.shapes[this.lastId]!, keys)) return this.lastId;
    const candidates = this.byFirstKey.get(keys[0] ?? "");
    if (candidates === undefined) return -1;
    for (const id of candidates) {
      if (sameKeys(this.shapes[id]!, keys)) {
        this.lastId = id;
        return id;
      }
    }
    return -1;
  }

  /** A new id for `keys`, or -1 when the table is full. */
  add(keys: string[]): number {
    if (this.shapes.length >= MAX_SHAPES) return -1;
    const id = this.shapes.length;
    this.shapes.push(keys);
    const first = keys[0] ?? "";
    const list = this.byFirstKey.get(first);
    if (list === undefined) this.byFirstKey.set(first, [id]);
    else list.push(id);
    return id;
  }

  /** Forget every shape from `id` on (added by an encoding that was not sent). */
  truncate(id: number): void {
    if (this.lastId >= id) this.lastId = -1;
    while (this.shapes.length > id) {
      const keys = this.shapes.pop()!;
      const first = keys[0] ?? "";
      const list = this.byFirstKey.get(first)!;
      list.pop();
      if (list.length === 0) this.byFirstKey.delete(first);
    }
  }

  get size(): number {
    return this.shapes.length;
  }
}

function sameKeys(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** What a compiled builder reads the values from (a WireReader). */
export interface ValueSource {
  readValue(): unknown;
}

type ObjectBuilder = (r: ValueSource) => Record<string, unknown>;

/** The receiver's half: each shape's keys, and a compiled builder for shapes in use. */
export class ShapeCache {
  private keys: string[][] = [];
  private uses: number[] = [];
  private builders: Array<ObjectBuilder | null | undefined> = [];

  define(id: number, keys: string[]): void {
    this.keys[id] = keys;
    this.uses[id] = 0;
    this.builders[id] = undefined;
  }

  keysOf(id: number): string[] {
    const keys = this.keys[id];
    if (keys === undefined) throw new TypeError(`shardheap: corrupt message (unknown shape ${id})`);
    return keys;
  }

  /**
   * The compiled builder for shape `id` once it has been used enough, else
   * undefined. A literal with the keys in order makes the object with its
   * final hidden class at once: 34 ns for four fields, where assigning
   * them one by one to {} costs 178 ns (a keyed store each).
   */
  builder(id: number): ObjectBuilder | undefined {
    const b = this.builders[id];
    if (b !== undefined) return b ?? undefined;
    if (++this.uses[id]! < COMPILE_AFTER_USES) return undefined;
    const keys = this.keysOf(id);
    let built: ObjectBuilder | null = null;
    // "__proto__" in a literal would set the prototype; such shapes stay uncompiled.
    if (!keys.includes("__proto__")) {
      try {
        const fields = keys.map((k) => `${JSON.stringify(k)}: r.readValue()`).join(", ");
        built = new Function("r", `return { ${fields} };`) as ObjectBuilder;
      } catch {
        built = null; // code generation disallowed (--disallow-code-generation-from-strings)
      }
    }
    this.builders[id] = built;
    return built ?? undefined;
  }
}
