/**
 * Management.GetClusterConsensus: the etcd membership and the curator leader
 * with its term, for the owner (nodes ask Curator.GetConsensusStatus).
 */
import type { api } from "@metropolis/proto";
import { consensusMembers } from "./consensus-members";
import type { LeaderContext } from "./leader-context";

/** The answer of GetClusterConsensus on the leader whose context is `ctx`. */
export async function getClusterConsensus(
  ctx: LeaderContext,
): Promise<api.GetClusterConsensusResponse> {
  const { self, createRevision } = ctx.leadership;
  return {
    members: await consensusMembers(ctx),
    leader: {
      nodeId: self.nodeId,
      host: self.host,
      port: self.port,
      // The election key's create revision: a later leader's key was created later.
      term: Number(createRevision),
    },
  };
}
