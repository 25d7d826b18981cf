/**
 * The records of bench/memcached.ts: per load, every server's requests/s
 * and server CPU per request at steady state (the median of the rounds run
 * on a full cache; the fill phase's rounds in the note), then the
 * comparisons as ratios of this run's medians, each with its bound where
 * one is set on that load (Bounds); then every server's items held in its
 * memory, with the bytes per item its `stats` and `stats slabs` give, and
 * the floor of the items target (memcached-items.ts).
 *
 * A target missed where this machine does not give it to the references
 * or the floor either, in the same run, is a calibration error, said on
 * its line (see each comparison below for what it is checked against),
 * unless the candidate does worse than they do (machine()).
 */
import { busiestClass, reportFloors, shardSum } from "./memcached-items.js";
import type { Load } from "./memcached-loads.js";
import { stat, type Round, type Roster, type Server, type Stats } from "./memcached-roster.js";
import { compare, type BenchContext } from "./report.js";
import { median } from "./timing.js";

const BENCH = "memcached";
const MIB = 1024 * 1024;

/** The bounds set on one load's ratios; an absent one: the ratio is reported without a target. */
export interface Bounds {
  /** --smp 2 / --smp 1 requests/s, at least. */
  scale?: number;
  /** --smp 2 / --smp 1 CPU per request, at most. */
  cpuScale?: number;
  /** --smp 2 / memcached -t 2 requests/s, at least. */
  vsMemcached?: number;
  /** --heapprof=2097152 / off CPU per request, at most. */
  profiler?: number;
  /** Full-cache requests/s / the filling rate, at least (a load that fills the caches). */
  fullVsFilling?: number;
  /** The last full round's requests/s / the first's, at least. */
  flat?: number;
}

/** What a second thread or process gives a reference (requests/s) and costs it (CPU per request). */
interface Reference {
  readonly name: string;
  readonly scale: number;
  readonly cpuScale: number;
}

/** Requests/s and server CPU per request of one side of a comparison. */
interface Side {
  readonly name: string;
  readonly tps: number;
  readonly cpu: number;
}

const k = (tps: number): string => `${(tps / 1000).toFixed(1)}k`;
const x = (r: number): string => `${r.toFixed(2)}x`;
const count = (n: number): string => Math.round(n).toLocaleString("en-US");
/**
 * Whether a missed bound is the machine's doing: every one of `refs` (what
 * the references or the floor make of the same comparison) misses it too,
 * and the candidate's `mine` is no worse than the worst of them (a
 * candidate below the floor is not the machine's doing). `atLeast`: the
 * bound is a floor on the ratio (requests/s), else a ceiling (CPU).
 */
function machine(refs: readonly number[], bound: number, mine: number, atLeast: boolean): boolean {
  if (refs.length === 0) return false;
  return atLeast ? refs.every((r) => r < bound) && mine >= Math.min(...refs) : refs.every((r) => r > bound) && mine <= Math.max(...refs);
}

const roundSide = (name: string, r: Round): Side => ({ name, tps: r.tps, cpu: r.cpuUsPerOp });
const sideOf = (name: string, rounds: readonly Round[]): Side => ({ name, tps: median(rounds.map((r) => r.tps)), cpu: median(rounds.map((r) => r.cpuUsPerOp)) });

