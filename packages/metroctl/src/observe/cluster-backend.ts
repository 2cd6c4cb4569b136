/**
 * The observer's real backend: the cluster, reached with the owner's
 * credentials exactly as metroctl's commands reach it. The nodes come from
 * Management.WatchNodes on one long-lived owner session (the curator leader
 * found and followed by CuratorConnection), one stream for every page
 * together: its backlog is the whole list, then each change, each health
 * change and (asked for with `heartbeats`) each heartbeat, at most once a
 * second per node. When the stream ends or breaks (the leader stopped
 * leading, or went away), it is opened again with backoff, on whoever leads
 * then, and its new backlog replaces the list. The consensus (etcd members,
 * the leader and its term) has no watch: Management.GetClusterConsensus is
 * asked every {@link consensusPollMs} while a page shows it, and a page is
 * sent what changed. A node's
 * tree, reports and logs are its own streams (Debug.WatchSupervisionTree,
 * Debug.GetSupervisorReports, NodeManagement.Logs), dialled like `metroctl
 * tree`, `reports` and `node logs`; actions are the calls of `approve`,
 * `set-role` and `label`.
 */
import { Metadata } from "@grpc/grpc-js";
import { api, common } from "@metropolis/proto";
import { abortableSleep, Backoff, resolveBackoff } from "@metropolis/supervisor";
import { ClusterSession } from "../cluster-session";
import type { CommandContext } from "../command-context";
import { nodeClient, reportJson } from "../debug-commands";
import { parseLabelChanges, parseNodeId } from "../flag-values";
import { byId, describeRoleChanges, rolesRequest } from "../node-changes";
import { logsRequest } from "../node-management-commands";
import { nodeDescription } from "../node-view";
import { writeLine } from "../io";
import { buildSupervisionTree } from "../supervision-tree";
import type { ClusterUpdate } from "./cluster-feed";
import type { ObserverBackend } from "./observer-backend";
import type {
  ConsensusSnapshot,
  LabelsChange,
  ObservedConsensusMember,
  LogsQuery,
  ObservedLogEntry,
  ObservedNode,
  ObservedReport,
  RolesChange,
  TreeSnapshot,
} from "./observer-protocol";

/**
 * Waits before the node watch is opened again: quick after a failover (the
 * new leader serves within a second or two), at most a few seconds while
 * the cluster cannot be reached.
 */
export const clusterWatchBackoff = resolveBackoff({
  initialMs: 200,
  multiplier: 2,
  maxMs: 5_000,
  jitter: 0.3,
});

/**
 * How often the consensus view's data is asked for: membership changes are
 * rare and a failover takes seconds, so a second or two late is fine.
 */
export const consensusPollMs = 2_000;

/** How many past log lines the logs view starts with. */
export const logBacklog = 200;

/** A node of a GetNodes answer as the page shows it; `at` is when the answer came. */
export function observedNode(
  node: api.Node,
  leaderId: string | undefined,
  at: number,
): ObservedNode {
  const description = nodeDescription(node, leaderId);
  const age = node.timeSinceHeartbeatMs;
  return { ...description, heartbeatAt: age === undefined ? null : at - age };
}

const memberStatus: Record<common.ConsensusMember_Status, ObservedConsensusMember["status"]> = {
  [common.ConsensusMember_Status.VOTER]: "voter",
  [common.ConsensusMember_Status.LEARNER]: "learner",
  [common.ConsensusMember_Status.UNKNOWN]: "unknown",
  [common.ConsensusMember_Status.UNRECOGNIZED]: "unknown",
};

/** A GetClusterConsensus answer as the consensus view shows it: members sorted, for stable diffs. */
export function observedConsensus(res: api.GetClusterConsensusResponse): ConsensusSnapshot {
  const members = res.members
    .map((m) => ({
      nodeId: m.nodeId,
      memberId: m.memberId,
      status: memberStatus[m.status],
      curatorRunning: m.curatorRunning,
    }))
    .sort((a, b) => (a.memberId < b.memberId ? -1 : a.memberId > b.memberId ? 1 : 0));
  const leader = res.leader ? { ...res.leader } : null;
  return { members, leader };
}

/** Reads a gRPC server stream until it ends; `signal` cancels it. */
async function* streamOf<T>(
  stream: AsyncIterable<unknown> & { cancel(): void },
  signal: AbortSignal,
): AsyncGenerator<T> {
  const cancel = () => stream.cancel();
  signal.addEventListener("abort", cancel, { once: true });
  if (signal.aborted) cancel();
  try {
    // grpc-js types a stream's messages as any: the client's method fixes what they are.
    for await (const message of stream as AsyncIterable<T>) yield message;
  } finally {
    signal.removeEventListener("abort", cancel);
    stream.cancel();
  }
}

/** The cluster through the owner's credentials; see the module comment. */
export class ClusterBackend implements ObserverBackend {
  private constructor(
    private readonly ctx: CommandContext,
    private readonly session: ClusterSession,
    private readonly debugPort: number,
  ) {}

