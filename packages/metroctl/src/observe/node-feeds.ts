/**
 * The feeds besides the cluster's: the node view's, one per node (and per
 * log filter), each fed by one of the node's own gRPC streams: its
 * supervision tree (the latest snapshot is all a page needs), and its
 * supervisor reports and log lines (the last {@link keptItems} are kept for
 * pages that open later, new ones are batched); and the consensus view's
 * (latest snapshot).
 */
import { LiveFeed, type FeedEvent, type LiveFeedOptions } from "./live-feed";

/** How many reports or log lines a feed keeps for pages that subscribe later. */
export const keptItems = 500;

/**
 * Whole snapshots, of which the latest is all a page needs (a node's
 * supervision tree, the consensus): sent as events named `event`.
 */
export class LatestFeed<T> extends LiveFeed {
  private latest: T | undefined;
  private pending = false;

  constructor(
    private readonly event: string,
    private readonly source: (signal: AbortSignal) => AsyncIterable<T>,
    opts?: LiveFeedOptions,
  ) {
    super(opts);
  }

  protected async run(signal: AbortSignal): Promise<void> {
    for await (const snapshot of this.source(signal)) {
      this.latest = snapshot;
      this.pending = true;
      this.changed();
    }
  }

  protected snapshotEvents(): FeedEvent[] {
    return this.latest ? [[this.event, this.latest]] : [];
  }

  protected takePending(): FeedEvent[] {
    if (!this.pending || !this.latest) return [];
    this.pending = false;
    return [[this.event, this.latest]];
  }
}

/**
 * Items that arrive in batches and are shown as a list (reports, log
 * lines): sent as `{[field]: items}` events named `event`.
 */
export class BatchFeed<T> extends LiveFeed {
  private kept: T[] = [];
  private pending: T[] = [];

  constructor(
    private readonly event: string,
    private readonly field: string,
    private readonly source: (signal: AbortSignal) => AsyncIterable<T[]>,
    opts?: LiveFeedOptions,
  ) {
    super(opts);
  }

  protected async run(signal: AbortSignal): Promise<void> {
    // A new upstream sends its backlog again: what was kept would be shown twice.
    this.kept = [];
    this.pending = [];
    this.broadcast(this.event, { [this.field]: [], reset: true });
    for await (const items of this.source(signal)) {
      this.kept.push(...items);
      this.pending.push(...items);
      if (this.kept.length > keptItems) this.kept = this.kept.slice(-keptItems);
      if (this.pending.length > keptItems) this.pending = this.pending.slice(-keptItems);
      this.changed();
    }
  }

  protected snapshotEvents(): FeedEvent[] {
    return [[this.event, { [this.field]: this.kept }]];
  }

  protected takePending(): FeedEvent[] {
    if (this.pending.length === 0) return [];
    const items = this.pending;
    this.pending = [];
    return [[this.event, { [this.field]: items }]];
  }
}
