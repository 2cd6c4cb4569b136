/**
 * What the leader's streams of node records share (Curator.Watch of all
 * nodes in curator-watch.ts, Management.WatchNodes in management-watch.ts):
 * every node at one etcd revision and the changes after it
 * ({@link followAllNodes}: from the leader's copy of the records, or, while
 * the copy cannot be trusted, read from etcd and watched from the next
 * revision), sending that backlog in chunks, and following the changes with
 * a cap on the messages a client leaves unread.
 *
 * Reading at one revision and following from the next means no change
 * between the read and the watch is lost, and none is sent twice.
 *
 * A call may have at most {@link WATCH_MAX_PENDING} messages not yet taken by
 * its client; beyond that it ends with RESOURCE_EXHAUSTED, and the client
 * watches again from a fresh backlog. Otherwise one hung or slow client would
 * make the leader buffer every later change without bound; etcd cancels its
 * own slow watchers for the same reason.
 */
import { status, type ServerWritableStream } from "@grpc/grpc-js";
import type { IKeyValue, Watcher } from "etcd3";
import { CuratorError } from "./errors";
import { nodesPrefix } from "./keys";
import type { LeaderContext } from "./leader-context";
import { decodeNode, type StoredNode } from "./node-record";

/** Nodes per backlog message: keeps each message far below gRPC's 4 MiB limit. */
export const WATCH_BACKLOG_CHUNK = 50;

/**
 * Messages a watch call may have pending (written, but not yet sent, which
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

/** The revision after `revision` (etcd revisions are int64, as decimal strings). */
export function nextRevision(revision: string): string {
  return (BigInt(revision) + 1n).toString();
}

/** The ID of the node whose record `entry` is. */
export function nodeIdOf(entry: IKeyValue): string {
  return entry.key.toString().slice(nodesPrefix.length);
}

/**
 * The node record `entry` holds; a corrupt record is logged and left out
 * (undefined) rather than ending every stream that reads it.
 */
export function storedNodeOf(
  ctx: LeaderContext,
  entry: IKeyValue,
  what: string,
): StoredNode | undefined {
  const id = nodeIdOf(entry);
  try {
    return { id, node: decodeNode(id, entry.value), modRevision: entry.mod_revision };
  } catch (e) {
    ctx.logger.error(`${what}: skipping node ${id}: ${e instanceof Error ? e.message : String(e)}`);
    return undefined;
  }
}

/**
 * Every readable node record, the etcd revision they were read at, and the
 * ID of the etcd cluster that revision belongs to.
 */
export async function readAllNodes(
  ctx: LeaderContext,
  what: string,
): Promise<{ revision: string; clusterId: string; nodes: StoredNode[] }> {
  const res = await ctx.kv.getAll().prefix(nodesPrefix).exec();
  const nodes: StoredNode[] = [];
  for (const entry of res.kvs) {
    const stored = storedNodeOf(ctx, entry, what);
    if (stored) nodes.push(stored);
  }
  return { revision: res.header.revision, clusterId: res.header.cluster_id, nodes };
}

/** Every readable node record at one revision, and the changes after it. */
export interface AllNodes {
  records: readonly StoredNode[];
  revision: number;
  /**
   * The ID of the etcd cluster `revision` belongs to: the cluster_id of
   * etcd's response header, the same on every member, new after a restore.
   */
  clusterId: string;
  changes: RecordEvents;
  /** Why the changes failed already, if they did. */
  failure(): Error | undefined;
}

/**
 * Every node record and its changes from the leader's copy, or, while the
 * copy cannot be trusted, read from etcd with an etcd watcher of their own.
 */
export async function followAllNodes(ctx: LeaderContext, what: string): Promise<AllNodes> {
  const followed = await ctx.nodes.follow();
  if (followed) {
    if (followed.corrupt > 0)
      ctx.logger.error(`${what}: skipping ${followed.corrupt} node records that do not decode`);
    const changes = followed.changes;
    return {
      records: followed.records,
      revision: Number(followed.revision),
      clusterId: followed.clusterId,
      changes,
      failure: () => changes.failure,
    };
  }
  const { revision, clusterId, nodes } = await readAllNodes(ctx, what);
  return {
    records: nodes,
    revision: Number(revision),
    clusterId,
    changes: await watchNodesAfter(ctx, revision),
    failure: () => undefined,
  };
}

/**
 * Writes `items` (all of `followed.records`, or those a resumed watch needs)
 * as the stream's backlog, and hands back the changes after it to follow.
 * The changes are ended when the backlog cannot go out, or when they failed
 * already (UNAVAILABLE: the client watches again).
 */
