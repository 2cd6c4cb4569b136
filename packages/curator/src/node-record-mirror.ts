/**
 * The leader's copy of every node record, for the reads that need them all
 * often: owners' listings (GetNodes, GetClusterInfo), the check that a
 * calling node still exists (every heartbeat stream and watch a node opens),
 * and the membership reconciler's pass every few seconds. Reading 5,000
 * records from etcd and decoding them cost the leader about 100 ms of CPU
 * per listing (11 MiB), and the new leader of a failover checked each of
 * 5,000 nodes with an etcd read of its own.
 *
 *   etcd: one read of /nodes/ ──▶ the copy (decoded, by ID) ◀── one watch of the
 *         curator namespace, from the read's next revision
 *
 * What a reader gets is never older than the leader's own writes: each
 * guarded write records its revision (`Leadership.lastWriteRevision`), and a
 * read waits until the watch has delivered that revision — so an owner who
 * changed a label sees it in the next listing, as with a read from etcd. The
 * watch covers the whole curator namespace (not only /nodes/), so that every
 * write of the leader, whatever its key, shows up in it. Writers other than
 * the leader (a deposed leader's writes are refused by the leadership guard;
 * the curator is the only writer of cluster state) show within the watch's
 * latency.
 *
 * Streams of every node (Curator.Watch of all nodes) follow the copy too
 * ({@link NodeRecordMirror.follow}): the records at the copy's revision, and
 * then its changes, handed over in one step of the event loop, so none is
 * lost or sent twice — without a read of every record from etcd and an etcd
 * watcher for each stream (each node's directory watches all nodes: after a
 * failover that was N reads of N records, 11 MiB each at 5,000 nodes).
 *
 * When the copy cannot be trusted — not read yet, its watch failed, or it
 * has not caught up within {@link catchUpMs} — readers read etcd, as they
 * did without it; a failed copy is read again on a later use (at most once
 * per {@link restartAfterMs}). Destructive decisions do not rest on the copy:
 * the reconciler re-reads etcd before it changes membership, and DeleteNode
 * and the role checks read etcd themselves.
 */
import { EventEmitter } from "node:events";
import { performance } from "node:perf_hooks";
import type { IKeyValue, Namespace, Watcher } from "etcd3";
import { openWatch } from "@metropolis/consensus";
import type { Logger } from "@metropolis/supervisor";
import { CuratorError } from "./errors";
import { nodesPrefix } from "./keys";
import type { Leadership } from "./leadership";
import { decodeNode, findNode, listNodes, type StoredNode } from "./node-record";
import type { RecordEvents } from "./node-watch-streams";

/** How long a read waits for the copy to catch up with the leader's writes before reading etcd. */
export const catchUpMs = 2000;

/** How long after a failed start (or watch) the copy is not tried again. */
export const restartAfterMs = 1000;

/** Options of a {@link NodeRecordMirror}. */
export interface MirrorOptions {
  /**
   * How long the first read's records are decoded before the event loop is
   * let run (the decoding goes on in its next turn). Otherwise a new leader
   * decodes every record in one task, which grows with the node count
   * (about 110 ms of CPU at 5,000 nodes, in the middle of a failover),
   * renewing no lease and answering no heartbeat meanwhile. 0 lets the loop
   * run after every record.
   * @default 10
   */
  decodeSliceMs?: number;
}

/** A reader waiting for the copy to reach `revision`. */
interface Waiter {
  revision: bigint;
  done: (current: boolean) => void;
}

/**
 * The changes of the node records after a {@link NodeRecordMirror.follow}
 * snapshot, in revision order; fails when the copy is given up (its watch
 * failed, or the leadership ended) — the stream then ends and its client
 * watches again.
 */
export class MirrorSubscription extends EventEmitter implements RecordEvents {
  /** Why the copy was given up, if it was; a stream checks before it follows the events. */
  failure: Error | undefined;

  constructor(private readonly leave: (s: MirrorSubscription) => void) {
    super();
  }

  /** Called by the mirror when the copy is given up. */
  fail(e: Error): void {
    this.failure = e;
    // Before its stream follows it nobody listens yet: the stream finds `failure` instead.
    if (this.listenerCount("error") > 0) this.emit("error", e);
  }

  /** Stops the events. */
  async cancel(): Promise<void> {
    this.leave(this);
  }
}

/** What {@link NodeRecordMirror.follow} hands a stream. */
export interface FollowedRecords {
  /** The revision of the curator namespace the records are current as of. */
  revision: bigint;
  /** The ID of the etcd cluster `revision` belongs to (its response headers' cluster_id). */
  clusterId: string;
  /** Every readable node record, in key order (do not modify). */
  records: readonly StoredNode[];
  /** Records that do not decode, left out of `records`. */
  corrupt: number;
  /** Every change of a node record after `revision`. */
  changes: MirrorSubscription;
}

