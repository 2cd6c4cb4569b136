import { ConcurrentGetError, WatcherClosedError } from "./errors";
import type { GetOptions, Value, Watcher } from "./watcher";
import { iterateWatcher } from "./watcher-iterator";

/**
 * The queue is compacted once it holds at least this many entries whose get()
 * ended without a value (aborted or closed) and they are at least half of it.
 * This keeps removal O(1) amortised instead of an O(n) splice per abort, while
 * bounding the garbage a value with no set() can accumulate.
 */
const MIN_STALE_TO_COMPACT = 64;

/**
 * The shared state of one MemoryValue, reachable from its watchers. It is a
 * separate object so that watchers can read the version and the queue without
 * MemoryValue exposing them in its public surface.
 */
class ValueState<T> {
  /** 0 until the first set; incremented by every set, so equal data still counts as newer. */
  version = 0;
  current: T | undefined = undefined;
  /**
   * Watchers with a pending get(), in the order they started waiting. Entries
   * whose get() ended early stay until the next set() or compaction; a watcher
   * is never in it twice (see MemoryWatcher.queued).
   */
  queue: MemoryWatcher<T>[] = [];
  /** Upper bound on the stale entries in `queue`. */
  stale = 0;

  publish(v: T): void {
    this.current = v;
    const version = ++this.version;
    const queue = this.queue;
    if (queue.length === 0) return;
    // Swapped out before delivering so that watchers re-queued by a filter, and
    // any set() made re-entrantly from a filter, work on a fresh array. (Reusing
    // a spare array measured no faster: truncating it frees its backing store.)
    this.queue = [];
    this.stale = 0;
    for (let i = 0; i < queue.length; i++) queue[i].deliver(v, version);
  }

  /** Called when a queued watcher stopped waiting without a value. */
  release(): void {
    if (++this.stale < MIN_STALE_TO_COMPACT || this.stale * 2 < this.queue.length) return;
    const live: MemoryWatcher<T>[] = [];
    for (const w of this.queue) {
      if (w.resolve !== undefined) live.push(w);
      else w.queued = false;
    }
    this.queue = live;
    this.stale = 0;
  }
}

/**
 * The watcher of a MemoryValue. Its pending get() is stored in plain fields
 * (no per-get closure other than the Promise executor's, no per-get abort
 * closure: the watcher is its own abort listener) so that a set() fanning out
 * to thousands of waiters only walks an array and calls resolve.
 */
class MemoryWatcher<T> implements Watcher<T> {
  /** Version of the last value delivered or skipped by a filter. */
  seen = 0;
  /** Whether this watcher is in state.queue (possibly as a stale entry). */
  queued = false;
  closed = false;
  /** Set exactly while a get() is pending. */
  resolve: ((v: T) => void) | undefined = undefined;
  reject: ((err: unknown) => void) | undefined = undefined;
  filter: ((v: T) => boolean) | undefined = undefined;
  signal: AbortSignal | undefined = undefined;

  constructor(private readonly state: ValueState<T>) {}

  get(opts?: GetOptions<T>): Promise<T> {
    if (this.closed) return Promise.reject(new WatcherClosedError());
    if (this.resolve !== undefined) return Promise.reject(new ConcurrentGetError());
    let filter: ((v: T) => boolean) | undefined;
    let signal: AbortSignal | undefined;
    if (opts !== undefined) {
      filter = opts.filter;
      signal = opts.signal;
      if (signal !== undefined && signal.aborted) return Promise.reject(signal.reason);
    }
    const state = this.state;
    if (state.version > this.seen) {
      this.seen = state.version;
      const v = state.current as T;
      if (filter === undefined) return Promise.resolve(v);
      try {
        if (filter(v)) return Promise.resolve(v);
      } catch (err) {
        return Promise.reject(err);
      }
    }
    const promise = new Promise<T>((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
    this.filter = filter;
    if (signal !== undefined) {
      this.signal = signal;
      signal.addEventListener("abort", this);
    }
    if (!this.queued) {
      this.queued = true;
      state.queue.push(this);
    }
    return promise;
  }

  /** Hands a newly set value to this (possibly stale) queue entry. */
  deliver(v: T, version: number): void {
    this.queued = false;
    const resolve = this.resolve;
    if (resolve === undefined) return;
    this.seen = version;
    const filter = this.filter;
    if (filter !== undefined) {
      let pass: boolean;
      try {
        pass = filter(v);
      } catch (err) {
        this.fail(err);
        return;
      }
      if (!pass) {
        this.queued = true;
        this.state.queue.push(this);
        return;
      }
    }
    this.clearPending();
    resolve(v);
  }

  /** The abort listener of the pending get(): the watcher itself, so that no closure is made per get(). */
  handleEvent(): void {
    if (this.signal !== undefined) this.abandon(this.signal.reason);
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.reject !== undefined) this.abandon(WatcherClosedError.atClose());
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    return iterateWatcher(this);
  }

  /** Ends a pending get() without a value while this watcher is still queued. */
  private abandon(err: unknown): void {
    if (this.reject === undefined) return;
    this.fail(err);
    this.state.release();
  }

  private fail(err: unknown): void {
    const reject = this.reject;
    this.clearPending();
    reject?.(err);
  }

  private clearPending(): void {
    this.resolve = undefined;
    this.reject = undefined;
    this.filter = undefined;
    const signal = this.signal;
    if (signal !== undefined) {
      this.signal = undefined;
      signal.removeEventListener("abort", this);
    }
  }
}

/**
 * A value held in memory: the basic `Value`, used by a service to publish its
 * state (e.g. the cluster manager's status) to any number of in-process
 * readers.
 *
 * `set()` is synchronous and O(waiting watchers): it resolves every pending
 * `get()` directly. Watchers that are not waiting cost nothing to a `set()`.
 * A value references only its waiting watchers (plus, until the next `set()`
 * or compaction, a bounded number whose `get()` was aborted or closed), so a
 * dropped or closed watcher becomes garbage without unsubscribing.
 *
 * @example
 * const status = new MemoryValue<Status>();
 * const w = status.watch();
 * status.set({ state: "ready" });
 * await w.get(); // { state: "ready" }
 */
export class MemoryValue<T> implements Value<T> {
  private readonly state = new ValueState<T>();

  /**
   * @param initial - the initial value. When the argument is passed (even as
   * `undefined`) the value starts set; without it, the first `get()` of every
   * watcher waits for the first `set()`.
   */
  constructor(initial?: T) {
    // arguments.length, not `initial !== undefined`: undefined is a legitimate
    // value of a MemoryValue<T | undefined>.
    if (arguments.length > 0) {
      this.state.current = initial;
      this.state.version = 1;
    }
  }

  set(v: T): void {
    this.state.publish(v);
  }

  watch(): Watcher<T> {
    return new MemoryWatcher(this.state);
  }
}
