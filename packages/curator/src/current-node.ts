/**
 * The calling node, which must still belong to the cluster. A deleted
 * node's certificate still verifies against the cluster CA (certificates
 * are not revoked), so every node-only RPC checks the record as well — in
 * the leader's copy of the records (node-record-mirror.ts), which holds
 * every write of this leader: a new leader checked each of a cluster's
 * nodes with an etcd read of its own as they all came back at once.
 */
import type { HasAuthContext } from "./identity";
import { requireNode } from "./identity";
import { PermissionDeniedError } from "./errors";
import type { LeaderContext } from "./leader-context";

/** The caller's node ID; PERMISSION_DENIED unless it is a node of this cluster that still exists. */
export async function requireCurrentNode(
  ctx: LeaderContext,
  call: HasAuthContext,
): Promise<string> {
  const { nodeId } = requireNode(await ctx.identify(call));
  if (!(await ctx.nodes.find(nodeId))) {
    throw new PermissionDeniedError(
      `node ${nodeId} is not part of the cluster (deleted, or never registered)`,
    );
  }
  return nodeId;
}
