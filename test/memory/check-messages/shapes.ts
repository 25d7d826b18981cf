/**
 * The messages heap.check() can give, read from the checker's source
 * (src/memory/check.ts, and checkHeader in src/memory/shared-heap.ts) as
 * shapes with a placeholder for each `${...}`, and which shape a message is
 * an instance of (check-messages.test.ts).
 */
import { readFileSync } from "node:fs";
import { expect } from "vitest";

const source = (path: string): string => readFileSync(new URL(`../../../${path}`, import.meta.url), "utf8");

/** A placeholder of a message shape: what `${...}` stood for. */
export const HOLE = "…";

/**
 * Scan `code` from `i` to the `close` character at depth 0 (or the end),
 * skipping comments, and push the shape of each string or template literal
 * met at this level onto `found` (null: collect nothing, as inside a
 * placeholder). Returns the index after `close`.
 */
function scan(code: string, i: number, close: string | undefined, found: string[] | null): number {
  let depth = 0;
  while (i < code.length) {
    const c = code[i]!;
    if (c === "/" && code[i + 1] === "/") i = code.indexOf("\n", i) < 0 ? code.length : code.indexOf("\n", i);
    else if (c === "/" && code[i + 1] === "*") i = code.indexOf("*/", i + 2) + 2;
    else if (c === '"' || c === "'") {
      let text = "";
      for (i++; code[i] !== c; i++) text += code[i] === "\\" ? code[++i] : code[i];
      i++;
      found?.push(text);
    } else if (c === "`") {
      let text = "";
      for (i++; code[i] !== "`"; ) {
        if (code[i] === "\\") {
          text += code[i + 1];
          i += 2;
        } else if (code[i] === "$" && code[i + 1] === "{") {
          i = scan(code, i + 2, "}", null);
          text += HOLE;
        } else text += code[i++];
      }
      i++;
      found?.push(text);
    } else {
      if (c === "{" || c === "(" || c === "[") depth++;
      else if (depth === 0 && c === close) return i + 1;
      else if (c === "}" || c === ")" || c === "]") depth--;
      i++;
    }
  }
  return i;
}

function literalShapes(code: string): string[] {
  const found: string[] = [];
  scan(code.replace(/^import [\s\S]*?;$/gm, ""), 0, undefined, found);
  return found;
}

/** The body of `function name(...) {...}` in `code`. */
function functionBody(code: string, name: string): string {
  const at = code.indexOf(`function ${name}(`);
  expect(at, `function ${name} in the source`).toBeGreaterThanOrEqual(0);
  const open = code.indexOf("{", scan(code, code.indexOf("(", at) + 1, ")", null));
  return code.slice(open + 1, scan(code, open + 1, "}", null) - 1);
}

const CHECK_SOURCE = source("src/memory/check.ts");
/**
 * Literals of check.ts that are not messages: checkRegion's fail() puts
 * "shard N: " before each of its messages with this template.
 */
const NOT_MESSAGES = new Set([`shard ${HOLE}: ${HOLE}`]);
export const CHECK_MESSAGES = literalShapes(CHECK_SOURCE).filter((s) => !NOT_MESSAGES.has(s));
export const HEADER_MESSAGES = ["checkHeader", "headerProblem"].flatMap((name) => literalShapes(functionBody(source("src/memory/shared-heap.ts"), name)));
/** Where forEachChained (cross-shard.ts) says a chain is, in check's chain messages. */
export const CHAIN_PLACES = literalShapes(functionBody(source("src/memory/cross-shard.ts"), "forEachChained"));

export const escape = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
/** The message shape as a pattern; check.ts's region messages carry a "shard N: " prefix. */
export const pattern = (shape: string): RegExp => new RegExp(`^(?:shard \\d+: )?${shape.split(HOLE).map(escape).join("(.+?)")}$`);
const literalLength = (shape: string): number => shape.replaceAll(HOLE, "").length;
/**
 * The shapes `message` is an instance of that say the most ("shard …: … is
 * corrupt at …" also matches "class 64: pool free list is corrupt at 8";
 * the more literal text, the more specific). One, unless two messages of
 * the checker cannot be told apart.
 */
export function shapesOf(message: string): string[] {
  const matching = [...CHECK_MESSAGES, ...HEADER_MESSAGES].filter((s) => pattern(s).test(message));
  const most = Math.max(...matching.map(literalLength));
  return matching.filter((s) => literalLength(s) === most);
}
