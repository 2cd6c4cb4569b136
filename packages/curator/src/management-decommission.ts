/**
 * Management.DecommissionNode: an UP node taken out of service for good, in
 * an order where every step that fails half-way leaves something a retry of
 * the same call finishes (each step is idempotent):
 *
 *   quorum check (unless forced) ─▶ etcd member removed ─▶ etcd's word that it is gone
 *     ─▶ roles taken away (consensus with the rest) ─▶ a learner added back meanwhile removed
 *     ─▶ certificates revoked ─▶ DECOMMISSIONED
 *
 * The consensus member goes first and alone, as UpdateNodeRoles takes the
 * role: the node stops its etcd only once etcd itself reports the member
 * removed. The role is written away only once the leader's own etcd member
 * no longer lists it (the proof from the source of truth); then its node
 * certificate and etcd peer certificates are revoked (curators, Debug
 * services and etcd peers refuse its new calls), and its record is kept as
 * DECOMMISSIONED: it is never let back in, and `delete` removes the record
 * later without bypasses (no roles, not UP). The node sees its record turn
 * DECOMMISSIONED on its watch of itself (or is refused its next one), and
 * stops as a node of no cluster.
 *
 * The leader never removes its own etcd member: it hands its leadership over
 * (UNAVAILABLE) and the client retries with the new leader, as for
 * UpdateNodeRoles.
 *
 * With `wipe`, the node is also to erase its storage and power off. A node
 * destroys its data only on the word of the source of truth: its own record,
 * DECOMMISSIONED with `wipe_requested`, read from the curator over mutual TLS
 * on the Watch of itself that every node keeps open (roleserve's rolefetch)
 * — never on a local flag, nor on a call from outside the cluster's state.
 * (Telling the node through its NodeManagement service from metroctl was the
 * other way: it would make the node act on an owner's call the cluster's
 * record need not agree with, and the node would have to ask the curator
 * anyway to know the decommission happened.) But the certificate is revoked
 * here, and a revoked node can no longer open that Watch: a node whose
 * stream happens to be down (a failover) would never learn of the wipe. So
 * with `wipe` the order changes at the end:
 *
 *   … roles taken away ─▶ DECOMMISSIONED + wipe_requested (certificate still valid)
 *     ─▶ the node's acknowledgement on its heartbeat, recorded in its record
 *        (wipe_acknowledged), or the leader's timeout
 *        ({@link defaultWipeAcknowledgementTimeoutMs} unless configured)
 *     ─▶ certificates revoked
 *
 * and the answer says whether the node acknowledged: one that did not (it
 * was stopped or cut off) is revoked all the same — a decommission always
 * ends with the node locked out — and the owner is told that its storage
 * must be erased by hand. Marked before revoked is safe here: the record is
 * only marked once its roles are gone, and a retry (DECOMMISSIONED is
 * accepted) finishes the revocation.
 *
 * The acknowledgement is durable: the leader that hears it on a heartbeat
 * writes it into the node's record ({@link recordWipeAcknowledgement}, the
 * guarded write of every record change) before it answers the heartbeat,
 * and the node takes only that answer as delivery. A `--wipe` asked again
 * after one that completed, or retried on a new leader after the one that
 * heard the node stopped leading, therefore finds it in the record and
 * answers at once (revoking, if that was not done yet) — neither the node,
 * wiped or revoked, nor a heartbeat to this leader is needed again.
 */
import { defaultPeerPort } from "@metropolis/consensus";
import { status } from "@grpc/grpc-js";
import { api, common } from "@metropolis/proto";
import { logProgress } from "@metropolis/supervisor/node-progress";
import { revokeNodeCertificate } from "./curator-pki";
import { CuratorError, FailedPreconditionError, LeadershipHandedOverError } from "./errors";
import { checkNotLastConsensusMember } from "./last-consensus-member";
import type { LeaderContext } from "./leader-context";
import { checkConsensusMaintenance } from "./management-maintenance";
import { changeNode, hasRole, resolveNode, type NodeChange } from "./management-nodes";
import { waitUntilMemberGone } from "./member-gone";
import { listNodes, type StoredNode } from "./node-record";

/**
 * How long DecommissionNode with `wipe` waits, unless the curator is
 * configured otherwise (`CuratorConfig.wipeAcknowledgementTimeoutMs`), for
 * the node to acknowledge the wipe on its heartbeat before it revokes the
 * node's certificate anyway: a few heartbeat intervals (5 s) after the
 * node's Watch delivered its record.
 */
