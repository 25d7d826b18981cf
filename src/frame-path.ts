/**
 * How a frame's file is shown in every report: short enough
 * that the file and the line stay visible in a flamegraph's box, a tree's
 * line, go tool pprof's listing, and still unambiguous.
 *
 * The rule, first match wins:
 * 1. a file inside `node_modules/<pkg>/...` (the last `node_modules` of its
 *    path: a nested or pnpm copy is named by the package that holds the
 *    file; `@scope/name` too) shows as `<pkg>/<path>`:
 *    `shardheap/src/memory/shard-allocator.ts`;
 * 2. a file under the working directory (`base`) shows relative to it:
 *    `src/app.ts`;
 * 3. anything else stays as recorded: `node:` internals, absolute paths and
 *    `file:` URLs elsewhere, `data:` and eval origins, "".
 * `file:` URLs are decoded (`my%20app` is `my app`) before the tests. The
 * rule is idempotent (a shown path is neither absolute nor a URL, so it is
 * shown as it is), which lets a profile read back from a pprof file, whose
 * frames are shown already, go through any renderer again.
 *
 * Only rendering uses it: the heap's frame records, heapProfile() and
 * heap images keep the URL V8 gave (the buffer is the source of truth).
 * It lives at the base (not in src/report) because the allocator's own
 * diagnostics report (memory/diagnostics.ts, OutOfMemoryError.report)
 * names sites too. POSIX paths only: a Windows path is left as it is.
 *
 * Why not absolute paths, or long ones with the middle cut out:
 * docs/decisions.md, "How reports show a frame's file".
 */
import { fileURLToPath } from "node:url";

const NODE_MODULES = "/node_modules/";

/**
 * The directory reports show paths relative to: the working directory, or
 * null when it is gone (process.cwd() throws ENOENT once the directory a
 * server started in is deleted; a report, an out-of-memory error's above
 * all, must not fail for that).
 */
export function workingDirectory(): string | null {
  try {
    return process.cwd();
  } catch {
    return null;
  }
}

/**
 * `url` as reports show it. `base` is the directory paths are shown
 * relative to: the working directory unless told; null shows none relative
 * (only the node_modules rule applies).
 */
export function displayPath(url: string, base: string | null = workingDirectory()): string {
  const path = absolutePathOf(url);
  if (path === undefined) return url;
  return packagePath(path) ?? (base === null ? undefined : pathUnder(path, base)) ?? url;
}

/** The absolute POSIX path a frame's URL names, or undefined (node:, data:, eval, a relative or Windows path, a file: URL of another host). */
function absolutePathOf(url: string): string | undefined {
  if (url.startsWith("/")) return url;
  if (!url.startsWith("file:")) return undefined;
  try {
    const path = fileURLToPath(url);
    return path.startsWith("/") ? path : undefined;
  } catch {
    return undefined; // file://host/..., a bad percent-escape: shown as recorded
  }
}

/** `<pkg>/<path>` for a file inside a package's folder under node_modules, else undefined. */
function packagePath(path: string): string | undefined {
  const at = path.lastIndexOf(NODE_MODULES);
  if (at < 0) return undefined;
  const rest = path.slice(at + NODE_MODULES.length);
  const parts = rest.split("/");
  // The package's name (one segment, two with a scope) and at least a file in it.
  const nameParts = rest.startsWith("@") ? 2 : 1;
  if (parts.length <= nameParts || parts.some((p) => p === "")) return undefined;
  return rest;
}

/** `path` relative to the directory `base`, when it is inside it (never `..`), else undefined. */
function pathUnder(path: string, base: string): string | undefined {
  const dir = base.endsWith("/") ? base.slice(0, -1) : base;
  // Under "/" every path would lose only its slash: no shorter, and no longer visibly absolute.
  if (dir === "" || !dir.startsWith("/")) return undefined;
  return path.startsWith(`${dir}/`) && path.length > dir.length + 1 ? path.slice(dir.length + 1) : undefined;
}
