/**
 * A user's TypeScript project compiles against the packed package with
 * TypeScript 5.9 (this repository's), the newest 6.x and the newest
 * release (`npm i -D typescript` today), each under the README's settings
 * ("type": "module", "module": "NodeNext", strict, sourceMap, @types/node
 * installed) and under what that version's `tsc --init` writes
 * ("types": [] from TypeScript 5.9 on, skipLibCheck, verbatimModuleSyntax,
 * exactOptionalPropertyTypes...). Before the package's types loaded
 * @types/node themselves, TypeScript 6 and 7 stopped inside its
 * declaration files (`region.d.ts: Cannot find name 'Buffer'`), and under
 * --init's defaults the errors moved to the user's code (`Property 'on'
 * does not exist on type 'Smp'`). The README's way of naming a task
 * module (./tasks.js) is then run from the compiled output. Versions the
 * registry cannot give are skipped, saying why.
 */
import { execFileSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { tempDir } from "./helpers.js";
import { packedProject, root } from "./packed-package.js";
import { cachedPackage, registryVersions, type Found } from "./registry-packages.js";

const TASKS = `import { createServer } from "node:http";
import { SharedMap, shardContext, type ListeningAddress, type ShardContext } from "shardheap";

// This module only ever loads in shards: shardContext() is a ShardContext, no undefined to narrow.
const self = shardContext().tasks<typeof import("./tasks.js")>();
let map: SharedMap | undefined;

export function fill(count: number, shard: ShardContext): number {
  map = SharedMap.create(shard.heap, { shard: shard.id, capacity: count });
  for (let i = 0; i < count; i++) map.set(\`k\${i}\`, \`v\${i * i}\`);
  return map.handle;
}
export function read(arg: { handle: number; key: string }, shard: ShardContext): string | null {
  const m = SharedMap.attach(shard.heap, arg.handle);
  try {
    return m.getString(arg.key) ?? null;
  } finally {
    m.close();
  }
}
export async function readOnNext(arg: { handle: number; key: string }, shard: ShardContext): Promise<string | null> {
  return self.read((shard.id + 1) % shard.shards, arg);
}
export async function serve(port: number, shard: ShardContext): Promise<ListeningAddress> {
  const server = createServer((req, res) => res.end(\`shard \${shard.id}\`));
  return shard.listen(server, { port, host: "127.0.0.1" }); // served until the runtime stops
}
`;

const MAIN = `import { currentShard, shardContext, SharedMap, Smp, type ShardError } from "shardheap";

const smp = await Smp.start({ shards: 2, memoryPerShard: "4MiB", module: new URL("./tasks.js", import.meta.url) });
smp.on("error", (e: ShardError) => console.error(e.message));
const tasks = smp.tasks<typeof import("./tasks.js")>();
const handle: number = await tasks.fill(0, 5);
const read: string | null = await tasks.readOnNext(1, { handle, key: "k3" });
const map = SharedMap.attach(smp.heap, handle);
const here: string | undefined = map.getString("k2");
const ports: number[] = (await tasks.serve.onAll(0)).map((b) => b.port);
map.close();
let outside = "";
try {
  shardContext();
} catch (e) {
  outside = (e as ShardError).code;
}
await smp.stop();
console.log(JSON.stringify({ read, here, outside, mainThread: currentShard === undefined, onePort: ports.length === 2 && ports[0] === ports[1] }));
`;

/** The README's settings (its TypeScript paragraph). */
const README_OPTIONS = { module: "NodeNext", strict: true, sourceMap: true, outDir: "out" };

interface Compiler {
  label: string;
  tsc: Found;
}

describe("a user's TypeScript project against the packed package, per TypeScript version", () => {
  const compilers: Compiler[] = [{ label: "5.9 (this repository's)", tsc: { path: join(root, "node_modules", "typescript", "bin", "tsc") } }];
  const offered = registryVersions("typescript");
  if ("reason" in offered) {
    compilers.push({ label: "6.x", tsc: offered }, { label: "the newest", tsc: offered });
  } else {
    const six = offered.versions.filter((v) => /^6\.\d+\.\d+$/.test(v)).at(-1);
    compilers.push({ label: `${six ?? "6.x"}`, tsc: six === undefined ? { reason: "the registry offers no 6.x" } : { reason: "" } });
    if (offered.latest !== six && !offered.latest.startsWith("5.")) compilers.push({ label: `${offered.latest} (the newest)`, tsc: { reason: "" } });
  }
  let project: string;
  beforeAll(() => {
    // Installed here, not while collecting: a slow registry counts against the hook's time.
    for (const c of compilers) if ("reason" in c.tsc && c.tsc.reason === "") c.tsc = cachedPackage("typescript", c.label.split(" ")[0]!, join("bin", "tsc"));
    project = tempDir("shardheap-ts-versions-");
    packedProject(project, {});
  }, 400_000);

  for (const c of compilers) {
    it(`TypeScript ${c.label}: compiles under the README's settings and under tsc --init's, and the program runs`, (ctx) => {
      if (!("path" in c.tsc)) return ctx.skip(`TypeScript ${c.label} could not be installed: ${c.tsc.reason}`);
      const tsc = c.tsc.path;
      const dir = join(project, c.label.split(" ")[0]!);
      mkdirSync(dir);
      // The packed package and its dependencies, as npm would lay them out.
      execFileSync("cp", ["-a", join(project, "node_modules"), dir]);
      writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }));
      writeFileSync(join(dir, "tasks.ts"), TASKS);
      writeFileSync(join(dir, "main.ts"), MAIN);
      const compile = (args: string[]): string => {
        try {
          return execFileSync(process.execPath, [tsc, ...args, "--pretty", "false"], { cwd: dir, encoding: "utf8", timeout: 180_000 });
        } catch (e) {
          return (e as { stdout?: string }).stdout ?? String(e);
        }
      };
      writeFileSync(join(dir, "tsconfig.json"), JSON.stringify({ compilerOptions: README_OPTIONS }));
      expect(compile(["-p", "."]), "README settings").toBe("");
      // What this version's --init writes, as a user gets it (written in a folder of its own, then used here).
      mkdirSync(join(dir, "init"));
      execFileSync(process.execPath, [tsc, "--init"], { cwd: join(dir, "init"), encoding: "utf8", timeout: 60_000 });
      copyFileSync(join(dir, "init", "tsconfig.json"), join(dir, "tsconfig.init.json"));
      expect(compile(["-p", "tsconfig.init.json", "--outDir", "out-init"]), "tsc --init's defaults").toBe("");
      expect(readdirSync(join(dir, "out")).sort()).toEqual(["main.js", "main.js.map", "tasks.js", "tasks.js.map"]);
      const out = execFileSync(process.execPath, [join(dir, "out", "main.js")], { cwd: dir, encoding: "utf8", timeout: 60_000, env: { ...process.env, SHARDHEAP_LOG: "silent" } });
      expect(JSON.parse(out)).toEqual({ read: "v9", here: "v4", outside: "ERR_SHARDHEAP_NOT_IN_SHARD", mainThread: true, onePort: true });
      expect(existsSync(join(dir, "out-init", "main.js"))).toBe(true);
    });
  }
});
