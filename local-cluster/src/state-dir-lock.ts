/**
 * The launcher's hold on a state dir, and the cleanup after a launcher that
 * was killed.
 *
 * Nodes run in process groups of their own (see node-process.ts), so a
 * launcher killed with SIGKILL — a closed terminal, an OOM kill — leaves its
 * nodes running, holding their ports and etcd data. A second launcher on the
 * same state dir would start every node twice. Hence two records in the
 * state dir:
 *
 *   launcher.json      the running launcher: its PID and command line
 *   pids/<node>.json   each node process it started: PID and node root
 *
 * `acquire()` refuses a state dir whose launcher still runs, and stops the
 * nodes a dead launcher left behind (SIGTERM to the group, SIGKILL after a
 * timeout). A record names a process only while that PID still runs the
 * same command (the same launcher, a node with the same `--root`), so a PID
 * the system has since given to another process is never signalled.
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { mkdir, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { LocalClusterError } from "./errors";
import { processGroupMembers } from "./node-process";

/** Another launcher, still running, holds the state dir. */
export class StateDirBusyError extends LocalClusterError {
  constructor(
    readonly stateDir: string,
    readonly pid: number,
  ) {
    super(
      `another local cluster (pid ${pid}) is running on ${stateDir}: ` +
        "stop it (Ctrl-C in its terminal, or `kill " +
        pid +
        "`) or pick another --state",
    );
  }
}

interface LauncherRecord {
  pid: number;
  cmdline: string;
}

interface NodeRecord {
  pid: number;
  root: string;
}

/** Time a left-over node gets to stop after SIGTERM before it is killed. */
export const orphanStopTimeoutMs = 30_000;

/** The command line of process `pid` (arguments joined by NUL), or undefined if it is gone. */
function cmdlineOf(pid: number): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8");
  } catch {
    return undefined;
  }
}

/** Whether `pid` still runs a metropolis-node with `--root root`. */
function runsNode({ pid, root }: NodeRecord): boolean {
  return cmdlineOf(pid)?.includes(`\0--root\0${root}\0`) ?? false;
}

async function readRecord<T>(path: string): Promise<T | undefined> {
  try {
    return JSON.parse(await readFile(path, "utf8")) as T;
  } catch {
    // Missing, or cut short by a crash while written: either way no live record.
    return undefined;
  }
}

function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // Gone already.
  }
}

async function groupGone(pgid: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while ((processGroupMembers(pgid)?.length ?? 0) > 0) {
    if (Date.now() > deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return true;
}

export class StateDirLock {
  private readonly launcherPath: string;
  private readonly pidsDir: string;

  constructor(
    readonly stateDir: string,
    private readonly log: (message: string) => void,
    private readonly stopTimeoutMs = orphanStopTimeoutMs,
  ) {
    this.launcherPath = join(stateDir, "launcher.json");
    this.pidsDir = join(stateDir, "pids");
  }

  /**
   * Takes the state dir for this process, then stops the nodes a killed
   * launcher left running. Taking it again from the same process is a no-op.
   *
   * @throws StateDirBusyError while another launcher runs on the state dir.
   */
  async acquire(): Promise<void> {
    await mkdir(this.pidsDir, { recursive: true });
    const self: LauncherRecord = { pid: process.pid, cmdline: cmdlineOf(process.pid) ?? "" };
    for (;;) {
      try {
        await writeFile(this.launcherPath, JSON.stringify(self) + "\n", { flag: "wx" });
        break;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
      }
      const holder = await readRecord<LauncherRecord>(this.launcherPath);
      if (holder?.pid === self.pid) break;
      if (holder && cmdlineOf(holder.pid) === holder.cmdline) {
        throw new StateDirBusyError(this.stateDir, holder.pid);
      }
      // A launcher that died: its record is stale.
      await rm(this.launcherPath, { force: true });
    }
    await this.stopOrphans();
  }

  /** Gives the state dir up (only if this process holds it). */
  release(): void {
    try {
      const holder = JSON.parse(readFileSync(this.launcherPath, "utf8")) as LauncherRecord;
      if (holder.pid === process.pid) rmSync(this.launcherPath, { force: true });
    } catch {
      // Not held.
    }
  }

  /** Records node process `pid` (a process group leader) running node `name` from `root`. */
  recordNode(name: string, root: string, pid: number): void {
    mkdirSync(this.pidsDir, { recursive: true });
    writeFileSync(this.nodePath(name), JSON.stringify({ pid, root } satisfies NodeRecord) + "\n");
  }

  /** Forgets node `name`'s process `pid` once it exited (a newer record is kept). */
  forgetNode(name: string, pid: number): void {
    try {
      const record = JSON.parse(readFileSync(this.nodePath(name), "utf8")) as NodeRecord;
      if (record.pid === pid) rmSync(this.nodePath(name), { force: true });
    } catch {
      // Already gone.
    }
  }

  private nodePath(name: string): string {
    return join(this.pidsDir, `${name}.json`);
  }

  private async stopOrphans(): Promise<void> {
    const files = (await readdir(this.pidsDir)).filter((f) => f.endsWith(".json"));
    await Promise.all(
      files.map(async (file) => {
        const path = join(this.pidsDir, file);
        const record = await readRecord<NodeRecord>(path);
        if (record && runsNode(record)) {
          const name = file.slice(0, -".json".length);
          this.log(
            `${name} (pid ${record.pid}) still runs, left behind by a launcher that was killed: stopping it`,
          );
          signalGroup(record.pid, "SIGTERM");
          if (!(await groupGone(record.pid, this.stopTimeoutMs))) {
            this.log(`${name} (pid ${record.pid}) did not stop on SIGTERM: killing it`);
            signalGroup(record.pid, "SIGKILL");
            await groupGone(record.pid, 5000);
          }
        }
        await rm(path, { force: true });
      }),
    );
  }
}
