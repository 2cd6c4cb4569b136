/**
 * Management.WatchNodes: the cluster's nodes as the owner sees them (the
 * `Node` of GetNodes, with health), as a stream.
 *
 * Like Curator.Watch of all nodes (node-watch-streams.ts holds what they
 * share): every node at one etcd revision, from the leader's copy of the
 * records, sent in chunks, the last marked PROGRESS_LAST_BACKLOGGED; then
 * the changes after that revision, deleted nodes as tombstones;
 * RESOURCE_EXHAUSTED for a client that leaves too much unread.
 *
 * Health is not in etcd: it is the leader's judgement of heartbeats
 * (heartbeat-tracker.ts), computed when asked for. So the stream also
 * follows the tracker's health changes (one check per leadership, shared by
 * every stream) and sends a node again whenever the health it last sent for
 * it is no longer the current one: a node that stops heartbeating arrives as
 * HEARTBEAT_TIMEOUT within about a second of its timeout, without anything
 * read from etcd. For that each stream keeps the records it sent, in memory.
 * With `heartbeats` set it also sends the nodes heard from since the last
 * check (once a second), so the client's time since a heartbeat stays
 * current.
 *
 * The stream ends when the client cancels, when the leader's server stops
 * (as it does when the curator stops leading: the client watches again, on
 * the new leader), or with an error status; its subscription to the changes
 * and to health go with it.
 */
import type { ServerWritableStream } from "@grpc/grpc-js";
import type { IKeyValue } from "etcd3";
import { api, type common } from "@metropolis/proto";
import type { HealthChanges } from "./heartbeat-tracker";
import type { LeaderContext } from "./leader-context";
import { toApiNode } from "./management-nodes";
import type { StoredNode } from "./node-record";
import {
  followAllNodes,
  followWatcher,
  nodeIdOf,
  sendBacklog,
  storedNodeOf,
  WATCH_BACKLOG_CHUNK,
} from "./node-watch-streams";

/** A WatchNodes call, as grpc-js gives it to the handler. */
export type WatchNodesCall = ServerWritableStream<api.WatchNodesRequest, api.WatchNodesResponse>;

const changed = (nodes: api.Node[]): api.WatchNodesResponse => ({
  nodes,
  nodeTombstones: [],
  progress: api.WatchNodesResponse_Progress.UNSPECIFIED,
});

/**
 * Streams the nodes to an owner's WatchNodes call (the caller is checked
 * already) until the client cancels, `ended` aborts, or the stream fails.
 */
export async function watchNodes(
  ctx: LeaderContext,
  call: WatchNodesCall,
  ended: AbortSignal,
): Promise<void> {
  /** The nodes this stream sent, as last sent: the records, and the health they were sent with. */
  const view = new Map<string, { stored: StoredNode; health: common.NodeHealth }>();
  /** The owner's view of `stored`, remembered as sent. */
  const present = (stored: StoredNode): api.Node => {
    const node = toApiNode(ctx, stored);
    view.set(stored.id, { stored, health: node.health });
    return node;
  };

  const followed = await followAllNodes(ctx, "WatchNodes");
  const changes = await sendBacklog(call, followed, followed.records, (chunk, last) => ({
    nodes: chunk.map(present),
    nodeTombstones: [],
    progress: last
      ? api.WatchNodesResponse_Progress.LAST_BACKLOGGED
      : api.WatchNodesResponse_Progress.UNSPECIFIED,
  }));

  /**
   * Sends the nodes among `ids` whose health is not the one last sent (all
   * of them with `always`), in chunks.
   */
  const resend = (
    ids: Iterable<string>,
    send: (message: api.WatchNodesResponse) => void,
    always = false,
  ) => {
    let batch: api.Node[] = [];
    for (const id of ids) {
      const sent = view.get(id);
      if (!sent || (!always && sent.health === ctx.heartbeats.health(id))) continue;
      batch.push(present(sent.stored));
      if (batch.length === WATCH_BACKLOG_CHUNK) {
        send(changed(batch));
        batch = [];
      }
    }
    if (batch.length > 0) send(changed(batch));
  };

  return followWatcher(
    call,
    changes,
    {
      what: "node watch",
      put: (entry: IKeyValue) => {
        const stored = storedNodeOf(ctx, entry, "WatchNodes");
        return stored && changed([present(stored)]);
      },
      delete: (entry: IKeyValue) => {
        const id = nodeIdOf(entry);
        view.delete(id);
        return {
          nodes: [],
          nodeTombstones: [{ nodeId: id }],
          progress: api.WatchNodesResponse_Progress.UNSPECIFIED,
        };
      },
      also: (send) => {
        const stop = ctx.heartbeats.onHealthChange((changes: HealthChanges) => {
          // Unheard nodes share one health: when it changes, any of them may be in the view.
          resend(changes.unheard ? [...view.keys()] : changes.nodes, send);
          if (call.request.heartbeats) resend(changes.beaten, send, true);
        });
        // Health that changed while the backlog was read and sent, before the subscription.
        resend([...view.keys()], send);
        return stop;
      },
    },
    ended,
  );
}
