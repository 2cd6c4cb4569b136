/**
 * The calling node, which must still belong to the cluster. A deleted
 * node's certificate still verifies against the cluster CA (certificates
 * are not revoked), so every node-only RPC checks the record as well.
 */
import type { HasAuthContext } from "./identity";
import { requireNode } from "./identity";
import { PermissionDeniedError } from "./errors";
import type { LeaderContext } from "./leader-context";
import { findNode } from "./node-record";

/** The caller's node ID; PERMISSION_DENIED unless it is a node of this cluster that still exists. */
export async function requireCurrentNode(
  ctx: LeaderContext,
  call: HasAuthContext,
): Promise<string> {
  const { nodeId } = requireNode(await ctx.identify(call));
  if (!(await findNode(ctx.kv, nodeId))) {
    throw new PermissionDeniedError(
      `node ${nodeId} is not part of the cluster (deleted, or never registered)`,
    );
  }
  return nodeId;
}
