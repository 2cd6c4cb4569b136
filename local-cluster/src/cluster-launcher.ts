/**
 * LocalCluster: a Metropolis cluster of real `metropolis-node` processes on
 * loopback addresses, driven the way an operator drives one — through
 * metroctl (run in-process) with the owner's credentials. It exists so that
 * one command gives a developer a working multi-node cluster, and so that
 * the e2e tests bring clusters up and take them down the same way.
 *
 * A cluster lives in a state dir:
 *
 *   <state>/cluster.json       the nodes: name, address, node ID (written as they join)
 *   <state>/node-config.json   the config every node gets (--config)
 *   <state>/metroctl/          the owner's metroctl config dir (key, certificate, CA)
 *   <state>/params/<name>.pb   node parameters (bootstrap / register)
 *   <state>/nodes/<name>/      each node's --root
 *   <state>/logs/<name>.log    each node's output, appended (JSON log lines)
 *
 * `up()` creates the cluster when the state dir has none (bootstrap node 1,
 * take ownership, register and approve the others, make every node a
 * consensus member one at a time), or cold-starts it from disk when it
 * exists. Every step is timed.
 *
 * In hosts mode (the `hosts` option) every node runs in a network
 * namespace of its own on a bridge (testbed.ts): node `i` on host `i`, at
 * the host's address, and the owner's metroctl reaches them from the
 * bridge. The network between them can then be broken with network.ts.
 *
 * This file is the cluster: its nodes and their processes, the owner's
 * metroctl, and the order of the steps. The steps themselves are in
 * bring-up-steps.ts, cluster.json in cluster-state-file.ts, one node's
 * process in node-process.ts, and the state dir's ownership in
 * state-dir-lock.ts.
 */
