/**
 * The cluster's health as a list of checks (Management.GetClusterHealth),
 * computed from what the curator leader read: one pure function per check,
 * and {@link healthChecks}, the list, in a fixed order. management-health.ts
 * gathers the inputs; this file only judges them, so that tests can give any
 * shape of cluster.
 *
 * A check is data — a name, a verdict (ok, warn, fail), one line of detail
 * and the nodes it is about — so that a caller (`metroctl cluster health`,
 * a rolling reboot between its steps) can print it, select it by name or
 * wait until every verdict is ok.
 */
import { common } from "@metropolis/proto";

/** The outcome of a check. */
export type Verdict = "ok" | "warn" | "fail";

/** One health check's result. */
export interface HealthCheckResult {
  /** Stable name, kebab-case (`nodes-up`). */
  readonly name: string;
  /** What it checks, in a few words. */
  readonly title: string;
  readonly verdict: Verdict;
  /** One line saying why (cut to {@link maxDetailLength}). */
  readonly detail: string;
  /** The nodes failing or warned of (at most {@link maxCheckNodeIds}). */
  readonly nodeIds: readonly string[];
}

/** The longest detail a check gives. */
export const maxDetailLength = 1024;
/** The most node IDs a check names. */
export const maxCheckNodeIds = 1000;
/** How far a node's clock may be from the leader's. */
export const maxClockOffsetMs = 1000;
/** The database's share of its quota from which the size check warns. */
export const databaseWarnShare = 0.8;
/** The database's share of its quota from which the size check fails. */
export const databaseFailShare = 0.95;
/** How soon an access credential's expiry is warned of. */
export const accessExpiryWarnMs = 7 * 24 * 3600 * 1000;

/** A node as the checks see it. */
export interface HealthNode {
  readonly id: string;
  readonly state: common.NodeState;
  /** Whether it holds the consensus member role. */
  readonly consensus: boolean;
  /** Its health as the leader's heartbeat tracker sees it. */
  readonly health: common.NodeHealth;
  /** Milliseconds since its last heartbeat; undefined when none was heard. */
  readonly sinceHeartbeatMs: number | undefined;
  /** The software version of its last status; undefined before one. */
  readonly version: string | undefined;
  /** Its clock against the leader's, from its latest heartbeat; undefined when none carried one. */
  readonly clock: { offsetMs: number; uncertaintyMs: number | undefined } | undefined;
  /**
   * Its etcd member's own view of the consensus, from its latest heartbeat
   * (consensus-views.ts); undefined when none carried one.
   */
  readonly consensusView?: {
    memberIds: readonly string[];
    raftLeaderId: string | undefined;
    /** The member's database size and quota, bytes; absent when the view carried none. */
    database?: { sizeBytes: number; quotaBytes: number };
    /** How long ago the leader heard it. */
    ageMs: number;
  };
}

/** An etcd member as the checks see it. */
export interface HealthMember {
  /** The node it is named after; empty while it has not started. */
  readonly nodeId: string;
  /** Hex. */
  readonly memberId: string;
  readonly voter: boolean;
  /** Whether the leader's etcd member reaches it; undefined when unknown. */
  readonly reachable: boolean | undefined;
}

/** An input that was read, or why it could not be. */
export type Reading<T> = { ok: T } | { failed: string };

/** Everything the checks judge. */
export interface HealthInputs {
  /** The curator leader computing them. */
  readonly leader: { nodeId: string; term: number };
  /** Every node of the cluster. */
  readonly nodes: readonly HealthNode[];
  /** The etcd members, as the leader's member lists them. */
  readonly members: Reading<readonly HealthMember[]>;
  /** The member (hex) the leader's member follows as raft leader, when it said. */
  readonly raftLeaderId?: string;
  /** The raised etcd alarms, `ALARM of member ID (node N)` each. */
  readonly alarms: Reading<readonly { memberId: string; nodeId: string; alarm: string }[]>;
  /**
   * The leader's member's database size and quota, bytes, read directly; the
   * other members' come with their views (HealthNode.consensusView).
   */
  readonly database: Reading<{ sizeBytes: number; quotaBytes: number }>;
  /** The heartbeat timeout in force. */
  readonly heartbeatTimeoutMs: number;
  /**
   * The access credentials the owner issued (`metroctl access issue`), for
   * the expiry check; absent: none are on record.
   */
  readonly credentials?: Reading<readonly HealthCredential[]>;
  /** The leader's wall clock now: credentials expire by it (a report, never a deadline). */
  readonly now?: Date;
}

