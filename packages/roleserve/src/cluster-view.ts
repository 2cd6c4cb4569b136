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
 *
 * The revision is kept with the ID of the etcd cluster it belongs to, and
 * both go back when the watch resumes: a cluster restored from a backup is
 * a new etcd cluster whose revisions restart at the snapshot's (etcd 3.4
 * cannot bump them on restore), so a revision alone could resume this view
 * at a point of another history. The leader resumes only a token of its own
 * etcd cluster; for any other it sends the full backlog, not marked
 * resumed, which replaces the view (nodes not in it are dropped).
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
  /** The ID of the etcd cluster {@link revision} belongs to; empty while it has none. */
  etcdClusterId = "";
  /** Nodes of the backlog under way; undefined once it is complete. */
  private incoming: Map<string, curator.Node> | undefined;

  /** Starts a watch: the request that resumes from this view, if it has one. */
  begin(): curator.WatchRequest {
    this.incoming = new Map();
    return {
      kind: {
        $case: "nodesInCluster",
        nodesInCluster: {
          resumeFromRevision: this.revision,
          resumeEtcdClusterId: this.etcdClusterId,
        },
      },
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
        this.etcdClusterId = "";
        throw new StaleViewError(held, event.nodeCount);
      }
    } else {
      for (const node of event.nodes) this.nodes.set(node.id, node);
      for (const { nodeId } of event.nodeTombstones) this.nodes.delete(nodeId);
    }
    if (event.revision > 0) {
      // Together: a revision means nothing without its etcd cluster.
      this.revision = event.revision;
      this.etcdClusterId = event.etcdClusterId;
    }
    return true;
  }
}
