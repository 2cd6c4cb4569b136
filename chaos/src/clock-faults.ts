/**
 * Clock faults on node processes, through libfaketime (Debian's
 * `libfaketime` package): a node started with
 * `LD_PRELOAD=/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1` reads the
 * offset of its wall clock from a file of its own
 * (`FAKETIME_TIMESTAMP_FILE`, one line such as `+60` or `-60`; no file: no
 * offset), re-read on every call (`FAKETIME_NO_CACHE=1`), so the offset of a
 * running process changes when the file does — no restart.
 * `FAKETIME_DONT_FAKE_MONOTONIC=1` leaves the monotonic clock alone: timers,
 * `performance.now()` and the curator's lease deadline run on it, so a jump
 * of the wall clock is what a node sees when NTP steps its clock, not a
 * stopped machine.
 *
 * What it reaches: the node's own process (Node.js reads the wall clock
 * through libc's `clock_gettime`, which libfaketime replaces): `Date.now()`,
 * log times, TLS certificate validity checks, heartbeat timestamps. Not
 * etcd: it is a Go binary, and Go reads the clock through the vDSO, never
 * through libc, so the preloaded library (inherited by the node's etcd
 * child) changes nothing there — a chaos run's clock faults skew the
 * curators and nodes against each other and against etcd, whose lease
 * expiry keeps real time.
 *
 * The preload must be in place when a process starts: a chaos run on the
 * testbed gives every node `environment(node)` through LocalCluster's
 * `nodeEnv`, from its first start on (restarts that heal a kill or a stop
 * included).
 *
 * libfaketime (0.9.10) keeps a shared memory segment and a semaphore per
 * process tree, `/dev/shm/faketime_shm_<pid>` and `sem.faketime_sem_<pid>`,
 * named after the first preloaded process: nsenter, which execs the node,
 * so the node's PID. It removes them only when that process image exits by
 * itself — never after the exec, nor a SIGKILL. libfaketime's README warns
 * that a stale pair makes a later process with the same PID fail at start
 * ("shm_open failed: File exists"); Debian's 0.9.10 starts it normally (a
 * process given such a PID in a PID namespace, and a node of a run that got
 * the PID of a stale pair, both ran), so they are litter, not a hazard here.
 * `removeFaketimeLeftovers(pids)` removes the pairs of the node processes a
 * run started, once they are gone.
 *
 * Guarantees: offsets are written atomically (a new file of a name of its
 * own renamed over the old: libfaketime never reads half a line), one at a
 * time per node in the order they were asked for (a strobe and a restart
 * may write at once: seed 23 of the first testbed runs lost a restart to
 * two writes sharing one temporary file); `reset()` puts every node back at
 * offset 0; the files live under the run's directory and go with it.
 */
import { existsSync } from "node:fs";
import { mkdir, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { ClusterNode } from "@metropolis/local-cluster";

/** Debian's libfaketime (package `libfaketime`). */
export const libfaketimePath = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/** Where libfaketime keeps its per-process-tree shared memory and semaphores. */
export const faketimeShmDir = "/dev/shm";

/**
 * Removes libfaketime's shared memory and semaphore of each of `pids` (the
 * node processes a run started, all gone by now); see the module comment.
 * @returns how many files it removed.
 */
export async function removeFaketimeLeftovers(
  pids: readonly number[],
  dir = faketimeShmDir,
): Promise<number> {
  let removed = 0;
  for (const pid of new Set(pids)) {
    for (const name of [`faketime_shm_${pid}`, `sem.faketime_sem_${pid}`]) {
      const path = join(dir, name);
      if (!existsSync(path)) continue;
      await rm(path, { force: true });
      removed++;
    }
  }
  return removed;
}

/** Whether libfaketime is installed here. */
export function faketimeAvailable(): boolean {
  return existsSync(libfaketimePath);
}

/** The node processes' wall clocks; see the module comment. */
export class ClockControl {
  private readonly offsets = new Map<string, number>();
  /** Each node's last write of its file: the next one waits for it. */
  private readonly writes = new Map<string, Promise<void>>();
  private writeCount = 0;

  /** @param dir where the nodes' offset files are kept. */
  constructor(private readonly dir: string) {}

  /** The offset file of `node`. */
  file(node: Pick<ClusterNode, "name">): string {
    return join(this.dir, `${node.name}.faketime`);
  }

  /** The environment that makes a process read its wall clock's offset from `node`'s file. */
  environment(node: Pick<ClusterNode, "name">): Record<string, string> {
    return {
      LD_PRELOAD: libfaketimePath,
      FAKETIME_TIMESTAMP_FILE: this.file(node),
      FAKETIME_NO_CACHE: "1",
      FAKETIME_DONT_FAKE_MONOTONIC: "1",
    };
  }

  /** Sets `node`'s wall clock `seconds` off the real time (negative: behind). */
  async set(node: ClusterNode, seconds: number): Promise<void> {
    this.offsets.set(node.name, seconds);
    await this.write(node, seconds);
  }

  /** `node`'s offset now, in seconds. */
  offset(node: ClusterNode): number {
    return this.offsets.get(node.name) ?? 0;
  }

  /** Puts every node whose offset is not 0 back at 0. */
  async reset(nodes: readonly ClusterNode[]): Promise<void> {
    for (const node of nodes) if (this.offset(node) !== 0) await this.set(node, 0);
  }

  /** Writes `node`'s offset once its earlier writes are done. */
  private write(node: ClusterNode, seconds: number): Promise<void> {
    const text = `${seconds >= 0 ? "+" : ""}${seconds.toFixed(3)}\n`;
    const tmp = `${this.file(node)}.${++this.writeCount}.tmp`;
    const previous = this.writes.get(node.name) ?? Promise.resolve();
    const next = previous
      .catch(() => undefined)
      .then(async () => {
        await mkdir(this.dir, { recursive: true });
        await writeFile(tmp, text);
        await rename(tmp, this.file(node));
      });
    this.writes.set(node.name, next);
    return next;
  }
}
