/**
 * Management's etcd member operations, owner only: RemoveConsensusMember,
 * MoveConsensusLeader, DefragmentConsensus, GetConsensusAlarms and
 * DisarmConsensusAlarm, each through the curator leader's own etcd member
 * (member-maintenance.ts of @metropolis/consensus): every member's client
 * endpoint is a unix socket of its own node.
 *
 * - RemoveConsensusMember removes only a member that no node holding the
 *   consensus role accounts for (a node deleted while it was down, a learner
 *   that never started): a node's own member leaves with UpdateNodeRoles or
 *   DecommissionNode, which keep its record in line. Quorum-checked.
 * - MoveConsensusLeader: etcd takes it only from the raft leader, so it
 *   works while the curator leader's member leads raft, and is refused
 *   FAILED_PRECONDITION naming the raft leader otherwise; the target must be
 *   a voter the leader's member reaches.
 * - DefragmentConsensus defragments the curator leader's member (it stalls
 *   meanwhile, like a member away): quorum-checked as a reboot of it is, and
 *   one at a time, a minute apart (defragment-gate.ts).
 * - Alarms are the cluster's (kept in raft): listed and disarmed through any
 *   member. Neither changes what quorum is.
 */
import { status } from "@grpc/grpc-js";
import type { Etcd3 } from "etcd3";
import {
  decimalMemberId,
  defaultPeerPort,
  defragmentMember,
  disarmAlarm,
  hexMemberId,
  listAlarms,
  MemberMaintenanceError,
  memberClient,
  moveRaftLeader,
  NotRaftLeaderError,
  type EtcdAlarm,
  type MemberAlarm,
} from "@metropolis/consensus";
import { api, common } from "@metropolis/proto";
import { readConsensus } from "./consensus-members";
import { DefragmentGate } from "./defragment-gate";
import {
  CuratorError,
  FailedPreconditionError,
  InvalidArgumentError,
  NotFoundError,
} from "./errors";
import type { LeaderContext } from "./leader-context";
import { checkConsensusMaintenance, maintenanceHolds } from "./management-maintenance";
import { hasRole } from "./management-nodes";
import { waitUntilMemberGone } from "./member-gone";
import { checkNodeId, listNodes } from "./node-record";

/** Checks a hex member ID of a request (`field` names it). */
function checkMemberId(id: string, field: string): string {
  try {
    decimalMemberId(id);
  } catch (e) {
    if (e instanceof MemberMaintenanceError)
      throw new InvalidArgumentError(`${field}: ${e.message}`);
    throw e;
  }
  return id;
}

/**
 * Runs `use` with a client of the leader's own etcd member, closed
 * afterwards; etcd's failures to do what was asked are answered UNAVAILABLE.
 */
async function withMemberClient<T>(
  ctx: LeaderContext,
  use: (client: Etcd3) => Promise<T>,
): Promise<T> {
  const client = memberClient(ctx.consensus.clientSocket);
  try {
    return await use(client);
  } catch (e) {
    if (e instanceof MemberMaintenanceError) throw new CuratorError(status.UNAVAILABLE, e.message);
    throw e;
  } finally {
    client.close();
  }
}

/** Implements RemoveConsensusMember; `signal` (the call's) bounds the removal. */
export async function removeConsensusMember(
  ctx: LeaderContext,
  req: api.RemoveConsensusMemberRequest,
  signal: AbortSignal,
): Promise<api.RemoveConsensusMemberResponse> {
  const memberId = checkMemberId(req.memberId, "member_id");
  const member = (await ctx.consensus.members()).find((m) => hexMemberId(m.ID) === memberId);
  if (member === undefined) throw new NotFoundError(`etcd has no member ${memberId}`);
  // From etcd, not the leader's copy: the decision destroys state.
  const holder = (await listNodes(ctx.kv)).find(
    ({ id, node }) =>
      hasRole(node.roles, api.NodeRole.CONSENSUS_MEMBER) &&
      (member.name === id ||
        (member.name === "" &&
          node.status?.externalAddress !== undefined &&
          node.status.externalAddress !== "" &&
          member.peerURLs.includes(`https://${node.status.externalAddress}:${defaultPeerPort}`))),
  );
  if (holder !== undefined) {
    throw new FailedPreconditionError(
      `member ${memberId} belongs to node ${holder.id}, which holds the consensus role: take the role away (metroctl set-role ${holder.id} --consensus off) or decommission the node (metroctl node decommission ${holder.id})`,
    );
  }
  if (!req.force) await checkConsensusMaintenance(ctx, "remove-member", { memberId });
  if (member.name !== "") {
    // Its copy of the keyring goes with it.
    await ctx.consensus.removeNode(member.name, undefined, signal);
  } else {
    await withMemberClient(ctx, async (client) => {
      await client.cluster.memberRemove({ ID: member.ID });
    });
  }
  await waitUntilMemberGone(ctx, (m) => m.ID === member.ID, `member ${memberId}`, signal);
  ctx.logger.info(`etcd member ${memberId} (node ${member.name || "never started"}) removed`);
  return { nodeId: member.name, memberId };
}