/** The copy as one start built it; replaced whole when its watch fails. */
interface Copy {
  readonly records: Map<string, StoredNode>;
  /** Records that do not decode: reads of them fail with DATA_LOSS, as from etcd. */
  readonly corrupt: Map<string, CuratorError>;
  /** The revision of the latest change of the curator namespace the copy has seen. */
  revision: bigint;
  /** The ID of the etcd cluster the copy was read from. */
  clusterId: string;
  /** Every record in key order, made on demand and dropped at the next change. */
  sorted: StoredNode[] | undefined;
  watcher: Watcher | undefined;
  live: boolean;
  /** The streams following this copy's changes. */
  readonly followers: Set<MirrorSubscription>;
}

/** The leader's copy of the node records; see the module comment. One per leadership. */
export class NodeRecordMirror {
  private copy: Copy | undefined;
  private starting: Promise<Copy | undefined> | undefined;
  private failedAt = -Infinity;
  private readonly waiters = new Set<Waiter>();
  /** Aborted by {@link close}: a start waiting for etcd to create its watch gives up. */
  private readonly closing = new AbortController();

  private get closed(): boolean {
    return this.closing.signal.aborted;
  }

  private readonly decodeSliceMs: number;

  constructor(
    private readonly kv: Namespace,
    private readonly leadership: Pick<Leadership, "lastWriteRevision"> &
      Partial<Pick<Leadership, "assertServing">>,
    private readonly logger: Logger,
    opts: MirrorOptions = {},
  ) {
    this.decodeSliceMs = opts.decodeSliceMs ?? 10;
  }

  /**
   * Every node record in key order, at least as new as this leader's last
   * write. Throws DATA_LOSS when one does not decode.
   */
  async list(): Promise<readonly StoredNode[]> {
    const copy = await this.current();
    if (!copy) return listNodes(this.kv);
    const corrupt = copy.corrupt.values().next();
    if (!corrupt.done) throw corrupt.value;
    copy.sorted ??= [...copy.records.values()].sort((a, b) => (a.id < b.id ? -1 : 1));
    return copy.sorted;
  }

  /** The record of node `id`, or undefined; as new as {@link list}'s. */
  async find(id: string): Promise<StoredNode | undefined> {
    const copy = await this.current();
    if (!copy) return findNode(this.kv, id);
    const corrupt = copy.corrupt.get(id);
    if (corrupt) throw corrupt;
    return copy.records.get(id);
  }

  /**
   * Every node record now and a subscription to every later change, taken
   * in one step so that nothing falls between them; undefined when the copy
   * cannot be trusted (the caller reads etcd and watches it instead).
   */
  async follow(): Promise<FollowedRecords | undefined> {
    const copy = await this.current();
    if (!copy?.live) return undefined;
    copy.sorted ??= [...copy.records.values()].sort((a, b) => (a.id < b.id ? -1 : 1));
    const changes = new MirrorSubscription((s) => copy.followers.delete(s));
    copy.followers.add(changes);
    return {
      revision: copy.revision,
      clusterId: copy.clusterId,
      records: copy.sorted,
      corrupt: copy.corrupt.size,
      changes,
    };
  }

  /** Starts reading the copy now, so that the first reader does not wait for it. */
  prime(): void {
    void this.current();
  }

  /**
   * Ends the copy's watch; later reads go to etcd. Resolves once etcd has
   * cancelled it: a watch still open when its client's member stops makes
   * etcd3 schedule a reconnection, a timer that outlives everything else.
   */
  async close(): Promise<void> {
    this.closing.abort();
    for (const w of this.waiters) w.done(false);
    this.waiters.clear();
    if (this.copy) await this.drop(this.copy);
    // A start under way drops its copy itself once it sees `closed`.
    await this.starting;
  }

  /**
   * The copy, once it holds the leader's last write; undefined when etcd
   * must be read instead.
   *
   * @throws LeaseUnconfirmedError when the leader's lease deadline has
   *   passed: the copy is current only while no other curator can lead
   *   (lease-deadline.ts), so it is checked at the moment of each read.
   */
  private async current(): Promise<Copy | undefined> {
    if (this.closed) return undefined;
    let copy = this.copy;
    if (!copy) {
      if (performance.now() - this.failedAt < restartAfterMs) return undefined;
      this.starting ??= this.start().finally(() => (this.starting = undefined));
      copy = await this.starting;
      if (!copy) return undefined;
    }
    const wanted = this.leadership.lastWriteRevision;
    const current = copy.revision >= wanted || ((await this.until(wanted)) && copy.live);
    if (!current) return undefined;
    this.leadership.assertServing?.();
    return copy;
  }

