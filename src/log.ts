/**
 * shardheap's few log lines (the profiler's "Enabling heap profiler", as the
 * seed patch logs them), on stderr so they never mix with a program's
 * output. SHARDHEAP_LOG=silent turns them off.
 */
export function logInfo(message: string): void {
  if (process.env.SHARDHEAP_LOG === "silent") return;
  process.stderr.write(`shardheap: ${message}\n`);
}