import { mkdir, rm, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { runMetroctl, type NodeView } from "@metropolis/metroctl";
import { rebootExitStatus, type NodeConfigFile } from "@metropolis/node";
import {
  bootstrapFirstNode,
  coldStartNodes,
  enrolNode,
  registerNode,
  rejoined,
  seconds,
  setConsensusRole,
} from "./bring-up-steps";
import { readClusterState, writeClusterState } from "./cluster-state-file";
import { LocalClusterError, MetroctlFailedError } from "./errors";
import { formatTrouble } from "./log-format";
import { describeExit, NodeProcess, type NodeLine } from "./node-process";
import { removeNodeRoots } from "./node-root-removal";
import { StateDirLock } from "./state-dir-lock";
import { Testbed } from "./testbed";
import { slotOfAddress, slotPrefix } from "./testbed-slot";

/**
 * What every node of a local cluster gets: fast etcd elections, short leases
 * and heartbeats. `loopbackTimings` (etcd heartbeat 10 ms, election 100 ms,
 * membership checks every second) also suit hosts mode: its bridge between
 * namespaces of one machine has the round trip of loopback (tens of µs).
 */
export const localNodeConfig: NodeConfigFile = {
  loopbackTimings: true,
  leaderTtlSeconds: 3,
  heartbeatTimeoutMs: 4000,
};

/** Default curator port (all nodes of one cluster must use the same one). */
const defaultCuratorPort = 7835;

/** Node `index` (1-based) of the default cluster: 127.0.0.2, 127.0.0.3, … */
export const defaultAddress = (index: number): string => `127.0.0.${index + 1}`;

/** One node of the cluster, and its process while it runs. */
export interface ClusterNode {
  /** 1-based position: node1 bootstrapped the cluster. */
  index: number;
  /** `node<index>`. */
  name: string;
  address: string;
  /** The node's --root. */
  root: string;
  /** Its node ID (metropolis-…), once known. */
  id: string;
  /** The running (or last) process. */
  process?: NodeProcess;
}

/** How long one step took. */
export interface StepTiming {
  /** What was measured, e.g. `node2 UP after approval`. */
  step: string;
  ms: number;
}

/** What metroctl printed and returned. */
export interface MetroctlResult {
  exitCode: number;
  stdout: string;
  stderr: string;
}

export interface LocalClusterOptions {
  /** Where the cluster lives (created if missing). */
  stateDir: string;
  /** How many nodes the cluster should have; a resumed cluster that has fewer gets new ones. */
  nodes: number;
  /** Address of node `index` (1-based); default 127.0.0.(index+1). Only used for new nodes. */
  address?: (index: number) => string;
  /**
   * Hosts mode: every node in a network namespace of its own (node `i` on
   * host `i`, at `testbed.address(i)`; not with `address`). A Testbed is
   * used as it is (grown with `addHost()` when the cluster outgrows it) and
   * left to its caller; `true` makes one that the cluster owns: created by
   * `up()` (on the /24 of a resumed cluster's addresses), destroyed by
   * `stop()` and `kill()` once the nodes are down.
   */
  hosts?: Testbed | true;
  /** Fields merged over `localNodeConfig` (e.g. workloads, ports). */
  nodeConfig?: NodeConfigFile;
  /** Progress messages (step timings); default: stdout. Pass `() => {}` for quiet. */
  log?: (message: string) => void;
  /** Every output line of every node, as it arrives. */
  onNodeLine?: (line: NodeLine) => void;
  /** Aborts the bring-up (Ctrl-C). */
  signal?: AbortSignal;
  /** Deadline of each waiting step; default 90 s. */
  stepTimeoutMs?: number;
  /** Lines each node process keeps. */
  bufferLines?: number;
  /**
   * Extra environment of node `node`'s process, asked each time it is
   * started (e.g. a per-node libfaketime for clock tests).
   */
  nodeEnv?: (node: ClusterNode) => Record<string, string>;
  /**
   * Make every node a consensus member (default). When false, only node1
   * (which bootstrapped the cluster) is one, and `up()` leaves roles alone.
   */
  consensusOnEveryNode?: boolean;
}

/** A local cluster of `metropolis-node` processes; see the module comment. */
export class LocalCluster {
  readonly stateDir: string;
  /** The owner's metroctl config dir. */
  readonly metroctlDir: string;
  readonly nodeConfigPath: string;
  /** The nodes, in order (node1 first). */
  readonly nodes: ClusterNode[] = [];
  /** Every timed step so far. */
  readonly timings: StepTiming[] = [];
  /**
   * Every node process this launcher started, also those of a node whose
   * step failed before it joined `nodes`: what a test stops in any case.
   */
  get started(): readonly NodeProcess[] {
    return this.startedProcesses;
  }
  private readonly startedProcesses: NodeProcess[] = [];

  /**
   * The warnings and errors the nodes logged last (at most `perNode` lines
   * of each process started, with their times, in their terminal form):
   * what a failed run prints, because its node logs are usually removed
   * with its state dir, and a CI log is all there is to read afterwards.
   */
  recentTrouble(perNode = 20): string[] {
    return this.startedProcesses.flatMap((proc) => formatTrouble(proc.lines(), perNode));
  }

  /** Deadline of each waiting step. */
  readonly stepTimeoutMs: number;
  /** Aborts every step: the caller's signal, or one that never aborts. */
  readonly signal: AbortSignal;

  private readonly address: (index: number) => string;
  private readonly log: (message: string) => void;
  /** The testbed in hosts mode, once there is one. */
  private hostsTestbed: Testbed | undefined;
  /** The removal of the testbed the cluster owned, once begun. */
  private removingTestbed: Promise<void> = Promise.resolve();
  private readonly curatorPort: number;
  private readonly lock: StateDirLock;

  constructor(private readonly opts: LocalClusterOptions) {
    if (!Number.isInteger(opts.nodes) || opts.nodes < 1) {
      throw new LocalClusterError(`a cluster needs at least 1 node, got ${opts.nodes}`);
    }
    this.stateDir = resolve(opts.stateDir);
    this.metroctlDir = join(this.stateDir, "metroctl");
    this.nodeConfigPath = join(this.stateDir, "node-config.json");
    if (opts.hosts !== undefined && opts.address !== undefined) {
      throw new LocalClusterError("hosts mode gives the nodes their addresses: drop `address`");
    }
    if (opts.hosts instanceof Testbed) this.hostsTestbed = opts.hosts;
    this.address =
      opts.hosts !== undefined
        ? (i) => this.requireTestbed().address(i)
        : (opts.address ?? defaultAddress);
    this.log = opts.log ?? ((m) => process.stdout.write(m + "\n"));
    this.stepTimeoutMs = opts.stepTimeoutMs ?? 90_000;
    this.signal = opts.signal ?? new AbortController().signal;
    this.curatorPort = opts.nodeConfig?.ports?.curator ?? defaultCuratorPort;
    this.lock = new StateDirLock(this.stateDir, this.log);
  }

  private get statePath(): string {
    return join(this.stateDir, "cluster.json");
  }

  /** The testbed the nodes run on, in hosts mode (once `up()` made it, when the cluster owns it). */
  get testbed(): Testbed | undefined {
    return this.hostsTestbed;
  }

  private requireTestbed(): Testbed {
    if (!this.hostsTestbed) {
      throw new LocalClusterError(
        this.opts.hosts === true
          ? "hosts mode: the cluster's testbed is not there (up() makes it; stop() and kill() remove it)"
          : "not in hosts mode",
      );
    }
    return this.hostsTestbed;
  }

  /**
   * In hosts mode, makes the testbed the cluster owns if there is none yet
   * (on the /24 of `recorded`, a resumed cluster's addresses), and makes
   * sure it has at least `hosts` hosts. Elsewhere, refuses a resumed
   * cluster that was made in hosts mode.
   */
  private async prepareHosts(recorded: readonly string[], hosts: number): Promise<void> {
    if (this.opts.hosts === undefined) {
      const onTestbed = recorded.find((a) => slotOfAddress(a) !== undefined);
      if (onTestbed !== undefined) {
        throw new LocalClusterError(
          `the cluster in ${this.stateDir} was made in hosts mode (a node at ${onTestbed}): ` +
            "resume it in hosts mode",
        );
      }
      return;
    }
    if (!this.hostsTestbed) {
      const slots = new Set(recorded.map((a) => slotOfAddress(a)));
      const [slot, ...others] = slots;
      if (others.length > 0 || (recorded.length > 0 && slot === undefined)) {
        throw new LocalClusterError(
          `the cluster in ${this.stateDir} has nodes at ${recorded.join(", ")}: ` +
            "not one /24 of a testbed (was it made on loopback? resume it without hosts mode)",
        );
      }
      const subnet = slot === undefined ? undefined : `${slotPrefix(slot)}.0/24`;
      const testbed = await Testbed.create({ hosts, subnet, log: this.log });
      this.hostsTestbed = testbed;
      this.log(
        `hosts: testbed ${testbed.tag}, ${testbed.hosts} network namespaces on bridge ` +
          `${testbed.bridge} (${testbed.subnet}, owner ${testbed.ownerAddress})`,
      );
    }
    const testbed = this.requireTestbed();
    await this.ensureHosts(hosts);
    // Node i runs on host i: a resumed node must be at its host's address.
    for (const [i, address] of recorded.entries()) {
      if (address !== testbed.address(i + 1)) {
        throw new LocalClusterError(
          `the cluster in ${this.stateDir} has node${i + 1} at ${address}, ` +
            `not at host ${i + 1} of testbed ${testbed.tag} (${testbed.address(i + 1)})`,
        );
      }
    }
  }

  /** In hosts mode, grows the testbed to at least `hosts` hosts. */
  private async ensureHosts(hosts: number): Promise<void> {
    if (this.opts.hosts === undefined) return;
    const testbed = this.requireTestbed();
    while (testbed.hosts < hosts) await testbed.addHost();
  }

  /** The network namespace node `node` runs in: its host's, in hosts mode. */
  private netnsOf(node: ClusterNode): string | undefined {
    if (this.opts.hosts === undefined) return undefined;
    const testbed = this.requireTestbed();
    const host = testbed.hostOf(node.address);
    if (host === undefined) {
      throw new LocalClusterError(
        `${node.name}'s address ${node.address} is no host of testbed ${testbed.tag} (${testbed.subnet})`,
      );
    }
    return testbed.namespace(host);
  }

  /**
   * Destroys the testbed the cluster owns, once its nodes are down; a second
   * caller (a kill() during a stop()) waits for the same removal.
   */
  private removeOwnTestbed(): Promise<void> {
    const testbed = this.hostsTestbed;
    if (this.opts.hosts !== true || !testbed) return this.removingTestbed;
    this.hostsTestbed = undefined;
    this.removingTestbed = testbed
      .destroy()
      .then((killed) =>
        this.log(
          `hosts: testbed ${testbed.tag} removed` +
            (killed.length > 0 ? ` (killed processes left in it: ${killed.join(", ")})` : ""),
        ),
      );
    return this.removingTestbed;
  }

  /**
   * Brings the cluster up: creates it, or cold-starts it from the state dir,
   * then adds nodes up to `nodes` and makes every node a consensus member.
   * Resolves once every node is UP and HEALTHY. On failure the nodes it
   * started keep running: call `stop()`.
   *
   * It first takes the state dir (see state-dir-lock.ts): it refuses one
   * that another running launcher holds, and stops nodes that a killed
   * launcher left running. `release()` gives it up.
   *
   * @returns whether an existing cluster was resumed.
   * @throws StateDirBusyError while another launcher runs on the state dir.
   */
  async up(): Promise<{ resumed: boolean }> {
    await mkdir(join(this.stateDir, "logs"), { recursive: true });
    await this.lock.acquire();
    await writeFile(
      this.nodeConfigPath,
      JSON.stringify({ ...localNodeConfig, ...this.opts.nodeConfig }, null, 2) + "\n",
    );
    const state = await readClusterState(this.statePath);
    const resumed = state !== undefined;
    const recorded = state?.nodes.map((n) => n.address) ?? [];
    await this.prepareHosts(recorded, Math.max(this.opts.nodes, recorded.length));
    if (state) {
      if (state.nodes.length > this.opts.nodes) {
        this.log(
          `the cluster in ${this.stateDir} has ${state.nodes.length} nodes: starting all of them`,
        );
      }
      for (const [i, recorded] of state.nodes.entries()) {
        this.nodes.push({ ...this.newNode(i + 1, recorded.address), id: recorded.id });
      }
      await this.coldStart();
    } else {
      // Leftovers of a creation that did not get as far as a bootstrapped cluster.
      await removeNodeRoots(join(this.stateDir, "nodes"));
      await rm(join(this.stateDir, "params"), { recursive: true, force: true });
      await bootstrapFirstNode(this);
    }
    while (this.nodes.length < this.opts.nodes) await this.addNode();
    if (this.opts.consensusOnEveryNode ?? true) {
      for (const node of this.nodes) await this.ensureConsensus(node);
    }
    return { resumed };
  }

  /** The node called `name` (`node2`), or number `index` (1-based). */
  node(nameOrIndex: string | number): ClusterNode {
    const node =
      typeof nameOrIndex === "number"
        ? this.nodes[nameOrIndex - 1]
        : this.nodes.find((n) => n.name === nameOrIndex);
    if (!node) throw new LocalClusterError(`no node ${nameOrIndex} in this cluster`);
    return node;
  }

  /** The node with ID `id`. */
  nodeById(id: string): ClusterNode {
    const node = this.nodes.find((n) => n.id === id);
    if (!node) throw new LocalClusterError(`no node ${id} in this cluster`);
    return node;
  }

  /**
   * Runs metroctl in-process against this cluster: the owner's config dir,
   * every node as an endpoint, or only `opts.endpoints` (`host:port`) when
   * given (a test that must reach one node's curator and no other).
   */
  async metroctl(
    args: readonly string[],
    opts: { signal?: AbortSignal; endpoints?: readonly string[] } = {},
  ): Promise<MetroctlResult> {
    const argv = ["--config", this.metroctlDir];
    const endpoints = opts.endpoints ?? this.nodes.map((n) => `${n.address}:${this.curatorPort}`);
    if (endpoints.length > 0) argv.push("--endpoints", endpoints.join(","));
    argv.push(...args);
    let stdout = "";
    let stderr = "";
    const exitCode = await runMetroctl(argv, {
      stdout: { write: (s: string) => (stdout += s) },
      stderr: { write: (s: string) => (stderr += s) },
      signal: opts.signal ? AbortSignal.any([this.signal, opts.signal]) : this.signal,
    });
    return { exitCode, stdout, stderr };
  }

  /** `metroctl` that must succeed; resolves to its stdout. @throws MetroctlFailedError */
  async metroctlOk(args: readonly string[], opts: { signal?: AbortSignal } = {}): Promise<string> {
    const result = await this.metroctl(args, opts);
    if (result.exitCode !== 0) throw new MetroctlFailedError(args, result.exitCode, result.stderr);
    return result.stdout;
  }

  /** `metroctl nodes -o json`. */
  async listNodes(): Promise<NodeView[]> {
    return JSON.parse(await this.metroctlOk(["nodes", "-o", "json"])) as NodeView[];
  }

  /** `metroctl nodes`: the table. */
  async nodeTable(): Promise<string> {
    return (await this.metroctlOk(["nodes"])).trimEnd();
  }

  /**
   * `metroctl wait ID --state … --health …`, failing early if the node's
   * process exits meanwhile.
   */
  async waitFor(
    node: ClusterNode,
    goal: { state?: string; health?: string },
    timeoutMs = this.stepTimeoutMs,
  ): Promise<void> {
    const args = ["wait", node.id, "--timeout", String(timeoutMs / 1000), "--interval", "0.2"];
    if (goal.state) args.push("--state", goal.state);
    if (goal.health) args.push("--health", goal.health);
    await this.unlessExited(node, `${goal.state ?? ""} ${goal.health ?? ""}`, (signal) =>
      this.metroctlOk(args, { signal }),
    );
  }

  /**
   * Starts node `node`'s process (it must not be running). A node that has
   * enrolled needs no parameters: it finds its sealed configuration.
   *
   * Like a node's service manager, the launcher starts a node again (same
   * root, same config) when it exits with the reboot status
   * ({@link rebootExitStatus}, after NodeManagement.Reboot), and says so in
   * its log; `node.process` is then the new process. Any other exit (a
   * PowerOff's 0, a stop, a crash) leaves it stopped.
   * @param binary another build of the node to run (a test's: e2e version
   *   skew); @default the cluster's (`nodeBinaryPath()`)
   */
  startNode(node: ClusterNode, parametersPath?: string, binary?: string): NodeProcess {
    if (node.process?.running) {
      throw new LocalClusterError(`${node.name} is already running (pid ${node.process.pid})`);
    }
    node.process = NodeProcess.start({
      name: node.name,
      root: node.root,
      address: node.address,
      netns: this.netnsOf(node),
      parametersPath,
      binary,
      configPath: this.nodeConfigPath,
      onLine: this.opts.onNodeLine,
      bufferLines: this.opts.bufferLines,
      env: this.opts.nodeEnv?.(node),
      logFile: join(this.stateDir, "logs", `${node.name}.log`),
    });
    this.startedProcesses.push(node.process);
    const { pid } = node.process;
    this.lock.recordNode(node.name, node.root, pid);
    const proc = node.process;
    void proc.exited.then((exit) => {
      this.lock.forgetNode(node.name, pid);
      // Only the node's own last process, and not once the caller gave up on the cluster.
      if (exit.code !== rebootExitStatus || node.process !== proc || this.signal.aborted) return;
      this.log(`${node.name} rebooted (exit status ${rebootExitStatus}): starting it again`);
      try {
        this.startNode(node, parametersPath, binary);
      } catch (e) {
        this.log(`${node.name}: could not start it again: ${e instanceof Error ? e.message : e}`);
      }
    });
    return proc;
  }

  /** Gives up the state dir `up()` took, so that another launcher may use it. */
  release(): void {
    this.lock.release();
  }

  /** Stops node `node` gracefully (SIGTERM, wait for exit). */
  async stopNode(node: ClusterNode): Promise<void> {
    await node.process?.stop();
  }

  /** Cuts node `node`'s power (SIGKILL to its process group). */
  async killNode(node: ClusterNode): Promise<void> {
    await node.process?.kill();
  }

  /**
   * Reboots node `node` (graceful stop, start) and waits until the cluster
   * sees it UP and HEALTHY again; the time is recorded.
   */
  async rebootNode(node: ClusterNode): Promise<void> {
    await this.timed(
      (ms) => `${node.name} stopped (SIGTERM) in ${seconds(ms)}`,
      () => this.stopNode(node),
    );
    await this.timed(
      (ms) => `${node.name} UP and HEALTHY after restart in ${seconds(ms)}`,
      async () => {
        const proc = this.startNode(node);
        await rejoined(this, node, proc);
        await this.waitFor(node, { state: "UP", health: "HEALTHY" });
      },
    );
  }

  /**
   * Stops every running node, all at once (SIGTERM by PID, SIGKILL after a
   * timeout); then removes the testbed the cluster owns (hosts mode, `true`).
   */
  async stop(): Promise<void> {
    try {
      await Promise.all(this.nodes.flatMap((n) => (n.process ? [n.process.stop()] : [])));
    } finally {
      await this.removeOwnTestbed();
    }
  }

  /**
   * Kills every node process group at once (SIGKILL): a power cut of the
   * whole cluster; then removes the testbed the cluster owns (hosts mode, `true`).
   */
  async kill(): Promise<void> {
    try {
      await Promise.all(this.nodes.flatMap((n) => (n.process ? [n.process.kill()] : [])));
    } finally {
      await this.removeOwnTestbed();
    }
  }

  /** Runs `fn`, records how long it took as `describe(ms)` and logs that. */
  async timed<T>(describe: (ms: number) => string, fn: () => Promise<T>): Promise<T> {
    const started = performance.now();
    const result = await fn();
    const ms = performance.now() - started;
    this.record(describe(ms), ms);
    return result;
  }

  /** Records a measured step (its description includes the time) and logs it. */
  record(step: string, ms: number): void {
    this.timings.push({ step, ms });
    this.log(step);
  }

  /**
   * Registers node number `nodes.length + 1` and waits until it is NEW; the
   * owner approves it (or not) afterwards.
   */
  async enrolNode(): Promise<ClusterNode> {
    await this.ensureHosts(this.nodes.length + 1);
    return enrolNode(this);
  }

  /** Registers node number `nodes.length + 1`, approves it, and waits until it is UP and HEALTHY. */
  async addNode(): Promise<ClusterNode> {
    await this.ensureHosts(this.nodes.length + 1);
    return registerNode(this);
  }

  /**
   * Gives `node` the consensus role unless it has it, and waits until it has
   * joined etcd as a voting member, runs a curator and is HEALTHY.
   */
  private async ensureConsensus(node: ClusterNode): Promise<void> {
    const view = (await this.listNodes()).find((n) => n.id === node.id);
    if (view?.roles.includes("consensus")) return;
    await this.setConsensus(node, true);
  }

  /**
   * `set-role ID --consensus on|off`, then waits until it took effect (see
   * bring-up-steps.ts); the time is recorded.
   */
  async setConsensus(node: ClusterNode, on: boolean): Promise<void> {
    const proc = node.process;
    if (!proc?.running) throw new LocalClusterError(`${node.name} is not running`);
    await setConsensusRole(this, node, proc, on);
  }

  /**
   * Cold start: starts every node at once, checks that each rejoined as the
   * node ID on record, and waits until all are UP and HEALTHY. Every node
   * must be stopped. The times are recorded.
   */
  coldStart(): Promise<void> {
    return coldStartNodes(this);
  }

  /**
   * Runs `fn`, but rejects as soon as `node`'s process exits meanwhile (and
   * then aborts what `fn` does through its signal).
   */
  private async unlessExited<T>(
    node: ClusterNode,
    what: string,
    fn: (signal: AbortSignal | undefined) => Promise<T>,
  ): Promise<T> {
    const proc = node.process;
    // A node that is down on purpose may well be waited for (e.g. for its heartbeat timeout).
    if (!proc?.running) return fn(undefined);
    const gone = new AbortController();
    let finished = false;
    const exited = proc.exited.then((exit) => {
      if (finished) return undefined as never;
      gone.abort();
      throw new LocalClusterError(
        `${node.name} ${describeExit(exit)} while waiting for it to be ${what.trim()}` +
          (proc.stderr().trim() ? `; its stderr:\n${proc.stderr().trimEnd()}` : ""),
      );
    });
    exited.catch(() => undefined);
    try {
      return await Promise.race([fn(gone.signal), exited]);
    } finally {
      finished = true;
    }
  }

  /** A new node `index` (1-based), not yet started nor among `nodes`; its ID is set once known. */
  newNode(index: number, address = this.address(index)): ClusterNode {
    const name = `node${index}`;
    return { index, name, address, root: join(this.stateDir, "nodes", name), id: "" };
  }

  /** Where `node`'s parameters (bootstrap, register) are written. */
  async paramsPath(node: ClusterNode): Promise<string> {
    await mkdir(join(this.stateDir, "params"), { recursive: true });
    return join(this.stateDir, "params", `${node.name}.pb`);
  }

  /** Records the nodes in cluster.json (atomically): what a resumed cluster starts. */
  async saveState(): Promise<void> {
    await writeClusterState(this.statePath, this.nodes);
  }
}
