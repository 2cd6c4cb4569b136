/**
 * Curator.Watch: the state of one node, or of all nodes, as a stream.
 *
 * Both kinds read the current state at one etcd revision, send it, and then
 * follow the changes after that revision — so no change between the read
 * and the watch is lost, and none is sent twice. Both read the leader's copy
 * of the records and follow its watches (node-record-mirror.ts,
 * node-record-feed.ts), not etcd for each stream: every node watches itself
 * and, for its directory, all nodes, and after a failover every one of them
 * watches again.
 *
 * A NodesInCluster backlog goes out in chunks; its last chunk (an empty one
 * if there are no nodes) carries PROGRESS_LAST_BACKLOGGED, the revision it
 * is current as of, and the number of nodes, so a client knows when its view
 * is complete. Every change carries its revision too. A client that kept its
 * view resumes from the revision it reached (`resume_from_revision`): its
 * backlog is then only the nodes changed since, which after a failover is
 * few or none instead of all N (N² across the cluster); deletions it missed
 * show as more nodes in its view than the cluster has, and it watches
 * afresh. Deleted nodes are announced as tombstones.
 *
 * A revision is a point of one etcd cluster's history, so every event that
 * carries one carries the etcd cluster's ID too, and a resume names both:
 * the leader resumes only a token of its own etcd cluster, and sends any
 * other (or one without a cluster ID, from an older client) the full
 * backlog, not marked resumed, which replaces the client's view. A cluster
 * restored from a backup is a new etcd cluster that starts at the
 * snapshot's revision (etcd 3.4's `etcdctl snapshot restore` cannot bump
 * it): without the cluster ID a node that had seen a later revision of the
 * old cluster would resume from it once the restored cluster passed it, and
 * keep a stale view for good.
 *
 * Only nodes may watch (any node may watch any node: they need each other's
 * addresses and roles). The stream ends when the client cancels; the etcd
 * watcher goes with it.
 *
 * A call may have at most WATCH_MAX_PENDING messages not yet taken by its
 * client (node-watch-streams.ts, which holds what this stream shares with
 * Management.WatchNodes); beyond that it ends with RESOURCE_EXHAUSTED.
 */
import type { ServerWritableStream } from "@grpc/grpc-js";
import type { IKeyValue } from "etcd3";
import { curator, type priv } from "@metropolis/proto";
import { InvalidArgumentError, NotFoundError } from "./errors";
import { requireCurrentNode } from "./current-node";
import type { LeaderContext } from "./leader-context";
import { checkNodeId } from "./node-record";
import type { NodeRecordFeed } from "./node-record-feed";
import {
  followAllNodes,
  followWatcher,
  nodeIdOf,
  type RecordEvents,
  sendBacklog,
  storedNodeOf,
  watchFailed,
} from "./node-watch-streams";

export { WATCH_BACKLOG_CHUNK, WATCH_MAX_PENDING } from "./node-watch-streams";

type WatchCall = ServerWritableStream<curator.WatchRequest, curator.WatchResponse>;

/** A node record as the Curator API shows it (without join and unlock keys, which are secrets). */
export function nodeToProto(id: string, node: priv.Node): curator.Node {
  return {
    id,
    publicKey: node.publicKey,
    state: node.state,
    roles: node.roles,
    status: node.status,
    labels: node.labels,
    wipeRequested: node.wipeRequested,
  };
}

/**
 * Handles one Watch call until the client cancels it; watches of a single
 * node follow `records`, the leadership's shared watch of node records.
 */
export async function watch(
  ctx: LeaderContext,
  records: NodeRecordFeed,
  call: WatchCall,
): Promise<void> {
  await requireCurrentNode(ctx, call);
  const kind = call.request.kind;
  if (kind?.$case === "nodeInCluster")
    return watchOne(ctx, records, call, checkNodeId(kind.nodeInCluster.nodeId));
  if (kind?.$case === "nodesInCluster")
    return watchAll(ctx, call, {
      revision: checkResumeRevision(kind.nodesInCluster.resumeFromRevision),
      clusterId: kind.nodesInCluster.resumeEtcdClusterId,
    });
  throw new InvalidArgumentError("watch request must set node_in_cluster or nodes_in_cluster");
}

