/**
 * Who had the machine's CPUs during a stretch of the benchmark: for each
 * process, how long its main thread (its event loop) ran and how long it
 * was ready to run but waited for a CPU, from Linux's per-thread scheduler
 * statistics (/proc/<pid>/schedstat: run time, run-queue wait, in ns); and
 * the CPU time of whole processes, every thread (/proc/<pid>/stat), for the
 * processes whose main thread is not the point (an etcd member's work is
 * spread over its goroutines' threads).
 *
 * The scale simulator runs the control plane and thousands of simulated
 * nodes on one 2-core machine: a recovery that is slow while the leader sits
 * idle, and the node hosts wait for CPU most of the time, is bounded by the
 * simulation's own clients, not by the control plane.
 */
import { readFileSync } from "node:fs";
import { processCpuMs } from "../process-cpu";

/** How a thread spent a stretch of time, in ms per second of it. */
export interface CpuShare {
  /** Time on a CPU. 1000 is one whole core. */
  runMsPerSecond: number;
  /** Time ready to run but waiting for a CPU. */
  waitMsPerSecond: number;
}

/** The main thread's run time and run-queue wait so far, in ns; undefined once the process is gone. */
function schedstat(pid: number): { runNs: number; waitNs: number } | undefined {
  try {
    const [run, wait] = readFileSync(`/proc/${pid}/schedstat`, "utf8").split(" ").map(Number);
    return { runNs: run, waitNs: wait };
  } catch {
    return undefined;
  }
}

/**
 * Time every CPU of the machine was busy so far (not idle, not waiting for
 * I/O, not stolen), and time the hypervisor gave the machine's CPUs to
 * others while it had work ("steal": a shared virtual machine's CPUs are not
 * all its own), in ms: /proc/stat's first line, in USER_HZ ticks of 10 ms.
 */
function machineTimes(): { busyMs: number; kernelMs: number; stolenMs: number } {
  const fields = readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).slice(1);
  const [user, nice, system, , , irq, softirq, steal] = fields.map(Number);
  return {
    busyMs: (user + nice + system + irq + softirq) * 10,
    kernelMs: (system + irq + softirq) * 10,
    stolenMs: steal * 10,
  };
}

/** Measures the {@link CpuShare} of processes, and how busy the machine was, from its construction on. */
export class CpuShares {
  private readonly started = performance.now();
  private readonly machineBefore = machineTimes();
  private readonly before = new Map<number, { runNs: number; waitNs: number }>();
  private readonly processBefore = new Map<number, number>();

  /** Starts measuring `pids`. */
  constructor(pids: Iterable<number>) {
    for (const pid of pids) {
      const now = schedstat(pid);
      if (now) this.before.set(pid, now);
      const ms = processCpuMs(pid);
      if (ms !== undefined) this.processBefore.set(pid, ms);
    }
  }

  /**
   * The CPU time of the whole processes `pids` (every thread) since the
   * start, summed, in ms per second (processes gone meanwhile count for nothing).
   */
  processMsPerSecond(pids: Iterable<number>): number {
    const seconds = (performance.now() - this.started) / 1000;
    let ms = 0;
    for (const pid of pids) {
      const before = this.processBefore.get(pid);
      const now = processCpuMs(pid);
      if (before !== undefined && now !== undefined) ms += now - before;
    }
    return ms / seconds;
  }

  /** The share of each of `pids` since the start, summed (processes gone meanwhile count for nothing). */
  share(pids: Iterable<number>): CpuShare {
    const seconds = (performance.now() - this.started) / 1000;
    let runNs = 0;
    let waitNs = 0;
    for (const pid of pids) {
      const before = this.before.get(pid);
      const now = schedstat(pid);
      if (!before || !now) continue;
      runNs += now.runNs - before.runNs;
      waitNs += now.waitNs - before.waitNs;
    }
    return { runMsPerSecond: runNs / 1e6 / seconds, waitMsPerSecond: waitNs / 1e6 / seconds };
  }

  /**
   * How busy the whole machine was since the start, of which in the kernel
   * (system calls, interrupts: the loopback network's work is there), and
   * how much CPU time the hypervisor took from it: ms per second summed over
   * its CPUs (2,000: two cores).
   */
  machine(): { busyMsPerSecond: number; kernelMsPerSecond: number; stolenMsPerSecond: number } {
    const seconds = (performance.now() - this.started) / 1000;
    const now = machineTimes();
    return {
      busyMsPerSecond: (now.busyMs - this.machineBefore.busyMs) / seconds,
      kernelMsPerSecond: (now.kernelMs - this.machineBefore.kernelMs) / seconds,
      stolenMsPerSecond: (now.stolenMs - this.machineBefore.stolenMs) / seconds,
    };
  }
}
