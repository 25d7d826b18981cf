/**
 * Allocation labels' own rules (heap-labels.ts): validation in specific
 * errors, interning, merging, which labels are in force where (async
 * work started inside withHeapLabels keeps them; withHeapLabelsSync's end
 * with its synchronous run), and the encoded form a site table stores.
 */
import { describe, expect, it } from "vitest";
import {
  MAX_LABELS,
  currentHeapLabels,
  decodeHeapLabels,
  heapLabelSet,
  withHeapLabels,
  withHeapLabelsSync,
} from "../dist/memory/heap-labels.js";

describe("heap labels", () => {
  it("interns a set: the same labels in any order give the same object, encoded sorted by name", () => {
    const a = heapLabelSet({ tenant: "a", route: "/x" });
    const b = heapLabelSet({ route: "/x", tenant: "a" });
    expect(a).toBe(b);
    expect(a.encoded).toBe('[["route","/x"],["tenant","a"]]');
    expect(decodeHeapLabels(a.encoded)).toEqual({ route: "/x", tenant: "a" });
    expect(heapLabelSet(a)).toBe(a);
    expect(Object.isFrozen(a.labels)).toBe(true);
  });

  it("refuses what is not a set of string labels, each with its own message", () => {
    const refused: Array<[unknown, RegExp]> = [
      [null, /an object of names to string values, got null/],
      [["a"], /got an array/],
      ["tenant=a", /got "tenant=a"/],
      [{ n: 1 }, /heap label "n" must be a string, got number/],
      [{ "": "x" }, /name must have 1 to 128 characters/],
      [{ v: "x".repeat(1025) }, /1025 characters, at most 1024/],
      [{ s: "\uD800" }, /lone surrogate/],
      [Object.fromEntries(Array.from({ length: MAX_LABELS + 1 }, (_, i) => [`k${i}`, "v"])), /at most 16 heap labels/],
    ];
    for (const [labels, message] of refused) {
      expect(() => heapLabelSet(labels as never), String(labels)).toThrow(message);
      expect(() => heapLabelSet(labels as never)).toThrow(expect.objectContaining({ code: "ERR_SHARDHEAP_INVALID_VALUE", field: "labels" }));
    }
    // Decoding refuses anything a writer would not have written.
    for (const bad of ["", "[]", "{}", '[["a"]]', '[["b","1"],["a","2"]]', '[["a",1]]', "not json"]) expect(decodeHeapLabels(bad), bad).toBeUndefined();
  });

  it("withHeapLabels: in force inside, through awaits and timers started inside, merged with outer labels (inner wins), gone after", async () => {
    expect(currentHeapLabels()).toBeUndefined();
    const seen: Array<Record<string, string> | undefined> = [];
    const done = withHeapLabels({ tenant: "a", route: "/x" }, async () => {
      seen.push(currentHeapLabels()?.labels);
      await new Promise((r) => setTimeout(r, 5));
      seen.push(currentHeapLabels()?.labels);
      await withHeapLabels({ route: "/y" }, async () => {
        await Promise.resolve();
        seen.push(currentHeapLabels()?.labels);
      });
      seen.push(currentHeapLabels()?.labels);
      return 42;
    });
    // Outside, meanwhile: nothing in force.
    expect(currentHeapLabels()).toBeUndefined();
    expect(await done).toBe(42);
    expect(seen).toEqual([
      { route: "/x", tenant: "a" },
      { route: "/x", tenant: "a" },
      { route: "/y", tenant: "a" },
      { route: "/x", tenant: "a" },
    ]);
    expect(currentHeapLabels()).toBeUndefined();
  });

  it("withHeapLabelsSync: in force for the synchronous run only, wins over withHeapLabels', restored after a throw", async () => {
    const hot = heapLabelSet({ loop: "hot" });
    await withHeapLabels({ tenant: "a" }, async () => {
      expect(withHeapLabelsSync(hot, () => currentHeapLabels())).toBe(hot);
      expect(() =>
        withHeapLabelsSync(hot, () => {
          throw new Error("boom");
        }),
      ).toThrow("boom");
      expect(currentHeapLabels()?.labels).toEqual({ tenant: "a" });
      let later: unknown;
      const p = withHeapLabelsSync(hot, async () => {
        await Promise.resolve();
        later = currentHeapLabels()?.labels;
      });
      await p;
      // After the await the synchronous form is over: the async labels are back in force.
      expect(later).toEqual({ tenant: "a" });
    });
  });
});
