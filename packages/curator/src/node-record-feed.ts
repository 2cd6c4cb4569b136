/**
 * One etcd watch of every node record per leadership, shared by the
 * Curator.Watch streams of single nodes (each node watches its own record).
 *
 * Without it each such stream had an etcd watcher of its own, and etcd3
 * creates watchers one at a time (etcd's answer to a create does not say
 * which request it answers, so the client waits for each before sending the
 * next): after a failover thousands of nodes watching again queued behind
 * each other for seconds. Here the first subscription creates one prefix
 * watcher, the events go to the subscribers of their node in memory, and
 * the watcher is cancelled when the last subscriber leaves.
 *
 *   etcd watch of nodes/ ──▶ NodeRecordFeed ──(by node ID)──▶ subscription of node A
 *                                                      └────▶ subscription of node B …
 *
 * A subscription buffers what arrives until its owner has read the record
 * and `start`s it after that read's revision: events at or before it are
 * dropped, later ones delivered in order, so nothing between the read and
 * the watch is lost and nothing is sent twice (as with an etcd watcher
 * started at the next revision). When the shared watch fails, every
 * subscription fails with it (the clients watch again), and the next
 * subscription creates a new one.
 */
import { EventEmitter } from "node:events";
import type { IKeyValue, Watcher } from "etcd3";
import { nodesPrefix } from "./keys";
import type { LeaderContext } from "./leader-context";
import { nodeIdOf, watchNodesAfter, type RecordEvents } from "./node-watch-streams";

/** A change of one node's record, as the shared watch saw it. */
type RecordEvent = { kind: "put" | "delete"; entry: IKeyValue };

/** The events of one node's record; see the module comment. */
export class NodeRecordSubscription extends EventEmitter implements RecordEvents {
  /** Events received before `start`; undefined once started. */
  private buffered: RecordEvent[] | undefined = [];
  private after = -1n;
  /** Why the shared watch failed, if it did; a stream checks before it follows the events. */
  failure: Error | undefined;

  constructor(
    readonly nodeId: string,
    private readonly leave: (s: NodeRecordSubscription) => void,
  ) {
    super();
  }

  /**
   * Delivers the events after `revision` (the revision the record was read
   * at), those buffered first.
   */
  start(revision: string): void {
    this.after = BigInt(revision);
    const buffered = this.buffered ?? [];
    this.buffered = undefined;
    for (const event of buffered) this.deliver(event);
  }

  /** Called by the feed with each event of this node, in revision order. */
  receive(event: RecordEvent): void {
    if (this.buffered) this.buffered.push(event);
    else this.deliver(event);
  }

  private deliver({ kind, entry }: RecordEvent): void {
    if (BigInt(entry.mod_revision) > this.after) this.emit(kind, entry);
  }

  /** Called by the feed when the shared watch failed: the subscription fails with it. */
  fail(e: Error): void {
    this.failure = e;
    // Before its stream follows it nobody listens yet: the stream finds `failure` instead.
    if (this.listenerCount("error") > 0) this.emit("error", e);
  }

  /** Leaves the feed; the last subscription out cancels the shared watch. */
  async cancel(): Promise<void> {
    this.leave(this);
  }
}

/** One shared etcd watch; `live` until cancelled or failed. */
interface SharedWatch {
  live: boolean;
  readonly watcher: Promise<Watcher>;
}

/** The shared watch of one leadership; see the module comment. */
export class NodeRecordFeed {
  private readonly subscribers = new Map<string, Set<NodeRecordSubscription>>();
  private count = 0;
  private current: SharedWatch | undefined;

  constructor(private readonly ctx: LeaderContext) {}

  /**
   * A subscription to node `id`'s record, receiving (buffered until
   * `start`) every change from now on. Resolves once the shared watch runs,
   * so a read made after it is covered by the watch.
   */
  async subscribe(id: string): Promise<NodeRecordSubscription> {
    const subscription = new NodeRecordSubscription(id, (s) => this.leave(s));
    let forNode = this.subscribers.get(id);
    if (!forNode) this.subscribers.set(id, (forNode = new Set()));
    forNode.add(subscription);
    this.count++;
    try {
      await (this.current ??= this.open()).watcher;
    } catch (e) {
      this.leave(subscription);
      throw e;
    }
    return subscription;
  }

  /** Subscriptions open now. */
  get size(): number {
    return this.count;
  }

  private open(): SharedWatch {
    const shared: SharedWatch = { live: true, watcher: this.createWatcher(() => shared) };
    // A watch that could not be created is not kept: the next subscription tries again.
    shared.watcher.catch(() => this.end(shared));
    return shared;
  }

  private async createWatcher(shared: () => SharedWatch): Promise<Watcher> {
    // Any read tells the current revision: the watch starts right after it.
    const { header } = await this.ctx.kv.get(nodesPrefix).exec();
    const watcher = await watchNodesAfter(this.ctx, header.revision);
    const dispatch = (kind: RecordEvent["kind"]) => (entry: IKeyValue) => {
      if (!shared().live) return;
      for (const s of this.subscribers.get(nodeIdOf(entry)) ?? []) s.receive({ kind, entry });
    };
    watcher.on("put", dispatch("put"));
    watcher.on("delete", dispatch("delete"));
    watcher.once("error", (e: Error) => {
      if (!shared().live) return;
      this.end(shared());
      for (const forNode of this.subscribers.values()) for (const s of forNode) s.fail(e);
    });
    return watcher;
  }

  /** Ends `shared`: no more events from it, its etcd watcher cancelled; the next subscription opens another. */
  private end(shared: SharedWatch): void {
    shared.live = false;
    if (this.current === shared) this.current = undefined;
    void shared.watcher.then(
      (w) => w.cancel().catch(() => undefined),
      () => undefined,
    );
  }

  private leave(subscription: NodeRecordSubscription): void {
    const forNode = this.subscribers.get(subscription.nodeId);
    if (!forNode?.delete(subscription)) return;
    if (forNode.size === 0) this.subscribers.delete(subscription.nodeId);
    if (--this.count === 0 && this.current) this.end(this.current);
  }
}
