/**
 * `Supervisor.watchTree()`: the tree's snapshot (what `tree()` returns) on
 * every change, coalesced. A burst of changes in one turn of the event loop
 * (a group restarting, a subtree starting) yields one snapshot, taken after
 * it; a reader slower than the changes gets the newest snapshot when it asks
 * again, never a backlog: at most one snapshot waits per reader.
 */
import type { NodeStatus } from "./types";

/** What a watch needs of the tree. */
export interface WatchSource {
  /** The snapshot. */
  tree(): NodeStatus[];
  /** Calls `cb` on every change and once when the tree has ended; returns the unsubscribe function. */
  onChange(cb: () => void): () => void;
  /** True once the tree has ended. */
  readonly hasEnded: boolean;
}

/** One reader of the live tree. */
export class TreeWatch implements AsyncIterableIterator<NodeStatus[]> {
  /** A change happened that the reader has not seen a snapshot of. */
  private dirty = true;
  /** A snapshot is scheduled for the end of this turn. */
  private scheduled = false;
  private finished = false;
  /** The tree ended; one last snapshot is owed if `dirty`. */
  private ended = false;
  private waiting: ((r: IteratorResult<NodeStatus[]>) => void) | undefined;
  private readonly unsubscribe: () => void;

  constructor(private readonly source: WatchSource) {
    this.unsubscribe = source.onChange(() => this.changed());
    if (source.hasEnded) this.ended = true;
  }

  private changed(): void {
    if (this.finished) return;
    this.dirty = true;
    if (this.source.hasEnded) this.ended = true;
    if (this.scheduled) return;
    this.scheduled = true;
    // Coalesce: one snapshot after everything that changes in this turn.
    setImmediate(() => {
      this.scheduled = false;
      this.deliver();
    });
  }

  /** Hands a waiting reader the snapshot it is owed, or the end. */
  private deliver(): void {
    const resolve = this.waiting;
    if (!resolve) return;
    if (this.dirty) {
      this.waiting = undefined;
      this.dirty = false;
      resolve({ value: this.source.tree(), done: false });
    } else if (this.ended) {
      this.waiting = undefined;
      this.finish();
      resolve({ value: undefined, done: true });
    }
  }

  next(): Promise<IteratorResult<NodeStatus[]>> {
    if (this.finished) return Promise.resolve({ value: undefined, done: true });
    if (this.dirty && !this.scheduled) {
      // The first snapshot, or changes of an earlier turn the reader has not seen.
      this.dirty = false;
      return Promise.resolve({ value: this.source.tree(), done: false });
    }
    if (!this.dirty && this.ended) {
      this.finish();
      return Promise.resolve({ value: undefined, done: true });
    }
    return new Promise((resolve) => (this.waiting = resolve));
  }

  return(): Promise<IteratorResult<NodeStatus[]>> {
    this.finish();
    const resolve = this.waiting;
    this.waiting = undefined;
    resolve?.({ value: undefined, done: true });
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<NodeStatus[]> {
    return this;
  }

  private finish(): void {
    if (this.finished) return;
    this.finished = true;
    this.unsubscribe();
  }
}
