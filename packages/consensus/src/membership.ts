/**
 * etcd cluster membership: adding a member as a learner, removing one, and
 * promoting learners that have caught up.
 *
 * New members always join as learners (non-voting): a member that is added
 * but never starts — a node that crashed during its join — then does not
 * count towards quorum, and cannot take a healthy cluster down.
 */
import { GRPCDeadlineExceededError, GRPCUnavailableError, type Etcd3, type IMember } from "etcd3";
import { abortable, abortableSleep, type Logger } from "@metropolis/supervisor";
import { logProgress } from "@metropolis/supervisor/node-progress";
import type { EtcdPeer } from "./etcd-flags";
import { MembershipError, MembershipRefusedError } from "./errors";

/**
 * etcd refuses membership changes while the previous one is fresh (strict
 * reconfiguration check, ~5 s), while a learner has not been promoted (etcd
 * 3.4 allows one learner at a time), and while the cluster is unhealthy.
 * These pass by themselves, so they are retried.
 */
const transientRefusals = [
  "unhealthy cluster",
  "too many learner members",
  "not enough started members",
  "leader changed",
  "no leader",
  "timed out",
  "UNAVAILABLE",
];

const isTransient = (e: unknown) =>
  e instanceof GRPCDeadlineExceededError ||
  e instanceof GRPCUnavailableError ||
  transientRefusals.some((r) => String(e).includes(r));

/**
 * How long one membership call to etcd may take. etcd sets no limit of its
 * own on a change waiting for quorum: a member added or removed while a
 * majority of voters is cut off waits for as long as its caller does, and
 * before this limit a leader's UpdateNodeRoles could wait on it for good,
 * long after its client had given up. A call past it is retried like any
 * transient refusal, each attempt checking first whether an earlier one took
 * effect after all.
 */
export const membershipCallTimeoutMs = 10_000;

/** Options of the retried membership calls. */
export interface RetryOptions {
  /** Gives up (MembershipRefusedError) when it aborts, also during a call. */
  signal: AbortSignal;
  /** Give up after this long. Default 60 s. */
  timeoutMs?: number;
  logger?: Logger;
}

/**
 * Runs `attempt` until it succeeds, retrying transient refusals with backoff;
 * each attempt is given the deadline of its etcd calls. Gives up with
 * MembershipRefusedError (naming etcd's last refusal) at the timeout or when
 * the signal aborts; any other failure is a MembershipError.
 */
async function retrying<T>(
  what: string,
  attempt: (callOptions: { deadline: number }) => Promise<T>,
  opts: RetryOptions,
): Promise<T> {
  const timeoutMs = opts.timeoutMs ?? 60_000;
  const started = Date.now();
  const deadline = started + timeoutMs;
  let delay = 50;
  let refusal: unknown;
  const giveUp = (why: string) =>
    new MembershipRefusedError(what, why, Date.now() - started, refusal);
  for (;;) {
    if (opts.signal.aborted) throw giveUp(`given up: ${String(opts.signal.reason)}`);
    try {
      const callDeadline = Math.min(deadline, Date.now() + membershipCallTimeoutMs);
      return await abortable(attempt({ deadline: callDeadline }), opts.signal);
    } catch (e) {
      if (opts.signal.aborted) throw giveUp(`given up: ${String(opts.signal.reason)}`);
      if (e instanceof MembershipError) throw e;
      if (!isTransient(e)) throw new MembershipError(`${what}: ${String(e)}`, { cause: e });
      refusal = e;
      if (Date.now() + delay > deadline) throw giveUp(`still refused after ${timeoutMs} ms`);
      opts.logger?.debug(`${what}: refused for now (${String(e)}); retrying in ${delay} ms`);
      await abortableSleep(delay, opts.signal).catch(() => undefined);
      delay = Math.min(delay * 2, 1000);
    }
  }
}

/** The peers of a cluster as etcd's `--initial-cluster` wants them; a member not yet started is named `name`. */
function peersOf(members: readonly IMember[], newMember: IMember, name: string): EtcdPeer[] {
  return members.map((m) => ({
    name: m.ID === newMember.ID ? name : m.name,
    peerUrl: m.peerURLs[0],
  }));
}

/**
 * Adds `name` at `peerUrl` as a learner and returns the initial cluster it
 * must start with. Idempotent: a member already registered at `peerUrl`
 * (an earlier attempt whose answer was lost) is returned as it is.
 */
export async function addLearner(
  client: Etcd3,
  name: string,
  peerUrl: string,
  opts: RetryOptions,
): Promise<EtcdPeer[]> {
  return retrying(
    `adding ${name} (${peerUrl}) as a learner`,
    async (call) => {
      // Listed on every attempt: one that ran past its deadline may have been applied.
      const { members } = await client.cluster.memberList({}, call);
      const existing = members.find((m) => m.peerURLs.includes(peerUrl));
      if (existing) {
        if (existing.name !== "" && existing.name !== name) {
          throw new MembershipError(
            `peer URL ${peerUrl} already belongs to member ${existing.name}`,
          );
        }
        return peersOf(members, existing, name);
      }
      const added = await client.cluster.memberAdd({ peerURLs: [peerUrl], isLearner: true }, call);
      opts.logger?.info(`added ${name} at ${peerUrl} as a learner (member ${added.member.ID})`);
      return peersOf(added.members, added.member, name);
    },
    opts,
  );
}

/**
 * Removes the member named `name` — or, when `peerUrl` is given, the member
 * registered at it: a learner that was added but never started has no name
 * yet, and would otherwise block every later addition (etcd 3.4 allows one
 * learner at a time). Does nothing when there is no such member.
 */
export async function removeMember(
  client: Etcd3,
  name: string,
  peerUrl: string | undefined,
  opts: RetryOptions,
): Promise<boolean> {
  let tried = false;
  return retrying(
    `removing ${name}`,
    async (call) => {
      // Looked up on every attempt: one that ran past its deadline may have been applied.
      const { members } = await client.cluster.memberList({}, call);
      const member =
        members.find((m) => m.name === name) ??
        (peerUrl === undefined
          ? undefined
          : members.find((m) => m.name === "" && m.peerURLs.includes(peerUrl)));
      if (!member) return tried;
      tried = true;
      await client.cluster.memberRemove({ ID: member.ID }, call);
      opts.logger?.info(`removed member ${name} (${member.ID})`);
      return true;
    },
    opts,
  );
}

/**
 * One pass of the autopromoter: if this member leads the cluster, promote
 * every learner that has started (it has a name once it has joined). etcd
 * refuses to promote a learner that has not caught up with the log; that
 * learner is simply tried again on the next pass.
 */
export async function promoteStartedLearners(client: Etcd3, logger: Logger): Promise<string[]> {
  const call = () => ({ deadline: Date.now() + membershipCallTimeoutMs });
  const status = await client.maintenance.status(call());
  if (status.leader !== status.header.member_id) return [];
  const { members } = await client.cluster.memberList({}, call());
  const promoted: string[] = [];
  for (const m of members) {
    if (!m.isLearner || m.name === "") continue;
    try {
      await client.cluster.memberPromote({ ID: m.ID }, call());
      logProgress(logger, `promoted learner ${m.name} to a voting member`, {
        event: "consensus.promoted",
        nodeId: m.name,
      });
      promoted.push(m.name);
    } catch (e) {
      logger.debug(`learner ${m.name} not promoted yet: ${String(e)}`);
    }
  }
  return promoted;
}
