/**
 * What the nemesis needs to know about a node's processes, from /proc: a
 * process's children and its command name, so that it can find the etcd
 * member a node runs and kill it alone; and signals sent by PID that do not
 * fail on a process that has just exited.
 */
import { readdirSync, readFileSync } from "node:fs";

/** The PIDs of `pid`'s children (every thread's), or none when it is gone. */
export function childPids(pid: number): number[] {
  const children: number[] = [];
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return children;
  }
  for (const task of tasks) {
    try {
      const text = readFileSync(`/proc/${pid}/task/${task}/children`, "utf8");
      for (const word of text.split(/\s+/)) if (/^\d+$/.test(word)) children.push(Number(word));
    } catch {
      // The thread ended meanwhile.
    }
  }
  return children;
}

/** The command name of `pid` (/proc/<pid>/comm), or undefined when it is gone. */
export function commandName(pid: number): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/comm`, "utf8").trim();
  } catch {
    return undefined;
  }
}

/** The etcd process node process `pid` runs as its child, if any. */
export function etcdChild(pid: number): number | undefined {
  return childPids(pid).find((child) => commandName(child) === "etcd");
}

/**
 * Sends `signal` to process `pid` (or, negative, to process group `-pid`).
 * @returns false when there was no such process.
 */
export function sendSignal(pid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(pid, signal);
    return true;
  } catch (e) {
    if (e instanceof Error && "code" in e && e.code === "ESRCH") return false;
    throw e;
  }
}
