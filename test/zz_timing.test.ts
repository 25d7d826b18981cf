import { it } from "vitest";
import { SharedHeap } from "../src/index.js";
it("t", () => {
  for (const sb of [256*1024, 1024*1024, 4*1024*1024]) {
    const h = SharedHeap.create({ shards: 2, shardBytes: sb });
    const a = h.shard(0);
    for (let i = 0; i < 40; i++) a.malloc(1 + (i * 37) % 300);
    let t = performance.now();
    for (let i = 0; i < 20; i++) h.check();
    const c = (performance.now() - t) / 20;
    t = performance.now();
    for (let i = 0; i < 20; i++) new Uint8Array(h.buffer).slice();
    console.log(sb, "check ms", c.toFixed(2), "snapshot ms", ((performance.now() - t) / 20).toFixed(2));
  }
});
