/**
 * Profile diffs (leak hunting): diffProfiles and every renderer on it, on
 * hand-built profiles (golden tree, signed collapsed sums, differential
 * flamegraph colours, signed pprof), reading back pprof files, and
 * `shardheap diff` end to end on heap images and pprof files. Where Go is
 * installed, `go tool pprof -top` of our diff agrees with `go tool pprof
 * -top -diff_base BASE NEXT` (the test says that it skipped otherwise).
 */
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { Profile } from "pprof-format";
import { beforeAll, describe, expect, it } from "vitest";
import { ERROR_TABLE } from "../../src/errors.js";
import { HeapFormatError, SharedHeap, type HeapProfile } from "../../src/index.js";
import { toCollapsed } from "../../src/report/collapsed.js";
import { diffProfiles, isProfileDiff, mergeProfiles } from "../../src/report/diff.js";
import { toFlamegraphSvg } from "../../src/report/flamegraph.js";
import { toPprof } from "../../src/report/pprof.js";
import { fromPprof } from "../../src/report/pprof-read.js";
import { renderProfile } from "../../src/report/render.js";
import { formatTree } from "../../src/report/tree.js";
import { profileOf as profile, runCli, siteOf as site, tempDir } from "../helpers.js";


const base = profile([
  site(["makeBuffer", "handle", "main"], 3000, 3),
  site(["makeKey", "handle", "main"], 600, 6),
  site(["startup", "main"], 400, 1),
  site(["gone"], 200, 2),
]);
const next = profile([
  site(["makeBuffer", "handle", "main"], 3000 + 1572864, 3 + 1536, { count: 5000, size: 2_000_000 }),
  site(["makeKey", "handle", "main"], 600, 6),
  site(["startup", "main"], 0, 0, { count: 1, size: 400 }),
  site(["leak", "main"], 204800, 200),
]);

/** Signed 64-bit values of a decoded pprof sample. */
const signedValues = (values: Array<number | bigint>): number[] => values.map((v) => (typeof v === "bigint" ? Number(BigInt.asIntN(64, v)) : v));

describe("diffProfiles", () => {
  it("gives next minus base per site matched by frames; sites in one profile count as zero in the other", () => {
    const d = diffProfiles(base, next);
    expect(isProfileDiff(d)).toBe(true);
    expect(isProfileDiff(next)).toBe(false);
    const byLeaf = new Map(d.sites.map((s) => [s.frames[0]!.functionName, s]));
    expect(byLeaf.get("makeBuffer")).toMatchObject({ size: 1572864, count: 1536, allocCount: 5000 - 3, allocSize: 2_000_000 - 3000, nextSize: 1575864 });
    expect(byLeaf.get("makeKey")).toMatchObject({ size: 0, count: 0, nextSize: 600 });
    expect(byLeaf.get("startup")).toMatchObject({ size: -400, count: -1, allocCount: 0, allocSize: 0, nextSize: 0 });
    expect(byLeaf.get("gone")).toMatchObject({ size: -200, count: -2, allocCount: -2, allocSize: -200, nextSize: 0 });
    expect(byLeaf.get("leak")).toMatchObject({ size: 204800, count: 200, nextSize: 204800 });
    expect(d.totalSize).toBe(next.totalSize - base.totalSize);
    expect(d.totalCount).toBe(next.totalCount - base.totalCount);
    expect(d.base.totalSize).toBe(base.totalSize);
    expect(d.next.totalSize).toBe(next.totalSize);
    // A site differs from another when any frame field differs.
    const moved = profile([{ ...site(["gone"], 200, 2), frames: [{ functionName: "gone", url: "", line: 1, column: 0 }] }]);
    expect(diffProfiles(profile([site(["gone"], 200, 2)]), moved).sites.map((s) => s.size).sort()).toEqual([-200, 200]);
  });

  it("of a profile with itself is all zeros; merged profiles add up by site", () => {
    expect(diffProfiles(next, next).sites.every((s) => s.size === 0 && s.count === 0 && s.allocSize === 0)).toBe(true);
    const merged = mergeProfiles([base, next]);
    expect(merged.totalSize).toBe(base.totalSize + next.totalSize);
    expect(merged.sites.find((s) => s.frames[0]!.functionName === "makeKey")).toMatchObject({ size: 1200, count: 12 });
    expect(merged.shard).toBe("all");
  });
});

