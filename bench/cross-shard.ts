/**
 * "cross-shard": giving objects back to the shard that owns them, from
 * another thread. The owner is shard 0 on this (the main) thread; the
 * consumer is a raw worker_threads Worker (bench/fixtures/cross-shard-
 * consumer.mjs) attached with SharedHeap.attach, freeing through shard 1.
 * The owner waits on its doorbell with Atomics.waitAsync and drains when it
 * rings, as a shard's loop does (src/smp/doorbell.ts, as src/smp/shard-worker.ts uses it).
 * Times come from process.hrtime (CLOCK_MONOTONIC, one clock for every
 * thread), written by each side and compared afterwards.
 *
 * 1. Throughput. The owner allocates N objects of 64 B (untimed) and hands
 *    the pointers over in a shared array; the consumer gives every one
 *    back, and a round's time runs from the consumer's first give-back to
 *    the owner having freed them all (the last drain returned). ns/object =
 *    that time / N; median over interleaved rounds.
 *      shardheap    consumer: shard(1).free(ptr), a cross-shard push onto
 *                   shard 0's inbox; owner: drains when the doorbell rings
 *      postMessage  baseline: the consumer posts each pointer (one message
 *                   a pointer) and the owner frees it on receipt
 *      bare-list    reference floor: the same CAS push / exchange drain and
 *                   doorbell on a bare list (links in the same objects), no
 *                   allocator: no validation, no pending bit, no free; the
 *                   owner only walks what it takes (frees them untimed)
 *    Each candidate also gets a "consumer" row: the consumer's own loop
 *    time per object (the sending side alone).
 *    Target: shardheap >= 30x the postMessage throughput, i.e.
 *    ratio of ns/object <= 1/30.
 * 2. Latency of a single remote free until the owner's drain returned it
 *    (doorbell wake-up included): the consumer frees one object, writes its
 *    time, and waits for the owner's acknowledgement before sleeping a
 *    random gap (0.2..1 ms) and freeing the next. Median / p99 / max in us
 *    over LATENCY_SAMPLES frees (after LATENCY_WARMUP unrecorded ones),
 *      idle    the owner has nothing else to do
 *      loaded  the owner runs malloc/free slices of ~1 ms (a FIFO live set,
 *              each slot freed and re-allocated at its own size, so no
 *              allocation slow path drains the inbox behind the doorbell's
 *              back), yielding with setImmediate between slices
 *    with the same for postMessage as reference (ratio shown, no target).
 *    docs/ARCHITECTURE.md ("The doorbell"): a remote free reaches an idle
 *    owner well under 100 ms.
 * Every run ends with a correctness check: each object given back exactly
 * once (drained counts, shard 0's liveObjects back to the start, shard 1's
 * crossShardFrees), heap.check() empty; the worker is always terminated.
 */
import { Worker } from "node:worker_threads";
import { watchDoorbell } from "../src/smp/doorbell.js";
import { SharedHeap, type ShardAllocator } from "../src/index.js";
import { compare, type BenchModule, type BenchRecord } from "./report.js";
import { collectGarbage, DEFAULT_TIMING, median } from "./timing.js";

const BENCH = "cross-shard";
const SIZE = 64;
const SHARD_BYTES = 64 * 1024 * 1024;
/** Objects a throughput round gives back. */
const BATCH = 100_000;
/** Unrecorded warm-up rounds per throughput candidate (JIT on both threads). */
const WARMUP_ROUNDS = 2;
const TARGET_RATIO = 1 / 30;
/** A round that has not ended by then has lost objects: fail instead of hanging. */
const ROUND_TIMEOUT_MS = 30_000;

const LATENCY_SAMPLES = 2000;
const LATENCY_WARMUP = 100;
const MIN_GAP_MS = 0.2;
const MAX_GAP_MS = 1.0;
/** Length of one slice of the loaded owner's malloc/free loop. */
const LOAD_SLICE_MS = 1;
const LOAD_LIVE = 4096;
const LOAD_SIZES = [16, 64, 256, 1024];

