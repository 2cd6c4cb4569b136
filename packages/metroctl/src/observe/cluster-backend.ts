/**
 * The observer's real backend: the cluster, reached with the owner's
 * credentials exactly as metroctl's commands reach it. The node list comes
 * from Management.GetNodes on one long-lived owner session (the curator
 * leader found and followed by CuratorConnection), asked every
 * {@link clusterPollMs}: the Management API has no watch of nodes for the
 * owner (Curator.Watch is for nodes only), so this is the one upstream that
 * is asked rather than streamed, once for every page together. A node's
 * tree, reports and logs are its own streams (Debug.WatchSupervisionTree,
 * Debug.GetSupervisorReports, NodeManagement.Logs), dialled like `metroctl
 * tree`, `reports` and `node logs`; actions are the calls of `approve`,
 * `set-role` and `label`.
 */
import { Metadata } from "@grpc/grpc-js";
import { api } from "@metropolis/proto";
import { abortableSleep } from "@metropolis/supervisor";
import { ClusterSession } from "../cluster-session";
import type { CommandContext } from "../command-context";
import { nodeClient, reportJson } from "../debug-commands";
import { parseLabelChanges, parseNodeId } from "../flag-values";
import { byId, describeRoleChanges, rolesRequest } from "../node-changes";
import { logsRequest } from "../node-management-commands";
import { nodeDescription } from "../node-view";
import { buildSupervisionTree } from "../supervision-tree";
import type { ClusterObservation } from "./cluster-feed";
import type { ObserverBackend } from "./observer-backend";
import type {
  LabelsChange,
  LogsQuery,
  ObservedLogEntry,
  ObservedNode,
  ObservedReport,
  RolesChange,
  TreeSnapshot,
} from "./observer-protocol";

/** How often the node list is asked for (see the module comment). */
export const clusterPollMs = 500;

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

  async *cluster(signal: AbortSignal): AsyncGenerator<ClusterObservation> {
    while (!signal.aborted) {
      const nodes = await this.session.getNodes();
      const at = Date.now();
      const leaderId = await this.session.leaderId();
      yield { nodes: nodes.map((n) => observedNode(n, leaderId, at)), leaderId };
      await abortableSleep(clusterPollMs, signal).catch(() => undefined);
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
