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

/**
 * Everything metroctl knows about a node: the {@link NodeView} and what the
 * node last reported, its consensus membership and its curator. This is
 * what `node describe` prints and what `--filter` expressions see as `node`.
 */
export interface NodeDescription extends NodeView {
  /** Version of the node software, from its last status; null before the first. */
  version: string | null;
  /** Identifier of the node's current boot, from its last status; null before the first. */
  bootId: string | null;
  /** When the node produced its last status (ISO 8601); null if unknown. */
  statusTime: string | null;
  consensus: {
    /** The node holds the consensus member role (runs an etcd member and a curator). */
    member: boolean;
    /**
     * Whether its etcd member votes or is still a learner: always null, because the
     * Management API does not expose etcd membership (GetNodes only has the role).
     */
    voter: null;
  };
  curator: {
    /** The node reported a running curator. */
    running: boolean;
    /** The curator's port at `address`; null when none runs. */
    port: number | null;
    /** The node's curator is the leader metroctl talked to. */
    leader: boolean;
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
