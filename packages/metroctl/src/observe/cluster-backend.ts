/**
 * The observer's real backend: the cluster, reached with the owner's
 * credentials exactly as metroctl's commands reach it. The nodes come from
 * Management.WatchNodes on one long-lived owner session (the curator leader
 * found and followed by CuratorConnection), one stream for every page
 * together: its backlog is the whole list, then each change, each health
 * change and (asked for with `heartbeats`) each heartbeat, at most once a
 * second per node. The consensus (etcd members, the curator and raft
 * leaders with their terms, the fault tolerance: what `cluster members`
 * prints, made by consensus-view.ts) comes from
 * Management.WatchClusterConsensus on the same session, while a page shows it: the whole of it at first and after each change. When either
 * stream ends or breaks (the leader stopped leading, or went away), it is
 * opened again with backoff, on whoever leads then, and its first answer
 * replaces what the pages were shown. A node's tree, reports and logs are
 * its own streams (Debug.WatchSupervisionTree, Debug.GetSupervisorReports,
 * NodeManagement.Logs), dialled like `metroctl tree`, `reports` and `node
 * logs`; actions are the calls of `approve`, `set-role` and `label`.
 */
import { Metadata } from "@grpc/grpc-js";
import { api } from "@metropolis/proto";
import { abortableSleep, Backoff, resolveBackoff } from "@metropolis/supervisor";
import { ClusterSession } from "../cluster-session";
import { consensusView } from "../consensus-view";
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
  LogsQuery,
  ObservedLogEntry,
  ObservedNode,
  ObservedReport,
  RolesChange,
  TreeSnapshot,
} from "./observer-protocol";

/**
 * Waits before a watch of the leader (the nodes, the consensus) is opened
 * again: quick after a failover (the new leader serves within a second or
 * two), at most a few seconds while the cluster cannot be reached.
 */
export const leaderWatchBackoff = resolveBackoff({
  initialMs: 200,
  multiplier: 2,
  maxMs: 5_000,
  jitter: 0.3,
});

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
    yield* this.rewatched("the nodes", signal, () => this.watchNodesOnce(signal));
  }

  async *consensus(signal: AbortSignal): AsyncGenerator<ConsensusSnapshot> {
    let last = "";
    const snapshots = this.rewatched("the consensus", signal, () =>
      this.watchConsensusOnce(signal),
    );
    for await (const snapshot of snapshots) {
      // A new stream starts with what may be known already: pages get changes only.
      const text = JSON.stringify(snapshot);
      if (text !== last) yield snapshot;
      last = text;
    }
  }

  /**
   * Reads the streams `watchOnce` opens on the leader, one after the other,
   * until `signal` aborts: when one ends or fails (the leader stopped
   * leading, or went away) the next is opened with backoff, on whoever leads
   * then. Failures are said on stderr, not thrown: the pages keep what they
   * were shown meanwhile.
   */
  private async *rewatched<T>(
    what: string,
    signal: AbortSignal,
    watchOnce: () => AsyncIterable<T>,
  ): AsyncGenerator<T> {
    const backoff = new Backoff(leaderWatchBackoff);
    while (!signal.aborted) {
      try {
        for await (const item of watchOnce()) {
          // A stream that answered is a success: the next break retries quickly.
          backoff.reset();
          yield item;
        }
      } catch (e) {
        if (signal.aborted) return;
        writeLine(
          this.ctx.io.stderr,
          `observer: watching ${what} failed, watching again: ${e instanceof Error ? e.message : String(e)}`,
        );
      }
      await abortableSleep(backoff.next(), signal).catch(() => undefined);
    }
  }

  /** One WatchNodes stream: its backlog as one list, then each change. */
  private async *watchNodesOnce(signal: AbortSignal): AsyncGenerator<ClusterUpdate> {
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
    }
  }

  /** One WatchClusterConsensus stream: the consensus, then again after each change. */
  private async *watchConsensusOnce(signal: AbortSignal): AsyncGenerator<ConsensusSnapshot> {
    const { stream } = await this.session.watchClusterConsensus(signal);
    for await (const res of streamOf<api.WatchClusterConsensusResponse>(stream, signal)) {
      if (res.consensus) yield consensusView(res.consensus);
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
