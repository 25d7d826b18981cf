/**
 * Importing the user's module in a shard (Smp.start's `module`), so that a
 * syntax error in it says where it is. V8 leaves the file and line out of
 * a SyntaxError that import() rejects with (message and stack alike; Node
 * prints them only for an uncaught error, from a field a program cannot
 * read), so start() used to report just "Unexpected token '*'". On a
 * SyntaxError from a file: module the file is checked with `node --check`,
 * which prints the place, and the error is thrown again with it in front:
 * "/app/tasks.mjs:3:13: Unexpected token '*'", the source line and a caret
 * in its stack. The check runs only on that failure path (a child process,
 * ~50 ms). When the module itself parses (the error is in a module it
 * imports, or is a missing export), the error is left as it was.
 *
 * Before the import, the loaders this thread runs under are put in force
 * where Node leaves one out (shard-loaders.ts: tsx on Node 20). A
 * TypeScript file that still finds no loader says how to give it one:
 * Node's own message names only the extension.
 */
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { registerShardLoaders } from "./shard-loaders.js";

/** A check that has not answered by then is abandoned: the original error is kept. */
const CHECK_TIMEOUT_MS = 10_000;

/** Node's refusal of a TypeScript file (the module or one it imports), which it loads only under a loader or its own type stripping. */
const TYPESCRIPT_REFUSED = /Unknown file extension "\.[cm]?tsx?"/;

export async function importUserModule(url: string): Promise<Record<string, unknown>> {
  await registerShardLoaders(process.execArgv, process.env.NODE_OPTIONS);
  try {
    return (await import(url)) as Record<string, unknown>;
  } catch (e) {
    if (isUnknownExtension(e) && TYPESCRIPT_REFUSED.test(e.message)) {
      e.message +=
        ": a TypeScript task module needs a loader in the shards: run the program under tsx (npx tsx main.ts, node --import tsx main.ts), " +
        'or give Smp.start execArgv: ["--import", "tsx"]; on Node 22.6 and later --experimental-strip-types works too';
      throw e;
    }
    if (!(e instanceof SyntaxError) || !url.startsWith("file:")) throw e;
    const place = await syntaxErrorPlace(fileURLToPath(url));
    if (place === undefined) throw e;
    const located = new SyntaxError(`${place.where}: ${e.message}`, { cause: e });
    located.stack = `${place.where}\n${place.excerpt}\n\n${located.stack ?? ""}`;
    throw located;
  }
}

/**
 * Where `node --check` finds a syntax error in `path`: "PATH:LINE:COLUMN"
 * and the source line with its caret, or undefined when it finds none (or
 * says something this does not read).
 */
function syntaxErrorPlace(path: string): Promise<{ where: string; excerpt: string } | undefined> {
  return new Promise((resolve) => {
    execFile(process.execPath, ["--check", path], { timeout: CHECK_TIMEOUT_MS, encoding: "utf8" }, (error, _stdout, stderr) => {
      // node --check prints "PATH:LINE", the line, a caret line, a blank line, then the error.
      const [head, source, caret] = stderr.split("\n");
      const m = /^(.*):(\d+)$/.exec(head ?? "");
      if (error === null || m === null || source === undefined || caret === undefined || !/^\s*\^+\s*$/.test(caret)) {
        resolve(undefined);
        return;
      }
      resolve({ where: `${m[1]}:${m[2]}:${caret.indexOf("^") + 1}`, excerpt: `${source}\n${caret}` });
    });
  });
}

function isUnknownExtension(e: unknown): e is Error {
  return e instanceof Error && (e as { code?: unknown }).code === "ERR_UNKNOWN_FILE_EXTENSION";
}
