/**
 * Go's net/http/pprof on the admin server, for the two profiles a heap
 * has: `GET /debug/pprof/heap` and `/debug/pprof/allocs`, so `go tool pprof
 * http://HOST:PORT/debug/pprof/heap` works and continuous profilers that
 * scrape Go services (Grafana Alloy's pyroscope.scrape, Parca) read
 * shardheap unchanged. Semantics kept from Go's pprof.go:
 * - the body is the gzipped profile of all shards (toPprof), the same
 *   profile for both, with `default_sample_type` inuse_space for heap and
 *   alloc_space for allocs (Go's allocs is the heap profile opened on
 *   alloc_space); `application/octet-stream`, `Content-Disposition:
 *   attachment; filename="heap"`, `X-Content-Type-Options: nosniff`;
 * - `?seconds=N` (a positive integer) answers after N seconds with the
 *   difference over those seconds, every sample type next minus base,
 *   `duration_nanos` set and the file named "heap-delta"; `debug` with
 *   `seconds` is refused, as in Go; a client that goes away cancels the
 *   wait (nothing more is read or computed);
 * - `?debug=N` (N > 0) answers text/plain: ours is the seed's tree, not
 *   Go's legacy text format (which has no place for JS frames);
 * - `gc` is accepted and ignored (there is no collector to run);
 * - `/debug/pprof/delta_heap`, as Grafana's godeltaprof serves it (the
 *   path Alloy's godeltaprof_memory scrapes): alloc_objects and alloc_space
 *   are what was allocated since the previous call (since the start, the
 *   first time), inuse_objects and inuse_space the live heap now; sites
 *   with neither are left out. One state for the server, as godeltaprof's:
 *   two scrapers of one server each get part of the allocations. Labels
 *   travel as on every profile (string labels). `seconds` and `debug` are
 *   refused there (the span is the time since the previous call);
 * - any other name under /debug/pprof/ is a 404, `/debug/pprof/` an index.
 * Bounds Go leaves to WriteTimeout: N at most MAX_DELTA_SECONDS, and at most
 * MAX_DELTA_WAITS delta requests waiting at once (503 beyond, each holds a
 * profile in memory while it waits).
 */
import type { ServerResponse } from "node:http";
import { HttpError, InvalidValueError, UsageError } from "../errors.js";
import { siteKey, type AllocationSite, type HeapProfile } from "../memory/heap-profile.js";
import { parseInteger } from "../parse.js";
import { diffProfiles } from "../report/diff.js";
import { toPprof } from "../report/pprof.js";
import { SourceMapCache, mapProfileToSources } from "../report/source-map.js";
import { formatTree } from "../report/tree.js";
import type { Smp } from "../smp/smp.js";

/** Longest `seconds` accepted: Go bounds it by the server's WriteTimeout; ours is 15 minutes (the dashboard's history). */
export const MAX_DELTA_SECONDS = 900;
/** Delta requests waiting at once, at most. */
export const MAX_DELTA_WAITS = 16;

const PROFILES = { heap: "inuse_space", allocs: "alloc_space", delta_heap: "inuse_space" } as const;
type ProfileName = keyof typeof PROFILES;
/** The profiles served, each at /debug/pprof/NAME. */
export const DEBUG_PPROF_PROFILES = Object.keys(PROFILES) as readonly ProfileName[];
/** The query parameters a profile takes (Go's: debug, seconds, gc); the admin server refuses others. */
export const DEBUG_PPROF_PARAMS: readonly string[] = ["debug", "seconds", "gc"];

const INDEX = `<!DOCTYPE html>
<html><head><title>/debug/pprof/</title></head>
<body>
<p>/debug/pprof/ (shardheap: Go's net/http/pprof for the shared heap, all shards)</p>
<p>Set debug=1 as a query parameter for a text tree; seconds=N for the difference over N seconds.</p>
<table>
<tr><td><a href="allocs?debug=1">allocs</a></td><td>Everything allocated since profiling began (opens on alloc_space)</td></tr>
<tr><td><a href="heap?debug=1">heap</a></td><td>The live heap (opens on inuse_space)</td></tr>
<tr><td><a href="delta_heap">delta_heap</a></td><td>Allocations since the previous call, and the live heap (godeltaprof's; a download)</td></tr>
</table>
</body></html>
`;

/** A site's cumulative figures at the previous delta_heap call. */
interface AllocatedBefore {
  allocCount: number;
  allocSize: number;
}

export class DebugPprof {
  private waiting = 0;
  /** delta_heap's state: every site's cumulative figures at the previous call, by frames and labels. */
  private deltaBase = new Map<string, AllocatedBefore>();
  private deltaAt = process.hrtime.bigint();

  constructor(
    private readonly smp: Smp,
    private readonly sourceMaps: SourceMapCache,
  ) {}

