/**
 * Smp's helpers that need none of its state: a wait with a deadline (stop's
 * two phases) and Node's refusal of a thread's flags said as the option's
 * error (start).
 */
import { InvalidValueError } from "../errors.js";
import { errorMessage } from "./call-errors.js";

/** True when `p` settles before `deadline` (performance.now() ms; undefined = no limit). */
export async function settlesBy(p: Promise<unknown>, deadline: number | undefined): Promise<boolean> {
  const settled = p.then(
    () => true,
    () => true,
  );
  if (deadline === undefined) return settled;
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), Math.max(0, deadline - performance.now()));
  });
  try {
    return await Promise.race([settled, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Node's refusal of Smp.start's execArgv for a thread, said as the option's error. */
export function refusedExecArgv(e: unknown): InvalidValueError | undefined {
  if ((e as { code?: unknown })?.code !== "ERR_WORKER_INVALID_EXEC_ARGV") return undefined;
  const flags = errorMessage(e).replace(/^.*?flags: /, "");
  return new InvalidValueError("options.execArgv", `options.execArgv: Node refuses ${flags} for a worker thread (V8 flags and process-wide ones cannot be given to a thread)`);
}
