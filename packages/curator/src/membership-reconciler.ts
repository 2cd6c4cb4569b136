/**
 * Leader background work: keeps etcd membership in line with the consensus
 * member role of the node records.
 *
 * UpdateNodeRoles and DeleteNode change membership themselves, but etcd
 * membership and node records cannot change in one transaction: a call that
 * fails half-way (or a leader that dies mid-call) leaves a member without
 * the role, or a node with the role but no member. Every few seconds the
 * leader compares both and repairs one discrepancy per pass — one, because
 * etcd refuses a membership change while the previous one is fresh, and
 * because a change can shift quorum: the next pass decides on what the
 * previous one left.
 *
 * Members are matched to nodes by name (etcd names a member after its node
 * once it has started) or, for a learner that has not started yet and so has
 * no name, by its peer URL: the one in the join data of the node's role, or
 * the one its reported external address gives (as the consensus service
 * derives it).
 *
 * A member added here gets its join data written into the node's role, as
 * UpdateNodeRoles does: the node starts its etcd member from it.
 */
import type { IMember } from "etcd3";
import { defaultPeerPort, MembershipError, type PeerAddress } from "@metropolis/consensus";
import { api, common } from "@metropolis/proto";
import { abortableSleep } from "@metropolis/supervisor";
import { LostLeadershipError } from "./errors";
import type { LeaderContext } from "./leader-context";
import { changeNode, hasRole } from "./management-nodes";
import { listNodes, type StoredNode } from "./node-record";

/** Default interval between two passes of {@link membershipReconciler}. */
export const defaultReconcileIntervalMs = 5000;

/** One change that brings membership closer to the node records. */
export type MembershipChange =
  /** Remove `member`, which no node holding the role accounts for. */
  | { kind: "remove"; member: IMember; reason: string }
  /** Add `node`, which holds the role, as a learner at `host` (its external address). */
  | { kind: "add"; node: StoredNode; host: string };

/** Options of {@link reconcileMembership}. */
export interface ReconcileOptions {
  /** Aborts a membership call that etcd keeps refusing (they are retried for up to 60 s). */
  signal?: AbortSignal;
  /**
   * IDs of the unnamed learners that no node claimed on the previous pass;
   * updated by each pass. When given, such a learner is only removed once it
   * went unclaimed on two consecutive passes. UpdateNodeRoles adds the
   * learner before it writes the role, so a pass running in between sees a
   * learner without a node; waiting one pass lets that write land first.
   * Without it, an unclaimed learner is removed at once.
   */
  unclaimedLearners?: Set<string>;
}

/**
 * The peer URL of a member added for `host`: the consensus service builds
 * it the same way (`https://<host>:<port>`, port defaulting to 7834), and
 * node records carry no peer port, so members are always added on the
 * default one.
 */
function peerUrlOf(host: string): string {
  return `https://${host}:${defaultPeerPort}`;
}

/** The peer address of a member's first peer URL, to remove an unnamed learner by it. */
function peerAddressOf(member: IMember): PeerAddress {
  const raw = member.peerURLs[0];
  let url: URL;
  try {
    url = new URL(raw);
  } catch (e) {
    throw new MembershipError(`member ${member.ID} has an unparseable peer URL ${raw}`, {
      cause: e,
    });
  }
  return { host: url.hostname, port: url.port === "" ? 443 : Number(url.port) };
}

/**
 * The peer URLs under which `node`'s member may be registered: the one its
 * role's join data names for it, and the one of its reported address.
 */
function peerUrlsOf(node: StoredNode): string[] {
  const urls =
    node.node.roles?.consensusMember?.peers
      .filter((p) => p.name === node.id)
      .map((p) => p.peerUrl) ?? [];
  const host = node.node.status?.externalAddress ?? "";
  if (host !== "") urls.push(peerUrlOf(host));
  return urls;
}

function describeMember(m: IMember): string {
  const what = m.isLearner ? "learner" : "voter";
  return m.name === ""
    ? `unstarted ${what} ${m.ID} at ${m.peerURLs.join(", ")}`
    : `${what} ${m.name} (${m.ID})`;
}

/**
 * Decides the next change, if any, from etcd's `members` and the node
 * records (`nodes`); pure, so that the rules can be read in one place:
 *
 * 1. Remove a member that no node holding the role accounts for: a named
 *    member whose node is gone or lost the role, an unnamed learner whose
 *    peer URL matches no role holder's address. Learners go first (they
 *    block additions: etcd 3.4 allows one learner at a time). Never the
 *    member of `selfId` — the leader would cut its own etcd away; once it
 *    stops, the next leader removes it — and never the last voter.
 * 2. Else add a role holder that has no member, once its address is known
 *    and no other learner is pending.
 *
 * `unclaimedLearners`, when given, holds back unnamed learners unclaimed on
 * this pass only (see {@link ReconcileOptions}), and is updated.
 */
