/**
 * The Management service: the cluster owner's API, served by the curator
 * leader. Every call needs the owner's certificate (identity.ts), or a
 * scoped credential whose role may call it (access-roles.ts); every
 * write is a transaction guarded by leadership (leadership.ts) and, for node
 * changes, by the node record's mod revision (management-nodes.ts).
 */
import { randomBytes } from "node:crypto";
import { status, type sendUnaryData, type ServerUnaryCall } from "@grpc/grpc-js";
import { etcdCertificateKv } from "@metropolis/consensus";
import { api, common } from "@metropolis/proto";
import { CuratorError, FailedPreconditionError, InvalidArgumentError } from "./errors";
import { BoundedStreams } from "./bounded-streams";
import { callSignal, serverStream, unary } from "./grpc-handlers";
import { requireAccess } from "./access-roles";
import { initialOwner } from "./aaa-service";
import {
  clusterConfigurationKey,
  clusterUnlockKeyKey,
  joinKeyKey,
  nodeAddressKey,
  registerTicketKey,
} from "./keys";
import { canonicalAddress } from "./node-addresses";
import {
  checkLabelBounds,
  checkLabelKeyLength,
  maxLabelsPerNode,
  validateLabelKey,
  validateLabels,
} from "./labels";
import type { LeaderContext } from "./leader-context";
import { changeNode, hasAnyRole, hasRole, resolveNode, type NodeChange } from "./management-nodes";
import { revokeNodeCertificate } from "./curator-pki";
import { EncodedNodeList, encodeNodeList } from "./node-listing";
import { listNodes, type StoredNode } from "./node-record";
import { updateNodeRoles } from "./management-roles";
import { rotateClusterSecretsKey } from "./management-secrets";
import { configureCluster } from "./management-configuration";
import { readRegisterTicket, registerTicketLength, sealRegisterTicket } from "./register-ticket";
import { checkNotLastConsensusMember } from "./last-consensus-member";
import { watchNodes } from "./management-watch";
import { ConsensusFeed, getClusterConsensus } from "./management-consensus";
import { decommissionNode } from "./management-decommission";
import { backupCluster } from "./management-backup";
import { checkNodeMaintenance } from "./management-maintenance";
import { getClusterHealth } from "./management-health";
import {
  defragmentConsensus,
  disarmConsensusAlarm,
  getConsensusAlarms,
  moveConsensusLeader,
  removeConsensusMember,
} from "./management-members";
import {
  maxConsensusWatchStreams,
  maxConsensusWatchStreamsPerConnection,
  maxNodeWatchStreams,
  maxNodeWatchStreamsPerConnection,
} from "./server-limits";

export { registerTicketLength } from "./register-ticket";

/**
 * The register ticket, created on first use. Creation is guarded by "the key
 * does not exist yet" (create revision 0), so of two concurrent first calls
 * one creates it and the other reads the winner's: every caller ends up with
 * the same ticket.
 */
export async function registerTicket(ctx: LeaderContext): Promise<Buffer> {
  const existing = await readRegisterTicket(ctx.kv, ctx.secrets);
  if (existing) return existing;
  const fresh = randomBytes(registerTicketLength);
  const value = sealRegisterTicket(ctx.secrets, fresh);
  const txn = ctx.leadership
    .txn()
    .and(registerTicketKey, "Create", "==", 0)
    .then(ctx.kv.put(registerTicketKey).value(value));
  if (await ctx.leadership.commit(txn)) return fresh;
  const winner = await readRegisterTicket(ctx.kv, ctx.secrets);
  if (!winner)
    throw new CuratorError(
      status.ABORTED,
      "register ticket was created and deleted concurrently; retry",
    );
  return winner;
}

