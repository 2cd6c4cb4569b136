/**
 * The cluster view's feed: every node with its state, roles, health and
 * heartbeat, and who leads. Its upstream (Management.WatchNodes, in
 * cluster-backend.ts) yields the whole node list when it starts watching
 * (a backlog: at first, and again after it watched anew, say on a new
 * leader), then the nodes that changed. The feed keeps the current list and
 * sends pages only the nodes that changed, also across a new backlog (it is
 * compared with the list the feed had), so a page of a 1,000-node cluster
 * gets a few rows per batch, not the cluster.
 *
 * A node's heartbeat counts as changed when the leader heard a new one
 * (its heartbeat time moved by more than {@link heartbeatJitterMs}), not
 * because its age grew: pages age heartbeats themselves.
 */
import { LiveFeed, type FeedEvent, type LiveFeedOptions } from "./live-feed";
import type { ClusterDelta, ClusterSnapshot, ObservedNode } from "./observer-protocol";

/** One look at the cluster: every node, and the curator leader. */
export interface ClusterObservation {
  nodes: ObservedNode[];
  leaderId: string | null;
}

/** Changes of the cluster since the last update: nodes new or changed, nodes gone, and the leader. */
export interface ClusterChanges {
  upserts: ObservedNode[];
  removed: string[];
  leaderId: string | null;
}

/** What the upstream yields: the whole cluster (which replaces what the feed had), or changes. */
export type ClusterUpdate = ClusterObservation | ClusterChanges;

/** The upstream: the cluster, then its changes (and the whole cluster again when it starts over), until `signal`. */
export type ClusterSource = (signal: AbortSignal) => AsyncIterable<ClusterUpdate>;

/**
 * How far a heartbeat time computed from two looks may differ without a new
 * heartbeat: the age is reported in 0.1 s steps and the call takes time.
 */
export const heartbeatJitterMs = 750;

/** A node's fields other than its heartbeat, as one comparable string. */
const stableKey = (node: ObservedNode) =>
  JSON.stringify({ ...node, heartbeatAgeSeconds: null, heartbeatAt: null });

const heartbeatMoved = (before: ObservedNode, after: ObservedNode) =>
  (before.heartbeatAt === null) !== (after.heartbeatAt === null) ||
  (before.heartbeatAt !== null &&
    after.heartbeatAt !== null &&
    Math.abs(after.heartbeatAt - before.heartbeatAt) > heartbeatJitterMs);

/** The cluster view's feed; see the module comment. */
export class ClusterFeed extends LiveFeed {
  private readonly nodes = new Map<string, { node: ObservedNode; key: string }>();
  private leaderId: string | null = null;
  private seen = false;
  private readonly upserts = new Map<string, ObservedNode>();
  private readonly removed = new Set<string>();
  private leaderChanged = false;

  constructor(
    private readonly source: ClusterSource,
    opts?: LiveFeedOptions,
  ) {
    super(opts);
  }

  protected async run(signal: AbortSignal): Promise<void> {
    for await (const update of this.source(signal)) {
      if ("upserts" in update) this.apply(update);
      else this.observe(update);
    }
  }

  /** Takes in changes: a node that is no different from the one the feed has is not sent again. */
  apply(changes: ClusterChanges): void {
    for (const node of changes.upserts) this.upsert(node);
    for (const id of changes.removed) this.remove(id);
    this.leader(changes.leaderId);
  }

  /** Takes in the whole cluster: what differs from the list the feed had is batched. */
  observe(observation: ClusterObservation): void {
    const present = new Set<string>();
    for (const node of observation.nodes) {
      present.add(node.id);
      this.upsert(node);
    }
    for (const id of this.nodes.keys()) if (!present.has(id)) this.remove(id);
    this.leader(observation.leaderId);
  }

  private upsert(node: ObservedNode): void {
    const key = stableKey(node);
    const before = this.nodes.get(node.id);
    if (before && before.key === key && !heartbeatMoved(before.node, node)) return;
    this.nodes.set(node.id, { node, key });
    this.upserts.set(node.id, node);
    this.removed.delete(node.id);
  }

  private remove(id: string): void {
    if (!this.nodes.delete(id)) return;
    this.upserts.delete(id);
    this.removed.add(id);
  }

  /** Ends an update: records the leader, and batches what changed. */
  private leader(leaderId: string | null): void {
    if (!this.seen || leaderId !== this.leaderId) this.leaderChanged = true;
    this.leaderId = leaderId;
    this.seen = true;
    if (this.upserts.size > 0 || this.removed.size > 0 || this.leaderChanged) this.changed();
  }

  protected snapshotEvents(): FeedEvent[] {
    if (!this.seen) return [];
    const snapshot: ClusterSnapshot = {
      nodes: [...this.nodes.values()].map((n) => n.node),
      leaderId: this.leaderId,
      serverTime: Date.now(),
    };
    return [["snapshot", snapshot]];
  }

  protected takePending(): FeedEvent[] {
    if (this.upserts.size === 0 && this.removed.size === 0 && !this.leaderChanged) return [];
    const delta: ClusterDelta = {
      upserts: [...this.upserts.values()],
      removed: [...this.removed],
      leaderId: this.leaderId,
      serverTime: Date.now(),
    };
    this.upserts.clear();
    this.removed.clear();
    this.leaderChanged = false;
    return [["delta", delta]];
  }
}
