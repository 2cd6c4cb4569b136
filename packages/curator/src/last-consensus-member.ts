/**
 * The one refusal UpdateNodeRoles, DeleteNode and DecommissionNode share, whatever else their
 * requests say (bypass flags included): no change may leave the cluster
 * without a consensus member. The cluster's whole state lives in its
 * members' etcd; taking the role from the last one, or deleting it, removes
 * that etcd and with it the cluster.
 */
import { api } from "@metropolis/proto";
import { FailedPreconditionError } from "./errors";
import { hasRole } from "./management-nodes";
import type { StoredNode } from "./node-record";

/** What is about to happen to the node: its consensus role is taken away, it is deleted or decommissioned. */
export type ConsensusMemberChange = "remove-role" | "delete" | "decommission";

const refusal: Record<ConsensusMemberChange, string> = {
  "remove-role": "its consensus member role cannot be taken away",
  delete: "it cannot be deleted, bypass or not",
  decommission: "it cannot be decommissioned, forced or not",
};

/**
 * Throws FailedPreconditionError when `target` holds the consensus member
 * role and no other node of `nodes` (every node record, as listed before the
 * change) does. A node without the role passes: changing it leaves the
 * members as they are.
 */
export function checkNotLastConsensusMember(
  target: StoredNode,
  nodes: readonly StoredNode[],
  change: ConsensusMemberChange,
): void {
  const isMember = (stored: StoredNode) =>
    hasRole(stored.node.roles, api.NodeRole.CONSENSUS_MEMBER);
  if (!isMember(target)) return;
  if (nodes.some((stored) => stored.id !== target.id && isMember(stored))) return;
  throw new FailedPreconditionError(
    `node ${target.id} is the last consensus member; ${refusal[change]}: the cluster's state lives in its etcd`,
  );
}