async function clusterInfo(ctx: LeaderContext): Promise<api.GetClusterInfoResponse> {
  const [nodes, ca, configuration] = await Promise.all([
    ctx.nodes.list(),
    ctx.clusterCa.load(etcdCertificateKv(ctx.kv)),
    ctx.kv.get(clusterConfigurationKey).buffer(),
  ]);
  if (ca === null) throw new CuratorError(status.INTERNAL, "the cluster CA does not exist");
  const directory: common.ClusterDirectory = {
    nodes: nodes
      .filter(({ node }) => node.state === common.NodeState.UP)
      .map(({ id, node }) => ({
        id,
        publicKey: node.publicKey,
        // A node that has not reported its address yet is listed without one: it is UP, just not dialable.
        addresses: node.status?.externalAddress ? [{ host: node.status.externalAddress }] : [],
        consensusMember: hasRole(node.roles, api.NodeRole.CONSENSUS_MEMBER),
      })),
  };
  return {
    clusterDirectory: directory,
    caCertificate: ca.certificate.der,
    clusterConfiguration: configuration
      ? common.ClusterConfiguration.decode(configuration)
      : undefined,
  };
}

async function getNodes(
  ctx: LeaderContext,
  req: api.GetNodesRequest,
): Promise<api.GetNodesResponse> {
  for (const role of req.roles) {
    if (role === api.NodeRole.UNSPECIFIED || api.NodeRole[role] === undefined) {
      throw new InvalidArgumentError(`invalid role ${role} in filter`);
    }
  }
  const wanted = [...req.labels];
  const nodes = (await ctx.nodes.list()).filter(
    ({ node }) =>
      (req.states.length === 0 || req.states.includes(node.state)) &&
      req.roles.every((role) => hasRole(node.roles, role)) &&
      wanted.every(([key, value]) => node.labels.get(key) === value),
  );
  return encodeNodeList(ctx, nodes);
}

async function approveNode(ctx: LeaderContext, req: api.ApproveNodeRequest): Promise<void> {
  await changeNode(ctx, req.node, ({ id, node }): NodeChange => {
    switch (node.state) {
      case common.NodeState.NEW:
        return { kind: "put", node: { ...node, state: common.NodeState.STANDBY } };
      case common.NodeState.STANDBY:
      case common.NodeState.UP:
        return { kind: "unchanged" }; // Already approved: approving again succeeds.
      default:
        throw new FailedPreconditionError(
          `node ${id} is ${common.nodeStateToJSON(node.state)} and cannot be approved`,
        );
    }
  });
}

async function updateNodeLabels(
  ctx: LeaderContext,
  req: api.UpdateNodeLabelsRequest,
): Promise<void> {
  // Sizes before content.
  checkLabelBounds(req.add);
  req.remove.forEach(checkLabelKeyLength);
  validateLabels(req.add);
  req.remove.forEach(validateLabelKey);
  await changeNode(ctx, req.node, ({ id, node }): NodeChange => {
    const labels = new Map(node.labels);
    for (const key of req.remove) labels.delete(key);
    for (const [key, value] of req.add) labels.set(key, value);
    const count = labels.size;
    if (count > maxLabelsPerNode) {
      throw new FailedPreconditionError(
        `node ${id} would have ${count} labels, more than the ${maxLabelsPerNode} allowed; remove some first`,
      );
    }
    const same =
      count === node.labels.size && [...labels].every(([k, v]) => node.labels.get(k) === v);
    return same ? { kind: "unchanged" } : { kind: "put", node: { ...node, labels } };
  });
}

/**
 * Implements DeleteNode; `signal` (the call's) bounds the removal of the
 * node's etcd member, which the membership reconciler finishes otherwise.
 */
