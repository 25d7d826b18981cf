/** Keys whose home slot, in the tests that build clusters on purpose, is known. */
import type { SharedMap } from "../../../src/index.js";
import { KeyScratch } from "../../../src/memory/shared-map/keys.js";
import * as L from "../../../src/memory/shared-map/layout.js";

/** `count` keys named `${prefix}${n}` whose home is slot 0 of a table of `slots` slots in `map`: one cluster once inserted in order. */
export function clusterKeys(map: SharedMap, slots: number, count: number, prefix: string): string[] {
  const seed = new Int32Array(map.heap.buffer)[(map.handle + L.M_SEED) >>> 2]!;
  const scratch = new KeyScratch();
  const names: string[] = [];
  for (let n = 0; names.length < count; n++) if ((scratch.ofString(`${prefix}${n}`, seed) & (slots - 1)) === 0) names.push(`${prefix}${n}`);
  return names;
}
