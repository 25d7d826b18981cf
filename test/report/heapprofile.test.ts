/** DevTools .heapprofile: shape (typed against devtools-protocol), ids, positions, sizes. */
import type { Protocol } from "devtools-protocol";
import { describe, expect, it } from "vitest";
import type { HeapProfile } from "../../src/index.js";
import { toHeapprofile } from "../../src/report/heapprofile.js";

const frame = (functionName: string, line: number, url = "file:///srv/app.js") => ({ functionName, url, line, column: 7 });
const profile: HeapProfile = {
  shard: 0,
  sampleRate: 512 * 1024,
  totalSize: 3000.7,
  totalCount: 3,
  sites: [
    { frames: [frame("leafA", 10), frame("main", 30)], count: 2, size: 2000.4, allocCount: 2, allocSize: 2000 },
    { frames: [frame("leafB", 11), frame("main", 30)], count: 1, size: 1000.3, allocCount: 1, allocSize: 1000 },
    { frames: [frame("gone", 12)], count: 0, size: 0, allocCount: 5, allocSize: 500 },
  ],
};

describe("toHeapprofile", () => {
  it("is a SamplingHeapProfile: root-first tree, 0-based positions, unique ids, sizes adding up", () => {
    const hp: Protocol.HeapProfiler.SamplingHeapProfile = toHeapprofile(profile);
    expect(hp.head.callFrame.functionName).toBe("(root)");
    const main = hp.head.children[0]!;
    expect(hp.head.children).toHaveLength(1); // both sites share main
    expect(main.callFrame).toEqual({ functionName: "main", scriptId: "1", url: "file:///srv/app.js", lineNumber: 29, columnNumber: 6 });
    expect(main.children.map((c) => c.callFrame.functionName)).toEqual(["leafA", "leafB"]);
    const ids: number[] = [];
    let selfTotal = 0;
    const walk = (n: Protocol.HeapProfiler.SamplingHeapProfileNode): void => {
      ids.push(n.id);
      selfTotal += n.selfSize;
      n.children.forEach(walk);
    };
    walk(hp.head);
    expect(new Set(ids).size).toBe(ids.length);
    expect(selfTotal).toBe(Math.round(profile.totalSize));
    expect(hp.samples.map((s) => s.nodeId)).toEqual([main.children[0]!.id, main.children[1]!.id]);
    expect(hp.samples.reduce((n, s) => n + s.size, 0)).toBe(selfTotal);
    expect(JSON.parse(JSON.stringify(hp))).toEqual(hp); // plain JSON, as the file holds it
  });
});
