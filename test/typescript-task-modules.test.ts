/**
 * TypeScript task modules: a shard runs under the loaders its
 * parent runs under. A program and its task module in TypeScript, run as
 * a user runs them: `npx tsx main.ts`, `node --import tsx main.ts`,
 * `NODE_OPTIONS=--import tsx`, a JavaScript program giving the shards
 * `execArgv: ["--import", "tsx"]`, and Node's own type stripping where
 * the Node running the tests has it. Without a loader, start() says how
 * to give the shards one. Each program runs in its own process in a temp
 * project (shardheap and tsx linked from this repository), bounded.
 */
import { execFile } from "node:child_process";
import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { beforeAll, describe, expect, it } from "vitest";
import { InvalidValueError, Smp } from "../dist/index.js";
import { tempDir } from "./helpers.js";

const root = fileURLToPath(new URL("..", import.meta.url));
const run = promisify(execFile);

const TASKS = `import type { ShardContext } from "shardheap";

interface Reading {
  name: string;
  celsius: number;
}
const readings = new Map<string, Reading>();

export function store(reading: Reading, shard: ShardContext): number {
  readings.set(reading.name, reading);
  return shard.id;
}
export function fahrenheit(name: string): number | null {
  const r: Reading | undefined = readings.get(name);
  return r === undefined ? null : (r.celsius * 9) / 5 + 32;
}
export function whoami(_: undefined, shard: ShardContext): string {
  return \`shard \${shard.id} of \${shard.shards}\` satisfies string;
}
`;

/** The program, in TypeScript; main.mjs is the same in JavaScript. argv[2]: the shards' execArgv as JSON, when given. */
const MAIN_TS = `import { Smp, type SmpOptions } from "shardheap";

const execArgv: string[] | undefined = process.argv[2] === undefined ? undefined : (JSON.parse(process.argv[2]) as string[]);
const options: SmpOptions = { shards: 2, memoryPerShard: "1MiB", module: new URL("./tasks.ts", import.meta.url), ...(execArgv === undefined ? {} : { execArgv }) };
try {
  const smp = await Smp.start(options);
  const tasks = smp.tasks<typeof import("./tasks.ts")>();
  const stored: number = await tasks.store(1, { name: "kitchen", celsius: 21.5 });
  console.log(JSON.stringify({ stored, fahrenheit: await tasks.fahrenheit(1, "kitchen"), who: await tasks.whoami.onAll() }));
  await smp.stop();
} catch (e) {
  console.log(JSON.stringify({ error: (e as Error).message }));
}
`;
const MAIN_MJS = MAIN_TS.replace(": string[] | undefined", "")
  .replace(" as string[]", "")
  .replace(": SmpOptions", "")
  .replace(", type SmpOptions", "")
  .replace("<typeof import(\"./tasks.ts\")>", "")
  .replace(": number", "")
  .replace(" as Error", "");

const WORKS = { stored: 1, fahrenheit: 70.7, who: ["shard 0 of 2", "shard 1 of 2"] };
const NO_LOADER = /^shard \d failed to start: Unknown file extension "\.ts" for .*tasks\.ts: a TypeScript task module needs a loader in the shards: run the program under tsx \(npx tsx main\.ts, node --import tsx main\.ts\), or give Smp\.start execArgv: \["--import", "tsx"\]/;

let dir: string;
beforeAll(() => {
  dir = tempDir("shardheap-ts-tasks-");
  mkdirSync(join(dir, "node_modules"));
  symlinkSync(root, join(dir, "node_modules", "shardheap"), "dir");
  symlinkSync(join(root, "node_modules", "tsx"), join(dir, "node_modules", "tsx"), "dir");
  writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "ts-tasks", private: true, type: "module" }));
  writeFileSync(join(dir, "tasks.ts"), TASKS);
  writeFileSync(join(dir, "main.ts"), MAIN_TS);
  writeFileSync(join(dir, "main.mjs"), MAIN_MJS);
});

/** Run `node ARGS` in the project; what the program printed, parsed. */
async function program(args: string[], env: NodeJS.ProcessEnv = {}): Promise<unknown> {
  const { stdout } = await run(process.execPath, args, { cwd: dir, timeout: 60_000, env: { ...process.env, SHARDHEAP_LOG: "silent", NODE_OPTIONS: "", ...env } });
  return JSON.parse(stdout);
}

/** Node's own type stripping: --experimental-strip-types from 22.6 (on by default from 22.18 and 23.6). */
const [major = 0, minor = 0] = process.versions.node.split(".").map(Number);
const stripTypes = major > 22 || (major === 22 && minor >= 6);
/** Flags for a program that must run without a loader: where Node strips types by itself, that is turned off. */
const NO_STRIPPING = stripTypes ? ["--no-experimental-strip-types"] : [];

describe("a TypeScript task module", () => {
  it("loads in the shards of a program run by npx tsx", async () => {
    expect(await program([join(root, "node_modules", "tsx", "dist", "cli.mjs"), "main.ts"])).toEqual(WORKS);
  });

  it("loads under node --import tsx, and under NODE_OPTIONS=--import tsx", async () => {
    expect(await program(["--import", "tsx", "main.ts"])).toEqual(WORKS);
    expect(await program(["main.ts"], { NODE_OPTIONS: "--import tsx" })).toEqual(WORKS);
  });

  it('loads from a JavaScript program that gives the shards execArgv: ["--import", "tsx"]; without, start() says how', async () => {
    expect(await program(["main.mjs", JSON.stringify(["--import", "tsx"])])).toEqual(WORKS);
    expect(await program([...NO_STRIPPING, "main.mjs"])).toEqual({ error: expect.stringMatching(NO_LOADER) });
  });

  it("execArgv replaces the parent's flags (execArgv: [] drops its --import tsx); NODE_OPTIONS reaches the shards either way", async () => {
    const none = JSON.stringify(NO_STRIPPING); // [] where Node has no type stripping
    expect(await program(["--import", "tsx", "main.ts", none])).toEqual({ error: expect.stringMatching(NO_LOADER) });
    expect(await program(["main.ts", none], { NODE_OPTIONS: "--import tsx" })).toEqual(WORKS);
  });

  it.skipIf(!stripTypes)(
    `loads under Node's own type stripping, --experimental-strip-types${stripTypes ? "" : ` (skipped: Node ${process.version} has none; 22.6 and later)`}`,
    async () => {
      expect(await program(["--experimental-strip-types", "--no-warnings", "main.ts"])).toEqual(WORKS);
    },
  );
});

describe("Smp.start's execArgv", () => {
  it("is an array of strings; flags Node refuses for a thread are an InvalidValueError naming the option, and no thread is left", async () => {
    await expect(Smp.start({ shards: 1, memoryPerShard: "1MiB", execArgv: "--import tsx" as unknown as string[] })).rejects.toThrow(
      new InvalidValueError("options.execArgv", "options.execArgv must be an array of strings (Node flags, as worker_threads' execArgv)"),
    );
    const refused = await Smp.start({ shards: 2, memoryPerShard: "1MiB", execArgv: ["--expose-gc"] }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(InvalidValueError);
    expect(refused).toMatchObject({ field: "options.execArgv", message: "options.execArgv: Node refuses --expose-gc for a worker thread (V8 flags and process-wide ones cannot be given to a thread)" });
  });
});