/** The records of one load. */
export function reportLoad(ctx: BenchContext, load: Load, bounds: Bounds, servers: Roster, loadAverages: string): void {
  const at = `[${load.name}]`;
  if (load.missing !== undefined) {
    ctx.record({ bench: BENCH, candidate: `skipped ${at}`, note: `skipped: ${load.missing}` });
    return;
  }
  const rounds = (s: Server): Round[] => (s.failure === undefined ? (s.rounds.get(load) ?? []) : []);
  const full = (s: Server): Round[] => rounds(s).filter((r) => r.phase === "full");
  const filling = (s: Server): Round[] => rounds(s).filter((r) => r.phase !== "full");
  const ran = (s: Server): boolean => full(s).length > 0;
  const why = (s: Server): string => (s.missing !== undefined ? `skipped: ${s.missing}` : `failed: ${s.failure ?? "no full-cache rounds"}`);
  const side = (s: Server): Side => sideOf(s.name, full(s));
  const { m1, m2, s1, s2, sp, c1, c2, fl, fo } = servers;
  const reference = ran(m2) ? m2 : undefined;

  for (const s of Object.values(servers)) {
    const candidate = `${s.name} ${at}`;
    const g = full(s);
    if (g.length === 0) {
      ctx.record({ bench: BENCH, candidate, note: why(s) });
      continue;
    }
    const me = side(s);
    const ref = reference === undefined || s === reference ? undefined : side(reference);
    const misses = g.reduce((a, r) => a + r.misses, 0) / g.reduce((a, r) => a + r.ops, 0);
    const setErrors = rounds(s).reduce((a, r) => a + r.setErrors, 0);
    const fills = filling(s);
    const fillText =
      fills.length === 0
        ? ""
        : `; filling: ${fills.map((r) => `${k(r.tps)}${r.phase === "filled" ? " (filled in it)" : ""} at ${r.cpuUsPerOp.toFixed(2)} us`).join(", ")}`;
    ctx.record({
      bench: BENCH,
      candidate,
      nsPerOp: 1e9 / me.tps,
      minNsPerOp: 1e9 / Math.max(...g.map((r) => r.tps)),
      maxNsPerOp: 1e9 / Math.min(...g.map((r) => r.tps)),
      rounds: g.length,
      ...(ref === undefined ? {} : compare(1e9 / me.tps, ref.name, 1e9 / ref.tps)),
      note:
        `full cache: ${count(me.tps)} requests/s (rounds ${g.map((r) => k(r.tps)).join(", ")}), ` +
        `server CPU ${me.cpu.toFixed(2)} us per request (rounds ${g.map((r) => r.cpuUsPerOp.toFixed(2)).join(", ")})` +
        fillText +
        (misses > 0 ? `; ${(misses * 100).toFixed(2)}% of requests were gets that missed` : "") +
        (setErrors > 0 ? `; ${count(setErrors)} sets answered SERVER_ERROR` : "") +
        (s.fillNote === undefined ? "" : `; ${s.fillNote}`),
    });
    ctx.record({
      bench: BENCH,
      metric: "CPU per request",
      candidate,
      nsPerOp: me.cpu * 1000,
      minNsPerOp: Math.min(...g.map((r) => r.cpuUsPerOp)) * 1000,
      maxNsPerOp: Math.max(...g.map((r) => r.cpuUsPerOp)) * 1000,
      rounds: g.length,
      ...(ref === undefined ? {} : compare(me.cpu * 1000, ref.name, ref.cpu * 1000)),
    });
  }

  /**
   * One comparison of `a` with `b`: requests/s (recorded as time per
   * request, so the ratio is b's requests/s over a's) or CPU per request;
   * with its bound when one is set, and the calibration error when the
   * bound is missed where the references or the floor miss it too.
   */
  const target = (o: {
    candidate: string;
    a: Side;
    b: Side;
    metric: "requests/s" | "CPU per request";
    bound: number | undefined;
    rounds: number;
    /** Why a missed bound is the machine's doing, given the bound and the candidate's ratio (a / b, in the metric's terms). */
    calibration?: (bound: number, mine: number) => string | undefined;
    note?: () => string;
  }): void => {
    const candidate = `${o.candidate} ${at}`;
    const throughput = o.metric === "requests/s";
    const value = (s: Side): number => (throughput ? 1e9 / s.tps : s.cpu * 1000);
    const maxRatio = o.bound === undefined ? undefined : throughput ? 1 / o.bound : o.bound;
    const text = o.bound === undefined ? undefined : throughput ? `requests/s >= ${o.bound}x (ratio <= ${maxRatio!.toFixed(3)})` : `CPU per request <= ${o.bound}x`;
    const mine = throughput ? o.a.tps / o.b.tps : o.a.cpu / o.b.cpu;
    const calibration = maxRatio !== undefined && value(o.a) / value(o.b) > maxRatio ? o.calibration?.(o.bound!, mine) : undefined;
    ctx.record({
      bench: BENCH,
      candidate,
      ...(throughput ? {} : { metric: "CPU per request" }),
      nsPerOp: value(o.a),
      rounds: o.rounds,
      ...compare(value(o.a), o.b.name, value(o.b), maxRatio, text === undefined || calibration === undefined ? text : `${text}: calibration error (note)`),
      note:
        (calibration !== undefined ? `calibration error: ${calibration}; ` : "") +
        `${o.a.name} makes ${x(o.a.tps / o.b.tps)} the requests/s of ${o.b.name} at ${x(o.a.cpu / o.b.cpu)} its CPU per request` +
        (o.note ? `; ${o.note()}` : "") +
        (o.bound === undefined ? " (no target on this load)" : ""),
    });
  };
  /** The comparison of a with b when both have full-cache rounds; else a line saying which has none. */
  const pair = (candidate: string, a: Server, b: Server, run: (a: Side, b: Side, rounds: number) => void): void => {
    const absent = [a, b].find((s) => !ran(s));
    if (absent !== undefined) ctx.record({ bench: BENCH, candidate: `${candidate} ${at}`, note: `${absent.name} ${why(absent)}` });
    else run(side(a), side(b), full(a).length);
  };

  // The cache full against filling, and round after round, where this load filled the caches.
  if (bounds.fullVsFilling !== undefined || bounds.flat !== undefined) {
    const fillSide = (s: Server): Side | undefined => {
      const f = filling(s);
      const pure = f.filter((r) => r.phase === "filling");
      return f.length === 0 ? undefined : sideOf(`${s.name} filling${pure.length === 0 ? " (the round it filled in)" : ""}`, pure.length > 0 ? pure : f);
    };
    const drop = (s: Server): { fill?: number; flat?: number } => {
      const f = fillSide(s);
      const g = full(s);
      return { ...(f === undefined || g.length === 0 ? {} : { fill: side(s).tps / f.tps }), ...(g.length < 2 ? {} : { flat: g.at(-1)!.tps / g[0]!.tps }) };
    };
    const others = (): string =>
      Object.values(servers)
        .filter((s) => s !== s1 && s !== s2 && ran(s))
        .map((s) => {
          const d = drop(s);
          return `${s.name}: ${d.fill === undefined ? "no filling round" : `full ${x(d.fill)} filling`}, ${d.flat === undefined ? "one full round" : `last ${x(d.flat)} first`}`;
        })
        .join("; ");
    /** The calibration error of a fill target: memcached -t 1 and -t 2 both miss it too, or the floor does (and the candidate does no worse). */
    const explained = (what: "fill" | "flat", bound: number, mine: number): string | undefined => {
      const ranRefs = [m1, m2].filter(ran);
      const refs = ranRefs.flatMap((s) => drop(s)[what] ?? []);
      if (refs.length === ranRefs.length && machine(refs, bound, mine, true)) return `memcached -t 1 and -t 2 drop as much on this machine (${refs.map(x).join(", ")})`;
      const floor = ran(fl) ? drop(fl)[what] : undefined;
      return floor !== undefined && machine([floor], bound, mine, true) ? `the floor itself makes ${x(floor)}` : undefined;
    };
    for (const s of [s1, s2]) {
      const f = fillSide(s);
      const g = full(s);
      const name = s === s1 ? "--smp 1" : "--smp 2";
      if (!ran(s) || f === undefined) {
        ctx.record({ bench: BENCH, candidate: `${name} full vs filling ${at}`, note: ran(s) ? `${s.name} has no filling round (its cache was full after the warm-up)` : `${s.name} ${why(s)}` });
      } else {
        target({
          candidate: `${name} full vs filling`,
          a: { ...side(s), name: `${s.name} full` },
          b: f,
          metric: "requests/s",
          bound: bounds.fullVsFilling,
          rounds: g.length,
          calibration: (b, mine) => explained("fill", b, mine),
          note: others,
        });
      }
      if (g.length >= 2) {
        target({
          candidate: `${name} last vs first full round`,
          a: roundSide(`${s.name} last full round`, g.at(-1)!),
          b: roundSide("the first", g[0]!),
          metric: "requests/s",
          bound: bounds.flat,
          rounds: g.length,
          calibration: (b, mine) => explained("flat", b, mine),
          note: () => `full rounds ${g.map((r) => k(r.tps)).join(", ")}`,
        });
      }
    }
  }

  // What a second thread or process gives the references on this machine, and what it costs them.
  const references: Reference[] = ([[m1, m2], [c1, c2]] as [Server, Server][])
    .filter(([one, two]) => ran(one) && ran(two))
    .map(([one, two]) => ({ name: `${two.name} / ${one.name}`, scale: side(two).tps / side(one).tps, cpuScale: side(two).cpu / side(one).cpu }));
  const referenceText = references.map((r) => `${r.name}: ${x(r.scale)} requests/s, ${x(r.cpuScale)} CPU per request`).join("; ") || "no references";
  const floorVs = (s: Server): string =>
    ran(fl) ? `the floor makes ${x(side(fl).tps / side(s).tps)} the requests/s of ${s.name} at ${x(side(fl).cpu / side(s).cpu)} its CPU per request` : `the floor ${why(fl)}`;
  const floorBelow =
    (s: Server) =>
    (bound: number, mine: number): string | undefined =>
      ran(fl) && machine([side(fl).tps / side(s).tps], bound, mine, true) ? `the floor itself is below ${bound}x ${s.name}` : undefined;
  // The one-cache floor against --smp 1: what two threads that are one cache give and cost with nothing of ours in them.
  const oneCache = (): string =>
    !ran(fo) || !ran(s1)
      ? `the one-cache floor ${why(fo)}`
      : `the one-cache floor makes ${x(side(fo).tps / side(s1).tps)} the requests/s of --smp 1 at ${x(side(fo).cpu / side(s1).cpu)} its CPU per request`;

  // --smp 2 against --smp 1: what a second shard gives (requests/s) and costs (CPU per request).
  const scaling = [
    { metric: "requests/s", bound: bounds.scale, atLeast: true, ofReference: (r: Reference) => r.scale, of: (s: Side) => s.tps, says: ["gives the references less", "is below"] },
    { metric: "CPU per request", bound: bounds.cpuScale, atLeast: false, ofReference: (r: Reference) => r.cpuScale, of: (s: Side) => s.cpu, says: ["costs the references more", "costs more than"] },
  ] as const;
  for (const m of scaling) {
    pair("--smp 2 vs --smp 1", s2, s1, (a, b, n) =>
      target({
        candidate: "--smp 2 vs --smp 1",
        a,
        b,
        metric: m.metric,
        bound: m.bound,
        rounds: n,
        calibration: (bound, mine) =>
          machine(references.map(m.ofReference), bound, mine, m.atLeast)
            ? `a second thread ${m.says[0]}`
            : ran(fo) && machine([m.of(side(fo)) / m.of(b)], bound, mine, m.atLeast)
              ? `the one-cache floor itself ${m.says[1]} ${bound}x --smp 1`
              : undefined,
        note: () => `${referenceText}; ${oneCache()}; load average ${loadAverages}`,
      }),
    );
  }
  pair("--smp 2 vs memcached -t 2", s2, m2, (a, b, n) =>
    target({ candidate: "--smp 2 vs memcached -t 2", a, b, metric: "requests/s", bound: bounds.vsMemcached, rounds: n, calibration: floorBelow(m2), note: () => floorVs(m2) }),
  );
  pair("--smp 2 vs node:cluster 2", s2, c2, (a, b, n) =>
    target({ candidate: "--smp 2 vs node:cluster 2", a, b, metric: "requests/s", bound: undefined, rounds: n, note: () => floorVs(c2) }),
  );
  pair("--heapprof=2097152 vs off", sp, s2, (a, b, n) =>
    target({
      candidate: "--heapprof=2097152 vs off",
      a,
      b,
      metric: "CPU per request",
      bound: bounds.profiler,
      rounds: n,
      // On and off ran back to back in every round: the median of those pairs says how much of the difference is the machine's drift.
      note: () => `median of the per-round pairs (on / off): CPU per request ${median(full(sp).map((r, i) => r.cpuUsPerOp / (full(s2)[i]?.cpuUsPerOp ?? NaN))).toFixed(3)}`,
    }),
  );
}

