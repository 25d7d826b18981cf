/**
 * TypeScript task modules: a shard runs under the loaders its parent runs
 * under. Node starts a worker thread with the parent's execArgv (or
 * Smp.start's `execArgv`) and environment, NODE_OPTIONS included, and on
 * Node 20 runs their `--import` preloads and `--loader` hooks in the
 * worker too (a preload calling module.register, and `--loader`, load a
 * custom extension in a shard: checked on 20.20). So most loaders need
 * nothing from here.
 *
 * tsx does: its preload (`--import tsx`, what `npx tsx` and
 * `NODE_OPTIONS=--import tsx` put there) registers its hooks on the main
 * thread only, on Node versions whose workers do not share the main
 * thread's hooks (tsx 4.23's loader.mjs: `isMainThread` on those), so a
 * shard failed with `Unknown file extension ".ts"`. Before 22.2 every
 * worker has hooks of its own (Node's single hooks thread for all workers,
 * nodejs/node#52706, came in 22.2.0), so there a shard calls tsx's public
 * API, `register()` from `tsx/esm/api`, of the same tsx package the
 * preload names: what a worker bootstrap under tsx is written to do. From
 * 22.2 on nothing is done here: the main thread's hooks serve the workers
 * (registering again would hang, nodejs/node#53182), and the tsx versions
 * for the Node versions that went back to hooks per worker register there
 * themselves.
 *
 * Node's own type stripping (`--experimental-strip-types`, 22.6 and
 * later; on by default from 22.18 and 23.6) is an execArgv flag like any other: the
 * shards inherit it.
 */
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

/** Before this Node version each worker thread has module hooks of its own (nodejs/node#52706 shipped in 22.2.0). */
const SHARED_HOOKS_SINCE: readonly [number, number] = [22, 2];

/** The flags whose value names a module the thread preloads or loads hooks from. */
const PRELOAD_FLAGS = new Set(["--import", "--loader", "--experimental-loader"]);

/**
 * Make the shard's module loadable under the loaders of this thread's
 * execArgv and NODE_OPTIONS: registers tsx's hooks in this thread where
 * its preload left them out (above). Resolves when there is nothing to do.
 */
export async function registerShardLoaders(execArgv: readonly string[], nodeOptions: string | undefined, nodeVersion = process.versions.node): Promise<void> {
  if (!hooksPerThread(nodeVersion)) return;
  const specifiers = [...preloadSpecifiers(splitNodeOptions(nodeOptions ?? "")), ...preloadSpecifiers(execArgv)];
  for (const specifier of specifiers) {
    const tsx = tsxPackageDir(specifier);
    if (tsx === undefined) continue;
    const api = (await import(pathToFileURL(join(tsx, exportTarget(tsx, "./esm/api"))).href)) as { register(): unknown };
    api.register();
    return; // once: one registration serves every later import in this thread
  }
}

/** True when `version` ("20.20.2") gives each worker thread module hooks of its own. */
export function hooksPerThread(version: string): boolean {
  const [major = 0, minor = 0] = version.split(".").map(Number);
  return major < SHARED_HOOKS_SINCE[0] || (major === SHARED_HOOKS_SINCE[0] && minor < SHARED_HOOKS_SINCE[1]);
}

/** The modules named by `--import X`, `--import=X`, `--loader X` and `--experimental-loader X` in `args`, in order. */
export function preloadSpecifiers(args: readonly string[]): string[] {
  const found: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    const eq = arg.indexOf("=");
    const flag = eq === -1 ? arg : arg.slice(0, eq);
    if (!PRELOAD_FLAGS.has(flag)) continue;
    const value = eq === -1 ? args[++i] : arg.slice(eq + 1);
    if (value !== undefined && value !== "") found.push(value);
  }
  return found;
}

/**
 * NODE_OPTIONS split as Node splits it: on spaces, a double-quoted part
 * one argument (a backslash in it takes the next character as it is).
 */
export function splitNodeOptions(text: string): string[] {
  const args: string[] = [];
  let current = "";
  let quoted = false;
  let started = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quoted && c === "\\" && i + 1 < text.length) {
      current += text[++i];
    } else if (c === '"') {
      quoted = !quoted;
      started = true;
    } else if (!quoted && /\s/.test(c)) {
      if (started) args.push(current);
      current = "";
      started = false;
    } else {
      current += c;
      started = true;
    }
  }
  if (started) args.push(current);
  return args;
}

/**
 * The folder of the tsx package a preload specifier names, or undefined
 * when it names another module: `tsx` and `tsx/...` resolved from the
 * working directory as Node resolves a preload, a path or file URL by the
 * package.json above the file.
 */
function tsxPackageDir(specifier: string): string | undefined {
  if (specifier === "tsx" || specifier.startsWith("tsx/")) {
    try {
      return dirname(createRequire(join(process.cwd(), "noop.js")).resolve("tsx/package.json"));
    } catch {
      return undefined; // Node would have failed to preload it already
    }
  }
  let file: string;
  if (specifier.startsWith("file:")) file = fileURLToPath(specifier);
  else if (specifier.startsWith(".") || isAbsolute(specifier)) file = resolve(process.cwd(), specifier);
  else return undefined;
  for (let dir = dirname(file); ; dir = dirname(dir)) {
    // The first package.json with a name is the package's (one without, {"type": "module"}, only marks a folder).
    const name = packageName(join(dir, "package.json"));
    if (name !== undefined) return name === "tsx" ? dir : undefined;
    if (dirname(dir) === dir) return undefined;
  }
}

function packageName(manifest: string): string | undefined {
  if (!existsSync(manifest)) return undefined;
  try {
    return (JSON.parse(readFileSync(manifest, "utf8")) as { name?: string }).name;
  } catch {
    return undefined;
  }
}

/** The file a package's export `subpath` gives an `import` (its exports map: a string, or `import` / `default` conditions). */
function exportTarget(packageDir: string, subpath: string): string {
  type Target = string | { import?: Target; default?: Target } | undefined;
  const exports = (JSON.parse(readFileSync(join(packageDir, "package.json"), "utf8")) as { exports?: Record<string, Target> }).exports;
  let target: Target = exports?.[subpath];
  while (target !== undefined && typeof target !== "string") target = target.import ?? target.default;
  if (target === undefined) throw new Error(`${join(packageDir, "package.json")} exports no ${subpath} to import`);
  return target;
}
