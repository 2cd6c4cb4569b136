/**
 * Curator.Watch: the state of one node, or of all nodes, as a stream.
 *
 * Both kinds read the current state at one etcd revision, send it, and then
 * follow an etcd watch started at the next revision — so no change between
 * the read and the watch is lost, and none is sent twice. A NodesInCluster
 * backlog goes out in chunks; its last chunk (an empty one if there are no
 * nodes) carries PROGRESS_LAST_BACKLOGGED, so a client knows when its view
 * is complete. Deleted nodes are announced as tombstones.
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
  followWatcher,
  nodeIdOf,
  readAllNodes,
  type RecordEvents,
  storedNodeOf,
  watchFailed,
  watchNodesAfter,
  writeBacklog,
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
  if (kind?.$case === "nodesInCluster") return watchAll(ctx, call);
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
    call.write({ nodes: [nodeToProto(id, found.node)], nodeTombstones: [], progress: 0 });
    subscription.start(found.modRevision);
    if (subscription.failure) throw watchFailed(subscription.failure);
  } catch (e) {
    await subscription.cancel();
    throw e;
  }
  return follow(ctx, call, subscription);
}

async function watchAll(ctx: LeaderContext, call: WatchCall): Promise<void> {
  const { revision, nodes } = await readAllNodes(ctx, "watch");
  writeBacklog(call, nodes, (chunk, last) => ({
    nodes: chunk.map(({ id, node }) => nodeToProto(id, node)),
    nodeTombstones: [],
    progress: last
      ? curator.WatchResponse_Progress.LAST_BACKLOGGED
      : curator.WatchResponse_Progress.UNSPECIFIED,
  }));
  return follow(ctx, call, await watchNodesAfter(ctx, revision));
}

/** Streams the watcher's events until the client cancels, falls behind, or the watch fails. */
function follow(ctx: LeaderContext, call: WatchCall, watcher: RecordEvents): Promise<void> {
  return followWatcher(call, watcher, {
    what: "node watch",
    put: (entry: IKeyValue) => {
      const stored = storedNodeOf(ctx, entry, "watch");
      return (
        stored && { nodes: [nodeToProto(stored.id, stored.node)], nodeTombstones: [], progress: 0 }
      );
    },
    delete: (entry: IKeyValue) => ({
      nodes: [],
      nodeTombstones: [{ nodeId: nodeIdOf(entry) }],
      progress: 0,
    }),
  });
}
