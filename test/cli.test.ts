/** `shardheap report` end to end: a heap image in a temp dir, every format, the exit codes. */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { Profile } from "pprof-format";
import { beforeAll, describe, expect, it } from "vitest";
import { ERROR_TABLE, SYSTEM_ERROR_ROW } from "../src/errors.js";
import { SharedHeap } from "../src/index.js";
import { runCli, tempDir } from "./helpers.js";

let dir: string;
let image: string;
const run = (...args: string[]) => runCli(args, { cwd: dir });

function allocateForTheReport(heap: SharedHeap): void {
  const a = heap.shard(1);
  for (let i = 0; i < 30; i++) a.malloc(1000);
  a.malloc(100_000);
}

beforeAll(async () => {
  process.env.SHARDHEAP_LOG = "silent";
  dir = tempDir("shardheap-cli-");
  const heap = SharedHeap.create({ shards: 2, shardBytes: 4 << 20 });
  heap.shard(1).setHeapProfilingEnabled(true);
  allocateForTheReport(heap);
  image = join(dir, "heap.img");
  await heap.saveImage(image);
});

describe("shardheap report", () => {
  it("prints the seed's tree by default, for all shards merged or one", () => {
    const all = run("report", image);
    expect(all.status).toBe(0);
    expect(all.stdout).toMatch(/^All \(133120, #31\)$/m);
    expect(all.stdout).toMatch(/^ \|-- allocateForTheReport \(.*cli\.test\.ts:\d+:\d+\) \(/m);
    expect(run("report", image, "--shard", "0").stdout).toBe("All (0, #0)\n");
    expect(run("report", image, "--shard", "1", "--inverted", "--min", "64K").stdout).toMatch(/^All \(133120, #31\)$/m);
  });

  it("writes every other format, to standard output or -o", () => {
    expect(run("report", image, "--format", "collapsed").stdout).toMatch(/allocateForTheReport \(.*\) 102400$/m);
    expect(run("report", image, "--format=svg").stdout).toMatch(/^<\?xml/);
    expect(JSON.parse(run("report", image, "--format", "heapprofile").stdout).head.callFrame.functionName).toBe("(root)");
    expect(JSON.parse(run("report", image, "--format", "json").stdout).totalSize).toBe(133120);
    const out = join(dir, "heap.pb.gz");
    expect(run("report", image, "--format", "pprof", "-o", out).status).toBe(0);
    const decoded = Profile.decode(gunzipSync(readFileSync(out)));
    expect(decoded.sample.reduce((n, s) => n + Number(s.value[3]), 0)).toBe(133120);
  });

  it("bad flags: one line saying what is wrong, then report's usage alone, exit 2", () => {
    for (const args of [["report"], ["report", image, "--format", "png"], ["report", image, "--min", "lots"], ["report", image, "--shard", "7"], ["report", image, "--bogus"], ["report", image, image]]) {
      const r = run(...args);
      expect(r.status, args.join(" ")).toBe(2);
      const [what, blank, usage] = r.stderr.split("\n");
      expect(what, args.join(" ")).toMatch(/^shardheap: \S/);
      expect([blank, usage], args.join(" ")).toEqual(["", "usage: shardheap report FILE [--format tree|collapsed|svg|pprof|heapprofile|json]"]);
      expect(r.stderr, args.join(" ")).toMatch(/^ {2}--min BYTES /m); // its flags, explained
      expect(r.stderr, args.join(" ")).not.toMatch(/shardheap (stress|diff|memcached)|^diff renders|^memcached serves/m);
    }
    const diff = run("diff", image);
    expect(diff.stderr).toMatch(/^shardheap: diff needs BASE and NEXT\n\nusage: shardheap diff BASE NEXT /);
    expect(diff.stderr).toMatch(/^Its flags are report's \(--format: tree, collapsed, svg, pprof, json\):\n {2}--format F/m);
    expect(diff.stderr).not.toMatch(/shardheap (stress|report|memcached)/);
  });

  it("no command, or one that does not exist: every command's synopsis, not their help; exit 2", () => {
    for (const args of [[], ["frobnicate"], ["--bogus"]]) {
      const r = run(...args);
      expect(r.status, args.join(" ")).toBe(2);
      expect(r.stderr.split("\n").slice(1, 3), args.join(" ")).toEqual(["", expect.stringMatching(/^usage: shardheap stress /)]);
      for (const command of ["report FILE", "diff BASE NEXT", "memcached"]) expect(r.stderr, args.join(" ")).toMatch(new RegExp(`^ {7}shardheap ${command} `, "m"));
      expect(r.stderr, args.join(" ")).not.toMatch(/^ {2}--/m); // no flag's explanation
      expect(r.stderr, args.join(" ")).toMatch(/^shardheap --help explains every command\.$/m);
    }
    expect(run("frobnicate").stderr.split("\n")[0]).toBe('shardheap: unknown command "frobnicate"');
  });

  it("--help prints every command's usage and help; COMMAND --help that command's alone", () => {
    const all = run("--help");
    expect(all.status).toBe(0);
    expect(all.stderr).toBe("");
    for (const text of [/^usage: shardheap stress /m, /^ {7}shardheap report FILE /m, /^ {7}shardheap diff BASE NEXT /m, /^ {7}shardheap memcached /m, /^ {2}--cross-shard R /m, /^ {2}--label N=V /m, /^diff renders NEXT minus BASE/m, /^ {2}-o idle_timeout=N /m]) {
      expect(all.stdout).toMatch(text);
    }
    expect(run("-h").stdout).toBe(all.stdout);
    const report = run("report", "--help");
    expect(report).toMatchObject({ status: 0, stderr: "" });
    expect(report.stdout).toMatch(/^usage: shardheap report FILE /);
    expect(report.stdout).not.toMatch(/shardheap (stress|diff|memcached)/);
    // The same text as a mistake's, after its first line.
    expect(run("report", "--bogus").stderr).toBe(`shardheap: unknown flag --bogus\n\n${report.stdout}`);
    const memcached = run("memcached", "--help");
    expect(memcached.status).toBe(0);
    expect(memcached.stdout).toBe(run("memcached", "-h").stdout);
    expect(memcached.stdout).toMatch(/^usage: shardheap memcached /);
  });

  it("--version prints the package's version", () => {
    const { version } = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string };
    for (const flag of ["--version", "-v"]) expect(run(flag)).toEqual({ status: 0, stdout: `${version}\n`, stderr: "" });
  });

  it("exit codes and messages come from the error table", () => {
    const usage = run("report", image, "--bogus");
    expect(usage.status).toBe(ERROR_TABLE.ERR_SHARDHEAP_USAGE.exitCode);
    expect(usage.stderr).toMatch(/^shardheap: unknown flag --bogus\n\nusage: /);
    const directory = run("report", dir); // unreadable input: one line, exit 2
    expect(directory.status).toBe(ERROR_TABLE.ERR_SHARDHEAP_FORMAT.exitCode);
    expect(directory.stderr).toMatch(/^shardheap: [^\n]*not a regular file\n$/);
    const missing = run("report", join(dir, "no-such-file.img")); // Node's ENOENT: a system error's row
    expect(missing.status).toBe(SYSTEM_ERROR_ROW.exitCode);
    expect(missing.stderr).toMatch(/^shardheap: ENOENT[^\n]*\n$/);
    const foreign = join(dir, "foreign.bin");
    writeFileSync(foreign, "not an image at all, not even close to one");
    const format = run("report", foreign);
    expect(format.status).toBe(ERROR_TABLE.ERR_SHARDHEAP_FORMAT.exitCode);
    expect(format.stderr.split("\n").length).toBe(2); // one line, no usage, no stack
  });

  it("reads values with the package's one parser: the field named, fractions of a byte and junk refused", () => {
    for (const [args, message] of [
      [["--min", "1.5"], '--min must be a whole number of bytes: "1.5" is 1.5 bytes'],
      [["--min", "1.3K"], '--min must be a whole number of bytes: "1.3K" is 1331.2 bytes'],
      [["--shard", "-1"], '--shard must be a whole number from 0 to 1023, got "-1"'],
      [["--shard=1.0"], '--shard must be a whole number from 0 to 1023, got "1.0"'],
      [["--inverted=maybe"], '--inverted must be 1, true, yes, on or 0, false, no, off; got "maybe"'],
    ] as const) {
      const r = run("report", image, ...args);
      expect(r.status, args.join(" ")).toBe(2);
      expect(r.stderr.split("\n")[0], args.join(" ")).toBe(`shardheap: ${message}`);
    }
    expect(run("report", image, "--inverted=0").stdout).toBe(run("report", image).stdout);
    expect(run("report", image, "--inverted=yes").stdout).toBe(run("report", image, "--inverted").stdout);
    expect(run("report", image, "--min=1.5K").status).toBe(0);
  });

  it("a file that is not a heap image: HeapFormatError's message, exit 2", () => {
    const foreign = join(dir, "notes.txt");
    writeFileSync(foreign, "these are not the bytes you are looking for, not at all");
    const r = run("report", foreign);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/not a shardheap heap image: wrong magic/);
    const truncated = join(dir, "truncated.img");
    writeFileSync(truncated, readFileSync(image).subarray(0, 1000));
    expect(run("report", truncated).stderr).toMatch(/checksum mismatch/);
    expect(run("report", join(dir, "missing.img")).status).toBe(2);
  });
});
