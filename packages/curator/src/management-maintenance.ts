/**
 * Management.CheckNodeMaintenance, and the quorum check every Management
 * call that takes an etcd member away runs first (quorum-safety.ts), on the
 * consensus as the curator leader's etcd member reports it at that moment.
 *
 * NodeManagement.Reboot, PowerOff and DefragmentMember are served by the node itself, which
 * does not know the consensus: metroctl asks the curator leader here first,
 * and only then the node (see the curator's README, "Quorum-safe
 * maintenance").
 */
import { api } from "@metropolis/proto";
import { readConsensus } from "./consensus-members";
import { InvalidArgumentError } from "./errors";
import type { LeaderContext } from "./leader-context";
import { MaintenanceHolds } from "./maintenance-holds";
import { resolveNode } from "./management-nodes";
import {
  checkQuorumSafe,
  type MaintenanceAction,
  type MaintenanceTarget,
  type QuorumVerdict,
} from "./quorum-safety";

/** The actions of CheckNodeMaintenance. */
const nodeActions = new Map<api.NodeMaintenance, MaintenanceAction>([
  [api.NodeMaintenance.REBOOT, "reboot"],
  [api.NodeMaintenance.POWER_OFF, "power-off"],
  [api.NodeMaintenance.DECOMMISSION, "decommission"],
  [api.NodeMaintenance.REMOVE_CONSENSUS_ROLE, "remove-consensus-role"],
  [api.NodeMaintenance.DEFRAGMENT, "defragment"],
]);

/** Each leadership's maintenance holds (maintenance-holds.ts). */
const leaderHolds = new WeakMap<LeaderContext, MaintenanceHolds>();

/** The maintenance holds of the leadership whose context is `ctx`. */
export function maintenanceHolds(ctx: LeaderContext): MaintenanceHolds {
  let holds = leaderHolds.get(ctx);
  if (!holds) leaderHolds.set(ctx, (holds = new MaintenanceHolds()));
  return holds;
}

/**
 * Allows `action` on `target` given the consensus read now and the nodes
 * other allowed actions hold, or throws FailedPreconditionError naming why
 * not (see quorum-safety.ts). Allowed on a node's member, the node is held
 * in turn (maintenance-holds.ts).
 */
export async function checkConsensusMaintenance(
  ctx: LeaderContext,
  action: MaintenanceAction,
  target: MaintenanceTarget,
): Promise<QuorumVerdict> {
  const [{ members }, records] = await Promise.all([readConsensus(ctx), ctx.nodes.list()]);
  const bootIds = new Map(records.map((r) => [r.id, r.node.status?.bootId ?? ""]));
  const holds = maintenanceHolds(ctx);
  const verdict = checkQuorumSafe(
    action,
    target,
    members,
    holds.held((id) => bootIds.get(id)),
  );
  if (verdict.member && "nodeId" in target) {
    holds.hold(target.nodeId, action, bootIds.get(target.nodeId) ?? "");
  }
  return verdict;
}

/** Implements CheckNodeMaintenance. */
export async function checkNodeMaintenance(
  ctx: LeaderContext,
  req: api.CheckNodeMaintenanceRequest,
): Promise<api.CheckNodeMaintenanceResponse> {
  const action = nodeActions.get(req.action);
  if (action === undefined) {
    throw new InvalidArgumentError(
      `action must be one of ${[...nodeActions.keys()].map((a) => api.nodeMaintenanceToJSON(a)).join(", ")}, not ${req.action}`,
    );
  }
  const { id } = await resolveNode(ctx, req.node);
  const verdict = await checkConsensusMaintenance(ctx, action, { nodeId: id });
  return {
    consensusMember: verdict.member,
    healthyVotersAfter: verdict.healthyVotersAfter,
    quorumAfter: verdict.quorumAfter,
  };
}