export const defaultWipeAcknowledgementTimeoutMs = 30_000;

/** The node's state, for refusals. */
const stateName = (node: StoredNode) => common.nodeStateToJSON(node.node.state);

/**
 * Removes the etcd member of node `nodeId` (by name, or an unnamed learner
 * at its peer URL when its address `host` is known) and waits until the
 * leader's etcd member no longer lists it; whether there was one.
 */
async function removeMemberOf(
  ctx: LeaderContext,
  nodeId: string,
  host: string | undefined,
  signal: AbortSignal,
): Promise<boolean> {
  const removed = await ctx.consensus.removeNode(
    nodeId,
    host === undefined ? undefined : { host },
    signal,
  );
  const peerUrl = host === undefined ? undefined : `https://${host}:${defaultPeerPort}`;
  await waitUntilMemberGone(
    ctx,
    (m) =>
      m.name === nodeId || (m.name === "" && peerUrl !== undefined && m.peerURLs.includes(peerUrl)),
    `the etcd member of node ${nodeId}`,
    signal,
  );
  return removed;
}

/** Refuses a node that is neither UP nor DECOMMISSIONED already (a retry finishes what an earlier call left). */
function checkDecommissionable(stored: StoredNode): void {
  if (stored.node.state === common.NodeState.UP) return;
  if (stored.node.state === common.NodeState.DECOMMISSIONED) return;
  throw new FailedPreconditionError(
    `node ${stored.id} is ${stateName(stored)}: only UP nodes are decommissioned; a node that never joined is deleted (metroctl delete)`,
  );
}

/**
 * Refuses a wipe of a node decommissioned earlier without one: its
 * certificate is revoked (a decommission without `wipe` marks the node only
 * after revoking it), so it can no longer read the request.
 */
function checkWipeable(stored: StoredNode): void {
  if (stored.node.state !== common.NodeState.DECOMMISSIONED || stored.node.wipeRequested) return;
  throw new FailedPreconditionError(
    `node ${stored.id} was decommissioned without a wipe: its certificate is revoked, so it can no longer be told to wipe itself; erase its storage on its machine`,
  );
}

/**
 * Records in node `nodeId`'s record that it acknowledged its wipe (a
 * heartbeat of its own carried `wipe_acknowledged`), with the leader's
 * guarded write; whether the record holds the acknowledgement now. A record
 * that does not ask for a wipe (DECOMMISSIONED with `wipe_requested`) is
 * left as it is, false: a node cannot acknowledge in advance a wipe it was
 * never asked for, and so make a later `--wipe` answered "acknowledged"
 * without its having seen the request.
 */
export async function recordWipeAcknowledgement(
  ctx: LeaderContext,
  nodeId: string,
): Promise<boolean> {
  const { before, change } = await changeNode(ctx, { $case: "id", id: nodeId }, (current) => {
    if (!asksForWipe(current) || current.node.wipeAcknowledged) return { kind: "unchanged" };
    return { kind: "put", node: { ...current.node, wipeAcknowledged: true } };
  });
  if (change.kind === "put") {
    ctx.logger.info(`node ${nodeId} acknowledged the wipe; recorded in its record`);
    return true;
  }
  if (asksForWipe(before)) return before.node.wipeAcknowledged === true;
  ctx.logger.warn(
    `node ${nodeId} acknowledged a wipe its record does not ask for (it is ${stateName(before)}${before.node.wipeRequested ? "" : ", without wipe_requested"}): not recorded`,
  );
  return false;
}

/** Whether the record asks its node to wipe itself: DECOMMISSIONED with `wipe_requested`. */
function asksForWipe(stored: StoredNode): boolean {
  return (
    stored.node.state === common.NodeState.DECOMMISSIONED && stored.node.wipeRequested === true
  );
}

/**
 * Implements DecommissionNode; `signal` (the call's) bounds the removal of
 * the node's etcd member and the wait for the wipe's acknowledgement.
 */
