/**
 * A real cluster control plane for the roleserve workers' tests: the
 * bootstrapped test cluster of `@metropolis/curator/testing` (one-member
 * etcd, cluster bootstrapped in it as the first node would: CA, first node
 * UP, owner key and certificate), and a real `Curator` leading it on a
 * loopback address. The workers reach it as nodes do, through
 * a CuratorConnection that finds the leader via CuratorLocal; the test acts
 * as the owner through the Management API, and adds nodes through the real
 * register → approve → commit flow.
 *
 *   const cluster = await startTestCluster();
 *   const node = await cluster.addNode();
 *   values.curatorConnection.set(cluster.connect(node));
 *   …
 *   await cluster.stop();
 */
import { randomBytes } from "node:crypto";
import { Curator, CuratorConnection, unaryCall, type CuratorAddress } from "@metropolis/curator";
import { bootstrapTestCluster } from "@metropolis/curator/testing";
import { freePort, type TestMember } from "@metropolis/consensus/testing";
import { waitFor } from "@metropolis/event";
import {
  createEphemeralCertificate,
  generateKeyPair,
  nodeIdFromPublicKey,
  tlsMaterial,
} from "@metropolis/pki";
import { api, common, curator as curatorProto, protocolVersion } from "@metropolis/proto";
import type { TestHarness } from "@metropolis/supervisor/testing";
import { credentialsPem, type NodeCredentials } from "../src/node-credentials";
import type { CuratorConnectionValue } from "../src/values";

/** A node of the test cluster: its credentials and public key. */
export interface ClusterNode extends NodeCredentials {
  publicKey: Uint8Array;
}

export interface TestClusterOptions {
  /** The curator's heartbeat timeout (default 10 s). */
  heartbeatTimeoutMs?: number;
  /**
   * How long the curator's DecommissionNode with `wipe` waits for the node's
   * acknowledgement.
   * @default the curator's own (30 s)
   */
  wipeAcknowledgementTimeoutMs?: number;
}

export interface TestCluster {
  /** Where the curator serves: "127.0.0.x:port". */
  address: string;
  /** The curator's address, bound to the first node that runs it. */
  endpoint: CuratorAddress;
  caPem: string;
  member: TestMember;
  /** The bootstrap node: UP, consensus member and Kubernetes controller; it runs the curator. */
  firstNode: ClusterNode;
  /** The curator currently running (a new one after restartCurator). */
  curator(): Curator;
  /**
   * A new node that went through RegisterNode, the owner's approval and
   * CommitNode (so it is UP, with a certificate), unless `commit` is false
   * (then it stays STANDBY and its credentials hold no certificate).
   */
  addNode(opts?: { commit?: boolean }): Promise<ClusterNode>;
  /** A curator connection as `node`, for `values.curatorConnection`; closed by stop(). */
  connect(node: NodeCredentials): CuratorConnectionValue;
  /** Calls the Management API as the owner. */
  management<Res>(fn: (m: api.ManagementClient) => Promise<Res>): Promise<Res>;
  /** The node as the owner sees it (GetNodes), undefined if it does not exist. */
  getNode(nodeId: string): Promise<api.Node | undefined>;
  /** UpdateNodeRoles as the owner. */
  updateRoles(
    nodeId: string,
    roles: Omit<api.UpdateNodeRolesRequest, "node">,
  ): Promise<api.UpdateNodeRolesResponse>;
  /** DeleteNode as the owner, with every bypass (the node may be UP and hold roles). */
  deleteNode(nodeId: string): Promise<void>;
  /** DecommissionNode as the owner (a node without an etcd member: no quorum check). */
  decommissionNode(nodeId: string): Promise<void>;
  /** UpdateNodeStatus as `node` itself. */
  reportStatus(node: NodeCredentials, status: Partial<common.NodeStatus>): Promise<void>;
  /**
   * Stops the curator and starts a new one on the same address (open
   * streams break), with `opts` instead of the cluster's options when given.
   */
  restartCurator(opts?: TestClusterOptions): Promise<void>;
  /** Stops curator, connections, etcd and removes the temp directory. Idempotent. */
  stop(): Promise<void>;
}

