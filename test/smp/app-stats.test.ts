/**
 * The figures an app publishes (smp/app-stats.ts, smp.publishAppStats):
 * numbers and described figures read back with every field filled, in the
 * order the apps first published; a name taken again replaces its reader
 * and the old withdraw function then does nothing; whatever a reader does
 * wrong (throws, returns a promise or a non-object, a figure that is not a
 * finite number, a bad unit, too many figures) becomes that app's `error`
 * with the good figures kept, never a throw; the bounds on apps and names.
 */
import { describe, expect, it } from "vitest";
import { InvalidValueError } from "../../src/errors.js";
import { AppStatsSources, MAX_APPS, MAX_FIGURES, MAX_NAME_LENGTH, type AppStatsReader } from "../../src/smp/app-stats.js";

describe("app figures", () => {
  it("reads numbers as count gauges and described figures as given, apps in the order they first published", () => {
    const apps = new AppStatsSources();
    let evictions = 0;
    apps.publish("cache", () => ({ items: 42, "hit rate": { value: 0.5, unit: "ratio", help: "hits / lookups" }, evictions: { value: ++evictions, kind: "counter" }, bytes: { value: 1024, unit: "bytes" } }));
    apps.publish("queue", () => ({ depth: 3 }));
    const [cache, queue] = apps.read();
    expect(cache).toEqual({
      app: "cache",
      t: expect.any(Number),
      figures: [
        { name: "items", value: 42, unit: "count", kind: "gauge" },
        { name: "hit rate", value: 0.5, unit: "ratio", kind: "gauge", help: "hits / lookups" },
        { name: "evictions", value: 1, unit: "count", kind: "counter" },
        { name: "bytes", value: 1024, unit: "bytes", kind: "gauge" },
      ],
    });
    expect(queue).toMatchObject({ app: "queue", figures: [{ name: "depth", value: 3 }] });
    // Each read calls the reader again.
    expect(apps.read()[0]!.figures[2]!.value).toBe(2);
  });

  it("a name published again replaces its reader, keeping its place; an old withdraw then does nothing", () => {
    const apps = new AppStatsSources();
    const withdrawOld = apps.publish("cache", () => ({ version: 1 }));
    apps.publish("queue", () => ({ depth: 3 }));
    const withdrawNew = apps.publish("cache", () => ({ version: 2 }));
    withdrawOld();
    expect(apps.read().map((a) => [a.app, a.figures[0]!.value])).toEqual([["cache", 2], ["queue", 3]]);
    withdrawNew();
    expect(apps.read().map((a) => a.app)).toEqual(["queue"]);
  });

  it("a reader that fails gives its app an error, never a throw; good figures are kept beside bad ones", () => {
    const apps = new AppStatsSources();
    const readers: Record<string, AppStatsReader> = {
      throws: () => {
        throw new Error("stats block gone");
      },
      promise: () => Promise.resolve({ a: 1 }) as unknown as ReturnType<AppStatsReader>,
      array: () => [1, 2] as unknown as ReturnType<AppStatsReader>,
      nothing: () => undefined as unknown as ReturnType<AppStatsReader>,
      mixed: () => ({ good: 1, nan: NaN, inf: Infinity, text: "7" as unknown as number, unit: { value: 1, unit: "percent" as "ratio" }, kind: { value: 1, kind: "rate" as "gauge" }, none: null as unknown as number, "": 1 }),
    };
    for (const [name, read] of Object.entries(readers)) apps.publish(name, read);
    const byApp = new Map(apps.read().map((a) => [a.app, a]));
    expect(byApp.get("throws")).toMatchObject({ figures: [], error: "its reader threw: stats block gone" });
    expect(byApp.get("promise")!.error).toMatch(/returned a promise/);
    expect(byApp.get("array")!.error).toBe("its reader must return an object of figures, got an array");
    expect(byApp.get("nothing")!.error).toBe("its reader must return an object of figures, got undefined");
    const mixed = byApp.get("mixed")!;
    expect(mixed.figures).toEqual([{ name: "good", value: 1, unit: "count", kind: "gauge" }]);
    for (const part of ["nan: not a finite number (NaN)", "inf: not a finite number (Infinity)", "text: a figure is a number or", "unit: unit must be one of count, bytes, ratio", "kind: kind must be counter or gauge", "none: a figure is a number or { value, unit?, kind?, help? }, got null", "a figure name must be"]) {
      expect(mixed.error).toContain(part);
    }
  });

  it(`keeps the first ${MAX_FIGURES} figures of an app, saying how many were left out`, () => {
    const apps = new AppStatsSources();
    apps.publish("many", () => Object.fromEntries(Array.from({ length: MAX_FIGURES + 6 }, (_, i) => [`f${i}`, i])));
    const [many] = apps.read();
    expect(many!.figures).toHaveLength(MAX_FIGURES);
    expect(many!.error).toBe(`6 figures past the first ${MAX_FIGURES} left out`);
  });

  it(`refuses a bad app name or reader, and more than ${MAX_APPS} apps`, () => {
    const apps = new AppStatsSources();
    for (const bad of ["", "  ", "x".repeat(MAX_NAME_LENGTH + 1), "a\nb", 7 as unknown as string]) {
      expect(() => apps.publish(bad, () => ({})), JSON.stringify(bad)).toThrow(InvalidValueError);
    }
    expect(() => apps.publish("x", "figures" as unknown as AppStatsReader)).toThrow(TypeError);
    for (let i = 0; i < MAX_APPS; i++) apps.publish(`app${i}`, () => ({}));
    expect(() => apps.publish("one-more", () => ({}))).toThrow(`at most ${MAX_APPS} apps publish figures at once`);
    apps.publish("app0", () => ({ again: 1 })); // a name already there is no more
    expect(apps.read()).toHaveLength(MAX_APPS);
  });
});
