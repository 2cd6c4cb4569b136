/**
 * CPU time of whole processes, from Linux's /proc: what a process used on
 * every thread it has (a Node process's GC helpers and thread pool, every
 * goroutine of an etcd member), where /proc/<pid>/schedstat (scale's
 * cpu-shares.ts) tells only the main thread's.
 */
import { readdirSync, readFileSync } from "node:fs";

/** Linux reports /proc/<pid>/stat times in USER_HZ, which is 100 on every architecture. */
const USER_HZ = 100;

/** The fields of /proc/<pid>/stat after the command name (which may hold spaces), or undefined once the process is gone. */
function statFields(pid: number): { comm: string; fields: string[] } | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  const open = stat.indexOf("(");
  const close = stat.lastIndexOf(")");
  return { comm: stat.slice(open + 1, close), fields: stat.slice(close + 2).split(" ") };
}

/** CPU time (user + system, every thread) process `pid` has used so far, in ms; undefined once it is gone. */
export function processCpuMs(pid: number): number | undefined {
  const stat = statFields(pid);
  if (!stat) return undefined;
  // utime and stime are the stat file's fields 14 and 15 (the 12th and 13th after the name).
  return ((Number(stat.fields[11]) + Number(stat.fields[12])) * 1000) / USER_HZ;
}

/** The PIDs of the running children of `parent` whose command name is `comm` (e.g. the etcd members a process started). */
export function childPids(parent: number, comm: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = statFields(Number(entry));
    // ppid is field 4 (the 2nd after the name).
    if (stat && stat.comm === comm && Number(stat.fields[1]) === parent) pids.push(Number(entry));
  }
  return pids;
}