/** Implements MoveConsensusLeader. */
export async function moveConsensusLeader(
  ctx: LeaderContext,
  req: api.MoveConsensusLeaderRequest,
): Promise<api.MoveConsensusLeaderResponse> {
  const nodeId = checkNodeId(req.nodeId);
  const { members, raft } = await readConsensus(ctx);
  const target = members.find((m) => m.nodeId === nodeId);
  if (target === undefined) throw new NotFoundError(`node ${nodeId} has no etcd member`);
  if (target.status !== common.ConsensusMember_Status.VOTER) {
    throw new FailedPreconditionError(
      `the etcd member of node ${nodeId} is a learner: only a voter can lead raft`,
    );
  }
  if (target.reachability !== common.ConsensusMember_Reachability.REACHABLE) {
    throw new FailedPreconditionError(
      `the etcd member of node ${nodeId} is not reachable from the curator leader's: it could not take raft leadership`,
    );
  }
  if (raft?.leaderId === target.memberId) {
    return { fromMemberId: target.memberId, toMemberId: target.memberId };
  }
  const from = await withMemberClient(ctx, async (client) => {
    try {
      return await moveRaftLeader(client, target.memberId);
    } catch (e) {
      if (!(e instanceof NotRaftLeaderError)) throw e;
      const leader = members.find((m) => m.memberId === e.leaderId);
      throw new FailedPreconditionError(
        `${e.message}; the curator leader (node ${ctx.self.nodeId}) reaches only its own etcd member` +
          (leader?.nodeId ? `: move it from node ${leader.nodeId} while its curator leads` : ""),
      );
    }
  });
  ctx.logger.info(
    `raft leadership moved from member ${from} to ${target.memberId} (node ${nodeId})`,
  );
  return { fromMemberId: from, toMemberId: target.memberId };
}

/** Each leadership's defragmentations, one at a time and a minute apart (defragment-gate.ts). */
const defragmentGates = new WeakMap<LeaderContext, DefragmentGate>();

/** Implements DefragmentConsensus. */
export async function defragmentConsensus(
  ctx: LeaderContext,
  req: api.DefragmentConsensusRequest,
): Promise<api.DefragmentConsensusResponse> {
  if (!req.force) await checkConsensusMaintenance(ctx, "defragment", { nodeId: ctx.self.nodeId });
  let gate = defragmentGates.get(ctx);
  if (!gate) defragmentGates.set(ctx, (gate = new DefragmentGate()));
  // Over once it returns: the member serves again (its hold, if checked, ends).
  const done = await gate
    .run(() => withMemberClient(ctx, (client) => defragmentMember(client)))
    .finally(() => maintenanceHolds(ctx).release(ctx.self.nodeId));
  ctx.logger.info(
    `etcd member ${done.memberId} defragmented: ${done.dbSizeBefore} -> ${done.dbSizeAfter} bytes`,
  );
  return {
    nodeId: ctx.self.nodeId,
    memberId: done.memberId,
    dbSizeBefore: done.dbSizeBefore,
    dbSizeAfter: done.dbSizeAfter,
  };
}

/** The wire's alarm types. */
const alarmTypes: Record<EtcdAlarm, api.ConsensusAlarmType> = {
  NOSPACE: api.ConsensusAlarmType.NOSPACE,
  CORRUPT: api.ConsensusAlarmType.CORRUPT,
};

/** The alarms as the owner sees them, each with its member's node. */
async function toApiAlarms(
  ctx: LeaderContext,
  alarms: readonly MemberAlarm[],
): Promise<api.ConsensusAlarm[]> {
  if (alarms.length === 0) return [];
  const names = new Map(
    (await ctx.consensus.members()).map((m): [string, string] => [hexMemberId(m.ID), m.name]),
  );
  return alarms.map((a) => ({
    memberId: a.memberId,
    nodeId: names.get(a.memberId) ?? "",
    alarm: alarmTypes[a.alarm],
  }));
}

/** Implements GetConsensusAlarms. */
export async function getConsensusAlarms(
  ctx: LeaderContext,
): Promise<api.GetConsensusAlarmsResponse> {
  const alarms = await withMemberClient(ctx, (client) => listAlarms(client));
  return { alarms: await toApiAlarms(ctx, alarms) };
}

/** Implements DisarmConsensusAlarm. */
export async function disarmConsensusAlarm(
  ctx: LeaderContext,
  req: api.DisarmConsensusAlarmRequest,
): Promise<api.DisarmConsensusAlarmResponse> {
  const memberId = checkMemberId(req.memberId, "member_id");
  let alarm: EtcdAlarm | undefined;
  switch (req.alarm) {
    case api.ConsensusAlarmType.NONE:
      alarm = undefined;
      break;
    case api.ConsensusAlarmType.NOSPACE:
      alarm = "NOSPACE";
      break;
    case api.ConsensusAlarmType.CORRUPT:
      alarm = "CORRUPT";
      break;
    default:
      throw new InvalidArgumentError(`alarm must be NONE, NOSPACE or CORRUPT, not ${req.alarm}`);
  }
  const disarmed = await withMemberClient(ctx, (client) => disarmAlarm(client, memberId, alarm));
  if (disarmed.length > 0) {
    ctx.logger.info(
      `etcd alarms disarmed: ${disarmed.map((a) => `${a.alarm} of member ${a.memberId}`).join(", ")}`,
    );
  }
  return { disarmed: await toApiAlarms(ctx, disarmed) };
}