  /** A backend with the owner session of `ctx`'s config dir; nodes are dialled at `debugPort`. */
  static async open(ctx: CommandContext, debugPort: number): Promise<ClusterBackend> {
    return new ClusterBackend(ctx, await ClusterSession.asOwner(ctx), debugPort);
  }

  async *cluster(signal: AbortSignal): AsyncGenerator<ClusterUpdate> {
    const backoff = new Backoff(clusterWatchBackoff);
    while (!signal.aborted) {
      try {
        const { leaderId, stream } = await this.session.watchNodes({ heartbeats: true }, signal);
        /** The backlog so far, until its last message came; then changes follow. */
        let backlog: ObservedNode[] | undefined = [];
        for await (const res of streamOf<api.WatchNodesResponse>(stream, signal)) {
          const at = Date.now();
          const nodes = res.nodes.map((n) => observedNode(n, leaderId, at));
          if (backlog === undefined) {
            const removed = res.nodeTombstones.map((t) => t.nodeId);
            yield { upserts: nodes, removed, leaderId };
            continue;
          }
          backlog.push(...nodes);
          if (res.progress !== api.WatchNodesResponse_Progress.LAST_BACKLOGGED) continue;
          yield { nodes: backlog, leaderId };
          backlog = undefined;
          // A stream that delivered its backlog is a success: the next break retries quickly.
          backoff.reset();
        }
      } catch (e) {
        if (signal.aborted) return;
        // Said, not thrown: the pages keep the last list and the watch tries again.
        writeLine(
          this.ctx.io.stderr,
          `observer: watching the nodes failed, watching again: ${e instanceof Error ? e.message : String(e)}`,
        );
      }
      await abortableSleep(backoff.next(), signal).catch(() => undefined);
    }
  }

  async *consensus(signal: AbortSignal): AsyncGenerator<ConsensusSnapshot> {
    let last = "";
    for (;;) {
      // A failed call ends the upstream: the feed tells the pages and asks again later.
      const snapshot = observedConsensus(await this.session.getClusterConsensus());
      const text = JSON.stringify(snapshot);
      if (text !== last) yield snapshot;
      last = text;
      try {
        await abortableSleep(consensusPollMs, signal);
      } catch {
        return; // the last page left
      }
    }
  }

  async *tree(id: string, signal: AbortSignal): AsyncGenerator<TreeSnapshot> {
    const client = await nodeClient(this.ctx, parseNodeId(id), this.debugPort, api.DebugClient);
    try {
      const stream = client.watchSupervisionTree({}, new Metadata(), {});
      for await (const res of streamOf<api.WatchSupervisionTreeResponse>(stream, signal)) {
        yield { roots: buildSupervisionTree(res.nodes), receivedAt: Date.now() };
      }
    } finally {
      client.close();
    }
  }

  async *reports(id: string, signal: AbortSignal): AsyncGenerator<ObservedReport[]> {
    const client = await nodeClient(this.ctx, parseNodeId(id), this.debugPort, api.DebugClient);
    try {
      const stream = client.getSupervisorReports(
        { dnPrefix: "", follow: true },
        new Metadata(),
        {},
      );
      for await (const res of streamOf<api.GetSupervisorReportsResponse>(stream, signal)) {
        yield res.reports.map(reportJson);
      }
    } finally {
      client.close();
    }
  }

  async *logs(
    id: string,
    query: LogsQuery,
    signal: AbortSignal,
  ): AsyncGenerator<ObservedLogEntry[]> {
    const request = logsRequest({
      dn: query.dn === "" ? undefined : query.dn,
      level: query.level,
      backlog: String(logBacklog),
      follow: query.follow,
    });
    const client = await nodeClient(
      this.ctx,
      parseNodeId(id),
      this.debugPort,
      api.NodeManagementClient,
    );
    try {
      const stream = client.logs(
        request,
        new Metadata(),
        query.follow ? {} : { deadline: Date.now() + this.ctx.dialTimeoutMs },
      );
      for await (const res of streamOf<api.LogsResponse>(stream, signal)) {
        yield res.entries.map((e) => ({
          time: e.time ? e.time.toISOString() : null,
          level: e.level,
          dn: e.dn,
          message: e.message,
        }));
      }
    } finally {
      client.close();
    }
  }

  async approve(id: string): Promise<string> {
    await this.session.approveNode(parseNodeId(id));
    return `node ${id} approved`;
  }

  async setRoles(id: string, change: RolesChange): Promise<string> {
    await this.session.updateNodeRoles(rolesRequest(parseNodeId(id), change));
    return `node ${id}: ${describeRoleChanges(change)}`;
  }

  async setLabels(id: string, change: LabelsChange): Promise<string> {
    const { add, remove } = parseLabelChanges(change.changes);
    await this.session.updateNodeLabels({ node: byId(parseNodeId(id)), add, remove });
    return `node ${id} labels updated`;
  }

  close(): void {
    this.session.close();
  }
}
