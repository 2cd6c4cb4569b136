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
 * A call may have at most {@link WATCH_MAX_PENDING} messages not yet taken by
 * its client; beyond that it ends with RESOURCE_EXHAUSTED, and the client
 * watches again from a fresh backlog. Otherwise one hung or slow client would
 * make the leader buffer every later change without bound; etcd cancels its
 * own slow watchers for the same reason.
 */
import type { ServerWritableStream } from "@grpc/grpc-js";
import { status } from "@grpc/grpc-js";
import type { IKeyValue, Watcher } from "etcd3";
import { curator, type priv } from "@metropolis/proto";
import { CuratorError, InvalidArgumentError, NotFoundError } from "./errors";
import { requireCurrentNode } from "./current-node";
import { nodeKey, nodesPrefix } from "./keys";
import type { LeaderContext } from "./leader-context";
import { checkNodeId, decodeNode } from "./node-record";

/** Nodes per backlog message: keeps each message far below gRPC's 4 MiB limit. */
export const WATCH_BACKLOG_CHUNK = 50;

/**
 * Messages a Watch call may have pending (written, but not yet sent, which
 * HTTP/2 flow control holds back while the client does not read) before it
 * ends with RESOURCE_EXHAUSTED.
 *
 * Counted in messages because grpc-js' server stream is an objectMode
 * Writable: its `writableLength` counts messages, not bytes. A change is one
 * node, typically under a KiB (about 50 KiB with the most and longest labels
 * allowed), so this caps a stuck watcher at about a MiB (50 MiB at worst),
 * while a reading client, which drains its stream within milliseconds, stays
 * far below it even when every node of a large cluster changes at once. An
 * unread backlog counts too, which is harmless below WATCH_MAX_PENDING ×
 * {@link WATCH_BACKLOG_CHUNK} (50,000) nodes.
 */
export const WATCH_MAX_PENDING = 1000;

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

/** Handles one Watch call until the client cancels it. */
export async function watch(ctx: LeaderContext, call: WatchCall): Promise<void> {
  await requireCurrentNode(ctx, call);
  const kind = call.request.kind;
  if (kind?.$case === "nodeInCluster")
    return watchOne(ctx, call, checkNodeId(kind.nodeInCluster.nodeId));
  if (kind?.$case === "nodesInCluster") return watchAll(ctx, call);
  throw new InvalidArgumentError("watch request must set node_in_cluster or nodes_in_cluster");
}

async function watchOne(ctx: LeaderContext, call: WatchCall, id: string): Promise<void> {
  const res = await ctx.kv.get(nodeKey(id)).exec();
  const entry = res.kvs[0];
  if (!entry) throw new NotFoundError(`node ${id} not found`);
  call.write({
    nodes: [nodeToProto(id, decodeNode(id, entry.value))],
    nodeTombstones: [],
    progress: 0,
  });
  const watcher = await ctx.kv
    .watch()
    .key(nodeKey(id))
    .startRevision(next(res.header.revision))
    .create();
  return follow(ctx, call, watcher);
}

async function watchAll(ctx: LeaderContext, call: WatchCall): Promise<void> {
  const res = await ctx.kv.getAll().prefix(nodesPrefix).exec();
  const nodes: curator.Node[] = [];
  for (const entry of res.kvs) {
    const node = toProto(ctx, entry);
    if (node) nodes.push(node);
  }
  // At least one message, so that an empty cluster still gets its marker.
  for (let i = 0; i === 0 || i < nodes.length; i += WATCH_BACKLOG_CHUNK) {
    const last = i + WATCH_BACKLOG_CHUNK >= nodes.length;
    call.write({
      nodes: nodes.slice(i, i + WATCH_BACKLOG_CHUNK),
      nodeTombstones: [],
      progress: last
        ? curator.WatchResponse_Progress.LAST_BACKLOGGED
        : curator.WatchResponse_Progress.UNSPECIFIED,
    });
  }
  const watcher = await ctx.kv
    .watch()
    .prefix(nodesPrefix)
    .startRevision(next(res.header.revision))
    .create();
  return follow(ctx, call, watcher);
}

/** Streams the watcher's events until the client cancels, falls behind, or the watch fails. */
function follow(ctx: LeaderContext, call: WatchCall, watcher: Watcher): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let done = false;
    const finish = (error?: unknown) => {
      if (done) return;
      done = true;
      watcher.removeAllListeners("put").removeAllListeners("delete");
      // Cancel errors (an already closed etcd client) change nothing for the caller.
      void watcher.cancel().catch(() => undefined);
      if (error === undefined) resolve();
      else reject(error);
    };
    const send = (message: curator.WatchResponse) => {
      call.write(message);
      const pending = call.writableLength;
      // The error status goes out after what is buffered already: a client
      // that resumes reading gets those messages, then RESOURCE_EXHAUSTED.
      if (pending > WATCH_MAX_PENDING) {
        finish(
          new CuratorError(
            status.RESOURCE_EXHAUSTED,
            `watcher fell behind: ${pending} messages not yet read by the client; watch again`,
          ),
        );
      }
    };
    if (call.cancelled) return finish();
    call.once("cancelled", () => finish());
    watcher.on("put", (entry: IKeyValue) => {
      const node = toProto(ctx, entry);
      if (node) send({ nodes: [node], nodeTombstones: [], progress: 0 });
    });
    watcher.on("delete", (entry: IKeyValue) => {
      send({ nodes: [], nodeTombstones: [{ nodeId: idOf(entry) }], progress: 0 });
    });
    watcher.once("error", (e: Error) =>
      finish(
        new CuratorError(status.UNAVAILABLE, `node watch failed, watch again: ${e.message}`, {
          cause: e,
        }),
      ),
    );
  });
}

function idOf(entry: IKeyValue): string {
  return entry.key.toString().slice(nodesPrefix.length);
}

/** The API form of a stored record; a corrupt record is logged and left out rather than ending every watch. */
function toProto(ctx: LeaderContext, entry: IKeyValue): curator.Node | undefined {
  const id = idOf(entry);
  try {
    return nodeToProto(id, decodeNode(id, entry.value));
  } catch (e) {
    ctx.logger.error(`watch: skipping node ${id}: ${e instanceof Error ? e.message : String(e)}`);
    return undefined;
  }
}

function next(revision: string): string {
  return (BigInt(revision) + 1n).toString();
}