// Control words (mirrored in the fixture). BARE_HEAD / BARE_BELL sit next to
// each other, as a region's inbox and doorbell words do.
const ACK = 0;
const BARE_HEAD = 16;
const BARE_BELL = 17;

const workerUrl = new URL("../../bench/fixtures/cross-shard-consumer.mjs", import.meta.url);

const now = (): number => Number(process.hrtime.bigint());

type Mode = "shardheap" | "postMessage" | "bare";
type Reply = { type: "done"; t0?: number; t1?: number; lost?: number };


/** The consumer thread and the request / reply plumbing around it. */
class Consumer {
  readonly worker: Worker;
  /** Receives each pointer the consumer posts (postMessage modes). */
  onPointer: (ptr: number) => void = (ptr) => this.unexpectedPointer(ptr);
  /** Rejects with the first failure (a consumer error, or a problem the owner side reports). */
  readonly failed: Promise<never>;
  private rejectFailed!: (e: Error) => void;
  private pending: { resolve(r: Reply): void; reject(e: Error): void } | undefined;
  private failure: Error | undefined;

  constructor(heap: SharedHeap, ctl: SharedArrayBuffer, ptrs: SharedArrayBuffer, tFree: SharedArrayBuffer) {
    this.failed = new Promise<never>((_, reject) => (this.rejectFailed = reject));
    this.failed.catch(() => {}); // observed through request() / until()
    this.worker = new Worker(workerUrl, { workerData: { heap: heap.buffer, shard: 1, ctl, ptrs, tFree } });
    this.worker.on("message", (m: number | { type: string; message?: string }) => {
      if (typeof m === "number") this.onPointer(m);
      else if (m.type === "error") this.fail(new Error(`cross-shard consumer: ${m.message}`));
      else {
        const p = this.pending;
        this.pending = undefined;
        p?.resolve(m as Reply);
      }
    });
    this.worker.on("error", (e) => this.fail(e));
    this.worker.on("exit", (code) => this.fail(new Error(`cross-shard consumer exited (code ${code})`)));
  }

  request(msg: object): Promise<Reply> {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => {
      this.pending = { resolve, reject };
      this.worker.postMessage(msg);
    });
  }

  throwIfFailed(): void {
    if (this.failure) throw this.failure;
  }

  unexpectedPointer(ptr: number): void {
    this.fail(new Error(`cross-shard: unexpected pointer message ${ptr}`));
  }

  /** `p`, unless the consumer fails first or `ms` pass. */
  until<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`cross-shard: ${what}: no end after ${ms} ms`)), ms);
    });
    return Promise.race([p, this.failed, timeout]).finally(() => clearTimeout(timer));
  }

  fail(e: Error): void {
    if (this.failure) return;
    this.failure = e;
    this.rejectFailed(e);
    const p = this.pending;
    this.pending = undefined;
    p?.reject(e);
  }

  async terminate(): Promise<void> {
    this.worker.removeAllListeners("exit");
    await this.worker.terminate();
  }
}

interface RoundResult {
  /** ns per object, consumer's first give-back to the owner's last free. */
  total: number;
  /** ns per object of the consumer's loop alone. */
  consumer: number;
  /** Owner drains (doorbell wake-ups that found work) in the round. */
  drains: number;
}

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))]!;
}

