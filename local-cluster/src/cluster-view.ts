/**
 * The cluster owner's view of a local cluster's nodes from outside metroctl:
 * the node's Debug service (GetCondition), a curator's CuratorLocal
 * (GetCurrentLeader), the node's own etcd member (its membership, over its
 * unix socket), and the curator leader's view of every node's health.
 *
 * Shared by the e2e tests and the chaos run, so both ask the cluster the
 * same way. Every call has a deadline; the waiting helpers poll with a
 * deadline (`eventually`) and never sleep a fixed time.
 */
import { join } from "node:path";
import { Metadata, type ChannelCredentials } from "@grpc/grpc-js";
import { curatorClientCredentials } from "@metropolis/curator";
import { ConfigDir, type OwnerCredentials } from "@metropolis/metroctl";
import { api, curator } from "@metropolis/proto";
import { eventually } from "@metropolis/supervisor/testing";
import { Etcd3 } from "etcd3";
import type { ClusterNode, LocalCluster } from "./cluster-launcher";
import { LocalClusterError } from "./errors";

/** Ports every local cluster node uses (the defaults): the Debug service and the curator. */
export const debugPort = 7837;
export const curatorPort = 7835;

/** One etcd member as a node's own etcd member lists it. */
export interface EtcdMemberView {
  name: string;
  isLearner: boolean;
}

/** The owner's view of the nodes of `cluster`; see the module comment. */
export class ClusterView {
  private ownerCredentials: OwnerCredentials | undefined;

  constructor(readonly cluster: LocalCluster) {}

  /**
   * The owner's certificate, key and the cluster CA, from the metroctl config dir.
   * @throws LocalClusterError when takeownership has not run.
   */
  async owner(): Promise<OwnerCredentials> {
    if (this.ownerCredentials) return this.ownerCredentials;
    const owner = await new ConfigDir(this.cluster.metroctlDir).readOwnerCredentials();
    if (!owner) throw new LocalClusterError("no owner credentials: takeownership did not run");
    this.ownerCredentials = owner;
    return owner;
  }

  /** Whether condition `condition` holds on `node`, asked over its Debug service as the owner. */
  async condition(
    node: ClusterNode,
    condition: api.Condition,
    timeoutMs = 5000,
  ): Promise<api.GetConditionResponse> {
    const client = new api.DebugClient(
      `${node.address}:${debugPort}`,
      ownerTowardsNode(await this.owner(), node.id),
    );
    try {
      return await new Promise<api.GetConditionResponse>((resolve, reject) =>
        client.getCondition(
          { condition },
          new Metadata(),
          { deadline: Date.now() + timeoutMs },
          (e, r) => (e ? reject(e) : resolve(r)),
        ),
      );
    } finally {
      client.close();
    }
  }

  /** Who the curator on `node` says leads: its first GetCurrentLeader answer. */
  async currentLeader(
    node: ClusterNode,
    timeoutMs = 5000,
  ): Promise<curator.GetCurrentLeaderResponse> {
    const client = new curator.CuratorLocalClient(
      `${node.address}:${curatorPort}`,
      ownerTowardsNode(await this.owner(), node.id),
    );
    try {
      return await new Promise<curator.GetCurrentLeaderResponse>((resolve, reject) => {
        const call = client.getCurrentLeader({}, new Metadata(), {
          deadline: Date.now() + timeoutMs,
        });
        call.once("data", (response: curator.GetCurrentLeaderResponse) => {
          resolve(response);
          call.cancel();
        });
        call.once("error", reject);
        call.once("end", () => reject(new LocalClusterError("GetCurrentLeader ended")));
      });
    } finally {
      client.close();
    }
  }

  /**
   * The leader every curator on `nodes` names, once they all answer and
   * agree. A curator rebuilds its listener when it becomes the leader, and
   * a cluster that just came up may still be electing, so one round of
   * answers right after "all healthy" can be a refused connection or a
   * split view; only agreement within the deadline counts.
   */
  async agreedLeader(nodes: readonly ClusterNode[], timeoutMs = 30_000): Promise<string> {
    return eventually(
      async () => {
        const ids = await Promise.all(
          nodes.map(async (n) => (await this.currentLeader(n)).leaderNodeId),
        );
        return ids.every((id) => id !== "" && id === ids[0]) && ids[0];
      },
      `${nodes.map((n) => n.name).join(", ")} to name one curator leader`,
      { timeoutMs, intervalMs: 200 },
    );
  }

  /** The etcd membership as `node`'s own etcd member reports it (over its unix socket). */
  async etcdMembers(node: ClusterNode): Promise<EtcdMemberView[]> {
    const socket = join(node.root, "ephemeral", "consensus", "client.sock:0");
    const client = new Etcd3({ hosts: `unix://${socket}`, dialTimeout: 3000 });
    try {
      const { members } = await client.cluster.memberList({});
      return members.map((m) => ({ name: m.name, isLearner: m.isLearner }));
    } finally {
      client.close();
    }
  }

  /**
   * Waits until every node of `nodes` runs consensus and its own etcd member
   * lists the nodes of `nodes` as voting members, no more and no fewer;
   * returns the member names each reported, sorted.
   */
  async votingMembers(nodes: readonly ClusterNode[], timeoutMs = 30_000): Promise<string[][]> {
    const ids = nodes.map((n) => n.id).sort();
    const seen: string[][] = [];
    for (const node of nodes) {
      const members = await eventually(
        async () => {
          const m = await this.etcdMembers(node);
          const running = (await this.condition(node, api.Condition.CONSENSUS_RUNNING)).ok;
          return running && m.length === ids.length && m.every((x) => !x.isLearner) && m;
        },
        `${node.name} to run consensus, its etcd member listing ${ids.length} voting members`,
        { timeoutMs, intervalMs: 200 },
      );
      seen.push(members.map((m) => m.name).sort());
    }
    return seen;
  }

  /** Waits until the curator leader sees every node of `some` UP and HEALTHY. */
  async allHealthy(some: readonly ClusterNode[], timeoutMs = 30_000): Promise<void> {
    await eventually(
      async () => {
        const views = await this.cluster.listNodes();
        return some.every((n) => {
          const view = views.find((v) => v.id === n.id);
          return view?.state === "UP" && view.health === "HEALTHY";
        });
      },
      `${some.map((n) => n.name).join(", ")} UP and HEALTHY`,
      { timeoutMs, intervalMs: 200 },
    );
  }
}

/** TLS as the owner towards node `nodeId` (its certificate must name it). */
export function ownerTowardsNode(owner: OwnerCredentials, nodeId: string): ChannelCredentials {
  return curatorClientCredentials(owner.ca, owner, { nodeId });
}
