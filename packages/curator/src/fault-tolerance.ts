/**
 * How many failures the cluster's consensus survives, from its members: the
 * one place this is computed (Management.GetClusterConsensus answers it, and
 * metroctl and the observer show what it answered).
 *
 * etcd commits with a quorum of its voters (voters / 2 + 1); learners do not
 * vote, so they count for nothing until they are promoted. Three voters
 * survive one failure, five survive two; one or two voters survive none.
 */
import { api, common } from "@metropolis/proto";

/** The fault tolerance of a consensus whose members are `members`. */
export function faultTolerance(
  members: readonly common.ConsensusMember[],
): api.GetClusterConsensusResponse_FaultTolerance {
  const voters = members.filter((m) => m.status === common.ConsensusMember_Status.VOTER);
  const quorum = Math.floor(voters.length / 2) + 1;
  return {
    voters: voters.length,
    learners: members.filter((m) => m.status === common.ConsensusMember_Status.LEARNER).length,
    quorum,
    tolerates: Math.max(0, voters.length - quorum),
    unreachableVoters: voters.filter(
      (m) => m.reachability === common.ConsensusMember_Reachability.UNREACHABLE,
    ).length,
  };
}
