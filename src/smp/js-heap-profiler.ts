/**
 * One thread's JavaScript heap profiler: V8's sampling heap profiler in
 * this thread's own isolate, driven through a node:inspector Session
 * (a Session made on a worker thread connects to that worker's isolate:
 * checked on Node 20, where a shard's profile holds its own task's
 * allocations and none of the main thread's). A shard's bootstrap
 * (shard-worker.ts) keeps one, as does Smp for the main thread's shard.
 *
 * Switching: a rate (the mean sampling interval in bytes) starts V8's
 * sampler; 0 stops it. V8 keeps one sampler per isolate and ignores a
 * second start (the first interval stays), so a new rate stops the
 * sampler and starts it again: the samples taken so far are dropped, and
 * the profile begins again at the new interval. Switching off keeps the
 * profile as it stood at that moment (stopSampling's answer), sampleRate 0,
 * its objects no longer followed: what the thread held when profiling
 * stopped, until profiling starts again.
 *
 * Cost: nothing until first switched on (node:inspector is imported then);
 * while on, V8 takes a sample (a stack walk) once per `rate` bytes
 * allocated on average, and a profile read walks V8's tree of live
 * samples on this thread (2,700 samples: ~20 ms the first time, JIT
 * included). The Session's calls answer synchronously on the thread that
 * made them.
 */
import type { Session } from "node:inspector";
import { ShardError } from "../errors.js";
import type { HeapProfile } from "../memory/heap-profile.js";
import { emptyJsHeapProfile, jsHeapProfileOf, type SamplingHeapProfile } from "./js-heap-profile.js";

export class JsHeapProfiler {
  private session: Session | undefined;
  /** The interval V8's sampler runs at; 0 when it is off. */
  private interval = 0;
  /** The profile as it stood when profiling was switched off. */
  private frozen: HeapProfile | undefined;
  /** Switches and reads one after another (each awaits the inspector). */
  private turn: Promise<unknown> = Promise.resolve();

  /** `shard`: the id the profiles carry. */
  constructor(readonly shard: number) {}

  /** The mean sampling interval in bytes, 0 when off. */
  get rate(): number {
    return this.interval;
  }

  /** Sample every `rate` bytes on average from now on (0: off); the same rate again changes nothing. */
  setRate(rate: number): Promise<number> {
    return this.inTurn(async () => {
      if (rate === this.interval) return rate;
      const session = await this.connect();
      if (this.interval > 0) {
        const { profile } = await post<{ profile: SamplingHeapProfile }>(session, "HeapProfiler.stopSampling");
        this.frozen = rate === 0 ? { ...jsHeapProfileOf(profile, this.shard, this.interval), sampleRate: 0 } : undefined;
        this.interval = 0;
      }
      if (rate > 0) {
        await post(session, "HeapProfiler.startSampling", { samplingInterval: rate });
        this.frozen = undefined;
        this.interval = rate;
      }
      return rate;
    });
  }

  /** The sampled objects still live in this thread's JS heap (the frozen profile when off; empty when never on). */
  profile(): Promise<HeapProfile> {
    return this.inTurn(async () => {
      if (this.interval === 0 || this.session === undefined) return this.frozen ?? emptyJsHeapProfile(this.shard);
      const { profile } = await post<{ profile: SamplingHeapProfile }>(this.session, "HeapProfiler.getSamplingProfile");
      return jsHeapProfileOf(profile, this.shard, this.interval);
    });
  }

  /** Switch off and let go of the inspector session (the profile as it stood stays readable). */
  close(): Promise<void> {
    return this.setRate(0).then(() =>
      this.inTurn(async () => {
        this.session?.disconnect();
        this.session = undefined;
      }),
    );
  }

  private inTurn<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.turn.then(fn, fn);
    this.turn = next.catch(() => undefined);
    return next;
  }

  private async connect(): Promise<Session> {
    if (this.session) return this.session;
    let inspector: typeof import("node:inspector");
    try {
      inspector = await import("node:inspector");
    } catch (e) {
      throw new ShardError(this.shard, `shard ${this.shard}: the JS heap profiler needs node:inspector, which this Node cannot give: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
    }
    const session = new inspector.Session();
    session.connect();
    this.session = session;
    return session;
  }
}

function post<T = unknown>(session: Session, method: string, params?: object): Promise<T> {
  return new Promise((resolve, reject) => {
    session.post(method, params ?? {}, (error, result) => (error ? reject(error) : resolve(result as T)));
  });
}