export function planMembershipChange(
  selfId: string,
  nodes: readonly StoredNode[],
  members: readonly IMember[],
  unclaimedLearners?: Set<string>,
): MembershipChange | undefined {
  const holders = new Map(
    nodes.filter((n) => hasRole(n.node.roles, api.NodeRole.CONSENSUS_MEMBER)).map((n) => [n.id, n]),
  );
  const claimedUrls = new Set([...holders.values()].flatMap(peerUrlsOf));
  const voters = members.filter((m) => !m.isLearner).length;

  const unclaimedNow = new Set<string>();
  const removals: Extract<MembershipChange, { kind: "remove" }>[] = [];
  for (const m of members) {
    let reason: string;
    if (m.name !== "") {
      if (m.name === selfId || holders.has(m.name)) continue;
      reason = nodes.some((n) => n.id === m.name)
        ? "its node no longer has the consensus member role"
        : "its node no longer exists";
    } else {
      if (m.peerURLs.some((u) => claimedUrls.has(u))) continue; // a role holder still joining
      unclaimedNow.add(m.ID);
      if (unclaimedLearners !== undefined && !unclaimedLearners.has(m.ID)) continue;
      reason = "no node with the consensus member role has its address";
    }
    // etcd would refuse this anyway; saying so here keeps the log honest.
    if (!m.isLearner && voters <= 1) continue;
    removals.push({ kind: "remove", member: m, reason });
  }
  if (unclaimedLearners !== undefined) {
    unclaimedLearners.clear();
    for (const id of unclaimedNow) unclaimedLearners.add(id);
  }
  const removal = removals.find((r) => r.member.isLearner) ?? removals[0];
  if (removal) return removal;

  // etcd 3.4 admits one learner at a time: adding beside a pending one would only be refused.
  if (members.some((m) => m.isLearner)) return undefined;
  for (const node of holders.values()) {
    const urls = peerUrlsOf(node);
    if (members.some((m) => m.name === node.id || m.peerURLs.some((u) => urls.includes(u)))) {
      continue;
    }
    const host = node.node.status?.externalAddress ?? "";
    if (host === "") continue; // cannot be reached yet; its status report will tell us where
    return { kind: "add", node, host };
  }
  return undefined;
}

/**
 * One pass of membership reconciliation (see the module comment): reads
 * etcd membership and the node records, makes at most one change, and
 * returns what it did, or undefined when there was nothing to do.
 *
 * Membership is read before the node records, so that a learner seen here
 * was added before the records were read: if its role had been written by
 * then, this pass sees it. Throws LostLeadershipError when this curator no
 * longer leads (membership changes cannot be guarded by the election key,
 * so leadership is checked right before acting), MembershipError when etcd
 * refuses the change, and CuratorError DATA_LOSS on an undecodable node
 * record (its role unknown, nothing is changed).
 */
export async function reconcileMembership(
  ctx: LeaderContext,
  opts: ReconcileOptions = {},
): Promise<string | undefined> {
  const members = await ctx.consensus.members();
  // Planned on the leader's copy of the records (a pass every few seconds
  // read all of them from etcd: 11 MiB at 5,000 nodes), but decided on etcd's:
  // a change of membership is made only when the records read now call for
  // it too, under the same hold-back of unclaimed learners.
  const heldBefore = opts.unclaimedLearners && new Set(opts.unclaimedLearners);
  const planned = planMembershipChange(
    ctx.self.nodeId,
    await ctx.nodes.list(),
    members,
    opts.unclaimedLearners,
  );
  if (planned === undefined) return undefined;
  const change = planMembershipChange(
    ctx.self.nodeId,
    await listNodes(ctx.kv),
    members,
    heldBefore,
  );
  if (change === undefined) return undefined;
  if (!(await ctx.leadership.stillLeads())) throw new LostLeadershipError();

  if (change.kind === "add") {
    const { node, host } = change;
    const join = await ctx.consensus.addNode(node.id, node.node.publicKey, { host }, opts.signal);
    // The node starts its etcd member from its role, so the role must carry this join data.
    // Should the role be gone by now, the learner is left to the next pass, which removes it.
    const member: common.NodeRoles_ConsensusMember = {
      peers: join.peers.map((p) => ({ name: p.name, peerUrl: p.peerUrl })),
      caCertificate: Buffer.from(join.caCertificate),
      peerCertificate: Buffer.from(join.certificate),
      peerCrl: Buffer.from(join.crl),
    };
    const { change: written } = await changeNode(ctx, { $case: "id", id: node.id }, (current) =>
      hasRole(current.node.roles, api.NodeRole.CONSENSUS_MEMBER)
        ? {
            kind: "put",
            node: { ...current.node, roles: { ...current.node.roles, consensusMember: member } },
          }
        : { kind: "unchanged" },
    );
    const recorded =
      written.kind === "put" ? "join data written to its role" : "role gone meanwhile";
    return `added node ${node.id} to consensus as a learner at ${peerUrlOf(host)} (${join.peers.length} peers; ${recorded}): it has the consensus member role`;
  }

  const { member, reason } = change;
  // A named member is removed by name; an unnamed learner by its peer URL. The name given
  // then cannot be any member's (members are named after node IDs), so that removeNode
  // falls through to the peer URL.
  const removed =
    member.name !== ""
      ? await ctx.consensus.removeNode(member.name, undefined, opts.signal)
      : await ctx.consensus.removeNode(
          `(unnamed learner ${member.ID})`,
          peerAddressOf(member),
          opts.signal,
        );
  if (!removed) {
    // Gone meanwhile (e.g. UpdateNodeRoles removed it too): nothing was changed by this pass.
    return undefined;
  }
  return `removed ${describeMember(member)} from consensus: ${reason}`;
}

/**
 * Runs {@link reconcileMembership} every `intervalMs` until `signal` aborts,
 * for as long as this curator leads. Changes are logged at info, failures at
 * warn; it never throws, since a failed pass is simply retried on the next.
 */
export async function membershipReconciler(
  ctx: LeaderContext,
  intervalMs: number,
  signal: AbortSignal,
): Promise<void> {
  const unclaimedLearners = new Set<string>();
  while (!signal.aborted) {
    try {
      await abortableSleep(intervalMs, signal);
    } catch {
      return; // aborted
    }
    try {
      const change = await reconcileMembership(ctx, { signal, unclaimedLearners });
      if (change !== undefined) ctx.logger.info(`membership reconciliation: ${change}`);
    } catch (e) {
      if (signal.aborted) return;
      ctx.logger.warn(
        `membership reconciliation failed: ${e instanceof Error ? e.message : String(e)}`,
      );
    }
  }
}