async function deleteNode(
  ctx: LeaderContext,
  req: api.DeleteNodeRequest,
  signal: AbortSignal,
): Promise<void> {
  // From etcd, not the leader's copy: a deletion decides on it.
  const nodes = await listNodes(ctx.kv);
  const decide = (stored: StoredNode): NodeChange => {
    const { id, node } = stored;
    // First, and whatever the bypass flags say: they waive checks, not the cluster's survival.
    checkNotLastConsensusMember(stored, nodes, "delete");
    if (hasAnyRole(node.roles) && !req.bypassHasRoles) {
      throw new FailedPreconditionError(
        `node ${id} still has roles: take them away first, or set bypass_has_roles`,
      );
    }
    if (node.state === common.NodeState.UP && !req.bypassNodeUp) {
      throw new FailedPreconditionError(
        `node ${id} is UP: decommission it first, or set bypass_node_up`,
      );
    }
    // Without its join key the node can never join again, even with its certificate.
    return {
      kind: "delete",
      alsoDelete: [
        ...(node.joinKey.length > 0 ? [joinKeyKey(node.joinKey)] : []),
        clusterUnlockKeyKey(id),
        // Its address is free again. Only this node can hold the address it
        // reports: the claim is written with the status (node-addresses.ts).
        ...(node.status?.externalAddress
          ? [nodeAddressKey(canonicalAddress(node.status.externalAddress))]
          : []),
      ],
    };
  };
  // The refusals first: nothing is revoked for a node that stays.
  const target = await resolveNode(ctx, req.node);
  decide(target);
  // Revoked before its record goes: a deletion that fails half-way leaves a
  // node locked out, never one whose certificate is still good. Its etcd peer
  // certificates too, if it ever was a consensus member: no member lets it
  // into raft again, not even from a copy of its old data.
  await revokeNodeCertificate(ctx, target);
  const peerCertificates = await ctx.consensus.revokeNode(target.id);
  if (peerCertificates > 0) {
    ctx.logger.info(`revoked ${peerCertificates} etcd peer certificates of node ${target.id}`);
  }
  const { before } = await changeNode(ctx, req.node, decide);
  ctx.heartbeats.forget(before.id);
  ctx.clocks.forget(before.id);
  ctx.consensusViews.forget(before.id);
  if (hasRole(before.node.roles, api.NodeRole.CONSENSUS_MEMBER)) {
    // The record is gone either way; a member left behind only weakens quorum, and the
    // leader's membership reconciliation removes it if this fails.
    const host = before.node.status?.externalAddress;
    const address = host ? { host } : undefined;
    await ctx.consensus.removeNode(before.id, address, signal).catch((e: unknown) => {
      ctx.logger.warn(
        `deleted node ${before.id} is still an etcd member: ${e instanceof Error ? e.message : String(e)}`,
      );
    });
  }
  ctx.logger.info(`node ${before.id} deleted`);
}

/**
 * A Management handler: checks the caller may call `method` (the owner, or a
 * scoped credential whose role access-roles.ts grants it), then runs
 * `handler`. Authorization comes first so that nothing about the cluster
 * (not even whether a node exists) leaks to anyone else.
 */
function ownerOnly<Req, Res>(
  ctx: LeaderContext,
  method: string,
  handler: (req: Req, call: ServerUnaryCall<Req, Res>) => Promise<Res>,
): (call: ServerUnaryCall<Req, Res>, callback: sendUnaryData<Res>) => void {
  return unary<Req, Res>(`Management.${method}`, ctx.logger, async (call) => {
    requireAccess(await ctx.identify(call), `Management.${method}`);
    return handler(call.request, call);
  });
}

/**
 * The Management service's definition to serve {@link managementServer}
 * under: api.ManagementService, but a GetNodes answer already encoded
 * (node-listing.ts) is sent as it is.
 */
export const managementService = {
  ...api.ManagementService,
  getNodes: {
    ...api.ManagementService.getNodes,
    responseSerialize: (value: api.GetNodesResponse): Buffer =>
      value instanceof EncodedNodeList
        ? value.bytes
        : api.ManagementService.getNodes.responseSerialize(value),
  },
} satisfies typeof api.ManagementService;