/** An issued access credential as the expiry check sees it. */
export interface HealthCredential {
  readonly name: string;
  /** reader, operator or backup. */
  readonly role: string;
  /** The certificate's serial, hex. */
  readonly serial: string;
  readonly notAfter: Date | undefined;
  readonly revoked: boolean;
}

/** `text` cut to {@link maxDetailLength}. */
function bounded(text: string): string {
  return text.length <= maxDetailLength ? text : `${text.slice(0, maxDetailLength - 1)}…`;
}

/** A result with its detail and node IDs bounded. */
function result(
  name: string,
  title: string,
  verdict: Verdict,
  detail: string,
  nodeIds: readonly string[] = [],
): HealthCheckResult {
  return {
    name,
    title,
    verdict,
    detail: bounded(detail),
    nodeIds: nodeIds.slice(0, maxCheckNodeIds),
  };
}

/** `items` joined with commas, at most `max` of them, then how many more. */
function some(items: readonly string[], max = 5): string {
  const shown = items.slice(0, max).join(", ");
  return items.length > max ? `${shown} and ${items.length - max} more` : shown;
}

/** Nodes that are still part of the cluster (not DECOMMISSIONED). */
function live(nodes: readonly HealthNode[]): HealthNode[] {
  return nodes.filter((n) => n.state !== common.NodeState.DECOMMISSIONED);
}

/** `curator-leader`: a curator leads (the one answering). */
export function checkCuratorLeader(inputs: HealthInputs): HealthCheckResult {
  const { nodeId, term } = inputs.leader;
  return result(
    "curator-leader",
    "a curator leader exists",
    "ok",
    `node ${nodeId} leads (term ${term})`,
  );
}

/** `nodes-up`: every node UP and heartbeating. */
export function checkNodesUp(inputs: HealthInputs): HealthCheckResult {
  const name = "nodes-up";
  const title = "every node UP and heartbeating";
  const nodes = live(inputs.nodes);
  const up = nodes.filter((n) => n.state === common.NodeState.UP);
  const silent = up.filter((n) => n.health === common.NodeHealth.HEARTBEAT_TIMEOUT);
  const unheard = up.filter((n) => n.health === common.NodeHealth.UNKNOWN);
  const waiting = nodes.filter((n) => n.state !== common.NodeState.UP);
  if (silent.length > 0) {
    const words = silent.map((n) =>
      n.sinceHeartbeatMs === undefined
        ? `${n.id} (no heartbeat heard)`
        : `${n.id} (last heartbeat ${Math.round(n.sinceHeartbeatMs / 1000)} s ago)`,
    );
    return result(
      name,
      title,
      "fail",
      `${silent.length} of ${up.length} UP nodes not heartbeating (timeout ${inputs.heartbeatTimeoutMs / 1000} s): ${some(words)}`,
      silent.map((n) => n.id),
    );
  }
  if (up.length === 0) return result(name, title, "fail", "no node is UP");
  if (unheard.length > 0 || waiting.length > 0) {
    const parts = [
      ...(unheard.length > 0
        ? [`not heard from yet by this leader: ${some(unheard.map((n) => n.id))}`]
        : []),
      ...(waiting.length > 0
        ? [
            `not UP: ${some(waiting.map((n) => `${n.id} (${common.nodeStateToJSON(n.state).replace(/^NODE_STATE_/, "")})`))}`,
          ]
        : []),
    ];
    return result(
      name,
      title,
      "warn",
      `${up.length - unheard.length} of ${nodes.length} nodes UP and heartbeating; ${parts.join("; ")}`,
      [...unheard, ...waiting].map((n) => n.id),
    );
  }
  return result(name, title, "ok", `${up.length} nodes UP and heartbeating`);
}

