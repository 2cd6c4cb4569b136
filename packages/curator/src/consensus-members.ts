/**
 * The etcd membership as the curator leader reports it, to nodes
 * (Curator.GetConsensusStatus) and to the owner
 * (Management.GetClusterConsensus): both answer with this one reading.
 */
import { common } from "@metropolis/proto";
import type { LeaderContext } from "./leader-context";
import { findNode } from "./node-record";

/** The etcd members, as the local consensus client lists them, and whether their nodes run curators. */
export async function consensusMembers(ctx: LeaderContext): Promise<common.ConsensusMember[]> {
  const members = await ctx.consensus.members();
  // One read per member (a handful), not a scan of every node: only members' records matter here.
  const records = await Promise.all(
    members.map(async (m) => (m.name === "" ? undefined : findNode(ctx.kv, m.name))),
  );
  return members.map((m, i) => ({
    // Consensus names each member after its node; empty until it started.
    nodeId: m.name,
    memberId: m.ID,
    status: m.isLearner
      ? common.ConsensusMember_Status.LEARNER
      : common.ConsensusMember_Status.VOTER,
    curatorRunning: records[i]?.node.status?.runningCurator !== undefined,
  }));
}