/** Starts the control plane; see the module comment. */
export async function startTestCluster(opts: TestClusterOptions = {}): Promise<TestCluster> {
  const base = await bootstrapTestCluster({ name: "roleserve" });
  const cleanup = base.stop;
  try {
    const { node, member, authority, caPem, owner } = base;
    const firstNode: ClusterNode = {
      nodeId: node.nodeId,
      publicKey: node.publicKey,
      privateKey: node.privateKey,
      certificate: base.firstNode.certificate,
      caCertificate: base.caCertificate,
    };

    const host = node.peer.host;
    const port = await freePort(host);
    const address = `${host}:${port}`;
    const endpoint: CuratorAddress = { host, port, nodeId: firstNode.nodeId };
    let running: { curator: Curator; harness: TestHarness } | undefined;
    const startCurator = async (curatorOpts: TestClusterOptions) => {
      const { curator, harness } = base.runCurator({
        nodeId: firstNode.nodeId,
        tls: credentialsPem(firstNode),
        host,
        port,
        heartbeatTimeoutMs: curatorOpts.heartbeatTimeoutMs,
        wipeAcknowledgementTimeoutMs: curatorOpts.wipeAcknowledgementTimeoutMs,
      });
      running = { curator, harness };
      // The curator announces itself as leader only once its listener serves.
      await waitFor(
        curator.leader,
        (l) => l?.nodeId === firstNode.nodeId,
        AbortSignal.timeout(20_000),
      );
    };
    const stopCurator = async () => {
      const r = running;
      running = undefined;
      await r?.harness.cleanup();
    };
    base.defer(stopCurator);
    await startCurator(opts);

    const connections: CuratorConnection[] = [];
    base.defer(async () => connections.forEach((c) => c.close()));
    const connection = (identity?: { cert: string; key: string }) => {
      const c = new CuratorConnection({ endpoints: [endpoint], ca: caPem, identity });
      connections.push(c);
      return c;
    };
    const asOwner = connection(base.tls(owner.certificate, owner.privateKey));
    const management: TestCluster["management"] = (fn) =>
      asOwner.call((leader) => fn(leader.management), { timeoutMs: 20_000 });

    const cluster: TestCluster = {
      address,
      endpoint,
      caPem,
      member,
      firstNode,
      curator: () => {
        if (!running) throw new Error("the test cluster's curator is not running");
        return running.curator;
      },
      management,
      addNode: async ({ commit = true } = {}) => {
        const keys = generateKeyPair();
        const nodeId = nodeIdFromPublicKey(keys.publicKey);
        const ephemeral = await createEphemeralCertificate(keys.privateKey);
        const asEphemeral = connection(
          tlsMaterial({ certificate: ephemeral, privateKey: keys.privateKey, ca: ephemeral }),
        );
        try {
          const { ticket } = await management((m) =>
            unaryCall<api.GetRegisterTicketRequest, api.GetRegisterTicketResponse>(
              m.getRegisterTicket.bind(m),
              {},
            ),
          );
          await asEphemeral.call((l) =>
            unaryCall<curatorProto.RegisterNodeRequest, curatorProto.RegisterNodeResponse>(
              l.curator.registerNode.bind(l.curator),
              {
                registerTicket: ticket,
                joinKey: generateKeyPair().publicKey,
                labels: new Map(),
                protocolVersion,
              },
            ),
          );
          await management((m) =>
            unaryCall<api.ApproveNodeRequest, api.ApproveNodeResponse>(m.approveNode.bind(m), {
              node: { $case: "id", id: nodeId },
            }),
          );
          let certificate: Uint8Array = new Uint8Array();
          if (commit) {
            const committed = await asEphemeral.call((l) =>
              unaryCall<curatorProto.CommitNodeRequest, curatorProto.CommitNodeResponse>(
                l.curator.commitNode.bind(l.curator),
                { clusterUnlockKey: randomBytes(32) },
              ),
            );
            certificate = committed.nodeCertificate;
          }
          return {
            nodeId,
            publicKey: keys.publicKey,
            privateKey: keys.privateKey,
            certificate,
            caCertificate: authority.certificate.der,
          };
        } finally {
          asEphemeral.close();
        }
      },
      connect: (n) => {
        const tls = credentialsPem(n);
        return { credentials: n, connection: connection(tls) };
      },
      getNode: async (nodeId) => {
        const { nodes } = await management((m) =>
          unaryCall<api.GetNodesRequest, api.GetNodesResponse>(m.getNodes.bind(m), {
            states: [],
            roles: [],
            labels: new Map(),
          }),
        );
        return nodes.find((n) => n.id === nodeId);
      },
      updateRoles: (nodeId, roles) =>
        management((m) =>
          unaryCall<api.UpdateNodeRolesRequest, api.UpdateNodeRolesResponse>(
            m.updateNodeRoles.bind(m),
            { node: { $case: "id", id: nodeId }, ...roles },
          ),
        ),
      deleteNode: async (nodeId) => {
        await management((m) =>
          unaryCall<api.DeleteNodeRequest, api.DeleteNodeResponse>(m.deleteNode.bind(m), {
            node: { $case: "id", id: nodeId },
            bypassHasRoles: true,
            bypassNodeUp: true,
          }),
        );
      },
      decommissionNode: async (nodeId) => {
        await management((m) =>
          unaryCall<api.DecommissionNodeRequest, api.DecommissionNodeResponse>(
            m.decommissionNode.bind(m),
            { node: { $case: "id", id: nodeId }, force: false },
          ),
        );
      },
      reportStatus: async (n, status) => {
        const as = connection(credentialsPem(n));
        try {
          await as.call((l) =>
            unaryCall<curatorProto.UpdateNodeStatusRequest, curatorProto.UpdateNodeStatusResponse>(
              l.curator.updateNodeStatus.bind(l.curator),
              { nodeId: n.nodeId, status: common.NodeStatus.fromPartial(status) },
            ),
          );
        } finally {
          as.close();
        }
      },
      restartCurator: async (restartOpts = opts) => {
        await stopCurator();
        await startCurator(restartOpts);
      },
      stop: cleanup,
    };
    return cluster;
  } catch (e) {
    await cleanup();
    throw e;
  }
}