/** The Management service of the leader whose context is `ctx`; serve it under {@link managementService}. */
export function managementServer(ctx: LeaderContext): api.ManagementServer {
  // One per leadership: the server this service belongs to ends the streams
  // (cancelling their calls) when the curator stops leading.
  const nodeWatches = new BoundedStreams("WatchNodes", {
    perConnection: maxNodeWatchStreamsPerConnection,
    total: maxNodeWatchStreams,
  });
  const consensusWatches = new BoundedStreams("WatchClusterConsensus", {
    perConnection: maxConsensusWatchStreamsPerConnection,
    total: maxConsensusWatchStreams,
  });
  const consensus = new ConsensusFeed(ctx);
  // One backup at a time: each reads the whole database.
  const backups = new BoundedStreams("BackupCluster", { perConnection: 1, total: 1 });
  return {
    getRegisterTicket: ownerOnly(ctx, "GetRegisterTicket", async () => ({
      ticket: await registerTicket(ctx),
    })),
    getClusterInfo: ownerOnly(ctx, "GetClusterInfo", () => clusterInfo(ctx)),
    getNodes: ownerOnly(ctx, "GetNodes", (req: api.GetNodesRequest) => getNodes(ctx, req)),
    getClusterConsensus: ownerOnly(ctx, "GetClusterConsensus", () => getClusterConsensus(ctx)),
    watchNodes: serverStream("Management.WatchNodes", ctx.logger, async (call) => {
      // As for every Management call: access first, then anything else (even the caps).
      requireAccess(await ctx.identify(call), "Management.WatchNodes");
      await nodeWatches.serve(call, (ended) => watchNodes(ctx, call, ended));
    }),
    watchClusterConsensus: serverStream(
      "Management.WatchClusterConsensus",
      ctx.logger,
      async (call) => {
        requireAccess(await ctx.identify(call), "Management.WatchClusterConsensus");
        await consensusWatches.serve(call, (ended) => consensus.serve(call, ended));
      },
    ),
    approveNode: ownerOnly(ctx, "ApproveNode", async (req: api.ApproveNodeRequest) => {
      await approveNode(ctx, req);
      return {};
    }),
    updateNodeRoles: ownerOnly(
      ctx,
      "UpdateNodeRoles",
      async (req: api.UpdateNodeRolesRequest, call) => {
        await updateNodeRoles(ctx, req, callSignal(call));
        return {};
      },
    ),
    updateNodeLabels: ownerOnly(
      ctx,
      "UpdateNodeLabels",
      async (req: api.UpdateNodeLabelsRequest) => {
        await updateNodeLabels(ctx, req);
        return {};
      },
    ),
    deleteNode: ownerOnly(ctx, "DeleteNode", async (req: api.DeleteNodeRequest, call) => {
      await deleteNode(ctx, req, callSignal(call));
      return {};
    }),
    rotateClusterSecretsKey: ownerOnly(ctx, "RotateClusterSecretsKey", () =>
      rotateClusterSecretsKey(ctx),
    ),
    configureCluster: ownerOnly(ctx, "ConfigureCluster", (req: api.ConfigureClusterRequest) =>
      configureCluster(ctx, req),
    ),
    checkNodeMaintenance: ownerOnly(
      ctx,
      "CheckNodeMaintenance",
      (req: api.CheckNodeMaintenanceRequest) => checkNodeMaintenance(ctx, req),
    ),
    decommissionNode: ownerOnly(ctx, "DecommissionNode", (req: api.DecommissionNodeRequest, call) =>
      decommissionNode(ctx, req, callSignal(call)),
    ),
    removeConsensusMember: ownerOnly(
      ctx,
      "RemoveConsensusMember",
      (req: api.RemoveConsensusMemberRequest, call) =>
        removeConsensusMember(ctx, req, callSignal(call)),
    ),
    moveConsensusLeader: ownerOnly(
      ctx,
      "MoveConsensusLeader",
      (req: api.MoveConsensusLeaderRequest) => moveConsensusLeader(ctx, req),
    ),
    defragmentConsensus: ownerOnly(
      ctx,
      "DefragmentConsensus",
      (req: api.DefragmentConsensusRequest) => defragmentConsensus(ctx, req),
    ),
    getConsensusAlarms: ownerOnly(ctx, "GetConsensusAlarms", () => getConsensusAlarms(ctx)),
    getClusterHealth: ownerOnly(ctx, "GetClusterHealth", () => getClusterHealth(ctx)),
    disarmConsensusAlarm: ownerOnly(
      ctx,
      "DisarmConsensusAlarm",
      (req: api.DisarmConsensusAlarmRequest) => disarmConsensusAlarm(ctx, req),
    ),
    backupCluster: serverStream("Management.BackupCluster", ctx.logger, async (call) => {
      requireAccess(await ctx.identify(call), "Management.BackupCluster");
      // Sealed to the owner's key whoever takes it (the owner, or a backup credential: the
      // owner certificate is only ever issued for this key): the file is the owner's to restore.
      const ownerKey = await initialOwner(ctx);
      await backups.serve(call, (ended) => backupCluster(ctx, call, ownerKey, ended));
    }),
  };
}
