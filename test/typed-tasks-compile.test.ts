/**
 * Typed tasks under a strict user's compiler: a project that
 * installs the packed package, with strict, exactOptionalPropertyTypes,
 * noUncheckedIndexedAccess and noPropertyAccessFromIndexSignature, and a
 * TypeScript task module. A correct program compiles and runs on real
 * shards; a wrong argument, a wrong result, a name the module does not
 * export, and a wrong call from inside a shard each fail to compile, with
 * an error that names the problem at the line that has it. One tsc run
 * checks every file (about 10 s on the 2-core VM).
 */
import { execFileSync, spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { tempDir } from "./helpers.js";
import { packedProject } from "./packed-package.js";

const TASKS = `import { currentShard, type ShardContext } from "shardheap";

export interface Entry {
  key: string;
  value: string;
  ttl?: number;
}
const store = new Map<string, Entry>();

export function put(entry: Entry, shard: ShardContext): number {
  store.set(entry.key, entry);
  return shard.id;
}
export async function get(key: string): Promise<string | null> {
  return store.get(key)?.value ?? null;
}
export function count(): number {
  return store.size;
}
export function keys(prefix?: string): string[] {
  return [...store.keys()].filter((k) => prefix === undefined || k.startsWith(prefix));
}
/** Calls its own module's tasks on another shard: its result type is written out (TypeScript cannot infer a type that refers to itself). */
export async function getFromNext(key: string, shard: ShardContext): Promise<string | null> {
  return shard.tasks<typeof import("./tasks.js")>().get((shard.id + 1) % shard.shards, key);
}
export const LIMIT = 10;
// Made at the top level, before the exports exist (used once they do).
const own = currentShard?.tasks<typeof import("./tasks.js")>();
export async function everyCount(): Promise<number[]> {
  return own === undefined ? [] : own.count.onAll();
}
`;

const MAIN = `import { Smp, type Tasks } from "shardheap";

const smp = await Smp.start({ shards: 2, memoryPerShard: "1MiB", module: new URL("./tasks.js", import.meta.url) });
const kv: Tasks<typeof import("./tasks.js")> = smp.tasks<typeof import("./tasks.js")>();
const owner: number = await kv.put(1, { key: "a", value: "apple" });
await kv.put(0, { key: "b", value: "banana", ttl: 60 });
const a: string | null = await kv.get(1, "a");
const fromNext: string | null = await kv.getFromNext(0, "a");
const counts: number[] = await kv.count.onAll();
const fromShard: number[] = await kv.everyCount(1);
const first: number | undefined = counts[0];
const all: string[] = await kv.keys(1);
const some: string[] = await kv.keys(0, "b");
console.log(JSON.stringify({ owner, a, fromNext, counts, fromShard, first, all, some }));
await smp.stop();
`;

/** Each wrong file: its code (after MAIN's first four lines), and what tsc must say at the line marked "// <-". */
const WRONG: Record<string, { code: string; error: RegExp }> = {
  "wrong-argument.ts": {
    code: `await kv.put(0, { key: "a", value: 42 }); // <-`,
    error: /error TS2322: Type 'number' is not assignable to type 'string'/,
  },
  "wrong-result.ts": {
    code: `const value: string = await kv.get(0, "a"); // <-\nvoid value;`,
    error: /error TS2322: Type 'string \| null' is not assignable to type 'string'/,
  },
  "unknown-task.ts": {
    code: `await kv.gett(0, "a"); // <-`,
    error: /error TS2551: Property 'gett' does not exist on type 'Tasks<typeof import\(.*tasks.*\)>'\. Did you mean 'get'\?/,
  },
  "not-a-task.ts": {
    code: `await kv.LIMIT(0); // <-`,
    error: /error TS2339: Property 'LIMIT' does not exist on type 'Tasks</,
  },
  "missing-argument.ts": {
    code: `await kv.put(0); // <-`,
    error: /error TS2554: Expected 2 arguments, but got 1/,
  },
  "wrong-in-shard.ts": {
    code: `export async function sum(_: undefined, shard: ShardContext): Promise<string[]> {\n  return shard.tasks<typeof import("./tasks.js")>().count.onAll(); // <-\n}`,
    error: /error TS2322: Type 'number\[\]' is not assignable to type 'string\[\]'/,
  },
};

describe("typed tasks in a strict TypeScript project, against the packed package", () => {
  let dir: string;
  let tsc: string;
  let diagnostics: string[];
  beforeAll(() => {
    dir = tempDir("shardheap-typed-tasks-");
    ({ tsc } = packedProject(dir, { strict: true, exactOptionalPropertyTypes: true, noUncheckedIndexedAccess: true, noPropertyAccessFromIndexSignature: true, noUnusedLocals: true }));
    writeFileSync(join(dir, "tasks.ts"), TASKS);
    writeFileSync(join(dir, "main.ts"), MAIN);
    const head = MAIN.split("\n").slice(0, 4).join("\n").replace('import { Smp, type Tasks }', 'import { Smp, type ShardContext, type Tasks }');
    for (const [file, { code }] of Object.entries(WRONG)) writeFileSync(join(dir, file), `${head}\nvoid kv;\n${code}\n${file === "wrong-in-shard.ts" ? "" : "await smp.stop();\n"}export type { ShardContext };\n`);
    const r = spawnSync(process.execPath, [tsc, "-p", dir, "--pretty", "false"], { cwd: dir, encoding: "utf8", timeout: 120_000 });
    diagnostics = r.stdout.split("\n").filter((l) => l.trim() !== "");
  }, 120_000);

  it("a correct program and task module compile, and run on shards", () => {
    expect(diagnostics.filter((l) => /^(main|tasks)\.ts\(/.test(l))).toEqual([]);
    const out = execFileSync(process.execPath, [join(dir, "out", "main.js")], { cwd: dir, encoding: "utf8", env: { ...process.env, SHARDHEAP_LOG: "silent" }, timeout: 60_000 });
    expect(JSON.parse(out)).toEqual({ owner: 1, a: "apple", fromNext: "apple", counts: [1, 1], fromShard: [1, 1], first: 1, all: ["a"], some: ["b"] });
  });

  for (const [file, { error }] of Object.entries(WRONG)) {
    it(`${file} fails to compile, naming the problem at its line`, () => {
      const errors = diagnostics.filter((l) => l.startsWith(`${file}(`));
      expect(errors, diagnostics.join("\n")).toHaveLength(1);
      expect(errors[0]).toMatch(error);
      const line = Number(/^[^(]+\((\d+),/.exec(errors[0]!)![1]);
      expect(line).toBe(6 + WRONG[file]!.code.split("\n").findIndex((l) => l.includes("// <-")));
    });
  }
});
