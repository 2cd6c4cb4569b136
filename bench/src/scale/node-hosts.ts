/**
 * The scale simulator's nodes, spread over node host processes (see
 * fixtures/node-host.ts): one Node process hosting every simulated node's
 * client saturates its one core at about 2,500 nodes on this machine while
 * the curators sit idle, and then the simulator measures itself. Each host
 * runs its share of the nodes exactly as scale/simulated-nodes.ts does; this
 * class hands out the nodes round-robin and gathers what the hosts measured.
 *
 *   simulator ──IPC──▶ node host 1: nodes 0, k, 2k … ──mTLS gRPC──▶ curators
 *             ──IPC──▶ node host 2: nodes 1, k+1 …
 *
 * Every host is stopped by its PID at the end (SIGKILL if it has not exited
 * 10 s after being asked to stop), and exits by itself if the simulator dies.
 *
 * The hosts run at a lower CPU priority (nice 10) than the control plane
 * under test: in a cluster, every node's client runs on a machine of its
 * own, and on this 2-core machine 5,000 simulated nodes attaching at once
 * want several cores' worth of TLS handshakes, which at equal priority the
 * kernel took from the etcd members and curators (the leader lost its
 * election lease while its clients connected). The nodes' work is still all
 * done; it waits when the control plane needs the CPU.
 */
import { fork, type ChildProcess } from "node:child_process";
import { rm } from "node:fs/promises";
import { setPriority } from "node:os";
import { join } from "node:path";
import type { RegisteredNode } from "../curator/registration";
import { worstLoopDelay, type LoopDelay } from "../loop-delay";
import type {
  NodeHostAnswer,
  NodeHostCall,
  NodeHostConfig,
  NodeHostLog,
  NodeHostRequest,
} from "./node-host-protocol";

/** A request a node host answered with an error, or did not answer. */
export class NodeHostError extends Error {
  constructor(pid: number | undefined, what: string, problem: string) {
    super(`node host ${pid ?? "(not started)"}: ${what}: ${problem}`);
    this.name = new.target.name;
  }
}

/** The node hosts' niceness (see the module comment): below the control plane's 0. */
export const hostNiceness = 10;

/** One node host process. */
class NodeHost {
  private readonly child: ChildProcess;
  private readonly pending = new Map<number, (a: NodeHostAnswer) => void>();
  private nextId = 0;
  readonly exited: Promise<void>;
  size = 0;

  /** The process ID. */
  get pid(): number | undefined {
    return this.child.pid;
  }

  constructor(config: NodeHostConfig) {
    // With METROPOLIS_BENCH_PROFILE_DIR set, each host writes its CPU profile there when it stops.
    const profileDir = process.env.METROPOLIS_BENCH_PROFILE_DIR;
    this.child = fork(join(__dirname, "..", "fixtures", "node-host.js"), [JSON.stringify(config)], {
      stdio: ["ignore", "inherit", "inherit", "ipc"],
      serialization: "advanced",
      execArgv: profileDir ? ["--cpu-prof", `--cpu-prof-dir=${profileDir}`] : [],
    });
    if (this.child.pid !== undefined) setPriority(this.child.pid, hostNiceness);
    this.child.on("message", (a: NodeHostAnswer) => {
      this.pending.get(a.id)?.(a);
      this.pending.delete(a.id);
    });
    this.exited = new Promise((resolve) =>
      this.child.once("exit", () => {
        for (const [id, answer] of this.pending) answer({ id, error: "the process exited" });
        this.pending.clear();
        resolve();
      }),
    );
  }

  async ask(request: NodeHostCall): Promise<NodeHostAnswer> {
    const id = this.nextId++;
    const answer = new Promise<NodeHostAnswer>((resolve) => this.pending.set(id, resolve));
    this.child.send({ ...request, id } satisfies NodeHostRequest);
    const a = await answer;
    if (a.error !== undefined) throw new NodeHostError(this.child.pid, request.type, a.error);
    return a;
  }

  kill(): void {
    if (this.child.exitCode === null && this.child.signalCode === null && this.child.pid)
      process.kill(this.child.pid, "SIGKILL");
  }

  /**
   * Asks the host to stop its nodes and exit; SIGKILL after 10 s (60 s when
   * profiling: a profiled host is slower to stop, and a killed one writes no
   * profile).
   */
  async stop(): Promise<void> {
    const graceMs = process.env.METROPOLIS_BENCH_PROFILE_DIR ? 60_000 : 10_000;
    const timer = setTimeout(() => this.kill(), graceMs);
    await this.ask({ type: "stop" }).catch(() => this.kill());
    await this.exited;
    clearTimeout(timer);
  }
}

/** Simulated nodes spread over `hosts` processes; the same surface as SimulatedNodes. */
export class NodeHosts {
  private readonly hosts: NodeHost[];
  private next = 0;
  /** What the hosts' nodes logged, as of the last `describeLog()`. */
  log: NodeHostLog = { errors: 0, warnings: 0, firstError: undefined };

