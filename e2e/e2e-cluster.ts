/**
 * The e2e tests' cluster: a LocalCluster of real `metropolis-node` processes
 * (real etcd, real mutual TLS) on a random 127.X.Y.0/24 of its own, so that
 * test files can run in parallel, with its state in a temp dir. `teardown()`
 * stops every process the file started — cluster nodes and extra ones — by
 * PID, even after a failure, removes the temp dir, and prints the step
 * timings the file measured so that they can be compared over time.
 *
 * Where it can (as root, as CI is: `Testbed.available()`), or always with
 * `hosts: true`, the nodes run on a testbed of their own instead (each in a
 * network namespace, on a bridge, at an address of a random /24 of
 * 198.18.0.0/15: ../local-cluster's testbed.ts), and `network` breaks the
 * network between them (network.ts); `teardown()` then also removes the
 * testbed. Node `i` runs on host `i`. `hosts: false` keeps a file on loopback.
 *
 * Also here: the owner's view of a node from outside metroctl — the node's
 * Debug service (GetCondition), a curator's CuratorLocal (GetCurrentLeader)
 * and the node's own etcd member (its membership), shared with the chaos run
 * in ../local-cluster's cluster-view.ts — and the unboxing of a node's fatal
 * error.
 */
import { existsSync, readdirSync, statSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { silenceIpServerNameWarning } from "@metropolis/curator";
import { placeNodeRoot } from "@metropolis/localstorage";
import type { OwnerCredentials } from "@metropolis/metroctl";
import type { NodeConfigFile } from "@metropolis/node";
import type { api, curator } from "@metropolis/proto";
import {
  LocalCluster,
  type ClusterNode,
  type LocalClusterOptions,
} from "../local-cluster/src/cluster-launcher";
import { ClusterView, type EtcdMemberView } from "../local-cluster/src/cluster-view";
import { randomLoopbackNet } from "../local-cluster/src/loopback-net";
import { Network } from "../local-cluster/src/network";
import {
  nodeBinaryPath,
  NodeProcess,
  type NodeProcessOptions,
} from "../local-cluster/src/node-process";
import { Testbed } from "../local-cluster/src/testbed";

/** A problem of the e2e harness itself (not of the system under test). */
export class E2eHarnessError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** Ports every node uses (the defaults): the Debug service and the curator. */
export { curatorPort, debugPort } from "../local-cluster/src/cluster-view";

/** The packages the node binary is built from. */
const nodePackages = [
  "supervisor",
  "event",
  "localstorage",
  "pki",
  "consensus",
  "curator",
  "roleserve",
  "cluster",
  "node",
];

/**
 * Fails early, with the command to run, when the node binary was not built,
 * and warns when a source file of it is newer than its build (the tests
 * would run old code).
 */
function checkNodeBinary(): void {
  const binary = nodeBinaryPath();
  if (!existsSync(binary)) {
    throw new E2eHarnessError(`${binary} is missing: run \`npx tsc -b packages/node\` first`);
  }
  if (process.env.METROPOLIS_NODE_BINARY) return;
  // tsc -b's own test: a project is stale when a source is newer than its tsbuildinfo.
  const stale = nodePackages.filter((name) => {
    const pkg = join(__dirname, "..", "packages", name);
    const info = join(pkg, "tsconfig.tsbuildinfo");
    if (!existsSync(info)) return true;
    const built = statSync(info).mtimeMs;
    return readdirSync(join(pkg, "src")).some(
      (f) => f.endsWith(".ts") && statSync(join(pkg, "src", f)).mtimeMs > built,
    );
  });
  if (stale.length > 0) {
    process.stderr.write(
      `e2e: warning: the build of ${stale.join(", ")} is older than its sources; ` +
        "run `npx tsc -b packages/node`\n",
    );
  }
}

export interface E2eClusterOptions {
  /** How many nodes `up()` brings up. */
  nodes: number;
  /** Node configuration merged over the local cluster's; a function gets the file's temp dir. */
  nodeConfig?: NodeConfigFile | ((dir: string) => NodeConfigFile);
  /** Whether every node becomes a consensus member (default true). */
  consensusOnEveryNode?: boolean;
  /**
   * Hosts mode: every node in a network namespace of its own, on a testbed
   * the file owns (`network` then breaks the network between them). Needs
   * root and ip, iptables, conntrack, nsenter: with `true`, check
   * `Testbed.available()` first to skip the file elsewhere; `false` keeps
   * the nodes on loopback.
   * @default on the testbed where `Testbed.available()` (as root, as CI
   *   is), on loopback elsewhere: the suites run across hosts wherever they can
   */
  hosts?: boolean;
  /** Extra environment of a node's process, each time it starts; gets the file's temp dir. */
  nodeEnv?: (node: ClusterNode, dir: string) => Record<string, string>;
}

/** A test file's cluster; see the module comment. */
export class E2eCluster {
  readonly cluster: LocalCluster;
  /** The owner's view of the nodes (Debug, CuratorLocal, etcd membership, health). */
  readonly view: ClusterView;
  /** Address of node `index` (1-based) in this file's /24. */
  readonly address: (index: number) => string;
  /** In hosts mode, the testbed the nodes run on (node `i` on host `i`). */
  readonly testbed: Testbed | undefined;
  private readonly extra: NodeProcess[] = [];
  private readonly hostsNetwork: Network | undefined;
  private tornDown: Promise<void> | undefined;

  private constructor(
    readonly name: string,
    readonly dir: string,
    opts: E2eClusterOptions,
    hosts: { testbed: Testbed; network: Network } | undefined,
  ) {
    this.testbed = hosts?.testbed;
    this.hostsNetwork = hosts?.network;
    const testbed = hosts?.testbed;
    this.address = testbed ? (i) => testbed.address(i) : randomLoopbackNet();
    const nodeEnv = opts.nodeEnv;
    const clusterOptions: LocalClusterOptions = {
      stateDir: join(dir, "cluster"),
      nodes: opts.nodes,
      ...(testbed ? { hosts: testbed } : { address: this.address }),
      nodeConfig: typeof opts.nodeConfig === "function" ? opts.nodeConfig(dir) : opts.nodeConfig,
      consensusOnEveryNode: opts.consensusOnEveryNode,
      nodeEnv: nodeEnv ? (node) => nodeEnv(node, dir) : undefined,
      log: () => undefined,
      stepTimeoutMs: 90_000,
    };
    this.cluster = new LocalCluster(clusterOptions);
    this.view = new ClusterView(this.cluster);
  }

  /**
   * Creates the temp dir and the (not yet running) cluster of test file
   * `name`; in hosts mode also its testbed, with `nodes` hosts.
   * @throws E2eHarnessError in hosts mode where a testbed cannot be built (says why).
   */
  static async create(name: string, opts: E2eClusterOptions): Promise<E2eCluster> {
    checkNodeBinary();
    // Nodes are dialled by IP by design (see @metropolis/curator's credentials).
    silenceIpServerNameWarning();
    let hosts: { testbed: Testbed; network: Network } | undefined;
    const availability = opts.hosts === false ? undefined : Testbed.available();
    if (availability && (opts.hosts === true || availability.ok)) {
      if (!availability.ok) throw new E2eHarnessError(`no hosts mode here: ${availability.reason}`);
      const testbed = await Testbed.create({ hosts: opts.nodes });
      try {
        hosts = { testbed, network: await Network.create(testbed) };
      } catch (e) {
        await testbed.destroy();
        throw e;
      }
    }
    const dir = await mkdtemp(join(tmpdir(), `metropolis-e2e-${name}-`));
    return new E2eCluster(name, dir, opts, hosts);
  }

  /**
   * The network between the nodes' hosts (partition, isolate, blockPort,
   * loss, heal), in hosts mode.
   * @throws E2eHarnessError when the cluster is not in hosts mode.
   */
  get network(): Network {
    if (!this.hostsNetwork) {
      throw new E2eHarnessError(
        `e2e ${this.name} is not in hosts mode: create it with hosts: true`,
      );
    }
    return this.hostsNetwork;
  }

  /** Brings the cluster up (bootstrap, register, approve, roles). */
  async up(): Promise<void> {
    await this.cluster.up();
  }

  node(nameOrIndex: string | number): ClusterNode {
    return this.cluster.node(nameOrIndex);
  }

  /** Records a measurement of the test's own, printed at teardown with the cluster's. */
  note(step: string, ms: number): void {
    this.cluster.record(`${step}: ${(ms / 1000).toFixed(2)} s`, ms);
  }

  /** Runs `fn` and records how long it took as `step`. */
  async measure<T>(step: string, fn: () => Promise<T>): Promise<T> {
    const started = performance.now();
    const result = await fn();
    this.note(step, performance.now() - started);
    return result;
  }

  /**
   * Starts a `metropolis-node` outside the cluster's nodes, at an address of
   * its own: a new host of the testbed in hosts mode (so a later
   * `cluster.addNode()` would share it: don't mix the two), from .200 of the
   * file's /24 on loopback. Stopped at teardown.
   */
  async spawn(
    opts: Omit<NodeProcessOptions, "name" | "address" | "netns"> & { name?: string },
  ): Promise<NodeProcess> {
    const name = opts.name ?? `extra${this.extra.length + 1}`;
    let place: { address: string; netns?: string };
    if (this.testbed) {
      const host = await this.testbed.addHost();
      place = { address: this.testbed.address(host), netns: this.testbed.namespace(host) };
    } else {
      place = { address: this.address(200 + this.extra.length) };
    }
    const proc = NodeProcess.start({ ...opts, ...place, name });
    this.extra.push(proc);
    return proc;
  }

  /** The owner's certificate, key and the cluster CA, from the metroctl config dir. */
  owner(): Promise<OwnerCredentials> {
    return this.view.owner();
  }

  /** Whether condition `condition` holds on `node` (Debug service, as the owner). */
  condition(node: ClusterNode, condition: api.Condition): Promise<api.GetConditionResponse> {
    return this.view.condition(node, condition);
  }

  /** Who the curator on `node` says leads: its first GetCurrentLeader answer. */
  currentLeader(node: ClusterNode): Promise<curator.GetCurrentLeaderResponse> {
    return this.view.currentLeader(node);
  }

  /** The leader every curator on `nodes` names, once they all answer and agree. */
  agreedLeader(nodes: readonly ClusterNode[], timeoutMs = 30_000): Promise<string> {
    return this.view.agreedLeader(nodes, timeoutMs);
  }

  /** The etcd membership as `node`'s own etcd member reports it (over its unix socket). */
  etcdMembers(node: ClusterNode): Promise<EtcdMemberView[]> {
    return this.view.etcdMembers(node);
  }

  /** Waits until every node of `nodes` runs consensus, each listing exactly them as voters. */
  votingMembers(nodes: readonly ClusterNode[]): Promise<string[][]> {
    return this.view.votingMembers(nodes);
  }

  /** Waits until the curator leader sees every node of `some` UP and HEALTHY (default: 30 s). */
  allHealthy(some: readonly ClusterNode[], timeoutMs?: number): Promise<void> {
    return this.view.allHealthy(some, timeoutMs);
  }

  /**
   * Stops every process this file started (graceful first, SIGKILL after
   * the timeout), reports any left behind, prints the timings and removes
   * the temp dir; in hosts mode then removes the testbed (namespaces,
   * veths, bridge, and with them the network's rules). Safe to call after
   * any failure, and more than once (later calls wait for the first).
   */
  teardown(): Promise<void> {
    this.tornDown ??= this.tearDown();
    return this.tornDown;
  }

  private async tearDown(): Promise<void> {
    // Every process started, not only those of the nodes: a node whose bring-up step failed
    // is not among them, but runs all the same.
    const procs = [...new Set([...this.cluster.started, ...this.extra])];
    await Promise.all(procs.map((p) => p.stop().catch(() => p.kill())));
    const leftBehind = procs.filter((p) => p.leftovers).map((p) => p.name);
    // Every node is down: nothing may be left on the testbed's hosts (destroy() kills what is).
    const killedOnHosts = (await this.testbed?.destroy()) ?? [];
    const lines = [
      ...this.cluster.timings.map((t) => t.step),
      ...(leftBehind.length > 0
        ? [`WARNING: processes left behind by ${leftBehind.join(", ")} (killed)`]
        : []),
      ...(killedOnHosts.length > 0
        ? [`WARNING: processes left on the testbed's hosts: ${killedOnHosts.join(", ")} (killed)`]
        : []),
      ...(this.testbed ? [`testbed ${this.testbed.tag} (${this.testbed.subnet}) removed`] : []),
    ];
    process.stdout.write(`\ne2e ${this.name} timings:\n${lines.map((l) => `  ${l}`).join("\n")}\n`);
    // A node killed and not started again still holds its ephemeral directory in memory (a
    // tmpfs mounted in the temp dir, or a directory under /dev/shm): given back in any case.
    for (const root of new Set(procs.map((p) => p.root))) {
      await placeNodeRoot(root).ephemeral.release();
    }
    if (process.env.METROPOLIS_E2E_KEEP) {
      process.stdout.write(`e2e ${this.name}: state and node logs kept in ${this.dir}\n`);
      return;
    }
    await rm(this.dir, { recursive: true, force: true });
  }
}

/**
 * The text of a boxed fatal error (`formatFatal`) on one line: borders
 * removed, wrapped lines joined with spaces.
 */
export function unboxed(stderr: string): string {
  return stderr
    .split("\n")
    .filter((l) => l.startsWith("│"))
    .map((l) => l.replace(/^│ ?/, "").replace(/ *│$/, "").trim())
    .filter((l) => l !== "")
    .join(" ");
}
