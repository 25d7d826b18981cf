#!/usr/bin/env node
/**
 * Runs memcached's own test suite (its t/*.t files, unchanged) against
 * `shardheap memcached --smp 2`, and prints a table per file: tests
 * passed, the numbers of those failed, or why a file was not run.
 *
 *   npm run memcached-suite [-- [--checkout DIR] [--smp N] [--timeout S] [FILE.t ...]]
 *
 * DIR: a memcached checkout (its t/ is used); default: t/ extracted from
 * the fetched mirror (MIRROR below). The files run in a new temporary
 * directory, the suite's "builddir", where memcached-debug and timedrun
 * are this directory's wrapper (memcached-debug: memcached's flags to
 * shardheap's, see its comment) and shim. Each file's server output goes
 * to FILE.log there (printed at the end). Servers a file leaves running
 * are stopped by their process ids (the wrapper writes them down).
 * Exit code: 0 when every file run passed, 1 otherwise.
 */
import { execFileSync, spawn } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readFileSync, readdirSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));
const REPO = resolve(HERE, "../../../..");
const MIRROR = "/work/.mirror/memcached+memcached/repo";

/**
 * Files not run, and why: what shardheap memcached does not have
 * (docs/guide/memcached.md, "memcached's own test suite"). Everything
 * else in t/ is run.
 */
const EXCEPTIONS = {
  binary: "the binary protocol (shardheap answers it with an error and closes)",
  tls: "TLS",
  sasl: "SASL and authentication",
  extstore: "extstore (items on flash)",
  proxy: "the proxy",
  restart: "warm restart (memory files)",
  udp: "UDP",
  unix: "unix sockets",
  watcher: "watchers (the watch command)",
  debugtime: "debugtime (memcached's debug build only)",
  slabs: "slab classes and their mover (shardheap's size classes are fixed)",
  lru: "memcached's LRU threads (segmented LRU, crawler, maintainer)",
  admin: "the shutdown command (-A)",
  buffers: "-o read_buf_mem_limit: memcached's pool of response objects and read buffers (Node's streams hold them here)",
  grow: "cache_memlimit above the memory the server started with (the heap is one SharedArrayBuffer, sized at start: -m)",
  big: "a cache over 4 GiB (-m 4098: the heap is one SharedArrayBuffer of at most 4 GiB)",
};
const EXCEPTED = {
  "binary.t": "binary", "binary-get.t": "binary", "binary-sasl.t": "sasl", "binary-extstore.t": "extstore",
  "issue_50.t": "binary", "issue_67.t": "udp",
  "udp.t": "udp", "unixsocket.t": "unix", "stats-conns.t": "unix",
  "ascii-auth.t": "sasl", "ascii-auth2.t": "sasl",
  "restart.t": "restart", "watcher.t": "watcher", "watcher_connid.t": "watcher",
  "slabs-mover.t": "debugtime", "expirations.t": "debugtime",
  "slabhang.t": "slabs", "slabs-cas.t": "slabs", "slabs-reassign-chunked.t": "slabs", "slabs-reassign2.t": "slabs",
  "slabs_reassign.t": "slabs", "dyn-maxbytes.t": "grow", "refhang.t": "slabs",
  "lru-crawler.t": "lru", "lru-maintainer.t": "lru", "lru.t": "lru",
  "shutdown.t": "admin", "64bit.t": "big", "conn-limits.t": "buffers",
};
/**
 * Single tests of files that are run, not counted as failures when they
 * fail, by their TAP description, and why: each needs what shardheap does
 * not have (the rest of its file is judged as usual).
 */
const EXCEPTED_TESTS = {
  "00-startup.t": [[/^binary works$/, "binary"]],
  "stats.t": [[/^expected count of stats values$/, "statcount"]],
  "issue_22.t": [[/^check evicted$/, "chunks"]],
};
EXCEPTIONS.chunks =
  "how many 66,560-byte values memcached's -m 3 holds: 36 in its 82,792-byte slab chunks (class 31), so 40 sets evict 4 and 40 more evict 40; -m counts the items' memory here too, and a page span of 69,632 bytes holds each, 44 in all: the first 40 evict nothing, the next 40 evict 36";