/** The bytes per item a server's `stats` (and `stats slabs`) give. */
function perItem(s: Server, stats: Stats): string {
  const items = stat(stats, "curr_items");
  const limit = stat(stats, "limit_maxbytes");
  const parts = [
    `${count(items)} items held in ${(limit / MIB).toFixed(0)} MiB (limit_maxbytes), ${count(stat(stats, "evictions"))} evictions`,
    `per item: ${(stat(stats, "bytes") / items).toFixed(0)} B of item (bytes / curr_items)`,
  ];
  const slabs = s.finalSlabs;
  if (slabs !== undefined) {
    const malloced = slabs.get("total_malloced");
    if (malloced !== undefined) parts.push(`${(malloced / items).toFixed(0)} B allocated (stats slabs total_malloced ${(malloced / MIB).toFixed(1)} MiB / curr_items)`);
    // The class holding the most chunks in use: where the items are.
    const busiest = busiestClass(slabs);
    if (busiest !== undefined) {
      parts.push(`class ${busiest}: chunk_size ${slabs.get(`${busiest}:chunk_size`)} B, ${count(slabs.get(`${busiest}:used_chunks`)!)} of ${count(slabs.get(`${busiest}:total_chunks`) ?? 0)} chunks used`);
    }
  }
  // shardheap's per-shard MemoryStats: what of -m the heap's own tables take (limit - totalMemory), and what was free when it evicted.
  const total = shardSum(stats, "totalMemory");
  const free = shardSum(stats, "freeMemory");
  // The heap holds the items' budget (-m) and, beside it, the index and the heap's own tables: it is larger than -m.
  if (total !== undefined && free !== undefined) parts.push(`the heap's shards: ${(total / MIB).toFixed(1)} MiB for -m ${(limit / MIB).toFixed(0)} MiB of items (the index and the heap's tables beside them), ${(free / MIB).toFixed(1)} MiB free (shardN:totalMemory, freeMemory)`);
  parts.push(`${(limit / items).toFixed(0)} B of the cache's memory (limit_maxbytes / curr_items)`);
  if (s.rss !== undefined) parts.push(`resident ${(s.rss / MIB).toFixed(0)} MiB: ${(s.rss / items).toFixed(0)} B per item (VmRSS of its processes)`);
  return parts.join("; ");
}