  /** Starts `hosts` hosts; host `i` keeps its nodes' files under `stateDir/host-i`. */
  constructor(
    config: Omit<NodeHostConfig, "stateDir" | "addressPrefix">,
    hosts: number,
    private readonly stateDir: string,
  ) {
    this.hosts = Array.from(
      { length: hosts },
      (_, i) =>
        new NodeHost({
          ...config,
          stateDir: join(stateDir, `host-${i}`),
          // 127.100.0.0/16 on: clear of the curators' and the bench cluster's addresses.
          addressPrefix: `127.${100 + i}`,
        }),
    );
  }

  get size(): number {
    return this.hosts.reduce((sum, h) => sum + h.size, 0);
  }

  /** The hosts' process IDs (of those started). */
  get pids(): number[] {
    return this.hosts.flatMap((h) => (h.pid === undefined ? [] : [h.pid]));
  }

  /** Starts `nodes`' heartbeat workers, spread round-robin over the hosts. */
  async add(nodes: readonly RegisteredNode[]): Promise<void> {
    const shares: RegisteredNode[][] = this.hosts.map(() => []);
    for (const node of nodes) shares[this.next++ % this.hosts.length].push(node);
    await Promise.all(
      this.hosts.map(async (h, i) => {
        if (shares[i].length === 0) return;
        await h.ask({ type: "add", nodes: shares[i] });
        h.size += shares[i].length;
      }),
    );
  }

  async startRecording(): Promise<void> {
    await Promise.all(this.hosts.map((h) => h.ask({ type: "startRecording" })));
  }

  /**
   * Stops recording; resolves to every host's heartbeat answer latencies, in
   * ms, when those heartbeats were sent (epoch ms), and each host's event
   * loop delay over the same window.
   */
  async stopRecording(): Promise<{
    latencies: number[];
    sentAt: number[];
    loopDelays: LoopDelay[];
  }> {
    const answers = await Promise.all(this.hosts.map((h) => h.ask({ type: "stopRecording" })));
    return {
      latencies: answers.flatMap((a) => a.latencies ?? []),
      sentAt: answers.flatMap((a) => a.sentAt ?? []),
      loopDelays: answers.flatMap((a) => (a.loopDelay ? [a.loopDelay] : [])),
    };
  }

  /** Starts recording every host's event loop delay, in a window of its own (see stopLoopDelay). */
  async startLoopDelay(): Promise<void> {
    await Promise.all(this.hosts.map((h) => h.ask({ type: "startLoopDelay" })));
  }

  /** Ends the window startLoopDelay began; resolves to the worst host's loop delay in it. */
  async stopLoopDelay(): Promise<LoopDelay | undefined> {
    const answers = await Promise.all(this.hosts.map((h) => h.ask({ type: "stopLoopDelay" })));
    return worstLoopDelay(answers.flatMap((a) => (a.loopDelay ? [a.loopDelay] : [])));
  }

  /**
   * Starts profiling every host's CPU, when METROPOLIS_BENCH_HOST_PROFILE_DIR
   * is set (see fixtures/node-host.ts); otherwise does nothing.
   */
  async startProfile(): Promise<void> {
    await Promise.all(this.hosts.map((h) => h.ask({ type: "startProfile" })));
  }

  /** Ends the window `startProfile` began; resolves to the profiles written, `name` in their file names. */
  async stopProfile(name: string): Promise<string[]> {
    const answers = await Promise.all(this.hosts.map((h) => h.ask({ type: "stopProfile", name })));
    return answers.flatMap((a) => (a.profile === undefined ? [] : [a.profile]));
  }

  /** What the nodes' supervisors logged so far, in a line. */
  async describeLog(): Promise<string> {
    const logs = await Promise.all(this.hosts.map((h) => h.ask({ type: "log" })));
    this.log = {
      errors: logs.reduce((n, a) => n + (a.log?.errors ?? 0), 0),
      warnings: logs.reduce((n, a) => n + (a.log?.warnings ?? 0), 0),
      firstError: logs.find((a) => a.log?.firstError !== undefined)?.log?.firstError,
    };
    const { errors, warnings, firstError } = this.log;
    return `nodes logged ${errors} errors, ${warnings} warnings${firstError ? ` (first: ${firstError.slice(0, 300)})` : ""}`;
  }

  /**
   * The nodes' errors since the last call, by kind, most frequent first: a
   * line each, for the progress output while a wait drags on.
   */
  async errorKinds(limit = 6): Promise<string[]> {
    const logs = await Promise.all(this.hosts.map((h) => h.ask({ type: "log" })));
    const total = new Map<string, number>();
    for (const a of logs)
      for (const [kind, n] of Object.entries(a.log?.kinds ?? {}))
        total.set(kind, (total.get(kind) ?? 0) + n);
    return [...total]
      .sort((x, y) => y[1] - x[1])
      .slice(0, limit)
      .map(([kind, n]) => `${String(n).padStart(7)} × ${kind}`);
  }

  /** SIGKILLs every host now (an interrupted run). */
  killAll(): void {
    for (const h of this.hosts) h.kill();
  }

  /** Stops every host's nodes and the hosts themselves, and removes the nodes' files. */
  async stop(): Promise<void> {
    await Promise.all(this.hosts.map((h) => h.stop()));
    await rm(this.stateDir, { recursive: true, force: true });
  }
}
