/**
 * Management.CheckNodeMaintenance, and the quorum check every Management
 * call that takes an etcd member away runs first (quorum-safety.ts), on the
 * consensus as the curator leader's etcd member reports it at that moment.
 *
 * NodeManagement.Reboot and PowerOff are served by the node itself, which
 * does not know the consensus: metroctl asks the curator leader here first,
 * and only then the node (see the curator's README, "Quorum-safe
 * maintenance").
 */
import { api } from "@metropolis/proto";
import { readConsensus } from "./consensus-members";
import { InvalidArgumentError } from "./errors";
import type { LeaderContext } from "./leader-context";
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
]);

/**
 * Allows `action` on `target` given the consensus read now, or throws
 * FailedPreconditionError naming why not (see quorum-safety.ts).
 */
export async function checkConsensusMaintenance(
  ctx: LeaderContext,
  action: MaintenanceAction,
  target: MaintenanceTarget,
): Promise<QuorumVerdict> {
  const { members } = await readConsensus(ctx);
  return checkQuorumSafe(action, target, members);
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
