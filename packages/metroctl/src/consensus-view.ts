/**
 * A GetClusterConsensus answer as metroctl shows it (`cluster members`, the
 * observer's consensus view): the plain fields of consensus-fields.ts, in a
 * stable order, so that two answers saying the same compare equal.
 */
import { api, common } from "@metropolis/proto";
import type { ConsensusMemberView, ConsensusView } from "./consensus-fields";

const memberStatus: Record<common.ConsensusMember_Status, ConsensusMemberView["status"]> = {
  [common.ConsensusMember_Status.VOTER]: "voter",
  [common.ConsensusMember_Status.LEARNER]: "learner",
  [common.ConsensusMember_Status.UNKNOWN]: "unknown",
  [common.ConsensusMember_Status.UNRECOGNIZED]: "unknown",
};

const reachability: Record<
  common.ConsensusMember_Reachability,
  ConsensusMemberView["reachability"]
> = {
  [common.ConsensusMember_Reachability.REACHABLE]: "reachable",
  [common.ConsensusMember_Reachability.UNREACHABLE]: "unreachable",
  [common.ConsensusMember_Reachability.UNKNOWN]: "unknown",
  [common.ConsensusMember_Reachability.UNRECOGNIZED]: "unknown",
};

const statusOrder: ConsensusMemberView["status"][] = ["voter", "learner", "unknown"];

const compare = (x: string | number, y: string | number) => (x < y ? -1 : x > y ? 1 : 0);

/** Voters first, then learners; each by node ID (members not started last), then member ID. */
function byStatusAndNode(a: ConsensusMemberView, b: ConsensusMemberView): number {
  return (
    compare(statusOrder.indexOf(a.status), statusOrder.indexOf(b.status)) ||
    compare(a.nodeId === "" ? 1 : 0, b.nodeId === "" ? 1 : 0) ||
    compare(a.nodeId, b.nodeId) ||
    compare(a.memberId, b.memberId)
  );
}

/** `res` as metroctl shows it; see the module comment. */
export function consensusView(res: api.GetClusterConsensusResponse): ConsensusView {
  return {
    members: res.members
      .map((m) => ({
        nodeId: m.nodeId,
        memberId: m.memberId,
        status: memberStatus[m.status],
        raftLeader: m.raftLeader,
        reachability: reachability[m.reachability],
        curatorRunning: m.curatorRunning,
      }))
      .sort(byStatusAndNode),
    leader: res.leader ? { ...res.leader } : null,
    raft: res.raft
      ? { leaderMemberId: res.raft.leaderMemberId || null, term: res.raft.term }
      : null,
    faultTolerance: res.faultTolerance ? { ...res.faultTolerance } : null,
  };
}
