/**
 * How a shard reads the loaders it runs under (src/smp/shard-loaders.ts):
 * NODE_OPTIONS split as Node splits it, the preload flags in both forms,
 * and which Node versions give each worker hooks of its own.
 * test/typescript-task-modules.test.ts runs the whole path under tsx.
 */
import { describe, expect, it } from "vitest";
import { hooksPerThread, preloadSpecifiers, splitNodeOptions } from "../../src/smp/shard-loaders.js";

describe("shard loaders", () => {
  it("splits NODE_OPTIONS on spaces, a double-quoted part one argument with backslash escapes", () => {
    expect(splitNodeOptions("")).toEqual([]);
    expect(splitNodeOptions("  --import tsx   --max-old-space-size=100 ")).toEqual(["--import", "tsx", "--max-old-space-size=100"]);
    expect(splitNodeOptions('--import "/my dir/register.mjs" --loader=x')).toEqual(["--import", "/my dir/register.mjs", "--loader=x"]);
    expect(splitNodeOptions('--title "a \\"quoted\\" \\\\ word" ""')).toEqual(["--title", 'a "quoted" \\ word', ""]);
  });

  it("finds the modules named by --import, --loader and --experimental-loader, with the value after a space or '='", () => {
    expect(
      preloadSpecifiers(["--enable-source-maps", "--import", "tsx", "--import=./a.mjs", "--loader", "ts-node/esm", "--experimental-loader=b.mjs", "--require", "c.cjs", "--import"]),
    ).toEqual(["tsx", "./a.mjs", "ts-node/esm", "b.mjs"]);
    expect(preloadSpecifiers(["--importer", "x", "--import="])).toEqual([]);
  });

  it("gives each worker thread hooks of its own before Node 22.2 (one hooks thread for all workers from then on)", () => {
    for (const v of ["20.0.0", "20.20.2", "21.7.3", "22.0.0", "22.1.0"]) expect(hooksPerThread(v), v).toBe(true);
    for (const v of ["22.2.0", "22.12.0", "23.0.0", "24.11.1", "25.1.0"]) expect(hooksPerThread(v), v).toBe(false);
  });
});
