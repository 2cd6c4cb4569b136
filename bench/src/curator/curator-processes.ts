/**
 * Curators of the curator benchmark in child processes of their own
 * (fixtures/curator-process.ts): the leader it SIGKILLs to measure failover,
 * and the leader whose CPU time it reads from /proc. Every child is tracked
 * in a {@link CuratorProcesses} registry, so that none outlives the benchmark.
 */
import { fork, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { MemoryValue, waitFor } from "@metropolis/event";
import type {
  CuratorProcessCall,
  CuratorProcessConfig,
  CuratorProcessMessage,
} from "../fixtures/curator-process";
import type { LoopDelay } from "../loop-delay";
import { processCpuMs } from "../process-cpu";
import type { BenchContext } from "./bench-context";
import { curatorIdentity } from "./cluster";

type Endpoint = { nodeId: string; host: string; port: number } | undefined;

/** The curator child processes started and not yet exited. */
export class CuratorProcesses {
  private readonly running = new Set<CuratorProcess>();

  add(p: CuratorProcess): void {
    this.running.add(p);
    void p.exited.then(() => this.running.delete(p));
  }

  /** SIGKILLs every one, at once (the benchmark is giving up). */
  killAll(): void {
    for (const p of this.running) p.kill("SIGKILL");
  }

  /** Stops every one in turn (SIGTERM, then SIGKILL after 5 s). */
  async stopAll(): Promise<void> {
    for (const p of [...this.running]) await p.stop();
  }
}

/** A curator in a child process, stopped by its PID. */
export class CuratorProcess {
  /** The leader as the child sees it. */
  readonly leader = new MemoryValue<Endpoint>(undefined);
  /** The last leader the child reported (for progress lines). */
  lastLeader: Endpoint;
  /** Told the path of the next CPU profile the child writes (see {@link profile}). */
  private profileWritten: ((path: string) => void) | undefined;
  /** Told the event loop delay the child sends (see {@link stopLoopDelay}). */
  private loopDelayAnswered: ((delay: LoopDelay | undefined) => void) | undefined;
  readonly exited: Promise<void>;
  private readonly child: ChildProcess;

  /** `host:port`, for dialling. */
  readonly address: string;

  private constructor(
    readonly nodeId: string,
    readonly host: string,
    readonly port: number,
    private readonly config: CuratorProcessConfig,
  ) {
    this.address = `${host}:${port}`;
    this.child = fork(
      join(__dirname, "..", "fixtures", "curator-process.js"),
      [JSON.stringify(config)],
      { stdio: ["ignore", "inherit", "inherit", "ipc"] },
    );
    this.child.on("message", (m: CuratorProcessMessage) => {
      if ("profile" in m) {
        this.profileWritten?.(m.profile);
        return;
      }
      if ("loopDelay" in m) {
        this.loopDelayAnswered?.(m.loopDelay ?? undefined);
        return;
      }
      this.lastLeader = m.leader ?? undefined;
      this.leader.set(this.lastLeader);
    });
    this.exited = new Promise((resolve) => this.child.once("exit", () => resolve()));
  }

  /**
   * Starts a curator of the context's cluster on a new loopback address,
   * tracked by the context, talking to the etcd member at `socketPath`
   * (default: the cluster's first member).
   */
  static async start(
    ctx: BenchContext,
    socketPath = ctx.cluster.socketPath,
  ): Promise<CuratorProcess> {
    const id = await curatorIdentity(ctx.cluster, ctx.nextHost());
    const p = new CuratorProcess(id.nodeId, id.host, id.port, {
      socketPath,
      keyring: ctx.cluster.keyring,
      nodeId: id.nodeId,
      tls: id.tls,
      host: id.host,
      port: id.port,
      leaderTtlSeconds: ctx.config.leaderTtlSeconds,
      memberNodeIds: [ctx.cluster.memberNodeId],
    });
    ctx.processes.add(p);
    return p;
  }

  /**
   * A new process of this same curator (identity, address, etcd member), as
   * a node restarts its curator after a crash; tracked by the context.
   */
  respawn(ctx: BenchContext): CuratorProcess {
    const p = new CuratorProcess(this.nodeId, this.host, this.port, this.config);
    ctx.processes.add(p);
    return p;
  }

  get pid(): number {
    const pid = this.child.pid;
    if (pid === undefined) throw new Error(`the process of curator ${this.nodeId} did not start`);
    return pid;
  }

  /** Resolves once this curator says it leads. */
  async leading(timeoutMs = 20_000): Promise<void> {
    await waitFor(this.leader, (l) => l?.nodeId === this.nodeId, AbortSignal.timeout(timeoutMs));
  }

  /** Resolves once this curator knows who leads (itself or another). */
  async following(timeoutMs = 30_000): Promise<void> {
    await waitFor(this.leader, (l) => l !== undefined, AbortSignal.timeout(timeoutMs));
  }

  /**
   * Has the child write its CPU profile (it must run with
   * METROPOLIS_BENCH_PROFILE_DIR set); resolves to the file's path.
   */
  async profile(timeoutMs = 30_000): Promise<string> {
    let timer: NodeJS.Timeout | undefined;
    const written = new Promise<string>((resolve, reject) => {
      this.profileWritten = resolve;
      timer = setTimeout(
        () => reject(new Error(`curator ${this.nodeId} wrote no profile within ${timeoutMs} ms`)),
        timeoutMs,
      );
    });
    this.kill("SIGUSR2");
    try {
      return await written;
    } finally {
      clearTimeout(timer);
      this.profileWritten = undefined;
    }
  }

  /** Has the child start recording its event loop's delay. */
  startLoopDelay(): void {
    this.child.send({ loopDelay: "start" } satisfies CuratorProcessCall);
  }

  /**
   * The child's event loop delay since {@link startLoopDelay}; undefined if
   * it recorded none, or does not answer within `timeoutMs` (a busy or dead
   * leader: the figure is then missing, not the benchmark).
   */
  async stopLoopDelay(timeoutMs = 10_000): Promise<LoopDelay | undefined> {
    let timer: NodeJS.Timeout | undefined;
    try {
      return await new Promise<LoopDelay | undefined>((resolve) => {
        this.loopDelayAnswered = resolve;
        timer = setTimeout(() => resolve(undefined), timeoutMs);
        this.child.send({ loopDelay: "stop" } satisfies CuratorProcessCall);
      });
    } finally {
      clearTimeout(timer);
      this.loopDelayAnswered = undefined;
    }
  }

  kill(signal: NodeJS.Signals): void {
    if (this.child.exitCode === null && this.child.signalCode === null)
      process.kill(this.pid, signal);
  }

  /** SIGTERM (the curator resigns), SIGKILL if it has not exited after 5 s. */
  async stop(): Promise<void> {
    this.kill("SIGTERM");
    const timer = setTimeout(() => this.kill("SIGKILL"), 5000);
    await this.exited;
    clearTimeout(timer);
  }

  /** Resident set size of the process now, in bytes (VmRSS of /proc/<pid>/status). */
  rssBytes(): number {
    const status = readFileSync(`/proc/${this.pid}/status`, "utf8");
    const kib = /^VmRSS:\s+(\d+) kB$/m.exec(status);
    if (!kib) throw new Error(`no VmRSS in /proc/${this.pid}/status`);
    return Number(kib[1]) * 1024;
  }

  /** CPU time (user + system) the process has used so far, in milliseconds. */
  cpuMs(): number {
    const ms = processCpuMs(this.pid);
    if (ms === undefined) throw new Error(`curator ${this.nodeId}'s process ${this.pid} is gone`);
    return ms;
  }
}