/** `etcd-members`: etcd's members are the consensus-role nodes, each reached by the leader's member. */
export function checkEtcdMembers(inputs: HealthInputs): HealthCheckResult {
  const name = "etcd-members";
  const title = "etcd members agree and equal the consensus-role nodes";
  if ("failed" in inputs.members) {
    return result(
      name,
      title,
      "fail",
      `etcd's members could not be read: ${inputs.members.failed}`,
    );
  }
  const members = inputs.members.ok;
  const holders = live(inputs.nodes).filter((n) => n.consensus);
  const named = new Set(members.map((m) => m.nodeId).filter((id) => id !== ""));
  const problems: string[] = [];
  const nodeIds: string[] = [];
  const withoutMember = holders.filter((n) => !named.has(n.id));
  if (withoutMember.length > 0) {
    problems.push(
      `consensus-role nodes without a started member: ${some(withoutMember.map((n) => n.id))}`,
    );
    nodeIds.push(...withoutMember.map((n) => n.id));
  }
  const holderIds = new Set(holders.map((n) => n.id));
  const strays = members.filter((m) => m.nodeId === "" || !holderIds.has(m.nodeId));
  if (strays.length > 0) {
    problems.push(
      `members no consensus-role node accounts for: ${some(strays.map((m) => (m.nodeId === "" ? `${m.memberId} (not started)` : `${m.memberId} (${m.nodeId})`)))}`,
    );
    nodeIds.push(...strays.map((m) => m.nodeId).filter((id) => id !== ""));
  }
  const unreachable = members.filter((m) => m.reachable === false);
  if (unreachable.length > 0) {
    problems.push(
      `members the leader's member has no raft connection with (their view cannot be in step): ${some(unreachable.map((m) => m.nodeId || m.memberId))}`,
    );
    nodeIds.push(...unreachable.map((m) => m.nodeId).filter((id) => id !== ""));
  }
  // Each member's own view (from its node's heartbeats), against the leader's member's.
  const byId = new Map(inputs.nodes.map((n) => [n.id, n]));
  const leaderIds = members.map((m) => m.memberId).sort();
  const viewless: string[] = [];
  for (const m of members) {
    const node = m.nodeId === "" ? undefined : byId.get(m.nodeId);
    if (node === undefined || m.reachable === false) continue;
    const view = node.consensusView;
    if (view === undefined || view.ageMs > inputs.heartbeatTimeoutMs) {
      viewless.push(node.id);
      continue;
    }
    const ids = [...view.memberIds].sort();
    if (ids.join(",") !== leaderIds.join(",")) {
      problems.push(
        `${node.id}'s member lists ${some(ids)} where the leader's lists ${some(leaderIds)}`,
      );
      nodeIds.push(node.id);
    } else if (
      inputs.raftLeaderId !== undefined &&
      view.raftLeaderId !== undefined &&
      view.raftLeaderId !== inputs.raftLeaderId
    ) {
      problems.push(
        `${node.id}'s member follows raft leader ${view.raftLeaderId}, the leader's member ${inputs.raftLeaderId}`,
      );
      nodeIds.push(node.id);
    }
  }
  if (problems.length > 0) return result(name, title, "fail", problems.join("; "), nodeIds);
  if (viewless.length > 0) {
    return result(
      name,
      title,
      "warn",
      `${members.length} members, one per consensus-role node; no recent view of its own from ${some(viewless)}'s member (its heartbeats carry none)`,
      viewless,
    );
  }
  const unknown = members.filter((m) => m.reachable === undefined);
  if (unknown.length > 0) {
    return result(
      name,
      title,
      "warn",
      `${members.length} members, one per consensus-role node; whether the leader's member reaches ${some(unknown.map((m) => m.nodeId || m.memberId))} is unknown`,
      unknown.map((m) => m.nodeId).filter((id) => id !== ""),
    );
  }
  return result(
    name,
    title,
    "ok",
    `${members.length} members, one per consensus-role node, in raft contact with the leader's member, each listing the same members`,
  );
}

