/**
 * UpdateNodeRoles: the role changes that touch consensus membership.
 *
 * Order matters because etcd membership and the node record cannot change
 * in one transaction:
 * - adding the consensus member role first adds the node to etcd (as a
 *   learner), then writes the role. A node that sees the role must find its
 *   membership ready; the reverse failure (a learner without the role, when
 *   the write fails) is harmless and repaired by retrying, since `addNode`
 *   is idempotent.
 * - removing it first removes the etcd member, then writes the record. The
 *   reverse would let the node stop its etcd while it still counts towards
 *   quorum: in a two-member cluster the removal could then never commit. A
 *   removed member's etcd exits by itself; the node stops trying once it
 *   sees the role gone. A failed write is repaired by retrying the call
 *   (removing a member that is gone already changes nothing).
 *
 * Taking the role away is quorum-checked first (quorum-safety.ts), unless
 * the request forces it.
 *
 * The leader never takes the role from its own node: removing its own etcd
 * member stops the etcd its curator writes through, so the role could not
 * be written any more. It hands its leadership over and answers
 * UNAVAILABLE; the client retries with the new leader, whose etcd stays.
 */
import { api, common } from "@metropolis/proto";
import { logProgress } from "@metropolis/supervisor/node-progress";
import { FailedPreconditionError, LeadershipHandedOverError } from "./errors";
import { checkNotLastConsensusMember } from "./last-consensus-member";
import type { LeaderContext } from "./leader-context";
import { checkConsensusMaintenance } from "./management-maintenance";
import { changeNode, hasRole, resolveNode, type NodeChange } from "./management-nodes";
import { listNodes } from "./node-record";
import type { StoredNode } from "./node-record";

/** The roles a node should have after the request: each unset field keeps the current role. */
function desiredRoles(
  current: common.NodeRoles | undefined,
  req: api.UpdateNodeRolesRequest,
  consensusMember: common.NodeRoles_ConsensusMember = common.NodeRoles_ConsensusMember.create(),
): common.NodeRoles {
  const pick = <T>(wanted: boolean | undefined, held: T | undefined, fresh: T): T | undefined =>
    wanted === undefined ? held : wanted ? (held ?? fresh) : undefined;
  return {
    consensusMember: pick(req.consensusMember, current?.consensusMember, consensusMember),
    kubernetesController: pick(req.kubernetesController, current?.kubernetesController, {}),
    kubernetesWorker: pick(req.kubernetesWorker, current?.kubernetesWorker, {}),
  };
}

/** Whether `a` and `b` hold the same roles (the role messages carry no data yet, so presence is all). */
function sameRoles(a: common.NodeRoles | undefined, b: common.NodeRoles | undefined): boolean {
  const roles = [
    api.NodeRole.CONSENSUS_MEMBER,
    api.NodeRole.KUBERNETES_CONTROLLER,
    api.NodeRole.KUBERNETES_WORKER,
  ];
  return roles.every((role) => hasRole(a, role) === hasRole(b, role));
}

/** Refusals that depend only on the node and the roles asked for. */
function checkRoleChange(stored: StoredNode, roles: common.NodeRoles): void {
  if (stored.node.state !== common.NodeState.UP) {
    throw new FailedPreconditionError(
      `node ${stored.id} is ${common.nodeStateToJSON(stored.node.state)}: roles can only be changed on UP nodes`,
    );
  }
  // A Kubernetes controller keeps its state in the local consensus member (Monogon's rule).
  if (roles.kubernetesController !== undefined && roles.consensusMember === undefined) {
    throw new FailedPreconditionError(
      hasRole(stored.node.roles, api.NodeRole.CONSENSUS_MEMBER)
        ? `node ${stored.id} is a Kubernetes controller: take away that role before its consensus member role`
        : `node ${stored.id} must be a consensus member to become a Kubernetes controller`,
    );
  }
}

/** The address the new etcd member will be reached at: the one the node reported. */
function peerHost(stored: StoredNode): string {
  const host = stored.node.status?.externalAddress ?? "";
  if (host === "") {
    throw new FailedPreconditionError(
      `node ${stored.id} has not reported its external address yet, so it cannot become a consensus member; retry once it has`,
    );
  }
  return host;
}

/**
 * Implements UpdateNodeRoles, `req` being an owner's request whose node
 * selector has been checked. `signal` (the call's: see grpc-handlers.ts'
 * callSignal) bounds the etcd membership change: one that etcd keeps
 * refusing, or holds for want of quorum, is given up with
 * MembershipRefusedError (answered UNAVAILABLE) before the caller's
 * deadline, and the role is not written.
 */
export async function updateNodeRoles(
  ctx: LeaderContext,
  req: api.UpdateNodeRolesRequest,
  signal: AbortSignal,
): Promise<void> {
  const stored = await resolveNode(ctx, req.node);
  if (
    req.consensusMember === undefined &&
    req.kubernetesController === undefined &&
    req.kubernetesWorker === undefined
  ) {
    return; // Nothing asked; the node's existence was still checked.
  }
  checkRoleChange(stored, desiredRoles(stored.node.roles, req));

  const isMember = hasRole(stored.node.roles, api.NodeRole.CONSENSUS_MEMBER);
  let newMember: common.NodeRoles_ConsensusMember | undefined;
  if (req.consensusMember === true && !isMember) {
    // Only while the role is missing: then a retry after a failed write re-adds the same
    // learner (addNode is idempotent), while a member whose address changed since is not
    // added a second time.
    const join = await ctx.consensus.addNode(
      stored.id,
      stored.node.publicKey,
      { host: peerHost(stored) },
      signal,
    );
    // The node learns from its role what it needs to start its etcd member.
    newMember = {
      peers: join.peers.map((p) => ({ name: p.name, peerUrl: p.peerUrl })),
      caCertificate: Buffer.from(join.caCertificate),
      peerCertificate: Buffer.from(join.certificate),
      peerCrl: Buffer.from(join.crl),
    };
    ctx.logger.info(
      `node ${stored.id} added to consensus as a learner (${join.peers.length} peers)`,
    );
  } else if (req.consensusMember === false && isMember) {
    checkNotLastConsensusMember(stored, await listNodes(ctx.kv), "remove-role");
    if (req.force !== true) {
      await checkConsensusMaintenance(ctx, "remove-consensus-role", { nodeId: stored.id });
    }
    if (stored.id === ctx.self.nodeId) {
      await ctx.leadership.handOver();
      logProgress(
        ctx.logger,
        `handed the leadership over: node ${stored.id} is to leave consensus`,
        { event: "curator.handed-over", nodeId: stored.id },
      );
      throw new LeadershipHandedOverError(stored.id);
    }
    // With the address, a learner that never started (and so has no name) is found too.
    const address = stored.node.status?.externalAddress ? { host: peerHost(stored) } : undefined;
    if (await ctx.consensus.removeNode(stored.id, address, signal)) {
      ctx.logger.info(`node ${stored.id} removed from consensus`);
    }
  }

  await changeNode(ctx, req.node, (current): NodeChange => {
    // The node may have changed since the checks above: check again on what is written.
    const roles = desiredRoles(current.node.roles, req, newMember);
    checkRoleChange(current, roles);
    if (sameRoles(roles, current.node.roles)) return { kind: "unchanged" };
    return { kind: "put", node: { ...current.node, roles } };
  });
}
