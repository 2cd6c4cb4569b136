/**
 * The etcd membership as the curator leader reports it, to nodes
 * (Curator.GetConsensusStatus) and to the owner
 * (Management.GetClusterConsensus): both answer with this one reading.
 *
 * Each member comes with what the leader's own etcd member knows of it
 * (`ctx.consensus.raftStatus()`): whether it leads raft, and whether the
 * leader's member has a raft connection with it. Every member's client
 * endpoint is a unix socket of its own node, so this is the one view there
 * is; when the leader's member does not answer it in time, the members are
 * still reported, none as raft leader and each one's reachability unknown.
 */
import { hexMemberId, RaftStatusError, type RaftStatus } from "@metropolis/consensus";
import { common } from "@metropolis/proto";
import type { LeaderContext } from "./leader-context";
import { findNode } from "./node-record";

const Reachability = common.ConsensusMember_Reachability;

/** The members, and the raft status they were read with (undefined when it did not answer). */
export interface ConsensusReading {
  members: common.ConsensusMember[];
  raft: RaftStatus | undefined;
}

/** Whether the member `id` (hex) is reached by the member whose raft status is `raft`. */
function reachability(
  id: string,
  raft: RaftStatus | undefined,
): common.ConsensusMember_Reachability {
  if (raft === undefined) return Reachability.UNKNOWN;
  if (id === raft.memberId) return Reachability.REACHABLE;
  if (raft.connectedPeers === undefined) return Reachability.UNKNOWN;
  return raft.connectedPeers.has(id) ? Reachability.REACHABLE : Reachability.UNREACHABLE;
}

/**
 * The etcd members, as the local consensus client lists them, whether their
 * nodes run curators, which one leads raft and which ones the local member
 * reaches; with the raft status itself.
 */
export async function readConsensus(ctx: LeaderContext): Promise<ConsensusReading> {
  const [members, raft] = await Promise.all([
    ctx.consensus.members(),
    ctx.consensus.raftStatus().catch((e: unknown) => {
      if (!(e instanceof RaftStatusError)) throw e;
      ctx.logger.debug(`consensus: no raft status: ${e.message}`);
      return undefined;
    }),
  ]);
  // One read per member (a handful), not a scan of every node: only members' records matter here.
  const records = await Promise.all(
    members.map(async (m) => (m.name === "" ? undefined : findNode(ctx.kv, m.name))),
  );
  return {
    raft,
    members: members.map((m, i) => {
      const memberId = hexMemberId(m.ID);
      return {
        // Consensus names each member after its node; empty until it started.
        nodeId: m.name,
        memberId,
        status: m.isLearner
          ? common.ConsensusMember_Status.LEARNER
          : common.ConsensusMember_Status.VOTER,
        curatorRunning: records[i]?.node.status?.runningCurator !== undefined,
        raftLeader: raft?.leaderId === memberId,
        reachability: reachability(memberId, raft),
      };
    }),
  };
}

/** The members of {@link readConsensus}, for Curator.GetConsensusStatus. */
export async function consensusMembers(ctx: LeaderContext): Promise<common.ConsensusMember[]> {
  return (await readConsensus(ctx)).members;
}
