/**
 * What a service's command line asks of `shardheap memcached` once its
 * port is bound, as memcached 1.6's main does it: -u USER (a process
 * started as root goes on as USER: no supplementary groups, USER's group,
 * USER's id; the shards' worker threads share the process's credentials)
 * and -P FILE (the process id, written as that user, whole or not at all).
 * Debian's memcached.service runs memcached as root with `-u memcache -P
 * /var/run/memcached/memcached.pid`, the directory the memcache user's.
 */
import { execFileSync } from "node:child_process";
import { readFileSync, renameSync, unlinkSync, writeFileSync } from "node:fs";
import { UsageError } from "../../errors.js";

/** A user's ids, looked up as the system looks them up (id(1) asks NSS, as memcached's getpwnam). */
function lookUp(user: string): { uid: number; gid: number } {
  const ask = (flag: string): number | undefined => {
    try {
      const out = execFileSync("id", [flag, "--", user], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"], env: { ...process.env, LC_ALL: "C" } });
      return /^\d+\n?$/.test(out) ? Number(out) : undefined;
    } catch {
      return undefined;
    }
  };
  const uid = ask("-u");
  const gid = ask("-g");
  if (uid === undefined || gid === undefined) throw new UsageError(`-u ${user}: can't find the user ${user} to switch to`);
  return { uid, gid };
}

/** Whether this process runs as root (its real or effective user id 0), as memcached asks before -u applies. */
export function runningAsRoot(): boolean {
  return process.getuid?.() === 0 || process.geteuid?.() === 0;
}

/**
 * memcached's -u: a process running as root becomes `user` (groups
 * dropped, then the group, then the user id); any other process goes on
 * as it is, as memcached's does. A user that does not exist is a
 * UsageError (exit 2); a change the system refuses keeps its system
 * error's code (EPERM: exit 2, one line) with memcached's words first.
 */
export function runAs(user: string): void {
  if (!runningAsRoot()) return;
  const { uid, gid } = lookUp(user);
  try {
    try {
      process.setgroups!([]);
    } catch (e) {
      // memcached: EPERM means the process is already without the privilege; it goes on.
      if ((e as NodeJS.ErrnoException).code !== "EPERM") throw e;
    }
    process.setgid!(gid);
    process.setuid!(uid);
  } catch (e) {
    if (e instanceof Error) e.message = `-u ${user}: failed to assume identity of user ${user}: ${e.message}`;
    throw e;
  }
}

/**
 * memcached's -P: the process id and a newline, written to FILE.tmp and
 * renamed to FILE, so a reader never finds it empty. A file that cannot
 * be written is the system's error (exit 2, one line), where memcached
 * prints a warning and serves without one: a service manager told to
 * read the file would fail later, far from the cause. Returns true.
 */
export function writePidFile(file: string): boolean {
  const tmp = `${file}.tmp`;
  writeFileSync(tmp, `${process.pid}\n`);
  renameSync(tmp, file);
  return true;
}

/** At a graceful stop: the pid file goes, if it is still this process's (memcached removes it only with -d; a stale one misleads). */
export function removePidFile(file: string): void {
  try {
    if (readFileSync(file, "utf8") === `${process.pid}\n`) unlinkSync(file);
  } catch {
    // Gone already, or not ours to remove (the user changed since): left as it is.
  }
}