/** `etcd-voters`: every member a voter. */
export function checkEtcdVoters(inputs: HealthInputs): HealthCheckResult {
  const name = "etcd-voters";
  const title = "every etcd member a voter (no learner)";
  if ("failed" in inputs.members) {
    return result(
      name,
      title,
      "fail",
      `etcd's members could not be read: ${inputs.members.failed}`,
    );
  }
  const members = inputs.members.ok;
  const learners = members.filter((m) => !m.voter);
  if (learners.length > 0) {
    return result(
      name,
      title,
      "fail",
      `${learners.length} of ${members.length} members are learners: ${some(learners.map((m) => m.nodeId || `${m.memberId} (not started)`))}`,
      learners.map((m) => m.nodeId).filter((id) => id !== ""),
    );
  }
  return result(name, title, "ok", `${members.length} voters`);
}

/** `etcd-alarms`: no etcd alarm raised. */
export function checkEtcdAlarms(inputs: HealthInputs): HealthCheckResult {
  const name = "etcd-alarms";
  const title = "no etcd alarm";
  if ("failed" in inputs.alarms) {
    return result(name, title, "fail", `etcd's alarms could not be read: ${inputs.alarms.failed}`);
  }
  const alarms = inputs.alarms.ok;
  if (alarms.length > 0) {
    return result(
      name,
      title,
      "fail",
      `${alarms.length} alarms raised: ${some(alarms.map((a) => `${a.alarm} of member ${a.memberId}${a.nodeId ? ` (${a.nodeId})` : ""}`))} (metroctl cluster alarms)`,
      alarms.map((a) => a.nodeId).filter((id) => id !== ""),
    );
  }
  return result(name, title, "ok", "none raised");
}

/** Bytes as MiB with one decimal. */
const mib = (bytes: number): string => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;

/** One member's database size against its quota, as the size check judges it. */
interface DatabaseReading {
  readonly nodeId: string;
  readonly sizeBytes: number;
  readonly quotaBytes: number;
  /** sizeBytes / quotaBytes; 1 when the quota is 0. */
  readonly share: number;
}

const databaseReading = (
  nodeId: string,
  { sizeBytes, quotaBytes }: { sizeBytes: number; quotaBytes: number },
): DatabaseReading => ({
  nodeId,
  sizeBytes,
  quotaBytes,
  share: quotaBytes > 0 ? sizeBytes / quotaBytes : 1,
});

/** A share as a percentage with one decimal. */
const percent = (share: number): string => `${(share * 100).toFixed(1)} %`;

/**
 * `etcd-database-size`: every member's database under its quota. Each member
 * has its own database file (of its own size: fragmentation, a member
 * catching up) and etcd raises NOSPACE per member, so the check judges the
 * largest share among the leader's member's own reading and every other
 * member's recent view (its node's heartbeats carry it); a member without
 * one is named.
 */
