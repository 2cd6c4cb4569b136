/**
 * The cluster status of this node, as the enrolment manager publishes it
 * (an event value every other part of the node watches): the cluster state
 * from this node's point of view, its credentials once it has them, and
 * whether it runs a consensus member.
 */
import type { ConsensusClient } from "@metropolis/consensus";
import { common } from "@metropolis/proto";
import type { NodeCredentials } from "@metropolis/roleserve";
import { ConsensusRefusedError, NoLocalConsensusError, UnknownConsensusUserError } from "./errors";

/** The users that may get an etcd client, each confined to its own namespace. */
export const consensusUsers = ["curator", "kubernetes-pki", "workloads"] as const;
export type ConsensusUser = (typeof consensusUsers)[number];

export class ClusterStatus {
  constructor(
    readonly state: common.ClusterState,
    readonly credentials?: NodeCredentials,
    /** The local consensus member's unconfined client, when this node runs one. */
    private readonly localConsensus?: ConsensusClient,
  ) {}

  get hasLocalConsensus(): boolean {
    return this.localConsensus !== undefined;
  }

  /**
   * An etcd client confined to `user`'s namespace (`namespaced:<user>/`).
   * Only for the fixed set of users, only on a node that runs consensus, and
   * only while the node is HOME or SPLIT (a split node still serves its own
   * consensus; whether to fence is the user's decision).
   */
  consensusClient(user: ConsensusUser): ConsensusClient {
    if (!(consensusUsers as readonly string[]).includes(user))
      throw new UnknownConsensusUserError(user);
    if (!this.localConsensus) throw new NoLocalConsensusError();
    if (this.state !== common.ClusterState.HOME && this.state !== common.ClusterState.SPLIT) {
      throw new ConsensusRefusedError(common.clusterStateToJSON(this.state));
    }
    return this.localConsensus.sub(user);
  }
}
