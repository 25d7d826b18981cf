/**
 * Allocation labels' own rules (heap-labels.ts): validation in specific
 * errors, interning, merging, which labels are in force where (async
 * work started inside withHeapLabels keeps them; withHeapLabelsSync's end
 * with its synchronous run), and the encoded form a site table stores.
 */
import { describe, expect, it } from "vitest";
import { Smp, groupByLabel } from "../../../dist/index.js";
import {
  MAX_INTERNED_BYTES,
  MAX_LABELS,
  OTHER_LABELS,
  currentHeapLabels,
  decodeHeapLabels,
  heapLabelSet,
  withHeapLabels,
  withHeapLabelsSync,
} from "../../../dist/memory/profiler/heap-labels.js";

const FLOOD = new URL("../../fixtures/label-flood.mjs", import.meta.url);

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

  it("refuses a label name a filter could not address (=, control characters, the fold's name), in every form; values stay free", () => {
    const refused: Array<[string, RegExp]> = [
      ["a=b", /heap label name "a=b" holds "=", which ends a name in a filter/],
      ["=", /holds "="/],
      ["line\nbreak", /heap label name "line\\nbreak" holds a control character/],
      ["nul\x00", /holds a control character/],
      ["del\x7f", /holds a control character/],
      ["c1\x85", /holds a control character/],
      ["sep\u2028", /holds a control character/],
      ["(other labels)", /"\(other labels\)" is reserved/],
    ];
    for (const [name, message] of refused) {
      const labels = { [name]: "v" };
      for (const form of [() => heapLabelSet(labels), () => withHeapLabels(labels, () => 1), () => withHeapLabelsSync(labels, () => 1)]) {
        expect(form, JSON.stringify(name)).toThrow(message);
        expect(form).toThrow(expect.objectContaining({ name: "InvalidValueError", code: "ERR_SHARDHEAP_INVALID_VALUE", field: "labels" }));
      }
    }
    // Names a filter reads: anything else, spaces and punctuation too; values may hold any character but a lone surrogate.
    for (const name of ["tenant", "http.route", "a b", "x-y:z", "é中"]) expect(heapLabelSet({ [name]: "\x00\x01\x1b[2J=\n" }).labels[name]).toBe("\x00\x01\x1b[2J=\n");
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

  it("remembers label sets up to a bound in bytes: a flood of big sets stays under it, the sets past it are recorded as (other labels), totals exact", async () => {
    process.env.SHARDHEAP_LOG = "silent";
    // A shard's thread of its own: its remembered sets start empty. Tables for 2048 stacks hold the labeled records' sets.
    const smp = await Smp.start({ shards: 1, memoryPerShard: "32MiB", heapprof: true, heapprofSites: 2048, module: FLOOD });
    try {
      const RECORD = 16 * 1024; // a size class: objectSize is the size
      const [sets, every] = [1200, 40];
      const flood = (await smp.submitTo(0, "floodLabelSets", { sets, every, size: RECORD })) as { before: { sets: number; bytes: number }; after: { sets: number; bytes: number }; wrong: number };
      // Every set was in force with its own labels, past the bound too.
      expect(flood.wrong).toBe(0);
      const remembered = flood.after.sets - flood.before.sets;
      expect(remembered).toBeGreaterThan(0);
      expect(remembered).toBeLessThan(sets);
      expect(flood.after.bytes).toBeLessThanOrEqual(MAX_INTERNED_BYTES);
      // The accounting is not vacuous: each set counts at least its 16 KiB of values and its 16 KiB of encoded text.
      expect(flood.after.bytes - flood.before.bytes).toBeGreaterThanOrEqual(remembered * 2 * 16 * 1024);
      // A second flood remembers nothing more.
      const again = (await smp.submitTo(0, "floodLabelSets", { sets: 200, every, size: RECORD, from: sets })) as typeof flood;
      expect(again.after).toEqual(again.before);
      // Totals exact: every record is in the profile, those under a set past the bound as (other labels), none folded into (other sites).
      const records = Math.ceil(sets / every) + Math.ceil(200 / every);
      const labeledRecords = Math.ceil(remembered / every);
      const p = smp.heapProfile();
      expect([p.totalCount, p.totalSize]).toEqual([records, records * RECORD]);
      expect(p.sites.filter((s) => s.frames[0]?.functionName === "(other sites)")).toEqual([]);
      const groups = groupByLabel(p, "n0");
      expect(groups.find((g) => g.value === OTHER_LABELS)).toMatchObject({ count: records - labeledRecords, size: (records - labeledRecords) * RECORD });
      const own = groups.filter((g) => g.value !== OTHER_LABELS);
      expect(own).toHaveLength(labeledRecords);
      for (const g of own) expect([g.count, g.size]).toEqual([1, RECORD]);
      expect(smp.heap.check()).toEqual([]);
    } finally {
      await smp.stop();
    }
  });
});