export async function decommissionNode(
  ctx: LeaderContext,
  req: api.DecommissionNodeRequest,
  signal: AbortSignal,
): Promise<api.DecommissionNodeResponse> {
  // From etcd, not the leader's copy: the decision destroys state.
  const target = await resolveNode(ctx, req.node);
  checkDecommissionable(target);
  const already = target.node.state === common.NodeState.DECOMMISSIONED;
  if (req.wipe) checkWipeable(target);
  const isMember = hasRole(target.node.roles, api.NodeRole.CONSENSUS_MEMBER);
  const host = target.node.status?.externalAddress || undefined;

  let consensusMemberRemoved = false;
  if (isMember) {
    // First, and whatever `force` says: force waives the quorum check, not the cluster's survival.
    checkNotLastConsensusMember(target, await listNodes(ctx.kv), "decommission");
    if (!req.force) await checkConsensusMaintenance(ctx, "decommission", { nodeId: target.id });
    if (target.id === ctx.self.nodeId) {
      await ctx.leadership.handOver();
      logProgress(ctx.logger, `handed the leadership over: node ${target.id} is decommissioned`, {
        event: "curator.handed-over",
        nodeId: target.id,
      });
      throw new LeadershipHandedOverError(target.id);
    }
    consensusMemberRemoved = await removeMemberOf(ctx, target.id, host, signal);
    ctx.logger.info(`node ${target.id}: etcd member removed (etcd no longer lists it)`);
  }

  // Every role, in one write: the consensus member is gone, and a Kubernetes
  // controller keeps its state in it, so neither may outlive the other.
  await changeNode(ctx, req.node, (current): NodeChange => {
    checkDecommissionable(current);
    // A consensus role given since the read above has a member this call did not remove.
    if (!isMember && hasRole(current.node.roles, api.NodeRole.CONSENSUS_MEMBER)) {
      throw new CuratorError(
        status.ABORTED,
        `node ${current.id} was made a consensus member while it was decommissioned; retry`,
      );
    }
    const roles = current.node.roles ?? {};
    if (Object.values(roles).every((role) => role === undefined)) return { kind: "unchanged" };
    return { kind: "put", node: { ...current.node, roles: {} } };
  });

  if (isMember) {
    // The leader's membership reconciler may have read the role before the write above and
    // the membership after the removal, and added the node back as a learner: removed again,
    // now that no record calls for it.
    if (await removeMemberOf(ctx, target.id, host, signal)) {
      ctx.logger.info(`node ${target.id}: a learner added back meanwhile was removed again`);
    }
  }

  let heard = false;
  if (req.wipe) {
    // Marked before it is locked out (see the top of this file): the node
    // must still be able to read this record to act on it.
    const requested = await changeNode(ctx, req.node, (current): NodeChange => {
      checkDecommissionable(current);
      checkWipeable(current);
      if (asksForWipe(current)) return { kind: "unchanged" };
      return {
        kind: "put",
        node: { ...current.node, state: common.NodeState.DECOMMISSIONED, wipeRequested: true },
      };
    });
    // Recorded by whichever leader heard it: no need to hear it again.
    if (requested.change.kind === "unchanged" && requested.before.node.wipeAcknowledged === true) {
      heard = true;
      ctx.logger.info(`node ${target.id}: its record says it acknowledged the wipe already`);
    } else {
      const timeoutMs = ctx.wipeAcknowledgementTimeoutMs ?? defaultWipeAcknowledgementTimeoutMs;
      ctx.logger.info(`node ${target.id}: wipe requested; waiting for its acknowledgement`);
      heard = await ctx.heartbeats.wipes.wait(target.id, timeoutMs, signal);
      if (heard) ctx.logger.info(`node ${target.id} acknowledged the wipe`);
      else {
        ctx.logger.warn(
          `node ${target.id} did not acknowledge the wipe within ${timeoutMs} ms: ` +
            "its certificate is revoked all the same, and its storage must be erased by hand",
        );
      }
    }
  }

  // Without `wipe`, locked out before it is marked: a call that fails here
  // leaves an UP node without roles whose certificate is refused, and a
  // retry finishes the job.
  await revokeNodeCertificate(ctx, target);
  const revokedPeerCertificates = await ctx.consensus.revokeNode(target.id);
  ctx.heartbeats.forget(target.id);

  const marked = await changeNode(ctx, req.node, (current): NodeChange => {
    checkDecommissionable(current);
    if (current.node.state === common.NodeState.DECOMMISSIONED) return { kind: "unchanged" };
    return { kind: "put", node: { ...current.node, state: common.NodeState.DECOMMISSIONED } };
  });
  ctx.logger.info(`node ${target.id} decommissioned`);
  return {
    nodeId: target.id,
    consensusMemberRemoved,
    revokedPeerCertificates,
    alreadyDecommissioned: already,
    wipeRequested: marked.before.node.wipeRequested === true,
    // The record's word (an acknowledgement that came after the wait gave
    // up, before the revocation, counts too); `heard` was written there first.
    wipeAcknowledged:
      marked.before.node.wipeRequested === true &&
      (heard || marked.before.node.wipeAcknowledged === true),
  };
}
