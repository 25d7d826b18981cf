/**
 * Every report shows frames' files short (report/display-paths.ts over
 * src/frame-path.ts), and as recorded with fullPaths: the tree,
 * collapsed stacks, the SVG (plain and differential), pprof (functions'
 * filenames, read back by fromPprof and by go tool pprof), the
 * .heapprofile's urls, json, the diagnostics' top sites. The profile itself
 * keeps the recorded URLs.
 */
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { gunzipSync } from "node:zlib";
import { Profile } from "pprof-format";
import { describe, expect, it } from "vitest";
import { SharedHeap, type AllocationSite, type Frame, type HeapProfile } from "../src/index.js";
import { toCollapsed } from "../src/report/collapsed.js";
import { diffProfiles } from "../src/report/diff.js";
import { withDisplayPaths } from "../src/report/display-paths.js";
import { toFlamegraphSvg } from "../src/report/flamegraph.js";
import { toHeapprofile } from "../src/report/heapprofile.js";
import { PATH_BASE_COMMENT, toPprof } from "../src/report/pprof.js";
import { readPprof } from "../src/report/pprof-read.js";
import { renderProfile } from "../src/report/render.js";
import { formatTree } from "../src/report/tree.js";
import { tempDir } from "./helpers.js";

const cwd = process.cwd();
const frame = (functionName: string, url: string, line: number, column: number): Frame => ({ functionName, url, line, column });
// One frame of each kind: under the working directory (a file: URL), in a scoped package, a node: internal, a file elsewhere.
const app = frame("allocate", pathToFileURL(join(cwd, "src", "app.ts")).href, 12, 5);
const pkg = frame("handle", "file:///tmp/deploy-7/node_modules/@acme/server/dist/handler.js", 40, 9);
const internal = frame("processImmediate", "node:internal/timers", 483, 21);
const elsewhere = frame("main", "/opt/other/main.js", 3, 1);
const SHORT = {
  app: "allocate (src/app.ts:12:5)",
  pkg: "handle (@acme/server/dist/handler.js:40:9)",
  internal: "processImmediate (node:internal/timers:483:21)",
  elsewhere: "main (/opt/other/main.js:3:1)",
};
const FULL_APP = `allocate (${app.url}:12:5)`;
const FULL_PKG = `handle (${pkg.url}:40:9)`;

const site = (frames: Frame[], size: number, count: number): AllocationSite => ({ frames, size, count, allocCount: count, allocSize: size });
function profileOf(sites: AllocationSite[]): HeapProfile {
  return { shard: "all", sampleRate: 1, sites, totalSize: sites.reduce((n, s) => n + s.size, 0), totalCount: sites.reduce((n, s) => n + s.count, 0) };
}
const profile = profileOf([site([app, pkg, internal, elsewhere], 4096, 4), site([pkg, internal, elsewhere], 1000, 2)]);
const recorded = structuredClone(profile);

describe("withDisplayPaths", () => {
  it("shows every frame's file short, leaves the profile as recorded, shares shown frames among sites", () => {
    const shown = withDisplayPaths(profile);
    expect(shown.sites[0]!.frames.map((f) => f.url)).toEqual(["src/app.ts", "@acme/server/dist/handler.js", "node:internal/timers", "/opt/other/main.js"]);
    expect(shown.sites[0]!.frames[0]).toEqual({ ...app, url: "src/app.ts" });
    expect(profile).toEqual(recorded);
    // One shown frame per recorded one, whichever site; unchanged frames are the recorded objects.
    expect(shown.sites[1]!.frames[0]).toBe(shown.sites[0]!.frames[1]);
    expect(shown.sites[0]!.frames[2]).toBe(internal);
    expect(withDisplayPaths(profile).sites[0]!.frames[0]).toBe(shown.sites[0]!.frames[0]);
    // Already shown: nothing changes, the very same profile comes back.
    expect(withDisplayPaths(shown)).toBe(shown);
  });

  it("keeps a diff a diff, labels and folded figures", () => {
    const labelled = { ...profileOf([{ ...site([app], 10, 1), labels: { tenant: "a" } }]), folded: { count: 1, size: 1, allocCount: 1, allocSize: 1, siteCapacity: 64, full: ["sites" as const] } };
    const shown = withDisplayPaths(labelled);
    expect(shown.sites[0]!.labels).toEqual({ tenant: "a" });
    expect(shown.folded).toEqual(labelled.folded);
    const d = withDisplayPaths(diffProfiles(profileOf([]), profile));
    expect(d.base.totalSize).toBe(0);
    expect(d.sites[0]!.nextSize).toBe(4096);
    expect(d.sites[0]!.frames[0]!.url).toBe("src/app.ts");
  });
});