  /** Reads every record and starts watching after the read; undefined when either failed. */
  private async start(): Promise<Copy | undefined> {
    const copy: Copy = {
      records: new Map(),
      corrupt: new Map(),
      revision: 0n,
      clusterId: "",
      sorted: undefined,
      watcher: undefined,
      live: true,
      followers: new Set(),
    };
    try {
      const res = await this.kv.getAll().prefix(nodesPrefix).exec();
      // In slices (see MirrorOptions.decodeSliceMs). Nothing else sees the
      // copy before it is done, and the watch starts from the read's revision:
      // no change is missed meanwhile.
      let sliceStart = performance.now();
      for (const entry of res.kvs) {
        this.put(copy, entry);
        if (performance.now() - sliceStart < this.decodeSliceMs) continue;
        await new Promise<void>((resolve) => setImmediate(resolve));
        sliceStart = performance.now();
      }
      copy.revision = BigInt(res.header.revision);
      copy.clusterId = res.header.cluster_id;
      // Every key of the namespace: see the module comment.
      const watcher = await openWatch(
        this.kv
          .watch()
          .prefix("")
          .startRevision((copy.revision + 1n).toString()),
        this.closing.signal,
      );
      copy.watcher = watcher;
      watcher.on("put", (entry: IKeyValue) => this.changed(copy, entry, "put"));
      watcher.on("delete", (entry: IKeyValue) => this.changed(copy, entry, "delete"));
      watcher.once("error", (e: Error) => {
        this.logger.warn(`the leader's copy of the node records: its watch failed: ${e.message}`);
        this.fail(copy);
      });
    } catch (e) {
      if (this.closed) return undefined;
      this.logger.warn(
        `the leader's copy of the node records could not be read: ${e instanceof Error ? e.message : String(e)}`,
      );
      this.fail(copy);
      return undefined;
    }
    if (this.closed) {
      await this.drop(copy);
      return undefined;
    }
    this.copy = copy;
    this.tell(copy);
    return copy;
  }

  private changed(copy: Copy, entry: IKeyValue, kind: "put" | "delete"): void {
    if (!copy.live) return;
    const isNode = entry.key.toString().startsWith(nodesPrefix);
    if (isNode) {
      copy.sorted = undefined;
      if (kind === "put") this.put(copy, entry);
      else {
        const id = entry.key.toString().slice(nodesPrefix.length);
        copy.records.delete(id);
        copy.corrupt.delete(id);
      }
    }
    const revision = BigInt(entry.mod_revision);
    if (revision > copy.revision) copy.revision = revision;
    if (isNode) for (const follower of copy.followers) follower.emit(kind, entry);
    this.tell(copy);
  }

  private put(copy: Copy, entry: IKeyValue): void {
    const id = entry.key.toString().slice(nodesPrefix.length);
    try {
      copy.records.set(id, {
        id,
        node: decodeNode(id, entry.value),
        modRevision: entry.mod_revision,
      });
      copy.corrupt.delete(id);
    } catch (e) {
      if (!(e instanceof CuratorError)) throw e;
      copy.records.delete(id);
      copy.corrupt.set(id, e);
    }
  }

  /** Tells the readers waiting for a revision `copy` has reached. */
  private tell(copy: Copy): void {
    for (const w of this.waiters) {
      if (copy.revision < w.revision) continue;
      this.waiters.delete(w);
      w.done(true);
    }
  }

  /** Whether the copy reaches `revision` within {@link catchUpMs}. */
  private until(revision: bigint): Promise<boolean> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.waiters.delete(waiter);
        resolve(false);
      }, catchUpMs);
      const waiter: Waiter = {
        revision,
        done: (current) => {
          clearTimeout(timer);
          resolve(current);
        },
      };
      this.waiters.add(waiter);
    });
  }

  /** Gives `copy` up: readers read etcd until a later start succeeds. */
  private fail(copy: Copy): void {
    this.failedAt = performance.now();
    void this.drop(copy);
    for (const w of this.waiters) w.done(false);
    this.waiters.clear();
  }

  private async drop(copy: Copy): Promise<void> {
    copy.live = false;
    if (this.copy === copy) this.copy = undefined;
    const followers = [...copy.followers];
    copy.followers.clear();
    const gone = new Error(
      "the leader's copy of the node records was given up (its watch failed, or the leadership ended)",
    );
    for (const follower of followers) follower.fail(gone);
    await copy.watcher?.cancel().catch(() => undefined);
  }
}
