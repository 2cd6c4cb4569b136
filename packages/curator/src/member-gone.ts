/**
 * Waiting for etcd's word that a member it was asked to remove is gone: the
 * leader's own etcd member no longer lists it. etcd has no watch of its
 * membership, so the list is read again every {@link memberGonePollMs}, on
 * the monotonic clock and bounded by {@link memberGoneTimeoutMs}.
 */
import { status } from "@grpc/grpc-js";
import type { IMember } from "etcd3";
import { abortableSleep } from "@metropolis/supervisor";
import { CuratorError } from "./errors";
import type { LeaderContext } from "./leader-context";

/** How long the leader waits for its etcd member to stop listing a removed member. */
export const memberGoneTimeoutMs = 30_000;

/** How often the member list is read meanwhile. */
export const memberGonePollMs = 100;

/**
 * Resolves once the leader's etcd member lists no member `matches`; rejects
 * UNAVAILABLE (retry) after {@link memberGoneTimeoutMs}, or when `signal`
 * aborts. `what` names the member in the refusal.
 */
export async function waitUntilMemberGone(
  ctx: Pick<LeaderContext, "consensus">,
  matches: (member: IMember) => boolean,
  what: string,
  signal: AbortSignal,
): Promise<void> {
  const deadline = performance.now() + memberGoneTimeoutMs;
  for (;;) {
    const left = (await ctx.consensus.members()).find(matches);
    if (left === undefined) return;
    if (performance.now() > deadline) {
      throw new CuratorError(
        status.UNAVAILABLE,
        `etcd still lists ${what} (member ${left.ID}) ${memberGoneTimeoutMs} ms after removing it; retry`,
      );
    }
    await abortableSleep(memberGonePollMs, signal);
  }
}
