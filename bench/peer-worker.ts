/**
 * A bench fixture on a worker thread that answers one request at a time
 * on parentPort (bench/fixtures/*-peer.mjs, hop-pacer.mjs): the messaging
 * benchmarks' baselines and floors, and the hop pacer.
 */
import { Worker } from "node:worker_threads";

/** A file in bench/fixtures (from dist-bench/bench/, where the compiled benchmarks run). */
export const fixture = (name: string): URL => new URL(`../../bench/fixtures/${name}`, import.meta.url);

export class PeerWorker {
  readonly worker: Worker;
  constructor(url: URL, workerData: unknown) {
    this.worker = new Worker(url, { workerData });
  }
  /** The answer's `ns`. */
  async request(message: unknown): Promise<number> {
    const { ns } = await this.ask<{ ns?: number }>(message);
    if (ns === undefined) throw new Error("bench peer: no ns in the answer");
    return ns;
  }
  /** The whole answer to `message` (rejects with the worker's error, or one it reports as { error }). */
  ask<T>(message: unknown): Promise<T> {
    return new Promise((resolve, reject) => {
      const onMessage = (m: T & { error?: string }): void => {
        this.worker.off("error", reject);
        if (m.error !== undefined) reject(new Error(`bench peer: ${m.error}`));
        else resolve(m);
      };
      this.worker.once("message", onMessage);
      this.worker.once("error", reject);
      this.worker.postMessage(message);
    });
  }
  /** The first message the worker posts by itself (its "ready"). */
  first(): Promise<unknown> {
    return new Promise((resolve, reject) => {
      this.worker.once("message", resolve);
      this.worker.once("error", reject);
    });
  }
}