export const crossShard: BenchModule = {
  name: BENCH,
  title: `cross-shard free of ${SIZE} B objects from another thread: inbox + doorbell vs postMessage per pointer`,
  async run(ctx) {
    const heap = SharedHeap.create({ shards: 2, shardBytes: SHARD_BYTES });
    const owner = heap.shard(0);
    const start = owner.stats();
    const ctlBuf = new SharedArrayBuffer(256);
    const ctl = new Int32Array(ctlBuf);
    const ptrBuf = new SharedArrayBuffer(4 * Math.max(BATCH, LATENCY_WARMUP + LATENCY_SAMPLES));
    const ptrs = new Uint32Array(ptrBuf);
    const tFreeBuf = new SharedArrayBuffer(8 * (LATENCY_WARMUP + LATENCY_SAMPLES));
    const tFree = new Float64Array(tFreeBuf);
    const heapU32 = new Uint32Array(heap.buffer);
    const consumer = new Consumer(heap, ctlBuf, ptrBuf, tFreeBuf);

    // What the checks at the end compare against.
    let pushedRemote = 0; // objects the consumer freed through shard 1 (cross-shard pushes)
    let drainedRemote = 0; // objects shard 0's drains returned
    const unexpectedDrain = (n: number): void => consumer.fail(new Error(`cross-shard: unexpected drain of ${n} objects`));
    let onDrain = unexpectedDrain;
    const doorbell = watchDoorbell(owner.i32, owner.doorbell, () => owner.drainCrossShardFrees(), (n) => {
      drainedRemote += n;
      onDrain(n);
    });
    let onBare = (n: number): void => consumer.fail(new Error(`cross-shard: unexpected bare-list drain of ${n} objects`));
    const drainBare = (): number => {
      if (Atomics.load(ctl, BARE_HEAD) === 0) return 0;
      let p = Atomics.exchange(ctl, BARE_HEAD, 0);
      let n = 0;
      while (p !== 0) {
        p = heapU32[p >>> 2]!;
        n++;
      }
      return n;
    };
    const bareBell = watchDoorbell(ctl, BARE_BELL, drainBare, (n) => onBare(n));

    const allocate = (n: number): void => {
      for (let i = 0; i < n; i++) ptrs[i] = owner.malloc(SIZE);
    };
    const expectStart = (what: string): void => {
      const live = owner.stats().liveObjects;
      if (live !== start.liveObjects) {
        throw new Error(`cross-shard: ${what}: shard 0 has ${live} live objects, expected ${start.liveObjects}`);
      }
    };

    try {
      await new Promise<void>((resolve, reject) => {
        consumer.worker.once("online", resolve);
        consumer.worker.once("error", reject);
      });

      // ------------------------------------------------------ 1. throughput
      const round = async (mode: Mode, n: number): Promise<RoundResult> => {
        allocate(n);
        collectGarbage();
        let got = 0;
        let drains = 0;
        let t1 = 0;
        let finished!: () => void;
        const allBack = new Promise<void>((resolve) => (finished = resolve));
        const count = (k: number): void => {
          got += k;
          drains++;
          if (got >= n) {
            t1 = now();
            finished();
          }
        };
        if (mode === "shardheap") onDrain = count;
        else if (mode === "bare") onBare = count;
        else
          consumer.onPointer = (p) => {
            owner.free(p);
            count(1);
          };
        const reply = await consumer.request({ type: "throughput", mode, n });
        await consumer.until(allBack, ROUND_TIMEOUT_MS, `${mode} round`);
        if (got !== n) throw new Error(`cross-shard: ${mode} round: ${got} objects came back, ${n} given`);
        if (mode === "shardheap") pushedRemote += n;
        if (mode === "bare") for (let i = 0; i < n; i++) owner.free(ptrs[i]!); // untimed: the floor frees nothing
        onDrain = unexpectedDrain;
        onBare = (k) => consumer.fail(new Error(`cross-shard: unexpected bare-list drain of ${k} objects`));
        consumer.onPointer = (p) => consumer.unexpectedPointer(p);
        expectStart(`after a ${mode} round`);
        return { total: (t1 - reply.t0!) / n, consumer: (reply.t1! - reply.t0!) / n, drains };
      };

      const modes: Mode[] = ["shardheap", "postMessage", "bare"];
      const rounds = Math.max(3, ctx.timing.rounds ?? DEFAULT_TIMING.rounds);
      ctx.progress(`${BENCH}: throughput, ${BATCH.toLocaleString("en-US")} objects a round, ${rounds} rounds of ${modes.join(", ")}`);
      for (let w = 0; w < WARMUP_ROUNDS; w++) for (const m of modes) await round(m, BATCH);
      const results = new Map<Mode, RoundResult[]>(modes.map((m) => [m, []]));
      for (let r = 0; r < rounds; r++) {
        for (const m of r % 2 === 0 ? modes : [...modes].reverse()) results.get(m)!.push(await round(m, BATCH));
      }
      const summary = (m: Mode, key: "total" | "consumer") => {
        const xs = results.get(m)!.map((x) => x[key]);
        return { nsPerOp: median(xs), minNsPerOp: Math.min(...xs), maxNsPerOp: Math.max(...xs) };
      };
      const base = summary("postMessage", "total");
      const baseConsumer = summary("postMessage", "consumer");
      const names: Record<Mode, string> = { shardheap: "shardheap", postMessage: "postMessage", bare: "bare-list" };
      for (const m of modes) {
        const drains = median(results.get(m)!.map((x) => x.drains));
        const tot = summary(m, "total");
        const rec: BenchRecord = {
          bench: BENCH,
          candidate: names[m],
          ...tot,
          opsPerRound: BATCH,
          rounds,
        };
        if (m === "shardheap") {
          Object.assign(rec, compare(tot.nsPerOp, "postMessage", base.nsPerOp, TARGET_RATIO, "ratio <= 1/30 (>= 30x)"));
        } else if (m === "bare") {
          Object.assign(rec, compare(tot.nsPerOp, "postMessage", base.nsPerOp));
        }
        rec.note =
          m === "postMessage"
            ? "one message a pointer; the owner frees each on receipt"
            : `median ${Math.round(drains)} drains a round (${Math.round(BATCH / drains)} objects a drain)` +
              (m === "bare" ? "; CAS push + exchange drain + doorbell, no allocator" : "");
        ctx.record(rec);
      }
      for (const m of modes) {
        const c = summary(m, "consumer");
        ctx.record({
          bench: BENCH,
          candidate: names[m],
          metric: "consumer",
          ...c,
          opsPerRound: BATCH,
          rounds,
          ...(m === "postMessage" ? {} : compare(c.nsPerOp, "postMessage", baseConsumer.nsPerOp)),
        });
      }

      // --------------------------------------------------------- 2. latency
      const latency = async (mode: "shardheap" | "postMessage", loaded: boolean): Promise<number[]> => {
        const n = LATENCY_WARMUP + LATENCY_SAMPLES;
        allocate(n);
        const tDrain = new Float64Array(n);
        let got = 0;
        let multi = 0;
        const back = (k: number): void => {
          const t = now();
          if (k !== 1) multi++;
          for (let j = 0; j < k && got < n; j++) tDrain[got++] = t;
          Atomics.store(ctl, ACK, got);
          Atomics.notify(ctl, ACK);
        };
        if (mode === "shardheap") onDrain = back;
        else
          consumer.onPointer = (p) => {
            owner.free(p);
            back(1);
          };
        Atomics.store(ctl, ACK, 0);

        // The loaded owner: a FIFO live set, each slot re-allocated at its own size.
        let stopLoad = (): void => {};
        let loadPairs = 0;
        let slices = 0;
        if (loaded) {
          const live = new Uint32Array(LOAD_LIVE);
          for (let i = 0; i < LOAD_LIVE; i++) live[i] = owner.malloc(LOAD_SIZES[i & 3]!);
          let stopped = false;
          let j = 0;
          const slice = (): void => {
            if (stopped) return;
            const end = performance.now() + LOAD_SLICE_MS;
            do {
              for (let k = 0; k < 256; k++) {
                owner.free(live[j]!);
                live[j] = owner.malloc(LOAD_SIZES[j & 3]!);
                j = (j + 1) & (LOAD_LIVE - 1);
              }
              loadPairs += 256;
            } while (performance.now() < end);
            slices++;
            setImmediate(slice);
          };
          setImmediate(slice);
          stopLoad = () => {
            stopped = true;
            for (let i = 0; i < LOAD_LIVE; i++) owner.free(live[i]!);
          };
        }
        let reply: Reply;
        try {
          reply = await consumer.request({ type: "latency", mode, n, minGapMs: MIN_GAP_MS, maxGapMs: MAX_GAP_MS });
        } finally {
          stopLoad();
        }
        if (reply.lost) throw new Error(`cross-shard: ${mode} latency: ${reply.lost} frees never acknowledged (drained behind the doorbell's back?)`);
        if (got !== n || multi !== 0) throw new Error(`cross-shard: ${mode} latency: ${got} of ${n} came back, ${multi} drains held more than one`);
        if (mode === "shardheap") pushedRemote += n;
        onDrain = unexpectedDrain;
        consumer.onPointer = (p) => consumer.unexpectedPointer(p);
        expectStart(`after the ${mode} latency run`);
        if (loaded && slices < 10) throw new Error(`cross-shard: the load loop ran only ${slices} slices`);
        const lat: number[] = [];
        for (let i = LATENCY_WARMUP; i < n; i++) lat.push(tDrain[i]! - tFree[i]!);
        return lat.sort((a, b) => a - b);
      };

      const stats = (xs: number[]) => ({
        medianUs: median(xs) / 1000,
        p99Us: percentile(xs, 0.99) / 1000,
        maxUs: xs[xs.length - 1]! / 1000,
      });
      ctx.progress(`${BENCH}: latency, ${LATENCY_SAMPLES} single frees ${MIN_GAP_MS}..${MAX_GAP_MS} ms apart, idle and loaded owner`);
      for (const loaded of [false, true]) {
        const kind = loaded ? "loaded" : "idle";
        const sh = await latency("shardheap", loaded);
        const pm = await latency("postMessage", loaded);
        const s = stats(sh);
        const p = stats(pm);
        const loadNote = loaded ? `; owner runs ${LOAD_SLICE_MS} ms malloc/free slices, setImmediate between` : "";
        ctx.record({
          bench: BENCH,
          candidate: `doorbell-${kind}`,
          metric: "latency",
          nsPerOp: median(sh),
          minNsPerOp: sh[0]!,
          maxNsPerOp: sh[sh.length - 1]!,
          ...s,
          rounds: sh.length,
          ...compare(median(sh), `postMessage-${kind}`, median(pm)),
          note:
            `remote free -> owner's drain returned it, median ${s.medianUs.toFixed(1)} us, p99 ${s.p99Us.toFixed(1)} us, max ${s.maxUs.toFixed(1)} us` +
            (loaded ? loadNote : "; docs/ARCHITECTURE.md: reaches an idle owner well under 100 ms"),
        });
        ctx.record({
          bench: BENCH,
          candidate: `postMessage-${kind}`,
          metric: "latency",
          nsPerOp: median(pm),
          minNsPerOp: pm[0]!,
          maxNsPerOp: pm[pm.length - 1]!,
          ...p,
          rounds: pm.length,
          note: `post -> owner freed it on receipt${loadNote}`,
        });
      }

      // ------------------------------------------------------------ checks
      onDrain = unexpectedDrain;
      consumer.throwIfFailed();
      const leftover = owner.drainCrossShardFrees();
      if (leftover !== 0) throw new Error(`cross-shard: ${leftover} objects were still in shard 0's inbox`);
      if (drainedRemote !== pushedRemote) {
        throw new Error(`cross-shard: shard 0 drained ${drainedRemote} objects, the consumer pushed ${pushedRemote}`);
      }
      const sent = heap.stats(1).crossShardFrees;
      if (sent !== pushedRemote) throw new Error(`cross-shard: shard 1 counts ${sent} cross-shard frees, expected ${pushedRemote}`);
      expectStart("at the end");
      const errors = heap.check();
      if (errors.length > 0) throw new Error(`cross-shard: heap check failed after the run: ${errors.join("; ")}`);
    } finally {
      doorbell.stop();
      bareBell.stop();
      await consumer.terminate();
    }
  },
};