export function checkDatabaseSize(inputs: HealthInputs): HealthCheckResult {
  const name = "etcd-database-size";
  const title = "every etcd member's database under its quota";
  const leaderId = inputs.leader.nodeId;
  // The members to account for: etcd's list, or while it cannot be read the consensus-role nodes.
  const memberNodeIds =
    "ok" in inputs.members
      ? inputs.members.ok.map((m) => m.nodeId).filter((id) => id !== "")
      : live(inputs.nodes)
          .filter((n) => n.consensus)
          .map((n) => n.id);
  const byId = new Map(inputs.nodes.map((n) => [n.id, n]));
  const readings: DatabaseReading[] = [];
  const unread: string[] = [];
  if ("ok" in inputs.database) readings.push(databaseReading(leaderId, inputs.database.ok));
  for (const id of new Set(memberNodeIds)) {
    if (id === leaderId) continue;
    const view = byId.get(id)?.consensusView;
    if (view?.database === undefined || view.ageMs > inputs.heartbeatTimeoutMs) {
      unread.push(id);
      continue;
    }
    readings.push(databaseReading(id, view.database));
  }
  readings.sort((a, b) => b.share - a.share);
  const over = readings.filter((r) => r.share >= databaseWarnShare);
  const failing = over.filter((r) => r.share >= databaseFailShare);
  const words = (r: DatabaseReading) =>
    `${mib(r.sizeBytes)} of ${mib(r.quotaBytes)} (${percent(r.share)}) on node ${r.nodeId}'s member`;

  const parts: string[] = [];
  const nodeIds: string[] = [];
  if ("failed" in inputs.database) {
    parts.push(
      `the database size could not be read on node ${leaderId}'s member: ${inputs.database.failed}`,
    );
    nodeIds.push(leaderId);
  }
  if (over.length > 0) {
    const advice =
      failing.length === 0
        ? ""
        : failing.every((r) => r.nodeId === leaderId)
          ? ": defragment or compact (metroctl cluster defrag)"
          : ": defragment or compact (metroctl cluster defrag --node ID, one member at a time)";
    const rest = readings.length - over.length;
    parts.push(
      `${some(over.map(words))}${advice}${rest > 0 ? `; the other ${rest} members below ${percent(databaseWarnShare)}` : ""}`,
    );
    nodeIds.push(...over.map((r) => r.nodeId));
  } else if (readings.length > 0) {
    const [largest] = readings;
    parts.push(
      readings.length === 1
        ? words(largest)
        : `${words(largest)}, the largest share of ${readings.length} members`,
    );
  }
  if (unread.length > 0) {
    parts.push(`no recent reading from ${some(unread)}'s member (its heartbeats carry none)`);
    nodeIds.push(...unread);
  }
  const verdict: Verdict =
    "failed" in inputs.database || failing.length > 0
      ? "fail"
      : over.length > 0 || unread.length > 0
        ? "warn"
        : "ok";
  return result(name, title, verdict, parts.join("; "), nodeIds);
}

/** Milliseconds as seconds with up to three decimals, signed. */
const seconds = (ms: number): string => `${ms >= 0 ? "+" : ""}${(ms / 1000).toFixed(3)} s`;

/** `clock-skew`: every UP node's clock within {@link maxClockOffsetMs} of the leader's. */
export function checkClockSkew(inputs: HealthInputs): HealthCheckResult {
  const name = "clock-skew";
  const title = `node clocks within ${maxClockOffsetMs / 1000} s of the leader's`;
  const up = live(inputs.nodes).filter((n) => n.state === common.NodeState.UP);
  const off = up.filter(
    (n) =>
      n.clock !== undefined &&
      Math.abs(n.clock.offsetMs) - (n.clock.uncertaintyMs ?? 0) > maxClockOffsetMs,
  );
  if (off.length > 0) {
    return result(
      name,
      title,
      "fail",
      `${off.length} nodes off: ${some(off.map((n) => `${n.id} ${seconds(n.clock?.offsetMs ?? 0)}`))}`,
      off.map((n) => n.id),
    );
  }
  const unsampled = up.filter((n) => n.clock === undefined);
  const sampled = up.filter((n) => n.clock !== undefined);
  const worst = sampled.reduce((max, n) => Math.max(max, Math.abs(n.clock?.offsetMs ?? 0)), 0);
  if (unsampled.length > 0) {
    return result(
      name,
      title,
      "warn",
      `no clock sample from ${some(unsampled.map((n) => n.id))} (no heartbeat with its time heard by this leader)${sampled.length > 0 ? `; the others within ${seconds(worst)}` : ""}`,
      unsampled.map((n) => n.id),
    );
  }
  return result(name, title, "ok", `${sampled.length} nodes, the farthest ${seconds(worst)} off`);
}

