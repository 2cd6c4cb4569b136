/**
 * In-process nodes for the enrolment tests: each with its own storage root,
 * machine key and loopback address, running a ClusterManager and a
 * Roleserver under a real supervisor — real etcd, real curators, real mTLS
 * gRPC between them. And the cluster's owner, with the Management API.
 */
import { randomBytes, randomInt } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { localTimings } from "@metropolis/consensus";
import { CuratorConnection, unaryCall, type CuratorAddress } from "@metropolis/curator";
import { placeNodeRoot, type NodeRoot } from "@metropolis/localstorage";
import {
  createEphemeralCertificate,
  encodePem,
  generateKeyPair,
  tlsMaterial,
  type Ed25519KeyPair,
} from "@metropolis/pki";
import { api, type common } from "@metropolis/proto";
import { Roleserver, type WorkloadSpec } from "@metropolis/roleserve";
import { eventually, testHarness, type TestHarness } from "@metropolis/supervisor/testing";
import { ClusterManager } from "../src/manager";
import type { ClusterStatus } from "../src/status";
import { getHome } from "../src/status-watcher";

/** A /24 of loopback addresses of its own, so that test files can run in parallel. */
export function loopbackNet(): (host: number) => string {
  const net = `127.${randomInt(100, 250)}.${randomInt(1, 250)}`;
  return (host) => `${net}.${host}`;
}

export interface NodeRun {
  manager: ClusterManager;
  roleserver: Roleserver;
  harness: TestHarness;
}

/** The node's status once HOME; fails at once with the enrolment's error if enrolment fails. */
export function homeOf(run: NodeRun): Promise<ClusterStatus> {
  return Promise.race([getHome(run.manager.status), run.manager.failure]);
}

export class TestClusterNode {
  run: NodeRun | undefined;

  private constructor(
    readonly dir: string,
    readonly address: string,
    private readonly workloads: WorkloadSpec[],
  ) {}

  static async create(address: string, workloads: WorkloadSpec[] = []): Promise<TestClusterNode> {
    const dir = await mkdtemp(join(tmpdir(), "metropolis-cluster-"));
    return new TestClusterNode(dir, address, workloads);
  }

  get machineKeyPath(): string {
    return join(this.dir, "machine.key");
  }

  /** A fresh view of the node's storage (each run places its own). */
  storage(): NodeRoot {
    return placeNodeRoot(join(this.dir, "root"));
  }

  /** Starts the node; `parameters` are written to a file given as on the command line. */
  async start(parameters?: api.NodeParameters | Uint8Array): Promise<NodeRun> {
    let parametersPath: string | undefined;
    if (parameters) {
      parametersPath = join(this.dir, "parameters.pb");
      const bytes =
        parameters instanceof Uint8Array
          ? parameters
          : api.NodeParameters.encode(parameters).finish();
      await writeFile(parametersPath, bytes);
    }
    const storage = this.storage();
    await storage.ephemeral.wipe();
    const roleserver = new Roleserver({
      storage,
      machineKeyPath: this.machineKeyPath,
      host: this.address,
      timings: localTimings,
      leaderTtlSeconds: 2,
      heartbeatTimeoutMs: 3_000,
      reconcileIntervalMs: 300,
      autopromoteIntervalMs: 300,
      heartbeatIntervalMs: 1_000,
      version: "test",
      bootId: randomBytes(8).toString("hex"),
      workloads: this.workloads,
    });
    const manager = new ClusterManager({
      storage,
      machineKeyPath: this.machineKeyPath,
      parametersPath,
      roleserver,
      address: this.address,
      commitIntervalMs: 200,
    });
    const harness = testHarness(
      async (ctx) => {
        ctx.run("enrolment", manager.run);
        ctx.run("roleserver", roleserver.run);
        ctx.healthy();
        await ctx.untilAborted();
      },
      {
        timeoutMs: 60_000,
        // Launchers follow role changes by failing and being restarted, and
        // curator streams fail over with the leader: by design, not a test failure.
        expectDeath: (dn) => dn.startsWith("root.roleserver."),
      },
    );
    this.run = { manager, roleserver, harness };
    return this.run;
  }

  async stop(): Promise<void> {
    await this.run?.harness.cleanup({ timeoutMs: 15_000 });
    this.run = undefined;
  }

  async remove(): Promise<void> {
    await this.stop().catch(() => undefined);
    await rm(this.dir, { recursive: true, force: true });
  }
}

/** The cluster's owner: its key, and once escrowed, Management API access. */
export class TestOwner {
  readonly key: Ed25519KeyPair = generateKeyPair();
  connection: CuratorConnection | undefined;

  bootstrapParameters(
    initialClusterConfiguration?: common.ClusterConfiguration,
  ): api.NodeParameters {
    return {
      cluster: {
        $case: "clusterBootstrap",
        clusterBootstrap: {
          ownerPublicKey: this.key.publicKey,
          labels: new Map([["site", "first"]]),
          initialClusterConfiguration,
        },
      },
    };
  }

