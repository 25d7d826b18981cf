/**
 * The encoder's slow path, when the plain pass (wire-writer.ts) gave up
 * part way through a value whose visited objects have getters: the copy
 * V8's serializer reads instead, so each getter runs once, as in a
 * structured clone.
 */
import { defineField } from "./wire-format.js";

/**
 * `value` as the slow path must read it once the plain pass has run some
 * of its getters: every object the plain pass visited becomes a copy built
 * from the values it read (an object visited twice, or a cycle, one copy),
 * an array it visited a copy of its items (read again: they are data), and
 * everything it never reached stays itself, for the slow path to read.
 */
export function snapshotOf(
  value: unknown,
  seen: readonly object[],
  keysOf: ReadonlyArray<string[] | undefined>,
  valuesOf: ReadonlyArray<unknown[] | undefined>,
  count: number,
): unknown {
  const visited = new Map<object, number>();
  for (let k = 0; k < count; k++) if (keysOf[k] !== undefined || Array.isArray(seen[k])) visited.set(seen[k]!, k);
  const copies = new Map<object, unknown>();
  const copy = (v: unknown): unknown => {
    if (typeof v !== "object" || v === null) return v;
    const k = visited.get(v);
    if (k === undefined) return v;
    const done = copies.get(v);
    if (done !== undefined) return done;
    const keys = keysOf[k];
    if (keys === undefined) {
      const a = v as unknown[];
      const out: unknown[] = [];
      copies.set(v, out);
      for (const key of Object.keys(a)) defineField(out, key, copy((a as unknown as Record<string, unknown>)[key]));
      out.length = a.length;
      return out;
    }
    const values = valuesOf[k]!;
    const out: Record<string, unknown> = {};
    copies.set(v, out);
    for (let i = 0; i < keys.length; i++) defineField(out, keys[i]!, copy(values[i]));
    return out;
  };
  return copy(value);
}
