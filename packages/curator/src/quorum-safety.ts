/**
 * The quorum check of maintenance: whether rebooting or powering off a node,
 * decommissioning it, taking its consensus role away, removing an etcd
 * member or defragmenting one keeps the consensus able to commit. Talos
 * refuses an upgrade the same way; `--force` (each request's `force`)
 * overrides it.
 *
 * etcd commits with a quorum of its voters (voters / 2 + 1). A healthy voter
 * here is one the curator leader's etcd member has a raft connection with
 * (its own member always counts): etcd's own word, read the moment the check
 * runs (consensus-members.ts). The action's node is left out, and:
 *
 * - for an action that takes the member away for a while (reboot, power
 *   off, defragment) the quorum stays that of every voter;
 * - for one that removes it for good (decommission, the consensus role
 *   taken away, remove-member) the quorum is that of the voters left.
 *
 * Refused (FAILED_PRECONDITION, naming why) when another member is a
 * learner (a membership change is under way), another voter is not healthy
 * (unreachable, or nothing is known of it), or the healthy voters left would
 * be fewer than that quorum. An action on a node without an etcd member
 * passes: the consensus does not depend on it. A voter whose node another
 * allowed action has just taken away counts as not healthy until etcd can
 * tell (maintenance-holds.ts): two actions checked at once do not both pass.
 */
import { common } from "@metropolis/proto";
import { FailedPreconditionError } from "./errors";
import type { HeldNode } from "./maintenance-holds";

/** What is about to happen to a member (or to its node). */
export type MaintenanceAction =
  | "reboot"
  | "power-off"
  | "defragment"
  | "decommission"
  | "remove-consensus-role"
  | "remove-member";

/** The actions after which the member is gone for good (the quorum shrinks with the voters). */
const removals: ReadonlySet<MaintenanceAction> = new Set<MaintenanceAction>([
  "decommission",
  "remove-consensus-role",
  "remove-member",
]);

/** How each action is named in a refusal. */
export const actionWords: Record<MaintenanceAction, string> = {
  reboot: "rebooting",
  "power-off": "powering off",
  defragment: "defragmenting",
  decommission: "decommissioning",
  "remove-consensus-role": "taking the consensus role away from",
  "remove-member": "removing",
};

/** What the check found, for an action it allows. */
export interface QuorumVerdict {
  /** Whether the action's target has an etcd member (false: the consensus does not depend on it). */
  member: boolean;
  /** Healthy voters left while (or after) the action runs. */
  healthyVotersAfter: number;
  /** The quorum they must form. */
  quorumAfter: number;
}

/** What the action is done to: a node (its member found by name) or a member (by hex ID). */
export type MaintenanceTarget = { nodeId: string } | { memberId: string };

/** A member as a refusal names it. */
function describeMember(m: common.ConsensusMember): string {
  return m.nodeId === ""
    ? `member ${m.memberId} (not started)`
    : `member ${m.memberId} of node ${m.nodeId}`;
}

/** Why voter `m` is not healthy, or undefined when it is. */
function unhealthy(m: common.ConsensusMember): string | undefined {
  switch (m.reachability) {
    case common.ConsensusMember_Reachability.REACHABLE:
      return m.nodeId === "" ? "it has not started" : undefined;
    case common.ConsensusMember_Reachability.UNREACHABLE:
      return "the curator leader's etcd member has no raft connection with it";
    default:
      return "its reachability is unknown (the curator leader's etcd member did not say)";
  }
}

/**
 * Allows `action` on `target` given the consensus `members` as the curator
 * leader read them just now (GetClusterConsensus's members), or throws
 * FailedPreconditionError naming why not; see the module comment.
 */
export function checkQuorumSafe(
  action: MaintenanceAction,
  target: MaintenanceTarget,
  members: readonly common.ConsensusMember[],
  /** Nodes another allowed action has just taken away, not yet seen gone by etcd (maintenance-holds.ts). */
  held: readonly HeldNode[] = [],
): QuorumVerdict {
  const isTarget = (m: common.ConsensusMember) =>
    "nodeId" in target
      ? m.nodeId !== "" && m.nodeId === target.nodeId
      : m.memberId === target.memberId;
  const own = members.find(isTarget);
  const voters = members.filter((m) => m.status === common.ConsensusMember_Status.VOTER);
  const quorumOf = (n: number) => Math.floor(n / 2) + 1;
  if (own === undefined) {
    return {
      member: false,
      healthyVotersAfter: voters.length,
      quorumAfter: quorumOf(voters.length),
    };
  }
  const what = `${actionWords[action]} ${"nodeId" in target ? `node ${target.nodeId}` : describeMember(own)}`;
  const refuse = (why: string): never => {
    throw new FailedPreconditionError(
      `${what} is refused: ${why}; wait until the consensus is healthy, or force it (--force) at the risk of the cluster no longer committing writes`,
    );
  };
  const others = members.filter((m) => !isTarget(m));
  const learner = others.find((m) => m.status === common.ConsensusMember_Status.LEARNER);
  if (learner !== undefined) {
    refuse(`${describeMember(learner)} is a learner (a membership change is under way)`);
  }
  for (const m of others) {
    const why = unhealthy(m);
    if (why !== undefined) refuse(`voter ${describeMember(m)} is not healthy: ${why}`);
    const hold = held.find((h) => m.nodeId !== "" && h.nodeId === m.nodeId);
    if (hold !== undefined) {
      refuse(
        `voter ${describeMember(m)} is under maintenance: ${hold.reason}, and etcd may not see it gone yet`,
      );
    }
  }
  const ownIsVoter = own.status === common.ConsensusMember_Status.VOTER;
  const votersAfter = removals.has(action) && ownIsVoter ? voters.length - 1 : voters.length;
  const quorumAfter = quorumOf(votersAfter);
  const healthyVotersAfter = others.filter(
    (m) => m.status === common.ConsensusMember_Status.VOTER,
  ).length;
  if (healthyVotersAfter < quorumAfter) {
    const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`;
    refuse(
      `afterwards ${plural(healthyVotersAfter, "healthy voter")} would remain, fewer than the quorum of ${quorumAfter}` +
        (removals.has(action) ? "" : ` (of ${plural(voters.length, "voter")})`),
    );
  }
  return { member: true, healthyVotersAfter, quorumAfter };
}
