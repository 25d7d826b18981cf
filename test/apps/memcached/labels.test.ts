/**
 * memcached's items labeled by key prefix: with the profiler on, the
 * profile grouped by `prefix` gives each prefix's item bytes, exactly (in
 * exact mode), whichever shard's connection took the set;
 * `report --by prefix` and the admin API group the same.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { gunzipSync } from "node:zlib";
import { SharedMap, groupByLabel, serveAdmin } from "../../../dist/index.js";
import { startMemcached, type MemcachedServer } from "../../../dist/apps/memcached/server.js";
import { fromPprof } from "../../../dist/report/pprof-read.js";
import { renderProfile } from "../../../dist/report/render.js";
import { clientPerShard } from "./census.js";
import { lines, RawClient } from "./client.js";

let server: MemcachedServer;
beforeAll(async () => {
  process.env.SHARDHEAP_LOG = "silent";
  server = await startMemcached({ shards: 2, memoryPerShard: "16MiB", port: 0, heapprof: true });
});
afterAll(async () => {
  await server?.close();
});

describe("memcached's items labeled by prefix", () => {
  it("the profile by prefix is each prefix's item bytes, to the byte, items of both shards", async () => {
    const [c, d] = await clientPerShard(server);
    try {
      const users = Array.from({ length: 300 }, (_, i) => `user:${i}`);
      const sessions = Array.from({ length: 120 }, (_, i) => `session:${i}`);
      const plain = Array.from({ length: 50 }, (_, i) => `plain${i}`);
      const set = (keys: string[], bytes: number): string => keys.map((k) => `set ${k} 0 0 ${bytes}\r\n${"v".repeat(bytes)}\r\n`).join("");
      // Half the users written on each shard, then replaced on the other (the old items handed back to their shard).
      const n = users.length / 2 + sessions.length + plain.length;
      expect(await c.request(set(users.slice(0, 150), 1000) + set(sessions, 3000) + set(plain, 200), lines("STORED", n), 20_000)).toBe("STORED\r\n".repeat(n));
      expect(await d.request(set(users.slice(150), 1000), lines("STORED", 150), 20_000)).toBe("STORED\r\n".repeat(150));
      // Replaced values: the old item's bytes leave its prefix.
      expect(await d.request(set(users.slice(0, 10), 5000), lines("STORED", 10))).toBe("STORED\r\n".repeat(10));
      expect(await c.request(set(users.slice(150, 160), 5000), lines("STORED", 10))).toBe("STORED\r\n".repeat(10));
      await c.request("stats\r\n", "END\r\n"); // every shard has taken back the items others replaced
      // The truth: each item's entry in the cache's index (its allocation, objectSize).
      const map = SharedMap.attach(server.smp.heap, server.index);
      const bytesOf = (keys: string[]): number =>
        keys.reduce((sum, k) => {
          const ref = map.acquire(k);
          expect(ref, k).not.toBe(0);
          const b = map.entryBytes(ref);
          map.release(ref);
          return sum + b;
        }, 0);
      const byPrefix = (): Record<string, number> => Object.fromEntries(groupByLabel(server.smp.heapProfile(), "prefix").map((g) => [g.value ?? "(none)", g.size]));
      // A replaced item's old entry is retired, and freed by its owner's next reclaim (a turn of its loop, or
      // later while a reader holds it): until then it is still user's. Bounded wait for the owners to get there.
      const userBytes = bytesOf(users);
      let groups = byPrefix();
      for (const deadline = Date.now() + 5000; groups.user !== userBytes && Date.now() < deadline; groups = byPrefix()) await new Promise((r) => setTimeout(r, 20));
      expect(groups.user).toBe(userBytes);
      expect(groups.session).toBe(bytesOf(sessions));
      // Keys without the delimiter carry no prefix label: with the index's own memory, under (none).
      expect(groups["(none)"]).toBeGreaterThanOrEqual(bytesOf(plain));
      const tree = renderProfile(server.smp.heapProfile(), "tree", { by: "prefix" }).body as string;
      expect(tree).toMatch(new RegExp(`^ [|\\\\]-- prefix=user \\(${groups.user}, #300\\)$`, "m"));
      expect(server.smp.heap.check()).toEqual([]);
      map.close();
    } finally {
      c.close();
      d.close();
    }
  });

  it("a prefix a client chose with control characters: escaped in every text output and the SVG, exact in json and pprof (the admin API's every view)", async () => {
    const CLEAR = "t\x01\x1b[2J"; // a terminal's "clear screen" after a control character XML forbids
    const c = await RawClient.open(server.port);
    const admin = await serveAdmin(server.smp);
    try {
      const keys = Array.from({ length: 20 }, (_, i) => `${CLEAR}:k${i}`);
      expect(await c.request(keys.map((k) => `set ${k} 0 0 100\r\n${"v".repeat(100)}\r\n`).join(""), lines("STORED", keys.length), 20_000)).toBe("STORED\r\n".repeat(keys.length));
      await c.request("stats\r\n", "END\r\n");
      const get = async (path: string): Promise<Response> => {
        const r = await fetch(`${admin.url}${path}`);
        expect(r.status, path).toBe(200);
        return r;
      };
      const RAW_CONTROL = /[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\ufffe\uffff]/;
      const only = `label=${encodeURIComponent(`prefix=${CLEAR}`)}`;
      for (const path of ["/v1/heapprof?format=tree&by=prefix", `/v1/heapprof?format=tree&${only}`, "/v1/heapprof?format=collapsed&by=prefix", "/debug/pprof/heap?debug=1", "/v1/memory/diagnostics"]) {
        const body = await (await get(path)).text();
        expect(body, path).not.toMatch(RAW_CONTROL);
      }
      expect(await (await get("/v1/heapprof?format=tree&by=prefix")).text()).toMatch(/^ [|\\]-- prefix=t\\x01\\x1b\[2J \(\d+, #20\)$/m);
      expect(await (await get("/v1/memory/diagnostics")).text()).toContain("[prefix=t\\x01\\x1b[2J]");
      // The dashboard's click on the value: the SVG of its sites, XML throughout.
      const svg = await (await get(`/v1/heapprof?format=svg&by=prefix&${only}`)).text();
      expect(svg).not.toMatch(RAW_CONTROL);
      expect(svg).toContain('data-name="prefix=t\\x01\\x1b[2J"');
      // Exact where the format carries any string.
      const labels = (await (await get("/v1/heapprof/labels?by=prefix")).json()) as { groups: Array<{ value?: string; count: number }> };
      expect(labels.groups.find((g) => g.value === CLEAR)?.count).toBe(20);
      const json = (await (await get(`/v1/heapprof?format=json&${only}`)).json()) as { sites: Array<{ labels?: Record<string, string> }> };
      expect(json.sites.length).toBeGreaterThan(0);
      for (const s of json.sites) expect(s.labels?.prefix).toBe(CLEAR);
      const pprof = fromPprof(new Uint8Array(await (await get(`/v1/heapprof?format=pprof&${only}`)).arrayBuffer()));
      expect(pprof.sites.map((s) => s.labels?.prefix)).toEqual(json.sites.map(() => CLEAR));
      expect(gunzipSync(new Uint8Array(await (await get("/debug/pprof/heap")).arrayBuffer())).includes(Buffer.from(CLEAR))).toBe(true);
      expect(server.smp.heap.check()).toEqual([]);
    } finally {
      await admin.close();
      c.close();
    }
  });
});