describe("renderers on a diff", () => {
  const d = diffProfiles(base, next);

  it("tree: signed short sizes beside the exact integers, growth first, unchanged sites left out (golden)", () => {
    expect(formatTree(d)).toBe(
      [
        "All (+1.7M +1777064, #+1733)",
        " |-- makeBuffer (+1.5M +1572864, #+1536)",
        " |   handle",
        " |   main",
        " |   ",
        " |-- leak (+200K +204800, #+200)",
        " |   main",
        " |   ",
        " |-- gone (-200B -200, #-2)",
        " |   ",
        " \\-- startup (-400B -400, #-1)",
        "     main",
        "",
      ].join("\n"),
    );
    expect(formatTree(d, { inverted: true, minSize: 300 })).toBe(
      [
        "All (+1.7M +1777064, #+1733)",
        " \\-- main (+1.7M +1777264, #+1735)",
        "      |-- handle (+1.5M +1572864, #+1536)",
        "      |   makeBuffer",
        "      |   ",
        "      |-- leak (+200K +204800, #+200)",
        "      |   ",
        "      \\-- startup (-400B -400, #-1)",
        "",
      ].join("\n"),
    );
  });

  it("unchanged sites are no difference: json and pprof leave them out, the tree leaves out what prints as 0 bytes", () => {
    const self = diffProfiles(next, next);
    expect(self.sites.length).toBe(next.sites.length); // the flamegraph draws them (widths from next)
    expect(JSON.parse(renderProfile(self, "json").body as string)).toMatchObject({ sites: [], totalSize: 0, totalCount: 0 });
    expect(formatTree(self)).toBe("All (+0B 0, #0)\n");
    // A sampled site that allocated and freed one object of weight w between the two: its size is x + w - w.
    const [x, w] = [1621.0801426634891, 3751.682204961433];
    expect((x + w) - w).not.toBe(x); // floating-point residue, ~2e-13
    const b = profile([site(["churn"], x, 1.5, { count: 3, size: 5000 })], { sampleRate: 4096 });
    const n = profile([site(["churn"], (x + w) - w, 1.5, { count: 4, size: 5000 + w })], { sampleRate: 4096 });
    const churn = diffProfiles(b, n);
    expect(formatTree(churn)).toBe("All (+0B 0, #0)\n");
    expect(toCollapsed(churn)).toBe("");
    // It did allocate: json says so, at full precision.
    expect(JSON.parse(renderProfile(churn, "json").body as string).sites).toMatchObject([{ allocCount: 1, allocSize: w }]);
  });

  it("collapsed: signed integers whose sum is next's total minus base's, also for sampled (fractional) figures", () => {
    expect(toCollapsed(d)).toBe(["main;handle;makeBuffer 1572864", "main;leak 204800", "gone -200", "main;startup -400", ""].join("\n"));
    let seed = 7;
    const random = (): number => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    const sampled = (n: number): HeapProfile =>
      profile([...Array(n).keys()].map((i) => site([`f${i % 17}`, `g${i % 5}`], random() * 100_000, random() * 50)), { sampleRate: 4096 });
    for (let round = 0; round < 20; round++) {
      const [b, n] = [sampled(30 + round), sampled(25 + round * 2)];
      const sum = toCollapsed(diffProfiles(b, n))
        .trim()
        .split("\n")
        .reduce((acc, line) => acc + Number(line.slice(line.lastIndexOf(" ") + 1)), 0);
      expect(sum).toBe(Math.round(n.totalSize - b.totalSize));
    }
  });

  it("svg: widths from next, red where a frame grew and blue where it shrank, deeper for more", () => {
    const svg = toFlamegraphSvg(d);
    const frame = (name: string): { fill: string; delta: number; w: number } => {
      const m = new RegExp(`<g class="frame" [^>]*data-w="([^"]+)"[^>]*data-name="${name}"[^>]*data-delta="([^"]+)">.*?fill="([^"]+)"`).exec(svg);
      if (!m) throw new Error(`no frame ${name}`);
      return { w: Number(m[1]), delta: Number(m[2]), fill: m[3]! };
    };
    const nextTotal = next.totalSize;
    expect(frame("makeBuffer").w).toBeCloseTo(1575864 / nextTotal, 9);
    expect(frame("makeKey")).toMatchObject({ fill: "rgb(255,255,255)", delta: 0 });
    expect(frame("main")).toMatchObject({ fill: "rgb(255,0,0)", delta: 1777264 });
    expect(frame("makeBuffer").fill).toBe(`rgb(255,${Math.round(210 * (1 - 1572864 / 1777264))},${Math.round(210 * (1 - 1572864 / 1777264))})`);
    expect(frame("leak").fill).toMatch(/^rgb\(255,(\d+),\1\)$/);
    expect(svg).toContain("Heap growth");
    // startup shrank to nothing: no width, so not drawn; gone likewise.
    expect(svg).not.toContain('data-name="startup"');
    // A profile that only shrank: blue.
    const shrank = toFlamegraphSvg(diffProfiles(next, base));
    expect(/data-name="leak"/.test(shrank)).toBe(false);
    expect(shrank).toMatch(/data-name="makeBuffer"[^>]*data-delta="-1572864"><title>[^<]*-1,572,864 bytes\)<\/title><rect [^>]*fill="rgb\(\d+,\d+,255\)"/);
  });

  it("pprof: signed values per site that add up to the differences of the totals", () => {
    const decoded = Profile.decode(gunzipSync(toPprof(d)));
    const sums = [0, 0, 0, 0];
    for (const s of decoded.sample) signedValues(s.value).forEach((v, i) => (sums[i]! += v));
    expect(sums).toEqual([5000 - 3 + 1 - 1 - 2 + 200, 2_000_000 - 3000 + 400 - 400 - 200 + 204800, next.totalCount - base.totalCount, next.totalSize - base.totalSize]);
    expect(decoded.sample.length).toBe(4); // makeKey did not change: left out
  });

  it("reads back a pprof profile it wrote, signed values included; anything else is a HeapFormatError", () => {
    const again = fromPprof(toPprof(next));
    expect(again.totalSize).toBe(next.totalSize);
    expect(again.sites.map((s) => s.frames.map((f) => f.functionName).join(";")).sort()).toEqual(next.sites.map((s) => s.frames.map((f) => f.functionName).join(";")).sort());
    const signed = fromPprof(toPprof(d));
    expect(signed.totalSize).toBe(d.totalSize);
    expect(signed.sites.find((s) => s.frames[0]!.functionName === "startup")).toMatchObject({ size: -400, count: -1 });
    expect(() => fromPprof(new Uint8Array([1, 2, 3, 4, 5]), "junk")).toThrow(HeapFormatError);
    expect(() => fromPprof(new Uint8Array([0x1f, 0x8b, 8, 0, 1]), "bad gzip")).toThrow(/bad gzip is not a pprof heap profile written by shardheap: gzip/);
    const cpu = new Profile({ sampleType: [], stringTable: new Profile().stringTable });
    expect(() => fromPprof(cpu.encode(), "cpu")).toThrow(/sample types are none/);
  });
});