EXCEPTIONS.statcount =
  "the exact number of memcached's stats fields (84, its hash table's, slab mover's, LRU crawler's, logger's and buffer pools' among them, which have no counterpart here; shardheap gives the fields that mean something here and adds shardheap_version and its per-shard lines)";
for (const f of ["chunked-extstore.t", "error-extstore.t", "extstore-buckets.t", "extstore-cas.t", "extstore-jbod.t", "extstore-overdel.t",
  "extstore-start.t", "extstore-tiered.t", "extstore-tiered2.t", "extstore.t"]) EXCEPTED[f] = "extstore";
/** The reason a file is not run, by name or by its family (proxy*.t, ssl_*.t). */
function exceptedFor(file) {
  if (EXCEPTED[file] !== undefined) return EXCEPTED[file];
  if (file.startsWith("proxy")) return "proxy";
  if (file.startsWith("ssl_")) return "tls";
  return undefined;
}

function parseArgs(argv) {
  const a = { checkout: undefined, smp: "2", timeout: 240, files: [] };
  for (let i = 0; i < argv.length; i++) {
    const x = argv[i];
    if (x === "--checkout") a.checkout = argv[++i];
    else if (x === "--smp") a.smp = argv[++i];
    else if (x === "--timeout") a.timeout = Number(argv[++i]);
    else if (x.startsWith("-")) throw new Error(`unknown flag ${x} (--checkout DIR, --smp N, --timeout S, FILE.t ...)`);
    else a.files.push(x.replace(/^t\//, ""));
  }
  return a;
}

/** The suite's working directory: t/ from the checkout (or the mirror), the wrapper and the shim. */
function makeBuildDir(checkout) {
  const dir = mkdtempSync(join(tmpdir(), "shardheap-memcached-suite-"));
  if (checkout !== undefined) {
    cpSync(join(checkout, "t"), join(dir, "t"), { recursive: true });
    // line-lengths.t reads doc/protocol.txt.
    if (existsSync(join(checkout, "doc"))) cpSync(join(checkout, "doc"), join(dir, "doc"), { recursive: true });
  } else {
    if (!existsSync(MIRROR)) throw new Error(`no checkout given and no mirror at ${MIRROR}: --checkout DIR`);
    execFileSync("sh", ["-c", `git -C '${MIRROR}' archive HEAD t doc | tar -x -C '${dir}'`]);
  }
  for (const name of ["memcached-debug", "timedrun"]) symlinkSync(join(HERE, name), join(dir, name));
  // The help, once (the wrapper prints this copy: the harness asks for it per connection).
  writeFileSync(join(dir, "help.txt"), execFileSync("node", [join(REPO, "dist/cli.js"), "memcached", "-h"]));
  return dir;
}

/** Run one file with a bound; its TAP output. */
function runFile(dir, file, a) {
  const log = join(dir, `${file}.log`);
  const pids = join(dir, `${file}.pids`);
  writeFileSync(log, "");
  writeFileSync(pids, "");
  return new Promise((done) => {
    const child = spawn("perl", ["-I", "t/lib", `t/${file}`], {
      cwd: dir,
      env: { ...process.env, SHARDHEAP_SMP: a.smp, SHARDHEAP_SUITE_LOG: log, SHARDHEAP_SUITE_PIDS: pids, SHARDHEAP_SUITE_HELP: join(dir, "help.txt"), T_MEMD_USE_DAEMON: "" },
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (err += d));
    let timedOut = false;
    // timedrun's `timeout` runs in a process group of its own and holds the file's output pipes
    // until its server ends: the servers are stopped (by id) when the file ends or runs out of time.
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        process.kill(-child.pid, "SIGKILL");
      } catch {}
      stopLeftServers(pids);
    }, a.timeout * 1000);
    let code = null;
    child.on("exit", (c) => {
      code = c;
      stopLeftServers(pids);
    });
    child.on("close", () => {
      clearTimeout(timer);
      done({ out, err, code, timedOut });
    });
  });
}

/** Servers the file left running (their ids, as the wrapper wrote them down). */
function stopLeftServers(pidFile) {
  for (const pid of readFileSync(pidFile, "utf8").split("\n").filter(Boolean).map(Number)) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {}
  }
}

