/**
 * How a frame is named in every report: `functionName (url:line:column)`,
 * as the README's trees show it; an anonymous function is named by its position
 * alone, as `(anonymous) (url:line:column)`. Paths under the working
 * directory are kept absolute: a report must not depend on where it is read.
 */
import type { Frame } from "../memory/stack-capture.js";
import { OTHER_SITES_NAME } from "../memory/site-table.js";

export function frameName(f: Frame): string {
  if (f.functionName === OTHER_SITES_NAME && f.url === "") return OTHER_SITES_NAME;
  const name = f.functionName || "(anonymous)";
  return f.url ? `${name} (${f.url}:${f.line}:${f.column})` : name;
}