export async function sendBacklog<T, Res>(
  call: Pick<ServerWritableStream<unknown, Res>, "write">,
  followed: AllNodes,
  items: readonly T[],
  message: (chunk: T[], last: boolean) => Res,
): Promise<RecordEvents> {
  try {
    writeBacklog(call, items, message);
    const failure = followed.failure();
    if (failure) throw watchFailed(failure);
  } catch (e) {
    await followed.changes.cancel();
    throw e;
  }
  return followed.changes;
}

/** An etcd watch of every node record from the revision after `revision`. */
export function watchNodesAfter(ctx: LeaderContext, revision: string): Promise<Watcher> {
  return ctx.kv.watch().prefix(nodesPrefix).startRevision(nextRevision(revision)).create();
}

/**
 * Writes `items` in chunks of {@link WATCH_BACKLOG_CHUNK}, each as the
 * message `message` makes of it; `last` is true for the last one. At least
 * one message goes out, so that an empty backlog still gets its marker.
 */
export function writeBacklog<T, Res>(
  call: Pick<ServerWritableStream<unknown, Res>, "write">,
  items: readonly T[],
  message: (chunk: T[], last: boolean) => Res,
): void {
  for (let i = 0; i === 0 || i < items.length; i += WATCH_BACKLOG_CHUNK) {
    call.write(
      message(items.slice(i, i + WATCH_BACKLOG_CHUNK), i + WATCH_BACKLOG_CHUNK >= items.length),
    );
  }
}

/** The error a stream ends with when its watch failed: UNAVAILABLE, the client watches again. */
export function watchFailed(e: Error, what = "node watch"): CuratorError {
  return new CuratorError(status.UNAVAILABLE, `${what} failed, watch again: ${e.message}`, {
    cause: e,
  });
}

/**
 * The events {@link followWatcher} follows: an etcd3 Watcher, or a
 * subscription to the leader's shared watch (node-record-feed.ts).
 */
export interface RecordEvents {
  on(event: "put" | "delete", listener: (entry: IKeyValue) => void): unknown;
  once(event: "error", listener: (e: Error) => void): unknown;
  removeAllListeners(event: "put" | "delete"): RecordEvents;
  cancel(): Promise<void>;
}

/** What {@link followWatcher} sends for the watcher's events, and what else it follows. */
export interface FollowHandlers<Res> {
  /** The message for a put of a record; undefined to send nothing. */
  put(entry: IKeyValue): Res | undefined;
  /** The message for a deleted record; undefined to send nothing. */
  delete(entry: IKeyValue): Res | undefined;
  /**
   * Further sources of messages, started once the events are followed:
   * they `send` through the same cap; returns what stops them.
   */
  also?(send: (message: Res) => void): () => void;
  /** A description of the watch for error messages ("node watch"). */
  what: string;
}

/**
 * Streams the watcher's events (and whatever `handlers.also` sends) to
 * `call` until the client cancels, `ended` aborts, the client falls behind
 * (RESOURCE_EXHAUSTED) or the watch fails (UNAVAILABLE: watch again).
 * Cancels the watcher when it returns.
 */
export function followWatcher<Req, Res>(
  call: ServerWritableStream<Req, Res>,
  watcher: RecordEvents,
  handlers: FollowHandlers<Res>,
  ended?: AbortSignal,
): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let done = false;
    /** Stops `handlers.also`; set once it started. */
    let stopAlso: (() => void) | undefined = undefined;
    const onEnded = () => finish();
    const finish = (error?: unknown) => {
      if (done) return;
      done = true;
      stopAlso?.();
      ended?.removeEventListener("abort", onEnded);
      watcher.removeAllListeners("put").removeAllListeners("delete");
      // Cancel errors (an already closed etcd client) change nothing for the caller.
      void watcher.cancel().catch(() => undefined);
      if (error === undefined) resolve();
      else reject(error);
    };
    const send = (message: Res) => {
      if (done) return;
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
    if (call.cancelled || ended?.aborted) return finish();
    call.once("cancelled", onEnded);
    ended?.addEventListener("abort", onEnded, { once: true });
    watcher.on("put", (entry: IKeyValue) => {
      const message = handlers.put(entry);
      if (message !== undefined) send(message);
    });
    watcher.on("delete", (entry: IKeyValue) => {
      const message = handlers.delete(entry);
      if (message !== undefined) send(message);
    });
    watcher.once("error", (e: Error) => finish(watchFailed(e, handlers.what)));
    stopAlso = handlers.also?.(send);
    // Its first sends may have ended the stream already (a client that reads nothing).
    if (done) stopAlso?.();
  });
}
