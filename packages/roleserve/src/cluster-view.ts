/**
 * A node's view of every node of its cluster, kept from Curator.Watch of
 * all nodes and kept across watches: a watch that breaks (a failover breaks
 * every node's) is resumed from the revision the view reached, so the new
 * leader sends the nodes changed since, not every node again. Each node of
 * a cluster keeps such a view (its directory), so without resuming a
 * failover costs N full backlogs: N² records, 25 million at 5,000 nodes.
 *
 *   watch ──backlog (full, or resumed: changed since)──▶ incoming ──LAST_BACKLOGGED──▶ nodes
 *         ──changes, each with its revision──────────────────────────────────────────▶ nodes
 *
 * Until a backlog is complete the view stays as it was (a directory written
 * from half a backlog would drop nodes not sent yet). A resumed backlog
 * carries no tombstones: if the view then holds more nodes than the leader
 * counts, nodes were deleted while it was away (any other difference would
 * be the leader's fault, and is treated alike), and {@link StaleViewError}
 * says to watch afresh (the view is reset for that).
 */
import { curator } from "@metropolis/proto";
import { RoleserveError } from "./errors";

/** A resumed watch showed the view missed deletions; the next watch starts afresh. */
export class StaleViewError extends RoleserveError {
  constructor(
    /** Nodes the view held after the resumed backlog. */
    readonly held: number,
    /** Nodes the cluster has. */
    readonly nodeCount: number,
  ) {
    super(
      `resumed node watch: the view holds ${held} nodes but the cluster has ${nodeCount}: ` +
        `it missed changes while it was away (a resumed backlog resends no deletions); ` +
        `watching again from scratch`,
    );
  }
}

/** The view of all nodes; see the module comment. */
export class ClusterView {
  /** Every node as of {@link revision}, by ID; complete once a backlog was. */
  readonly nodes = new Map<string, curator.Node>();
  /** The etcd revision the view is current as of; 0 while it has none. */
  revision = 0;
  /** Nodes of the backlog under way; undefined once it is complete. */
  private incoming: Map<string, curator.Node> | undefined;

  /** Starts a watch: the request that resumes from this view, if it has one. */
  begin(): curator.WatchRequest {
    this.incoming = new Map();
    return {
      kind: { $case: "nodesInCluster", nodesInCluster: { resumeFromRevision: this.revision } },
    };
  }

  /**
   * Applies one event of the watch {@link begin} started; true when the view
   * is complete (its backlog was). Throws {@link StaleViewError} when a
   * resumed backlog shows deletions the view missed.
   */
  apply(event: curator.WatchResponse): boolean {
    const incoming = this.incoming;
    if (incoming) {
      for (const node of event.nodes) incoming.set(node.id, node);
      if (event.progress !== curator.WatchResponse_Progress.LAST_BACKLOGGED) return false;
      this.incoming = undefined;
      if (!event.resumed) this.nodes.clear();
      for (const [id, node] of incoming) this.nodes.set(id, node);
      if (event.resumed && this.nodes.size !== event.nodeCount) {
        const held = this.nodes.size;
        this.nodes.clear();
        this.revision = 0;
        throw new StaleViewError(held, event.nodeCount);
      }
    } else {
      for (const node of event.nodes) this.nodes.set(node.id, node);
      for (const { nodeId } of event.nodeTombstones) this.nodes.delete(nodeId);
    }
    if (event.revision > 0) this.revision = event.revision;
    return true;
  }
}