async function watchOne(
  ctx: LeaderContext,
  records: NodeRecordFeed,
  call: WatchCall,
  id: string,
): Promise<void> {
  // Subscribed before the read: a change right after it is buffered, not missed.
  const subscription = await records.subscribe(id);
  try {
    // From the leader's copy (no etcd read for each of a cluster's nodes
    // watching again after a failover). The copy and the shared watch are
    // two watches, either may be ahead: starting after the record's own mod
    // revision delivers every later change of it, once, either way.
    const found = await ctx.nodes.find(id);
    if (!found) throw new NotFoundError(`node ${id} not found`);
    call.write({
      nodes: [nodeToProto(id, found.node)],
      nodeTombstones: [],
      progress: 0,
      revision: 0,
      nodeCount: 0,
      resumed: false,
      etcdClusterId: "",
    });
    subscription.start(found.modRevision);
    if (subscription.failure) throw watchFailed(subscription.failure);
  } catch (e) {
    await subscription.cancel();
    throw e;
  }
  // Its changes' revisions resume nothing (NodeInCluster watches are not resumed).
  return follow(ctx, call, subscription, "");
}

/** A request's `resume_from_revision`: 0 (start afresh) or a revision. */
function checkResumeRevision(revision: number): number {
  if (!Number.isSafeInteger(revision) || revision < 0)
    throw new InvalidArgumentError("resume_from_revision must be 0 or an etcd revision");
  return revision;
}

/** Where a NodesInCluster watch resumes: a revision of an etcd cluster (0: nowhere). */
interface ResumeToken {
  revision: number;
  /** The etcd cluster `revision` belongs to; empty from a client older than the field. */
  clusterId: string;
}

async function watchAll(ctx: LeaderContext, call: WatchCall, resume: ResumeToken): Promise<void> {
  const followed = await followAllNodes(ctx, "watch");
  const { records, revision, clusterId } = followed;
  // A revision of another etcd cluster (one restored from a backup is a new
  // one, whose revisions restart at the snapshot's), or of none named, or
  // one this leader has not reached, is nobody's view of this cluster: the
  // client gets the full backlog instead.
  const resumed =
    resume.revision > 0 &&
    resume.revision <= revision &&
    resume.clusterId !== "" &&
    resume.clusterId === clusterId;
  const backlog = resumed
    ? records.filter((r) => Number(r.modRevision) >= resume.revision)
    : records;
  const changes = await sendBacklog(call, followed, backlog, (chunk, last) => ({
    nodes: chunk.map(({ id, node }) => nodeToProto(id, node)),
    nodeTombstones: [],
    progress: last
      ? curator.WatchResponse_Progress.LAST_BACKLOGGED
      : curator.WatchResponse_Progress.UNSPECIFIED,
    revision: last ? revision : 0,
    nodeCount: last ? records.length : 0,
    resumed,
    etcdClusterId: last ? clusterId : "",
  }));
  return follow(ctx, call, changes, clusterId);
}

/**
 * Streams the watcher's events until the client cancels, falls behind, or
 * the watch fails; each carries its revision and `clusterId`, the ID of the
 * etcd cluster the revision belongs to.
 */
function follow(
  ctx: LeaderContext,
  call: WatchCall,
  watcher: RecordEvents,
  clusterId: string,
): Promise<void> {
  return followWatcher(call, watcher, {
    what: "node watch",
    put: (entry: IKeyValue) => {
      const stored = storedNodeOf(ctx, entry, "watch");
      return (
        stored && {
          nodes: [nodeToProto(stored.id, stored.node)],
          nodeTombstones: [],
          progress: 0,
          revision: Number(entry.mod_revision),
          nodeCount: 0,
          resumed: false,
          etcdClusterId: clusterId,
        }
      );
    },
    delete: (entry: IKeyValue) => ({
      nodes: [],
      nodeTombstones: [{ nodeId: nodeIdOf(entry) }],
      progress: 0,
      revision: Number(entry.mod_revision),
      nodeCount: 0,
      resumed: false,
      etcdClusterId: clusterId,
    }),
  });
}
