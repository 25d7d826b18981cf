// Tasks for labels.mjs: allocations that say for whom they were made.
import { heapLabelSet, withHeapLabels, withHeapLabelsSync } from "shardheap";

const sessions = []; // what this shard keeps (freed by clear)

// withHeapLabels: the labels follow the async work started inside, as AsyncLocalStorage does.
export async function login({ tenant, count }, shard) {
  return withHeapLabels({ tenant, route: "/login" }, async () => {
    for (let i = 0; i < count; i++) {
      sessions.push(shard.memory.malloc(1024)); // recorded with tenant and route
      await new Promise((resolve) => setImmediate(resolve)); // still labeled after an await
    }
    return sessions.length;
  });
}

// withHeapLabelsSync: for a hot loop, with a label set made once (validated and interned).
const CACHE = heapLabelSet({ job: "cache-warmup" });
export function warm(count, shard) {
  withHeapLabelsSync(CACHE, () => {
    for (let i = 0; i < count; i++) sessions.push(shard.memory.malloc(256));
  });
}

export function clear(_arg, shard) {
  for (const p of sessions.splice(0)) shard.memory.free(p);
}