/** A span of milliseconds in words: `3 d 4 h`, `5 h`, `12 min`. */
function span(ms: number): string {
  const minutes = Math.max(0, Math.floor(ms / 60_000));
  const days = Math.floor(minutes / 1440);
  const hours = Math.floor((minutes % 1440) / 60);
  if (days > 0) return hours > 0 ? `${days} d ${hours} h` : `${days} d`;
  if (hours > 0) return `${hours} h`;
  return `${minutes} min`;
}

/** `access-expiry`: issued access credentials that expire within 7 days, listed. */
export function checkAccessExpiry(inputs: HealthInputs): HealthCheckResult {
  const name = "access-expiry";
  const title = "no access credential expires within 7 days";
  const credentials = inputs.credentials ?? { ok: [] };
  if ("failed" in credentials) {
    return result(
      name,
      title,
      "warn",
      `the access credentials could not be read: ${credentials.failed}`,
    );
  }
  const now = (inputs.now ?? new Date()).getTime();
  const active = credentials.ok.filter(
    (c) => !c.revoked && c.notAfter !== undefined && c.notAfter.getTime() > now,
  );
  const soon = active
    .filter((c) => (c.notAfter?.getTime() ?? now) - now <= accessExpiryWarnMs)
    .sort((a, b) => (a.notAfter?.getTime() ?? 0) - (b.notAfter?.getTime() ?? 0));
  if (soon.length > 0) {
    return result(
      name,
      title,
      "warn",
      `${soon.length} of ${active.length} active credentials expire within 7 days: ${some(soon.map((c) => `${c.name} (${c.role}, serial ${c.serial}) in ${span((c.notAfter?.getTime() ?? now) - now)}`))}`,
    );
  }
  return result(
    name,
    title,
    "ok",
    active.length === 0
      ? "no active access credentials"
      : `${active.length} active credentials, none expiring within 7 days`,
  );
}

/** `versions`: every live node on one software version. */
export function checkVersions(inputs: HealthInputs): HealthCheckResult {
  const name = "versions";
  const title = "every node on one version";
  const nodes = live(inputs.nodes);
  const byVersion = new Map<string, string[]>();
  const unknown: string[] = [];
  for (const n of nodes) {
    if (n.version === undefined || n.version === "") {
      unknown.push(n.id);
      continue;
    }
    byVersion.set(n.version, [...(byVersion.get(n.version) ?? []), n.id]);
  }
  if (byVersion.size > 1) {
    const counts = [...byVersion].map(([v, ids]) => `${v} on ${ids.length}`);
    // The nodes warned of: those not on the most common version.
    const common_ = [...byVersion].reduce((a, b) => (b[1].length > a[1].length ? b : a));
    return result(
      name,
      title,
      "warn",
      `${byVersion.size} versions: ${some(counts)}`,
      [...byVersion].filter(([v]) => v !== common_[0]).flatMap(([, ids]) => ids),
    );
  }
  if (unknown.length > 0) {
    return result(
      name,
      title,
      "warn",
      `version unknown (no status yet) for ${some(unknown)}${byVersion.size === 1 ? `; the others on ${[...byVersion.keys()][0]}` : ""}`,
      unknown,
    );
  }
  const [only] = byVersion.keys();
  return result(
    name,
    title,
    "ok",
    only === undefined ? "no nodes" : `${nodes.length} nodes on ${only}`,
  );
}

/** Every check, in this order. */
export const healthCheckList: readonly ((inputs: HealthInputs) => HealthCheckResult)[] = [
  checkCuratorLeader,
  checkNodesUp,
  checkEtcdMembers,
  checkEtcdVoters,
  checkEtcdAlarms,
  checkDatabaseSize,
  checkClockSkew,
  checkAccessExpiry,
  checkVersions,
];

/** Every check's result, in the order of {@link healthCheckList}. */
export function healthChecks(inputs: HealthInputs): HealthCheckResult[] {
  return healthCheckList.map((check) => check(inputs));
}

/** The worst of `verdicts` (ok when there are none). */
export function worstVerdict(verdicts: readonly Verdict[]): Verdict {
  if (verdicts.includes("fail")) return "fail";
  if (verdicts.includes("warn")) return "warn";
  return "ok";
}
