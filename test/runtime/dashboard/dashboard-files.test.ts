/**
 * The dashboard's browser code (src/runtime/dashboard/) as the admin server
 * serves it: only that folder's compiled modules are routes, so a module
 * must import nothing outside the folder (the browser would ask for a file
 * the server does not have), every module is a route, and the server's
 * code imports only the answers' types (api.ts) from it, never code that
 * needs the DOM.
 */
import { readFileSync, readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { DASHBOARD_MODULES, DASHBOARD_PATHS, dashboardAsset } from "../../../src/runtime/dashboard.js";
import { readImportGraph } from "../../import-layers.js";

const SRC = fileURLToPath(new URL("../../../src", import.meta.url));
const FOLDER = "runtime/dashboard/";
const inFolder = (file: string): boolean => file.startsWith(FOLDER);

describe("the dashboard's browser files", () => {
  const graph = readImportGraph(SRC);
  const modules = readdirSync(`${SRC}/${FOLDER}`).filter((f) => f.endsWith(".ts"));

  it("import only each other", () => {
    const outside = [...graph].filter(([file]) => inFolder(file)).flatMap(([file, deps]) => deps.filter((d) => !inFolder(d)).map((d) => `${file} imports ${d}`));
    expect(modules.length).toBeGreaterThan(5);
    expect(outside).toEqual([]);
  });

  it("are each served as /dashboard/NAME.js, api.ts (types only) aside", () => {
    expect([...DASHBOARD_MODULES].sort()).toEqual(modules.filter((f) => f !== "api.ts").map((f) => f.replace(/\.ts$/, "")).sort());
    for (const m of DASHBOARD_MODULES) expect(DASHBOARD_PATHS).toContain(`/dashboard/${m}.js`);
    expect(readFileSync(`${SRC}/${FOLDER}api.ts`, "utf8")).not.toMatch(/^\s*export\s+(const|let|var|function|class|enum)\b/m);
  });

  it("are served to a server run from the sources too: the build's output, the page marked", () => {
    const main = dashboardAsset("/dashboard/main.js", false)!;
    expect(main.headers["content-type"]).toMatch(/^text\/javascript/);
    expect(String(main.body)).toMatch(/^import .* from "\.\/lib\.js";$/m);
    expect(String(dashboardAsset("/", true)!.body)).toContain('<body data-token="required">');
  });

  it("reach the server's code only as api.ts's types", () => {
    const crossing = [...graph].filter(([file]) => !inFolder(file)).flatMap(([file, deps]) => deps.filter(inFolder).map((d) => `${file} imports ${d}`));
    // The server's files that declare what the API answers (admin.ts, memory-history.ts, baselines.ts, ...) use api.ts's types, declared once there.
    expect(crossing.length).toBeGreaterThan(0);
    for (const c of crossing) {
      expect(c).toMatch(/^runtime\/[^/]+\.ts imports runtime\/dashboard\/api\.ts$/);
      expect(readFileSync(`${SRC}/${c.split(" ")[0]}`, "utf8"), c).toMatch(/^import type \{[^}]*\} from "\.\/dashboard\/api\.js";/m);
    }
    expect(crossing).toContain("runtime/admin.ts imports runtime/dashboard/api.ts");
  });
});