describe("each renderer shows files short, and as recorded with fullPaths", () => {
  it("the tree", () => {
    const tree = formatTree(profile);
    for (const name of Object.values(SHORT)) expect(tree).toContain(name);
    expect(tree).not.toContain("file://");
    expect(tree.split("\n")[1]).toBe(` |-- ${SHORT.app} (4096, #4)`);
    const full = formatTree(profile, { fullPaths: true });
    expect(full).toContain(FULL_APP);
    expect(full).toContain(FULL_PKG);
    // Caller-first: the one chain from main folds onto the root's lines.
    expect(formatTree(profile, { inverted: true }).split("\n").slice(0, 4)).toEqual(["All (5096, #6)", SHORT.elsewhere, SHORT.internal, SHORT.pkg]);
  });

  it("collapsed stacks", () => {
    expect(toCollapsed(profile)).toBe(`${SHORT.elsewhere};${SHORT.internal};${SHORT.pkg};${SHORT.app} 4096\n${SHORT.elsewhere};${SHORT.internal};${SHORT.pkg} 1000\n`);
    expect(toCollapsed(profile, { fullPaths: true })).toContain(`;${FULL_PKG};${FULL_APP} 4096\n`);
  });

  it("the SVG flamegraph, plain and differential", () => {
    const names = (svg: string): string[] => [...svg.matchAll(/data-name="([^"]*)"/g)].map((m) => m[1]!).sort();
    const expected = ["all", ...Object.values(SHORT)].sort();
    expect(names(toFlamegraphSvg(profile))).toEqual(expected);
    expect(names(toFlamegraphSvg(diffProfiles(profileOf([site([pkg, internal, elsewhere], 1000, 2)]), profile)))).toEqual(expected);
    const full = names(toFlamegraphSvg(profile, { fullPaths: true }));
    expect(full).toContain(FULL_APP);
    expect(full).toContain(FULL_PKG);
  });

  it("pprof: functions' filenames, a comment naming the directory, read back as written", () => {
    const decoded = Profile.decode(gunzipSync(toPprof(profile)));
    const str = (i: unknown): string => decoded.stringTable.strings[Number(i)]!;
    expect(decoded.function.map((f) => `${str(f.name)} ${str(f.filename)}`).sort()).toEqual(
      ["allocate src/app.ts", "handle @acme/server/dist/handler.js", "main /opt/other/main.js", "processImmediate node:internal/timers"].sort(),
    );
    expect(decoded.comment.map(str)).toEqual([PATH_BASE_COMMENT + cwd]);
    const back = readPprof(toPprof(profile));
    expect(back.pathBase).toBe(cwd);
    expect(back.profile.sites.map((s) => s.frames)).toEqual(withDisplayPaths(profile).sites.map((s) => s.frames));
    // As recorded: the URLs, no comment, nothing to read back as a base.
    const full = Profile.decode(gunzipSync(toPprof(profile, { fullPaths: true })));
    expect(full.function.map((f) => full.stringTable.strings[Number(f.filename)])).toContain(app.url);
    expect(full.comment).toEqual([]);
    expect(readPprof(toPprof(profile, { fullPaths: true }))).toMatchObject({ pathBase: undefined, profile: { sites: profile.sites } });
    // Nothing to shorten: no comment either.
    expect(Profile.decode(gunzipSync(toPprof(profileOf([site([internal, elsewhere], 8, 1)])))).comment).toEqual([]);
  });

  it("DevTools' .heapprofile: each call frame's url", () => {
    const urls = (p: ReturnType<typeof toHeapprofile>): string[] => {
      const out: string[] = [];
      const walk = (n: typeof p.head): void => {
        out.push(n.callFrame.url);
        n.children.forEach(walk);
      };
      walk(p.head);
      return [...new Set(out)].sort();
    };
    expect(urls(toHeapprofile(profile))).toEqual(["", "/opt/other/main.js", "@acme/server/dist/handler.js", "node:internal/timers", "src/app.ts"]);
    expect(urls(toHeapprofile(profile, { fullPaths: true }))).toContain(app.url);
  });

  it("json (the HeapProfile's shape), and every format through renderProfile", () => {
    const json = JSON.parse(renderProfile(profile, "json").body as string) as HeapProfile;
    expect(json.sites[0]!.frames.map((f) => f.url)).toEqual(["src/app.ts", "@acme/server/dist/handler.js", "node:internal/timers", "/opt/other/main.js"]);
    expect((JSON.parse(renderProfile(profile, "json", { fullPaths: true }).body as string) as HeapProfile).sites).toEqual(profile.sites);
    for (const format of ["tree", "collapsed", "svg", "heapprofile"] as const) {
      const body = renderProfile(profile, format, { by: "tenant" }).body as string;
      expect(body, format).toMatch(/\bsrc\/app\.ts\b/);
      expect(body, format).not.toContain(app.url);
      expect(renderProfile(profile, format, { fullPaths: true }).body as string, format).toContain(app.url);
    }
    const pprof = Profile.decode(gunzipSync(renderProfile(profile, "pprof", { pprof: { defaultSampleType: "alloc_space" } }).body as Uint8Array));
    expect(pprof.stringTable.strings).toContain("src/app.ts");
    expect(pprof.stringTable.strings[Number(pprof.defaultSampleType)]).toBe("alloc_space");
    expect(profile).toEqual(recorded);
  });

  it("the diagnostics report's top sites, raw (the allocator's) and as the admin API passes them", () => {
    process.env.SHARDHEAP_LOG = "silent";
    const heap = SharedHeap.create({ shards: 1, shardBytes: 4 << 20 });
    const shard = heap.shard(0);
    shard.setHeapProfilingEnabled(true);
    const keep = [...Array(4)].map(() => shard.malloc(1000));
    const report = shard.diagnostics();
    expect(report).toMatch(/^\s+4K\s+4 {2}\S+ \(test\/display-paths\.test\.ts:\d+:\d+\)$/m);
    expect(report).not.toContain("file://");
    for (const p of keep) shard.free(p);
  });

  const hasGo = spawnSync("go", ["version"]).status === 0;
  if (!hasGo) console.warn("go tool pprof check SKIPPED: Go is not installed (apt-get install golang-go)");
  it.runIf(hasGo)("go tool pprof shows the short names, with the directory in its comments", () => {
    const dir = tempDir("shardheap-paths-");
    writeFileSync(join(dir, "p.pb.gz"), toPprof(profile));
    const r = spawnSync("go", ["tool", "pprof", "-top", "-lines", "-nodecount=100", "-sample_index=inuse_space", "p.pb.gz"], { encoding: "utf8", cwd: dir, timeout: 120_000 });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^\s*4096B\s.*\sallocate src\/app\.ts:12$/m);
    expect(r.stdout).toMatch(/\shandle @acme\/server\/dist\/handler\.js:40$/m);
    expect(r.stdout).toMatch(/\smain \/opt\/other\/main\.js:3$/m);
    expect(r.stdout).not.toContain("file://");
    expect(r.stdout).toContain(PATH_BASE_COMMENT + cwd);
  });
});
