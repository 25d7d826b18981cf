/**
 * docs/ARCHITECTURE.md "Layers": no import circle in src/, no import from a
 * higher layer, and inside a layer no import between rooms (sub-folders)
 * that test/import-layers.ts ROOMS does not allow.
 */
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { ROOMS, findCircles, findLayerViolations, findRoomViolations, importSpecifiers, layerOf, readImportGraph, roomOf, type ImportGraph } from "./import-layers.js";

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

  it("inside src/memory, the allocator imports none of its sub-folders and each sub-folder only what ROOMS allows", () => {
    // The real graph has the edges the rules are about, so a pass means something.
    const edges = [...real].flatMap(([from, to]) => to.map((t) => [roomOf(from), roomOf(t)].join(" -> ")));
    expect(edges).toEqual(expect.arrayContaining(["memory/profiler -> memory", "memory/heap-image -> memory/profiler", "memory/shared-map -> memory"]));
    expect(Object.keys(ROOMS).filter((r) => layerOf(`${r}/x.ts`) === "memory").sort()).toEqual([...new Set([...real.keys()].filter((f) => layerOf(f) === "memory").map(roomOf))].sort());
    expect(findRoomViolations(real)).toEqual([]);
  });

  it("inside src/apps, memcached's rooms import only what ROOMS allows (the store no command, network or config; the protocol no other room)", () => {
    const edges = [...real].flatMap(([from, to]) => to.map((t) => [roomOf(from), roomOf(t)].join(" -> ")));
    const m = "apps/memcached";
    expect(edges).toEqual(
      expect.arrayContaining([`${m}/store -> ${m}/stats`, `${m}/store -> ${m}/protocol`, `${m}/commands -> ${m}/store`, `${m}/network -> ${m}/commands`, `${m} -> ${m}/network`, `${m}/stats -> ${m}`]),
    );
    expect(Object.keys(ROOMS).filter((r) => layerOf(`${r}/x.ts`) === "apps").sort()).toEqual([...new Set([...real.keys()].filter((f) => layerOf(f) === "apps").map(roomOf))].sort());
    expect(findRoomViolations(real)).toEqual([]);
  });

  it("flags an import planted in the real graph against memcached's rooms: the store reaching a connection, the protocol the store, the store the config", () => {
    const planted = new Map(real);
    const plant = (from: string, to: string): void => {
      expect(real.has(from) && real.has(to), `${from} and ${to} exist`).toBe(true);
      planted.set(from, [...planted.get(from)!, to]);
    };
    const m = "apps/memcached";
    plant(`${m}/store/store.ts`, `${m}/network/connection.ts`);
    plant(`${m}/protocol/protocol.ts`, `${m}/store/item.ts`);
    plant(`${m}/store/item-cache.ts`, `${m}/config.ts`);
    plant(`${m}/stats/stats.ts`, `${m}/server.ts`);
    expect(findRoomViolations(planted).sort()).toEqual([
      `${m}/protocol/protocol.ts (${m}/protocol) imports ${m}/store/item.ts (${m}/store), a room ${m}/protocol may not import`,
      `${m}/stats/stats.ts (${m}/stats) imports ${m}/server.ts (${m}), a room ${m}/stats may not import`,
      `${m}/store/item-cache.ts (${m}/store) imports ${m}/config.ts (${m}), a room ${m}/store may not import`,
      `${m}/store/store.ts (${m}/store) imports ${m}/network/connection.ts (${m}/network), a room ${m}/store may not import`,
    ]);
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

  it("flags an import between rooms the table does not allow, a folder that is no room, and accepts allowed ones", () => {
    const rooms = { memory: [], "memory/profiler": ["memory"], "memory/heap-image": ["memory", "memory/profiler"] };
    expect(
      findRoomViolations(
        graph({
          "memory/shard-allocator.ts": ["memory/profiler/sampler.ts", "memory/layout.ts", "errors.ts"],
          "memory/profiler/sampler.ts": ["memory/layout.ts", "memory/heap-image/heap-image.ts"],
          "memory/heap-image/heap-image.ts": ["memory/profiler/peaks.ts", "memory/shared-heap.ts"],
          "memory/stray/x.ts": ["memory/layout.ts"],
          "smp/smp.ts": ["memory/profiler/plug-in.ts", "smp/deep/y.ts"],
        }),
        rooms,
      ),
    ).toEqual([
      "memory/shard-allocator.ts (memory) imports memory/profiler/sampler.ts (memory/profiler), a room memory may not import",
      "memory/profiler/sampler.ts (memory/profiler) imports memory/heap-image/heap-image.ts (memory/heap-image), a room memory/profiler may not import",
      "memory/stray/x.ts is in no room of memory (place memory/stray/ in test/import-layers.ts ROOMS and docs/ARCHITECTURE.md)",
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
