/**
 * `shardheap stress` end to end in a temp dir, with short durations. Every
 * wait on a child is bounded, and a child still running when its test
 * ends is killed (helpers.ts spawnCli).
 */
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { Profile } from "pprof-format";
import { describe, expect, it } from "vitest";
import { runCli, spawnCli, tempDir } from "../../helpers.js";

const FILES = ["heapprof.svg", "heapprof.collapsed", "heapprof.pb.gz", "heapprof.heapprofile", "heap.img"];

/**
 * Every report file is there and valid. `withSites`: also that the profile
 * names the workload's allocation sites (a run interrupted on a starved CI
 * machine may have sampled nothing yet, so the Ctrl-C test asks only for
 * valid files).
 */
function checkReport(out: string, withSites: boolean): void {
  for (const f of FILES) expect(existsSync(join(out, f)), f).toBe(true);
  expect(readFileSync(join(out, "heapprof.svg"), "utf8")).toMatch(/^<\?xml/);
  const pprof = Profile.decode(gunzipSync(readFileSync(join(out, "heapprof.pb.gz"))));
  if (withSites) {
    expect(readFileSync(join(out, "heapprof.collapsed"), "utf8")).toMatch(/allocate\w+ \(.*workload\.ts:\d+:\d+\) \d+$/m);
    expect(pprof.sample.length).toBeGreaterThan(0);
  }
  expect(JSON.parse(readFileSync(join(out, "heapprof.heapprofile"), "utf8")).head.callFrame.functionName).toBe("(root)");
  const report = runCli(["report", join(out, "heap.img")]);
  expect(report.status).toBe(0);
  expect(report.stdout).toMatch(/^All \(\d+, #\d+\)$/m);
}

describe("shardheap stress", () => {
  it("runs, shows progress, prints statistics and the tree, writes every report file", () => {
    const out = join(tempDir("shardheap-stress-"), "out");
    const r = runCli(["stress", "--duration", "1.5", "--smp", "2", "--memory", "16MiB", "--cross-shard", "0.5", "--live", "0.3", "--out", out]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^shardheap stress: 2 shards x 16M, heap profiler sampled every 64K, 1.5 s, 50% of frees cross-shard, live set 30% of each shard/m);
    expect(r.stdout).toMatch(/^\[ +1\.\ds\] +\S+ ops\/s +\S+ cross-shard frees\/s  used: s0 \S+ s1 \S+  largest free: s0 \S+ s1 \S+  failed mallocs: \S+$/m);
    expect(r.stdout).toMatch(/^shard +mallocs +frees +cross-shard +live objects +used +free +largest free span +failed mallocs$/m);
    // Per shard: free memory, its largest piece (no larger than all of it), failed allocations.
    const rows = [...r.stdout.matchAll(/^ +([01]) +\S+ +\S+ +\S+ +\S+ +\S+ +(\S+) +(\S+) +(\S+)$/gm)];
    expect(rows.map((m) => m[1])).toEqual(["0", "1"]);
    const bytes = (text: string): number => Number(text.slice(0, -1)) * 1024 ** "BKMGT".indexOf(text.slice(-1));
    for (const m of rows) expect(bytes(m[3]!)).toBeLessThanOrEqual(bytes(m[2]!));
    expect(r.stdout).toMatch(/^All \(\d+, #\d+\)$/m);
    expect(r.stdout).toMatch(/allocate(SessionState|RequestBuffer|CacheEntry) \(.*workload\.ts:\d+:\d+\)/);
    checkReport(out, true);
  });

  it("shows failed allocations per shard; with --heapprof=0 writes heap.img and no profile files, and says so", () => {
    const out = join(tempDir("shardheap-stress-"), "out");
    // 256 KiB shards: the workload's cache entries (32 to 256 KiB) often cannot fit.
    const r = runCli(["stress", "--duration", "1.2", "--smp", "1", "--memory", "256K", "--heapprof=0", "--out", out]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^shardheap stress: 1 shard x 256K, heap profiler off, 1.2 s, no cross-shard frees \(one shard\),/m);
    const failedNow = /failed mallocs: (\S+)$/m.exec(r.stdout);
    expect(failedNow, r.stdout).not.toBeNull();
    const row = /^ +0 +(?:\S+ +){7}(\S+)$/m.exec(r.stdout);
    expect(row, r.stdout).not.toBeNull();
    expect(Number(row![1]!.replace(/k$/, "000"))).toBeGreaterThan(0);
    expect(r.stdout).toMatch(/Heap profiler was off \(--heapprof to turn it on\): no heapprof\.\* files, only heap\.img/);
    expect(readdirSync(out)).toEqual(["heap.img"]);
    expect(r.stdout).toMatch(/^wrote heap\.img in /m);
    expect(runCli(["report", join(out, "heap.img")]).stdout).toBe("All (0, #0)\n");
  });

  it("Ctrl-C stops cleanly and still writes the report", async () => {
    const out = join(tempDir("shardheap-stress-"), "out");
    const stress = spawnCli(["stress", "--duration", "60", "--smp", "2", "--memory", "16MiB", "--out", out]);
    await stress.output(/ops\/s/);
    stress.child.kill("SIGINT");
    expect(await stress.exit(30_000)).toBe(0);
    expect(stress.stdout()).toMatch(/interrupted: writing the report/);
    checkReport(out, false);
  });

  it("--admin-port serves the admin API while it runs, printing its URL first", async () => {
    const out = join(tempDir("shardheap-stress-"), "out");
    const stress = spawnCli(["stress", "--duration", "5", "--smp", "2", "--memory", "16MiB", "--admin-port", "0", "--out", out]);
    const url = (await stress.output(/^admin: (http:\/\/127\.0\.0\.1:\d+)$/m))[1]!;
    const stdout = stress.stdout();
    expect(stdout.indexOf("admin: ")).toBeLessThan(stdout.search(/ops\/s|$/));
    expect((await fetch(`${url}/v1/heapprof?shard=1&rate=0`, { method: "PUT" })).status).toBe(200);
    expect(await (await fetch(`${url}/metrics`)).text()).toMatch(/^shardheap_memory_malloc_operations_total\{shard="0"\} \d+/m);
    expect((await fetch(`${url}/v1/heap/image`)).status).toBe(403); // not allowed without --admin-heap-image
    expect(await stress.exit()).toBe(0);
  });

  it("bad flags: one line naming the flag, then stress's usage alone, exit 2", () => {
    for (const args of [
      ["--duration", "0"],
      ["--duration", "1e1"],
      ["--cross-shard", "2"],
      ["--cross-shard="],
      ["--live", "1.5"],
      ["--live=-0.1"],
      ["--live"],
      ["--smp", "x"],
      ["--memory", "12XB"],
      ["--memory=64K"],
      ["--bogus"],
      ["--heapprof=fast"],
      ["--heapprof=0.5"], // was silently "off"
      ["--heapprof=1.5"], // was silently "exact"
      ["--heapprof=2GiB"], // was refused inside the shard
      ["--heapprof", "64K"], // was "unknown flag for stress: 64K"
      ["--heapprof-sites", "0"],
      ["--heapprof-sites=-1"],
      ["--heapprof-sites=2.5"],
      ["--heapprof-sites"],
      ["--heapprof-sites", "65536"], // more than 64 MiB shards hold: names --memory
      ["--admin-port", "70000"],
      ["--admin-heap-image=maybe"],
      ["--admin-heap-image"], // without --admin-port it would do nothing
    ]) {
      const r = runCli(["stress", ...args], { timeoutMs: 30_000 });
      expect(r.status, args.join(" ")).toBe(2);
      expect(r.stderr.split("\n")[0], args.join(" ")).toContain(args[0]!.replace(/=.*/, ""));
      // One line saying what is wrong, then stress's usage and flags alone.
      expect(r.stderr.split("\n").slice(1, 3), args.join(" ")).toEqual(["", expect.stringMatching(/^usage: shardheap stress /)]);
      expect(r.stderr, args.join(" ")).toMatch(/^ {2}--cross-shard R /m);
      expect(r.stderr, args.join(" ")).not.toMatch(/shardheap (report|diff|memcached)/);
    }
    expect(runCli(["stress", "--heapprof", "64K"]).stderr).toMatch(/did you mean --heapprof=64K\?/);
    expect(runCli(["stress", "--heapprof-sites", "65536"]).stderr).toMatch(/^shardheap: --heapprof-sites 65536 does not fit shards of 64M: .* 27250 sites in this one; 65536 need --memory of 153M or more\n/);
  });
});
