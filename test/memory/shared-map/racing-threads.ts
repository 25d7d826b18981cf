/**
 * The harness the SharedMap race tests share: worker threads started
 * together (each fixture waits on a spin barrier in `ctl`), each posting
 * one report when done; a bound on the whole race; the threads ended
 * after the test whatever happened.
 */
import { once } from "node:events";
import { Worker } from "node:worker_threads";
import { expect, onTestFinished } from "vitest";

/** Below vitest's testTimeout (60 s), so that this message is the one seen. */
export const RACE_TIMEOUT_MS = 45_000;

/** The racing threads' reports, one per element of `workerData`, in that order; rejects after RACE_TIMEOUT_MS, saying `progress()`. */
export async function raceThreads<R>(url: URL, workerData: readonly object[], progress: () => string = () => ""): Promise<R[]> {
  const threads = workerData.map((data) => new Worker(url, { workerData: data }));
  onTestFinished(() => Promise.all(threads.map((t) => t.terminate())).then(() => undefined));
  let timer: NodeJS.Timeout | undefined;
  const reports = await Promise.race([
    Promise.all(threads.map(async (t) => ((await once(t, "message")) as [R])[0])),
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`the racing threads did not finish within ${RACE_TIMEOUT_MS} ms${progress()}`)), RACE_TIMEOUT_MS);
    }),
  ]).finally(() => clearTimeout(timer));
  await Promise.all(threads.map((t) => t.terminate()));
  return reports;
}

/** No thread failed, nor saw a failure: the one that failed first listed before those it stopped ("another thread failed"). */
export function expectNoFailures<R extends { error?: string; failures: string[] }>(reports: readonly R[], name: (r: R) => string): void {
  const errors = reports.filter((r) => r.error !== undefined).sort((a, b) => Number(/another thread failed/.test(a.error!)) - Number(/another thread failed/.test(b.error!)));
  expect(errors.map((r) => `${name(r)}: ${r.error}`)).toEqual([]);
  for (const r of reports) expect(r.failures, name(r)).toEqual([]);
}
