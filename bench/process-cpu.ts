/**
 * CPU time of a process and every process below it, from /proc (Linux):
 * what bench/memcached.ts reads around each load for a server's CPU per
 * request. utime + stime in /proc/PID/stat count every thread of the
 * process, ended threads too, in clock ticks (USER_HZ: 100 on Linux, so
 * 10 ms; a 4 s round at ~1.5 cores is ~600 ticks, read to within a tick).
 * Also their resident memory (VmRSS), for the memory a full cache takes.
 */
import { readdirSync, readFileSync } from "node:fs";

const CLOCK_TICKS_PER_SECOND = 100;

/** The fields of /proc/PID/stat after the command name (which may hold spaces), or undefined when the process is gone. */
function statFields(pid: number | string): string[] | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
}

/** `pid` and every process below it. */
export function processTree(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const fields = statFields(entry);
    if (fields === undefined) continue;
    const ppid = Number(fields[1]);
    const list = children.get(ppid) ?? [];
    list.push(Number(entry));
    children.set(ppid, list);
  }
  const tree = [pid];
  for (let i = 0; i < tree.length; i++) tree.push(...(children.get(tree[i]!) ?? []));
  return tree;
}

/** CPU seconds used so far, user and system, by all threads of these processes (a process that has ended adds nothing). */
export function cpuSeconds(pids: readonly number[]): number {
  let ticks = 0;
  for (const pid of pids) {
    const fields = statFields(pid);
    if (fields !== undefined) ticks += Number(fields[11]) + Number(fields[12]); // utime, stime
  }
  return ticks / CLOCK_TICKS_PER_SECOND;
}

/** Resident memory of these processes, bytes: the sum of their VmRSS (a process that has ended adds nothing). */
export function rssBytes(pids: readonly number[]): number {
  let kib = 0;
  for (const pid of pids) {
    let status: string;
    try {
      status = readFileSync(`/proc/${pid}/status`, "utf8");
    } catch {
      continue;
    }
    kib += Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1] ?? 0);
  }
  return kib * 1024;
}
