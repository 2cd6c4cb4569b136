/**
 * The owner's etcd member operations, each through the curator leader
 * (Management; see the curator's management-members.ts):
 *
 * - `cluster remove-member MEMBER_ID [--force]`: removes an etcd member no
 *   node holding the consensus role accounts for (a node's own member leaves
 *   with `set-role --consensus off` or `node decommission`);
 * - `cluster move-leader NODE_ID`: hands raft leadership to that node's
 *   voter (etcd takes it only from the raft leader: it works while the
 *   curator leader's member leads raft);
 * - `cluster defrag [--force]`: defragments the curator leader's member;
 *   `cluster defrag --node ID [--force]`: that node's member, through the
 *   node's own NodeManagement.DefragmentMember (every member's client
 *   endpoint is a unix socket on its node), after the curator leader's
 *   quorum check (CheckNodeMaintenance, DEFRAGMENT), as `node reboot` does;
 * - `cluster alarms [list] [-o json]`, `cluster alarms disarm MEMBER_ID
 *   [--alarm nospace|corrupt]`: etcd's alarms.
 *
 * remove-member and defrag are refused FAILED_PRECONDITION when they would
 * leave fewer healthy voters than a quorum, unless `--force`.
 *
 * Defragmenting the member of the curator leader's node stalls it, and with
 * it the leader's lease renewals: the leader may step down (a failover of a
 * few seconds). `--node` of the leader's node says so on stderr first.
 */
import { Metadata } from "@grpc/grpc-js";
import { api } from "@metropolis/proto";
import { withOwnerSession } from "./cluster-session";
import type { CommandContext } from "./command-context";
import { defaultDebugPort, nodeClient } from "./debug-commands";
import { UsageError } from "./errors";
import { parseNodeId, parsePortFlag } from "./flag-values";
import { warnForced } from "./forced";
import { byId } from "./node-changes";
import { writeLine } from "./io";
import { renderTable, writeJson, type OutputFormat } from "./output";

/** How long a member removal or defragmentation may take at least. */
export const consensusCallTimeoutMs = 120_000;

/** A member ID as `cluster members` and etcdctl print it: up to 16 hex digits (any case). */
export function parseMemberId(text: string): string {
  if (!/^[0-9a-fA-F]{1,16}$/.test(text)) {
    throw new UsageError(
      `"${text.slice(0, 64)}" is not an etcd member ID (1 to 16 hex digits, as \`metroctl cluster members\` prints them)`,
    );
  }
  return text.toLowerCase();
}

/** `cluster remove-member MEMBER_ID [--force]` */
export async function removeMember(
  ctx: CommandContext,
  memberId: string,
  opts: { force?: boolean },
): Promise<void> {
  const id = parseMemberId(memberId);
  const force = opts.force === true;
  if (force) warnForced(ctx, "cluster remove-member", `removing etcd member ${id}`);
  const res = await withOwnerSession(ctx, (session) =>
    session.removeConsensusMember(
      { memberId: id, force },
      Math.max(ctx.dialTimeoutMs, consensusCallTimeoutMs),
    ),
  );
  writeLine(
    ctx.io.stdout,
    `etcd member ${res.memberId} removed${res.nodeId ? ` (node ${res.nodeId})` : " (never started)"}`,
  );
}

/** `cluster move-leader NODE_ID` */
export async function moveLeader(ctx: CommandContext, nodeId: string): Promise<void> {
  parseNodeId(nodeId);
  const res = await withOwnerSession(ctx, (session) => session.moveConsensusLeader({ nodeId }));
  writeLine(
    ctx.io.stdout,
    res.fromMemberId === res.toMemberId
      ? `etcd member ${res.toMemberId} of node ${nodeId} leads raft already`
      : `raft leadership moved from etcd member ${res.fromMemberId} to ${res.toMemberId} (node ${nodeId})`,
  );
}

/** `cluster defrag` as `-o json` prints it. */
export interface DefragView {
  nodeId: string;
  memberId: string;
  dbSizeBefore: number;
  dbSizeAfter: number;
}

/** Flags of `cluster defrag`, as given. */
export interface DefragOptions {
  force?: boolean;
  node?: string;
  debugPort?: string;
  output: OutputFormat;
}

/** What `cluster defrag --node` of the curator leader's node says on stderr first. */
export function leaderStallWarning(nodeId: string): string {
  return `metroctl: cluster defrag: node ${nodeId} runs the curator leader: its etcd member stalls while it is defragmented, which may make the curator leader step down (a failover of a few seconds)`;
}

/** `cluster defrag [--node ID [--debug-port PORT]] [--force] [-o json]` */
export async function defrag(ctx: CommandContext, opts: DefragOptions): Promise<void> {
  const force = opts.force === true;
  let view: DefragView;
  if (opts.node === undefined) {
    if (opts.debugPort !== undefined) throw new UsageError("--debug-port needs --node");
    if (force) warnForced(ctx, "cluster defrag", "the curator leader's etcd member stalling");
    const res = await withOwnerSession(ctx, (session) =>
      session.defragmentConsensus({ force }, Math.max(ctx.dialTimeoutMs, consensusCallTimeoutMs)),
    );
    view = {
      nodeId: res.nodeId,
      memberId: res.memberId,
      dbSizeBefore: res.dbSizeBefore,
      dbSizeAfter: res.dbSizeAfter,
    };
  } else {
    view = await defragNode(ctx, opts.node, opts);
  }
  if (opts.output === "json") {
    writeJson(ctx.io.stdout, view);
    return;
  }
  writeLine(
    ctx.io.stdout,
    `etcd member ${view.memberId} (node ${view.nodeId}) defragmented: ${view.dbSizeBefore} -> ${view.dbSizeAfter} bytes`,
  );
}