describe("shardheap diff", () => {
  let dir: string;
  const run = (...args: string[]) => runCli(args, { cwd: dir });
  let baseSize = 0;
  let nextSize = 0;

  function keepObjects(heap: SharedHeap, n: number, size: number): number[] {
    return [...Array(n)].map(() => heap.shard(1).malloc(size));
  }
  function leakRecords(heap: SharedHeap, n: number): number[] {
    return keepObjects(heap, n, 4096);
  }

  beforeAll(async () => {
    process.env.SHARDHEAP_LOG = "silent";
    dir = tempDir("shardheap-diff-");
    const heap = SharedHeap.create({ shards: 2, shardBytes: 4 << 20 });
    heap.shard(1).setHeapProfilingEnabled(true);
    const kept = keepObjects(heap, 30, 1000);
    await heap.saveImage(join(dir, "base.img"));
    baseSize = heap.heapProfile().totalSize;
    leakRecords(heap, 20);
    for (const p of kept.slice(0, 10)) heap.shard(1).free(p);
    await heap.saveImage(join(dir, "next.img"));
    nextSize = heap.heapProfile().totalSize;
    expect(run("report", "base.img", "--format", "pprof", "-o", "base.pb.gz").status).toBe(0);
    expect(run("report", "next.img", "--format", "pprof", "-o", "next.pb.gz").status).toBe(0);
  });

  it("renders NEXT minus BASE of two heap images in every format", () => {
    const tree = run("diff", "base.img", "next.img");
    expect(tree.status).toBe(0);
    // 20 records of 4096 bytes kept, 10 objects of 1000 bytes (a 1024-byte size class) freed.
    expect(tree.stdout).toMatch(/^All \(\+70K \+71680, #\+10\)$/m);
    expect(tree.stdout).toMatch(/^ \|-- leakRecords \(.*diff\.test\.ts:\d+:\d+\) \(\+80K \+81920, #\+20\)$/m);
    expect(tree.stdout).toMatch(/\(-10K -10240, #-10\)$/m);
    const collapsed = run("diff", "base.img", "next.img", "--format", "collapsed");
    const sum = collapsed.stdout.trim().split("\n").reduce((n, l) => n + Number(l.slice(l.lastIndexOf(" ") + 1)), 0);
    expect(sum).toBe(nextSize - baseSize);
    expect(run("diff", "base.img", "next.img", "--format", "svg").stdout).toMatch(/^<\?xml[\s\S]*fill="rgb\(255,/);
    const json = JSON.parse(run("diff", "base.img", "next.img", "--format", "json", "--shard", "1").stdout) as HeapProfile;
    expect(json.totalSize).toBe(nextSize - baseSize);
    expect(JSON.parse(run("diff", "base.img", "next.img", "--format=json", "--shard=0").stdout).sites).toEqual([]);
    expect(run("diff", "base.img", "next.img", "--format", "pprof", "-o", "d.pb.gz").status).toBe(0);
    const decoded = Profile.decode(gunzipSync(readFileSync(join(dir, "d.pb.gz"))));
    expect(decoded.sample.reduce((n, s) => n + signedValues(s.value)[3]!, 0)).toBe(nextSize - baseSize);
  });

  it("takes pprof files shardheap wrote, and a mix, with the same figures", () => {
    const fromImages = run("diff", "base.img", "next.img", "--format", "collapsed").stdout;
    expect(run("diff", "base.pb.gz", "next.pb.gz", "--format", "collapsed").stdout).toBe(fromImages);
    expect(run("diff", "base.img", "next.pb.gz", "--format", "collapsed").stdout).toBe(fromImages);
  });

  it("matches a heap image with a pprof file whose paths were shown relative to another directory", () => {
    // Written where this test's frames sit under the working directory: test/report/diff.test.ts:LINE, not the whole URL.
    const repo = process.cwd();
    expect(runCli(["report", join(dir, "next.img"), "--format", "pprof", "-o", join(dir, "next-short.pb.gz")], { cwd: repo }).status).toBe(0);
    const short = fromPprof(readFileSync(join(dir, "next-short.pb.gz")));
    expect(short.sites.some((s) => s.frames.some((f) => f.url === "test/report/diff.test.ts"))).toBe(true);
    // Diffed from the temp dir, the image's frames are shown as the file shows its own: same sites, same figures.
    const mixed = run("diff", "base.img", "next-short.pb.gz", "--format", "collapsed");
    expect(mixed.status, mixed.stderr).toBe(0);
    expect(mixed.stdout).toBe(runCli(["diff", join(dir, "base.img"), join(dir, "next.img"), "--format", "collapsed"], { cwd: repo }).stdout);
    expect(mixed.stdout).toMatch(/;leakRecords \(test\/report\/diff\.test\.ts:\d+:\d+\);.* 81920$/m);
    // The same file against its own image: no difference at all.
    expect(run("diff", "next.img", "next-short.pb.gz").stdout).toBe("All (+0B 0, #0)\n");
  });

  it("--full-paths shows the recorded URLs, in a diff as in a report", () => {
    const here = run("diff", "base.img", "next.img", "--format", "collapsed", "--full-paths").stdout;
    expect(here).toMatch(/;leakRecords \(\/.*\/test\/report\/diff\.test\.ts:\d+:\d+\);.* 81920$/m);
    const repo = process.cwd();
    const relative = runCli(["diff", join(dir, "base.img"), join(dir, "next.img"), "--format", "collapsed"], { cwd: repo }).stdout;
    expect(relative).toMatch(/;leakRecords \(test\/report\/diff\.test\.ts:\d+:\d+\);.* 81920$/m);
    expect(relative).toContain("(@vitest/runner/dist/"); // a package's file, shown as the package's
    expect(here).toContain("(file:///");
    expect(runCli(["diff", join(dir, "base.img"), join(dir, "next.img"), "--format", "collapsed", "--full-paths"], { cwd: repo }).stdout).toBe(here);
    expect(runCli(["report", join(dir, "next.img"), "--format", "tree", "--full-paths=false"], { cwd: repo }).stdout).toContain("(test/report/diff.test.ts:");
    expect(runCli(["report", join(dir, "next.img"), "--format", "tree", "--full-paths"], { cwd: repo }).stdout).not.toContain("(test/report/diff.test.ts:");
  });

  // Distinct sites for the sampled image below.
  const sampledSites = {
    smallRecords: (heap: SharedHeap, n: number) => [...Array(n)].map((_, i) => heap.shard(0).malloc(24 + (i % 200))),
    midBuffers: (heap: SharedHeap, n: number) => [...Array(n)].map((_, i) => heap.shard(0).malloc(700 + ((i * 37) % 3000))),
    bigSpans: (heap: SharedHeap, n: number) => [...Array(n)].map((_, i) => heap.shard(1).malloc(20_000 + i * 1234)),
  };

  it("an image against its own pprof export (sampled: fractional figures) is no difference, in tree, collapsed and json", async () => {
    const heap = SharedHeap.create({ shards: 2, shardBytes: 4 << 20 });
    for (const id of [0, 1]) heap.shard(id).setHeapProfilingSampleRate(4096);
    const small = sampledSites.smallRecords(heap, 3000);
    const mid = sampledSites.midBuffers(heap, 400);
    sampledSites.bigSpans(heap, 30);
    for (const p of [...small.slice(0, 1200), ...mid.slice(100, 250)]) heap.shard(0).free(p);
    await heap.saveImage(join(dir, "sampled.img"));
    // The premise: the image's estimates are fractional, in every figure.
    const sites = heap.heapProfile().sites;
    expect(sites.length).toBeGreaterThanOrEqual(3);
    for (const figure of ["count", "size", "allocCount", "allocSize"] as const) expect(sites.some((s) => !Number.isInteger(s[figure]))).toBe(true);
    expect(run("report", "sampled.img", "--format", "pprof", "-o", "sampled.pb.gz").status).toBe(0);
    for (const [a, b] of [["sampled.img", "sampled.pb.gz"], ["sampled.pb.gz", "sampled.img"]]) {
      const tree = run("diff", a!, b!);
      expect(tree.status, tree.stderr).toBe(0);
      expect(tree.stdout).toBe("All (+0B 0, #0)\n");
      expect(run("diff", a!, b!, "--format", "collapsed").stdout).toBe("");
      const json = JSON.parse(run("diff", a!, b!, "--format", "json").stdout) as HeapProfile;
      expect(json).toMatchObject({ sites: [], totalSize: 0, totalCount: 0, sampleRate: 4096 });
    }
    // Against another image, the image keeps its precision: exact fractional differences.
    const changed = JSON.parse(run("diff", "base.img", "sampled.img", "--format", "json").stdout) as HeapProfile;
    expect(changed.sites.some((s) => !Number.isInteger(s.size))).toBe(true);
  });

  it("exits as report does: 2 for bad flags and for files that are neither images nor shardheap's pprof", () => {
    writeFileSync(join(dir, "junk"), "not a profile at all");
    const junk = run("diff", "base.img", "junk");
    expect(junk.status).toBe(ERROR_TABLE.ERR_SHARDHEAP_FORMAT.exitCode);
    expect(junk.stderr).toMatch(/junk \(not a heap image: no SHARDIMG magic\) is not a pprof heap profile written by shardheap/);
    expect(junk.stderr).not.toMatch(/\n\s+at /); // one line, no stack
    expect(run("diff", "base.img").status).toBe(2);
    expect(run("diff", "base.img", "next.img", "third").status).toBe(2);
    expect(run("diff", "base.img", "next.img", "--format", "heapprofile").stderr).toMatch(/--format must be one of tree, collapsed, svg, pprof, json/);
    expect(run("diff", "base.pb.gz", "next.pb.gz", "--shard", "1").stderr).toMatch(/--shard applies to heap images/);
    expect(run("diff", "base.img", "next.img", "--shard", "2").stderr).toMatch(/--shard 2: base.img has shards 0 to 1/);
    expect(run("diff", "base.img", "missing.img").status).toBe(2);
  });

  const hasGo = spawnSync("go", ["version"]).status === 0;
  if (!hasGo) console.warn("go tool pprof check SKIPPED: Go is not installed (apt-get install golang-go)");
  it.runIf(hasGo)("go tool pprof -top of our diff agrees with go tool pprof -top -diff_base BASE NEXT", () => {
    expect(run("diff", "base.pb.gz", "next.pb.gz", "--format", "pprof", "-o", "ours.pb.gz").status).toBe(0);
    const top = (...args: string[]): Map<string, string> => {
      const r = spawnSync("go", ["tool", "pprof", "-top", "-nodecount=1000", "-sample_index=inuse_space", ...args], { encoding: "utf8", cwd: dir, timeout: 120_000 });
      expect(r.status, r.stderr).toBe(0);
      // "flat flat% sum% cum cum% name": compare flat and cum by name (percentages are of different totals).
      const rows = r.stdout.split("\n").filter((l) => /^\s*-?[\d.]+[kMG]?B?\s+-?[\d.]+%/.test(l));
      expect(rows.length).toBeGreaterThan(2);
      return new Map(rows.map((l) => {
        const f = l.trim().split(/\s+/);
        return [f.slice(5).join(" "), `${f[0]} ${f[3]}`];
      }));
    };
    const ours = top("ours.pb.gz");
    expect(ours).toEqual(top("-diff_base", "base.pb.gz", "next.pb.gz"));
    expect([...ours.keys()]).toContain("leakRecords");
    for (const index of ["alloc_space", "inuse_objects"]) {
      const a = spawnSync("go", ["tool", "pprof", "-top", `-sample_index=${index}`, "ours.pb.gz"], { encoding: "utf8", cwd: dir, timeout: 120_000 }).stdout;
      const b = spawnSync("go", ["tool", "pprof", "-top", `-sample_index=${index}`, "-diff_base", "base.pb.gz", "next.pb.gz"], { encoding: "utf8", cwd: dir, timeout: 120_000 }).stdout;
      const rows = (s: string) => s.split("\n").filter((l) => /%/.test(l) && !/^Showing/.test(l)).map((l) => l.trim().split(/\s+/).filter((_, i) => i === 0 || i === 3 || i >= 5).join(" ")).sort();
      expect(rows(a)).toEqual(rows(b));
    }
  });
});