  /** Escrows the owner certificate from the cluster at `endpoint` whose CA is `ca` (DER). */
  async takeOwnership(endpoint: CuratorAddress, ca: Uint8Array): Promise<void> {
    const ephemeral = await createEphemeralCertificate(this.key.privateKey);
    const self = tlsMaterial({
      certificate: ephemeral,
      privateKey: this.key.privateKey,
      ca: ephemeral,
    });
    const caPem = encodePem("CERTIFICATE", ca);
    const anonymous = new CuratorConnection({ endpoints: [endpoint], ca: caPem, identity: self });
    try {
      const res = await anonymous.call((l) =>
        unaryCall<api.EscrowRequest, api.EscrowResponse>(l.aaa.escrow.bind(l.aaa), {
          publicKey: this.key.publicKey,
        }),
      );
      const owner = tlsMaterial({
        certificate: res.userCertificate,
        privateKey: this.key.privateKey,
        ca,
      });
      this.connection = new CuratorConnection({
        endpoints: [endpoint],
        ca: caPem,
        identity: owner,
      });
    } finally {
      anonymous.close();
    }
  }

  private get management() {
    if (!this.connection) throw new Error("takeOwnership first");
    return this.connection;
  }

  registerTicket(): Promise<Buffer> {
    return this.management
      .call((l) =>
        unaryCall<api.GetRegisterTicketRequest, api.GetRegisterTicketResponse>(
          l.management.getRegisterTicket.bind(l.management),
          {},
        ),
      )
      .then((r) => r.ticket);
  }

  clusterInfo(): Promise<api.GetClusterInfoResponse> {
    return this.management.call((l) =>
      unaryCall<api.GetClusterInfoRequest, api.GetClusterInfoResponse>(
        l.management.getClusterInfo.bind(l.management),
        {},
      ),
    );
  }

  /**
   * Register parameters, once the cluster's directory lists a node with an
   * address: a cluster that has just bootstrapped lists its first node only
   * after that node pushed its status, and a node given a directory without
   * an address refuses its parameters (as `metroctl register-params` does).
   */
  async registerParameters(): Promise<api.NodeParameters> {
    const info = await eventually(async () => {
      const i = await this.clusterInfo();
      const nodes = i.clusterDirectory?.nodes ?? [];
      if (!nodes.some((n) => n.addresses.some((a) => a.host !== "")))
        throw new Error("the cluster directory lists no node with an address yet");
      return i;
    }, "a node with an address in the cluster directory");
    return {
      cluster: {
        $case: "clusterRegister",
        clusterRegister: {
          registerTicket: await this.registerTicket(),
          clusterDirectory: info.clusterDirectory,
          caCertificate: info.caCertificate,
          labels: new Map(),
        },
      },
    };
  }

  nodes(): Promise<api.Node[]> {
    return this.management
      .call((l) =>
        unaryCall<api.GetNodesRequest, api.GetNodesResponse>(
          l.management.getNodes.bind(l.management),
          { states: [], roles: [], labels: new Map() },
        ),
      )
      .then((r) => r.nodes);
  }

  /** DecommissionNode of a node without an etcd member, with or without its wipe. */
  decommission(nodeId: string, wipe: boolean): Promise<api.DecommissionNodeResponse> {
    return this.management.call((l) =>
      unaryCall<api.DecommissionNodeRequest, api.DecommissionNodeResponse>(
        l.management.decommissionNode.bind(l.management),
        { node: { $case: "id", id: nodeId }, force: false, wipe },
      ),
    );
  }

  approve(nodeId: string): Promise<unknown> {
    return this.management.call((l) =>
      unaryCall<api.ApproveNodeRequest, api.ApproveNodeResponse>(
        l.management.approveNode.bind(l.management),
        { node: { $case: "id", id: nodeId } },
      ),
    );
  }

  setRoles(
    nodeId: string,
    roles: { consensusMember?: boolean; kubernetesWorker?: boolean },
  ): Promise<unknown> {
    return this.management.call((l) =>
      unaryCall<api.UpdateNodeRolesRequest, api.UpdateNodeRolesResponse>(
        l.management.updateNodeRoles.bind(l.management),
        { node: { $case: "id", id: nodeId }, ...roles },
      ),
    );
  }

  deleteNode(nodeId: string): Promise<unknown> {
    return this.management.call((l) =>
      unaryCall<api.DeleteNodeRequest, api.DeleteNodeResponse>(
        l.management.deleteNode.bind(l.management),
        { node: { $case: "id", id: nodeId }, bypassHasRoles: true, bypassNodeUp: true },
      ),
    );
  }

  close(): void {
    this.connection?.close();
  }
}