/**
 * `cluster defrag --node ID`: the curator leader's quorum check first
 * (CheckNodeMaintenance, DEFRAGMENT: a refusal, FAILED_PRECONDITION naming
 * why, is the command's error and the node is not asked; `--force` skips it
 * and says what it risks), a warning when the node is the curator leader's,
 * then the node's NodeManagement.DefragmentMember.
 */
async function defragNode(
  ctx: CommandContext,
  id: string,
  opts: DefragOptions,
): Promise<DefragView> {
  parseNodeId(id);
  const port =
    opts.debugPort === undefined ? defaultDebugPort : parsePortFlag(opts.debugPort, "--debug-port");
  const force = opts.force === true;
  if (force) warnForced(ctx, "cluster defrag", `the stall of node ${id}'s etcd member`);
  const leaderId = await withOwnerSession(ctx, async (session) => {
    if (!force) {
      await session.checkNodeMaintenance({
        node: byId(id),
        action: api.NodeMaintenance.DEFRAGMENT,
      });
    }
    return session.leaderId();
  });
  if (leaderId === id) writeLine(ctx.io.stderr, leaderStallWarning(id));
  const client = await nodeClient(ctx, id, port, api.NodeManagementClient);
  try {
    const res = await new Promise<api.DefragmentMemberResponse>((resolve, reject) =>
      client.defragmentMember(
        {},
        new Metadata(),
        { deadline: Date.now() + Math.max(ctx.dialTimeoutMs, consensusCallTimeoutMs) },
        (e, r) => (e ? reject(e) : resolve(r)),
      ),
    );
    return {
      nodeId: id,
      memberId: res.memberId,
      dbSizeBefore: res.dbSizeBefore,
      dbSizeAfter: res.dbSizeAfter,
    };
  } finally {
    client.close();
  }
}

/** The alarms `--alarm` takes. */
const alarmNames: Readonly<Record<string, api.ConsensusAlarmType>> = {
  nospace: api.ConsensusAlarmType.NOSPACE,
  corrupt: api.ConsensusAlarmType.CORRUPT,
};

/** An alarm as the operator reads it. */
function alarmName(alarm: api.ConsensusAlarmType): string {
  return api.ConsensusAlarmType[alarm] ?? `ALARM_${alarm}`;
}

/** One alarm as `cluster alarms -o json` prints it. */
export interface AlarmView {
  memberId: string;
  nodeId: string | null;
  alarm: string;
}

const alarmView = (a: api.ConsensusAlarm): AlarmView => ({
  memberId: a.memberId,
  nodeId: a.nodeId === "" ? null : a.nodeId,
  alarm: alarmName(a.alarm),
});

/** `cluster alarms [list] [-o json]` / `cluster alarms disarm MEMBER_ID [--alarm nospace|corrupt]` */
export async function alarms(
  ctx: CommandContext,
  args: string[],
  opts: { alarm?: string; output: OutputFormat },
): Promise<void> {
  const [action = "list", memberId, ...rest] = args;
  if (action === "list") {
    if (memberId !== undefined) throw new UsageError("list takes no arguments");
    if (opts.alarm !== undefined) throw new UsageError("--alarm goes with disarm");
    const res = await withOwnerSession(ctx, (session) => session.getConsensusAlarms());
    const views = res.alarms.map(alarmView);
    if (opts.output === "json") {
      writeJson(ctx.io.stdout, views);
      return;
    }
    if (views.length === 0) {
      writeLine(ctx.io.stdout, "no alarms");
      return;
    }
    writeLine(
      ctx.io.stdout,
      renderTable<AlarmView>(
        [
          { heading: "MEMBER ID", cell: (a) => a.memberId },
          { heading: "NODE", cell: (a) => a.nodeId ?? "-" },
          { heading: "ALARM", cell: (a) => a.alarm },
        ],
        views,
      ),
    );
    return;
  }
  if (memberId === undefined) throw new UsageError("disarm needs a MEMBER_ID");
  if (rest.length > 0) throw new UsageError(`unexpected arguments: ${rest.join(" ")}`);
  const id = parseMemberId(memberId);
  let alarm = api.ConsensusAlarmType.NONE;
  if (opts.alarm !== undefined) {
    const named = Object.hasOwn(alarmNames, opts.alarm) ? alarmNames[opts.alarm] : undefined;
    if (named === undefined) {
      throw new UsageError(
        `--alarm: "${opts.alarm.slice(0, 64)}" is not one of ${Object.keys(alarmNames).join(", ")}`,
      );
    }
    alarm = named;
  }
  const res = await withOwnerSession(ctx, (session) =>
    session.disarmConsensusAlarm({ memberId: id, alarm }),
  );
  if (opts.output === "json") {
    writeJson(ctx.io.stdout, res.disarmed.map(alarmView));
    return;
  }
  writeLine(
    ctx.io.stdout,
    res.disarmed.length === 0
      ? `no alarm of etcd member ${id} to disarm`
      : `disarmed: ${res.disarmed.map((a) => `${alarmName(a.alarm)} of etcd member ${a.memberId}`).join(", ")}`,
  );
}
