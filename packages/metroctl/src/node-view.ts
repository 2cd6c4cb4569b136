/**
 * A node as the operator sees it in `nodes` and `wait`: the fields of the
 * table, in the form `-o json` prints them.
 */
import { spokenProtocolVersion, type api, type common } from "@metropolis/proto";
import { nodeHealthName, nodeStateName } from "./flag-values";
import type { NodeDescription, NodeView } from "./node-fields";

export type { NodeDescription, NodeView } from "./node-fields";

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

/** The description of one node of a GetNodes answer; `leaderId` is the curator leader's node. */
export function nodeDescription(node: api.Node, leaderId: string | undefined): NodeDescription {
  const status = node.status;
  const curatorPort = status?.runningCurator?.port;
  const time = status?.timestamp;
  return {
    ...nodeView(node),
    version: status?.version || null,
    protocolVersion: status ? spokenProtocolVersion(status.protocolVersion) : null,
    bootId: status?.bootId || null,
    statusTime: time === undefined || isNaN(time.getTime()) ? null : time.toISOString(),
    consensus: { member: node.roles?.consensusMember !== undefined, voter: null },
    curator: {
      running: status?.runningCurator !== undefined,
      port: curatorPort ?? null,
      leader: node.id === leaderId,
    },
  };
}