  /** Serve `pathname` (under /debug/pprof/). */
  async serve(pathname: string, q: URLSearchParams, res: ServerResponse): Promise<void> {
    res.setHeader("x-content-type-options", "nosniff");
    const name = pathname.slice("/debug/pprof/".length);
    if (name === "") {
      res.writeHead(200, { "content-type": "text/html; charset=utf-8", "cache-control": "no-store", "content-length": String(Buffer.byteLength(INDEX)) });
      res.end(INDEX);
      return;
    }
    if (!Object.hasOwn(PROFILES, name)) throw new HttpError("ERR_SHARDHEAP_NOT_FOUND", `Unknown profile: ${name} (shardheap serves heap and allocs)`);
    const profileName = name as ProfileName;
    if (profileName === "delta_heap") {
      for (const p of ["seconds", "debug"]) {
        if (q.has(p)) throw new UsageError(`delta_heap takes no ${p}: it is the change since the previous call`);
      }
      await this.serveDeltaHeap(res);
      return;
    }
    const debug = q.has("debug") && q.get("debug") !== "" ? parseInteger(q.get("debug")!, "debug", 0, 2) : 0;
    const seconds = q.get("seconds");
    if (seconds !== null && seconds !== "") {
      if (!/^\d+$/.test(seconds) || Number(seconds) <= 0) throw new InvalidValueError("seconds", `invalid value for "seconds" - must be a positive integer, got ${JSON.stringify(seconds)}`);
      if (Number(seconds) > MAX_DELTA_SECONDS) throw new InvalidValueError("seconds", `seconds must be at most ${MAX_DELTA_SECONDS}, got ${seconds}`);
      if (debug !== 0) throw new UsageError("seconds and debug params are incompatible");
      await this.serveDelta(profileName, Number(seconds), res);
      return;
    }
    const profile = await mapProfileToSources(this.smp.heapProfile(), this.sourceMaps);
    if (debug !== 0) {
      const tree = formatTree(profile);
      res.writeHead(200, { "content-type": "text/plain; charset=utf-8", "cache-control": "no-store", "content-length": String(Buffer.byteLength(tree)) });
      res.end(tree);
      return;
    }
    this.sendProfile(res, profileName, profileName, profile);
  }

  private async serveDelta(name: ProfileName, seconds: number, res: ServerResponse): Promise<void> {
    if (this.waiting >= MAX_DELTA_WAITS) {
      res.setHeader("retry-after", String(seconds));
      throw new HttpError("ERR_SHARDHEAP_BUSY", `${MAX_DELTA_WAITS} profiles over time are already being taken; retry when one ends`);
    }
    this.waiting++;
    try {
      const base = this.smp.heapProfile();
      const started = process.hrtime.bigint();
      // The wait ends early when the client goes away: its socket closes.
      const completed = res.destroyed ? false : await new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => finish(true), seconds * 1000);
        const gone = (): void => finish(false);
        const finish = (done: boolean): void => {
          clearTimeout(timer);
          res.off("close", gone);
          resolve(done);
        };
        res.on("close", gone);
      });
      if (!completed) return;
      const next = this.smp.heapProfile();
      const durationNanos = Number(process.hrtime.bigint() - started);
      const delta = await mapProfileToSources(diffProfiles(base, next), this.sourceMaps);
      this.sendProfile(res, name, `${name}-delta`, delta, durationNanos);
    } finally {
      this.waiting--;
    }
  }

  /** delta_heap: allocations since the previous call, the live heap now. */
  private async serveDeltaHeap(res: ServerResponse): Promise<void> {
    const now = this.smp.heapProfile();
    const at = process.hrtime.bigint();
    const base = new Map<string, AllocatedBefore>();
    const sites: AllocationSite[] = [];
    for (const s of now.sites) {
      const key = siteKey(s.frames, s.labels);
      const before = this.deltaBase.get(key);
      base.set(key, { allocCount: s.allocCount, allocSize: s.allocSize });
      const site: AllocationSite = { ...s, allocCount: s.allocCount - (before?.allocCount ?? 0), allocSize: s.allocSize - (before?.allocSize ?? 0) };
      if (site.allocCount !== 0 || site.allocSize !== 0 || site.count !== 0 || site.size !== 0) sites.push(site);
    }
    const durationNanos = Number(at - this.deltaAt);
    this.deltaBase = base;
    this.deltaAt = at;
    const delta = await mapProfileToSources({ ...now, sites }, this.sourceMaps);
    this.sendProfile(res, "delta_heap", "heap.pprof.gz", delta, durationNanos);
  }

  private sendProfile(res: ServerResponse, name: ProfileName, filename: string, profile: HeapProfile, durationNanos?: number): void {
    const body = toPprof(profile, { defaultSampleType: PROFILES[name], ...(durationNanos === undefined ? {} : { durationNanos }) });
    res.writeHead(200, { "content-type": "application/octet-stream", "content-disposition": `attachment; filename="${filename}"`, "cache-control": "no-store", "content-length": String(body.length) });
    res.end(body);
  }
}
