/**
 * The contract shared by every observable value in this package: a source
 * (`Watchable`, or a settable `Value`) hands out independent `Watcher`s, and
 * each watcher delivers the newest value it has not yet delivered.
 */

/** Options of a single `Watcher.get()`. */
export interface GetOptions<T> {
  /**
   * Abandons this `get()`: it rejects with `signal.reason`. The watcher stays
   * usable, and the value the abandoned call would have returned is returned by
   * the next `get()`.
   */
  signal?: AbortSignal;
  /**
   * Only values for which `filter` returns true are returned; the others are
   * skipped (consumed without being returned). Must be cheap and synchronous:
   * it runs inside the `set()` of the source. If it throws, `get()` rejects with
   * the thrown error.
   */
  filter?: (v: T) => boolean;
}

/**
 * A subscription to a value. It remembers which update it delivered last, so
 * its first `get()` returns the current value (waiting if there is none yet)
 * and each later `get()` waits for a newer update. Updates made between two
 * `get()`s are collapsed: only the latest is returned, so a slow reader never
 * builds up a backlog.
 *
 * One watcher serves one reader: a `get()` while another is pending rejects
 * with `ConcurrentGetError`. Call `close()` when done so the source can forget
 * the watcher; iterating with `for await` closes it when the loop ends.
 */
export interface Watcher<T> extends AsyncIterable<T> {
  /**
   * The newest value not yet delivered by this watcher, waiting for one if
   * needed. Rejects with `WatcherClosedError` once the watcher is closed, with
   * `ConcurrentGetError` while another `get()` is pending, and with the abort
   * reason when `opts.signal` aborts.
   */
  get(opts?: GetOptions<T>): Promise<T>;
  /** Releases the watcher. Idempotent. A pending `get()` rejects with `WatcherClosedError`. */
  close(): void;
}

/** Something that can be watched but not set: a read-only view of a value, e.g. a combinator's output. */
export interface Watchable<T> {
  /** A new, independent watcher. Every call subscribes anew; close the watcher when done. */
  watch(): Watcher<T>;
}

/** A watchable value that can also be set. */
export interface Value<T> extends Watchable<T> {
  /**
   * Publishes `v` to every watcher. Every call counts as an update, even when
   * `v` equals the previous value: watchers waiting in `get()` are woken.
   */
  set(v: T): void;
}
