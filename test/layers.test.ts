/** docs/ARCHITECTURE.md "Layers": no import circle in src/ and no import from a higher layer. */
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { findCircles, findLayerViolations, importSpecifiers, layerOf, readImportGraph, type ImportGraph } from "./import-layers.js";

const SRC = fileURLToPath(new URL("../src", import.meta.url));
const graph = (edges: Record<string, string[]>): ImportGraph => new Map(Object.entries(edges));

describe("src/ layers", () => {
  const real = readImportGraph(SRC);

  it("reads the real import graph (so the checks below look at something)", () => {
    expect(real.size).toBeGreaterThan(30);
    expect(real.get("index.ts")).toContain("memory/shared-heap.ts");
    expect(real.get("smp/shard-worker.ts")).toContain("smp/doorbell.ts");
  });

  it("has no import circle", () => {
    expect(findCircles(real)).toEqual([]);
  });

  it("imports only from its own layer or below, and every file has a layer", () => {
    expect(findLayerViolations(real)).toEqual([]);
  });
});

describe("the layer checker itself", () => {
  it("reads static, re-exported, side-effect, type-only and dynamic imports, not comments or strings", () => {
    const source = [
      'import { a } from "./a.js";',
      'import type { B } from "../memory/b.js";',
      'export { c } from "./c.js";',
      'export * from "./d.js";',
      'import "./e.js";',
      'const f = await import("./f.js");',
      'import { g } from "node:fs";',
      '// import { h } from "./comment.js";',
      'const s = "import(\\"./string.js\\")";',
    ].join("\n");
    expect(importSpecifiers(source)).toEqual(["./a.js", "../memory/b.js", "./c.js", "./d.js", "./e.js", "./f.js"]);
  });

  it("finds a two-file circle, a longer one and a self-import, and passes a graph without one", () => {
    const circles = findCircles(
      graph({
        "memory/a.ts": ["memory/b.ts"],
        "memory/b.ts": ["memory/a.ts"],
        "smp/x.ts": ["smp/y.ts", "memory/a.ts"],
        "smp/y.ts": ["smp/z.ts"],
        "smp/z.ts": ["smp/x.ts"],
        "report/self.ts": ["report/self.ts"],
        "report/ok.ts": ["memory/a.ts"],
      }),
    );
    expect(circles).toEqual([
      ["memory/a.ts", "memory/b.ts", "memory/a.ts"],
      ["report/self.ts", "report/self.ts"],
      ["smp/x.ts", "smp/y.ts", "smp/z.ts", "smp/x.ts"],
    ]);
    expect(findCircles(graph({ "smp/x.ts": ["memory/a.ts", "memory/b.ts"], "memory/a.ts": ["memory/b.ts"], "memory/b.ts": [] }))).toEqual([]);
  });

  it("flags an import from a higher layer, a root file of no layer, and accepts imports downwards", () => {
    expect(
      findLayerViolations(
        graph({
          "smp/smp.ts": ["runtime/admin.ts", "memory/shared-heap.ts", "errors.ts"],
          "units.ts": ["memory/layout.ts"],
          "helpers.ts": [],
          "cli.ts": ["apps/stress/run.ts", "runtime/flags.ts"],
          "apps/stress/run.ts": ["runtime/admin.ts", "smp/smp.ts"],
        }),
      ),
    ).toEqual([
      "smp/smp.ts (smp) imports runtime/admin.ts (runtime), a higher layer",
      "units.ts (base) imports memory/layout.ts (memory), a higher layer",
      "helpers.ts is in no layer (place it in test/import-layers.ts and docs/ARCHITECTURE.md's layers)",
    ]);
  });

  it("places folders and root files in the layers' order", () => {
    expect(["errors.ts", "memory/x.ts", "smp/x.ts", "report/x.ts", "runtime/x.ts", "apps/stress/x.ts", "cli.ts"].map(layerOf)).toEqual([
      "base",
      "memory",
      "smp",
      "report",
      "runtime",
      "apps",
      "top",
    ]);
    expect(layerOf("stress/run.ts")).toBeUndefined();
  });
});