/** Every server's items held at the end, and the targets: shardheap holds as many items as memcached in the same memory. */
export function reportItems(ctx: BenchContext, servers: Roster, itemsBound: number): void {
  const bytesPerItem = (st: Stats): number => stat(st, "limit_maxbytes") / stat(st, "curr_items");
  const held = (s: Server): Stats | undefined => (s.failure === undefined && s.final !== undefined && stat(s.final, "curr_items") > 0 ? s.final : undefined);
  for (const s of Object.values(servers)) {
    const st = held(s);
    const candidate = `${s.name} [items held]`;
    if (st === undefined) {
      ctx.record({ bench: BENCH, candidate, note: s.missing !== undefined ? `skipped: ${s.missing}` : `failed: ${s.failure ?? "no items"}` });
      continue;
    }
    ctx.record({ bench: BENCH, candidate, metric: "bytes of memory per item", value: bytesPerItem(st), note: perItem(s, st) + (s.fillNote === undefined ? "" : `; ${s.fillNote}`) });
  }
  const { m1, m2, s1, s2 } = servers;
  for (const [a, b] of [
    [s1, m1],
    [s2, m2],
  ] as [Server, Server][]) {
    const candidate = `${a.name} vs ${b.name} [items held]`;
    const sa = held(a);
    const sb = held(b);
    if (sa === undefined || sb === undefined) {
      ctx.record({ bench: BENCH, candidate, note: `${(sa === undefined ? a : b).name} has no figures` });
      continue;
    }
    const maxRatio = 1 / itemsBound;
    const { baselineNsPerOp: _, ...ratio } = compare(bytesPerItem(sa), b.name, bytesPerItem(sb), maxRatio, `items held >= ${itemsBound}x (bytes per item: ratio <= ${maxRatio.toFixed(3)})`);
    ctx.record({
      bench: BENCH,
      candidate,
      metric: "bytes of memory per item",
      value: bytesPerItem(sa),
      ...ratio,
      note: `${a.name} holds ${x(stat(sa, "curr_items") / stat(sb, "curr_items"))} the items of ${b.name} (${count(stat(sa, "curr_items"))} against ${count(stat(sb, "curr_items"))}) in ${x(stat(sa, "limit_maxbytes") / stat(sb, "limit_maxbytes"))} its limit_maxbytes`,
    });
  }
  // Where an item's bytes go, and the floor of the target: limit_maxbytes over one item's allocation (memcached-items.ts).
  reportFloors(ctx, servers, itemsBound, held);
}
