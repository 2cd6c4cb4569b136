/**
 * A node as the operator sees it in `nodes` and `wait`: the fields of the
 * table, in the form `-o json` prints them.
 */
import type { api, common } from "@metropolis/proto";
import { nodeHealthName, nodeStateName } from "./flag-values";

/** One row of `metroctl nodes`. */
export interface NodeView {
  id: string;
  /** The address the node reported; null before its first status. */
  address: string | null;
  /** NEW, STANDBY, UP or DECOMMISSIONED. */
  state: string;
  /** Held roles: consensus, controller, worker. */
  roles: string[];
  /** UNKNOWN, HEALTHY or HEARTBEAT_TIMEOUT, as the curator leader sees it. */
  health: string;
  /** Seconds since the leader's last heartbeat from the node; null if it never heard one. */
  heartbeatAgeSeconds: number | null;
  labels: Record<string, string>;
}

/** The operator's names of the roles, as `set-role` takes them. */
export function roleNames(roles: common.NodeRoles | undefined): string[] {
  const names: string[] = [];
  if (roles?.consensusMember) names.push("consensus");
  if (roles?.kubernetesController) names.push("controller");
  if (roles?.kubernetesWorker) names.push("worker");
  return names;
}

/** The view of one node of a GetNodes answer. */
export function nodeView(node: api.Node): NodeView {
  return {
    id: node.id,
    address: node.status?.externalAddress || null,
    state: nodeStateName(node.state),
    roles: roleNames(node.roles),
    health: nodeHealthName(node.health),
    heartbeatAgeSeconds:
      node.timeSinceHeartbeatMs === undefined
        ? null
        : Math.round(node.timeSinceHeartbeatMs / 100) / 10,
    labels: Object.fromEntries(node.labels),
  };
}
