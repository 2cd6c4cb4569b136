/**
 * The cluster view's feed: every node with its state, roles, health and
 * heartbeat, and who leads. Its upstream yields the whole node list each
 * time it looks (the Management API has no watch of nodes for the owner:
 * see README.md); the feed keeps the last list and sends pages only the
 * nodes that changed, so a page of a 1,000-node cluster gets a few rows per
 * batch, not the cluster.
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

/** The upstream: a look at the cluster whenever something may have changed, until `signal`. */
export type ClusterSource = (signal: AbortSignal) => AsyncIterable<ClusterObservation>;

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
    for await (const observation of this.source(signal)) this.observe(observation);
  }

  /** Takes in one look at the cluster: what differs from the last one is batched. */
  observe(observation: ClusterObservation): void {
    const present = new Set<string>();
    for (const node of observation.nodes) {
      present.add(node.id);
      const key = stableKey(node);
      const before = this.nodes.get(node.id);
      if (before && before.key === key && !heartbeatMoved(before.node, node)) continue;
      this.nodes.set(node.id, { node, key });
      this.upserts.set(node.id, node);
      this.removed.delete(node.id);
    }
    for (const id of this.nodes.keys()) {
      if (present.has(id)) continue;
      this.nodes.delete(id);
      this.upserts.delete(id);
      this.removed.add(id);
    }
    if (!this.seen || observation.leaderId !== this.leaderId) this.leaderChanged = true;
    this.leaderId = observation.leaderId;
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
