/**
 * Management.GetClusterHealth: reads what the checks of cluster-health.ts
 * judge — the node records with the leader's heartbeat health and clock
 * samples, etcd's members (with the leader's member's raft contact), its
 * alarms, and the leader's member's database size against its quota (the
 * other members' come with their views) — and
 * answers every check, in order, with the worst verdict.
 *
 * Each etcd read is bounded ({@link healthReadTimeoutMs}, on the monotonic
 * clock: timers): a read that fails or does not answer in time makes its
 * checks fail with why, and the answer still comes, so that an operator
 * learns what is wrong rather than waiting on a stuck member.
 *
 * Every client of every leader asks this one function, so everyone sees the
 * same verdicts. etcd's members are the leader's own member's list (every
 * member's client endpoint is a unix socket of its own node), with whether
 * the leader's member has raft contact with each of the others, and each
 * other member's own view as its node's heartbeats carry it
 * (consensus-views.ts).
 */
import { readDatabaseSize } from "@metropolis/consensus";
import { access, api, common } from "@metropolis/proto";
import {
  healthChecks,
  worstVerdict,
  type HealthCredential,
  type HealthInputs,
  type HealthMember,
  type HealthNode,
  type Reading,
  type Verdict,
} from "./cluster-health";
import { listAccessCredentials } from "./access-service";
import { readConsensus } from "./consensus-members";
import type { LeaderContext } from "./leader-context";
import { getConsensusAlarms } from "./management-members";
import { hasRole } from "./management-nodes";

/** How long each etcd read of a health check may take. */
export const healthReadTimeoutMs = 3_000;

/** The wire's verdicts. */
const verdicts: Record<Verdict, api.HealthVerdict> = {
  ok: api.HealthVerdict.OK,
  warn: api.HealthVerdict.WARN,
  fail: api.HealthVerdict.FAIL,
};

/** An error's message, in one line. */
function why(e: unknown): string {
  const text = e instanceof Error ? e.message : String(e);
  return text.split("\n")[0] ?? "";
}

/** `read()` as a {@link Reading}: its failure, or its not answering within `timeoutMs`, told in words. */
async function reading<T>(read: () => Promise<T>, timeoutMs: number): Promise<Reading<T>> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<Reading<T>>((resolve) => {
    timer = setTimeout(() => resolve({ failed: `no answer within ${timeoutMs} ms` }), timeoutMs);
  });
  try {
    return await Promise.race([
      read().then(
        (ok): Reading<T> => ({ ok }),
        (e: unknown): Reading<T> => ({ failed: why(e) }),
      ),
      late,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** Reads what the checks judge, on the leader whose context is `ctx`. */
export async function readHealthInputs(
  ctx: LeaderContext,
  timeoutMs = healthReadTimeoutMs,
): Promise<HealthInputs> {
  let raftLeaderId: string | undefined;
  const [records, members, alarms, database, credentials] = await Promise.all([
    ctx.nodes.list(),
    reading(async () => {
      const { members, raft } = await readConsensus(ctx);
      raftLeaderId = raft?.leaderId;
      return members.map((m): HealthMember => ({
        nodeId: m.nodeId,
        memberId: m.memberId,
        voter: m.status === common.ConsensusMember_Status.VOTER,
        reachable:
          m.reachability === common.ConsensusMember_Reachability.UNKNOWN
            ? undefined
            : m.reachability === common.ConsensusMember_Reachability.REACHABLE,
      }));
    }, timeoutMs),
    reading(async () => {
      const { alarms } = await getConsensusAlarms(ctx);
      return alarms.map((a) => ({
        memberId: a.memberId,
        nodeId: a.nodeId,
        alarm: api.consensusAlarmTypeToJSON(a.alarm),
      }));
    }, timeoutMs),
    reading(() => readDatabaseSize(ctx.consensus.clientSocket, timeoutMs), timeoutMs),
    reading(async () => {
      const issued = await listAccessCredentials(ctx);
      return issued.map((c): HealthCredential => ({
        name: c.name,
        role: access
          .accessRoleToJSON(c.role)
          .replace(/^ACCESS_ROLE_/, "")
          .toLowerCase(),
        serial: c.serial,
        notAfter: c.notAfter,
        revoked: c.revokedAt !== undefined,
      }));
    }, timeoutMs),
  ]);
  const now = ctx.heartbeats.now();
  const nodes = records.map(({ id, node }): HealthNode => {
    const clock = ctx.clocks.sample(id);
    const view = ctx.consensusViews.view(id);
    return {
      id,
      state: node.state,
      consensus: hasRole(node.roles, api.NodeRole.CONSENSUS_MEMBER),
      health: ctx.heartbeats.health(id, now),
      sinceHeartbeatMs: ctx.heartbeats.sinceLast(id, now),
      version: node.status?.version || undefined,
      clock: clock && { offsetMs: clock.offsetMs, uncertaintyMs: clock.uncertaintyMs },
      consensusView: view && {
        memberIds: view.memberIds,
        raftLeaderId: view.raftLeaderId,
        ...(view.database === undefined ? {} : { database: view.database }),
        ageMs: ctx.consensusViews.age(view),
      },
    };
  });
  return {
    leader: { nodeId: ctx.self.nodeId, term: Number(ctx.leadership.createRevision) },
    nodes,
    members,
    ...(raftLeaderId === undefined ? {} : { raftLeaderId }),
    alarms,
    database,
    heartbeatTimeoutMs: ctx.heartbeats.timeoutMs,
    credentials,
    now: new Date(),
  };
}

/** The answer of GetClusterHealth on the leader whose context is `ctx`. */
export async function getClusterHealth(ctx: LeaderContext): Promise<api.GetClusterHealthResponse> {
  const checks = healthChecks(await readHealthInputs(ctx));
  return {
    checks: checks.map((c) => ({
      name: c.name,
      title: c.title,
      verdict: verdicts[c.verdict],
      detail: c.detail,
      nodeIds: [...c.nodeIds],
    })),
    verdict: verdicts[worstVerdict(checks.map((c) => c.verdict))],
    leaderNodeId: ctx.self.nodeId,
    checkedAt: new Date(),
  };
}