/** TAP -> counts; `file`'s excepted tests (EXCEPTED_TESTS) that failed go to `excepted`. */
function summarize(r, file) {
  const plan = /^1\.\.(\d+)(?:\s*#\s*(?:skip|SKIP)\w*\s*(.*))?$/m.exec(r.out);
  const failed = [];
  const excepted = [];
  let passed = 0;
  let skipped = 0;
  for (const m of r.out.matchAll(/^(not )?ok (\d+)(?: - )?([^\n]*)$/gm)) {
    if (m[1]) {
      const why = (EXCEPTED_TESTS[file] ?? []).find(([name]) => name.test(m[3].trim()))?.[1];
      if (why !== undefined) excepted.push(`${m[2]} (${why})`);
      else if (!/#\s*TODO/i.test(m[3])) failed.push(Number(m[2]));
    } else {
      passed++;
      if (/#\s*skip/i.test(m[3])) skipped++;
    }
  }
  const planned = plan ? Number(plan[1]) : undefined;
  if (planned === 0) return { status: "skipped", note: plan[2] || "skipped by the file", passed, failed, planned };
  const ran = passed + failed.length + excepted.length;
  let note = "";
  if (r.timedOut) note = "timed out";
  else if (planned !== undefined && ran < planned) note = `stopped after ${ran} of ${planned}`;
  else if (planned === undefined) note = "no plan";
  const died = /^(.*(?:died|Failed|croak|at t\/[^ ]+ line \d+).*)$/m.exec(r.err);
  if (note !== "" && died) note += `: ${died[1].slice(0, 120)}`;
  // Test::More exits with the number of failures: the excepted ones are not the file's.
  const ok = failed.length === 0 && note === "" && (r.code === 0 || r.code === excepted.length);
  const notes = [note, skipped ? `${skipped} skipped` : "", excepted.length ? `excepted ${excepted.join(", ")}` : ""].filter(Boolean);
  return { status: ok ? "passed" : "FAILED", note: notes.join("; "), passed, failed, planned };
}

const a = parseArgs(process.argv.slice(2));
if (!existsSync(join(REPO, "dist/cli.js"))) throw new Error("no dist/cli.js: npm run build first");
const dir = makeBuildDir(a.checkout);
const all = readdirSync(join(dir, "t")).filter((f) => f.endsWith(".t")).sort();
const wanted = a.files.length > 0 ? a.files : all;
const rows = [];
for (const file of wanted) {
  if (!all.includes(file)) {
    rows.push({ file, status: "missing", note: "not in t/" });
    continue;
  }
  if (a.files.length === 0 && exceptedFor(file) !== undefined) {
    rows.push({ file, status: "not run", note: EXCEPTIONS[exceptedFor(file)] });
    continue;
  }
  const r = await runFile(dir, file, a);
  const s = summarize(r, file);
  rows.push({ file, ...s });
  process.stderr.write(`${file}: ${s.status} ${s.passed}/${s.planned ?? "?"}${s.failed.length ? ` failed ${s.failed.join(",")}` : ""} ${s.note}\n`);
}
const width = Math.max(...rows.map((r) => r.file.length));
console.log(`memcached's suite against shardheap memcached --smp ${a.smp} (files in ${dir})`);
console.log(`${"file".padEnd(width)}  result   passed  failed tests / why`);
for (const r of rows) {
  const counts = r.passed === undefined ? "" : `${r.passed}/${r.planned ?? "?"}`;
  const why = [r.failed?.length ? `failed ${r.failed.join(",")}` : "", r.note].filter(Boolean).join("; ");
  console.log(`${r.file.padEnd(width)}  ${r.status.padEnd(7)}  ${counts.padStart(7)}  ${why}`);
}
const run = rows.filter((r) => r.passed !== undefined && r.status !== "skipped");
const good = run.filter((r) => r.status === "passed").length;
console.log(`${good} of ${run.length} files run passed; ${rows.length - run.length} not run`);
const exceptedKeys = new Set(Object.values(EXCEPTED_TESTS).flatMap((list) => list.map(([, why]) => why)));
for (const key of exceptedKeys) console.log(`excepted tests (${key}): ${EXCEPTIONS[key]}`);
process.exitCode = good === run.length ? 0 : 1;
