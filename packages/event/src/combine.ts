import { ConcurrentGetError, WatcherClosedError } from "./errors";
import type { GetOptions, Watchable, Watcher } from "./watcher";
import { iterateWatcher } from "./watcher-iterator";

/** The type a watcher of `combine(sources)` delivers: each key's source replaced by its value type. */
export type Combined<S extends Record<string, Watchable<unknown>>> = {
  [K in keyof S]: S[K] extends Watchable<infer T> ? T : never;
};

/**
 * Combines several values into one whose watchers deliver an object with the
 * latest value of every source, e.g. a launcher that needs both the node's
 * roles and its local storage status:
 *
 * @example
 * const w = combine({ roles, storage }).watch();
 * const { roles: r, storage: s } = await w.get({ filter: (v) => v.storage.mounted });
 *
 * A combined watcher delivers its first object once every source has a value,
 * then a new object whenever any source changes; as with any watcher, changes
 * made between two `get()`s are collapsed into one delivery. Each combined
 * watcher holds one watcher per source, created by `watch()` and closed by
 * `close()`. An error from a source watcher (e.g. an etcd decoder error) is
 * returned by the next combined `get()`; later updates still arrive.
 */
export function combine<S extends Record<string, Watchable<unknown>>>(
  sources: S,
): Watchable<Combined<S>> {
  const keys = Object.keys(sources);
  return {
    watch: () =>
      new CombinedWatcher<Combined<S>>(
        keys,
        keys.map((k) => sources[k].watch()),
      ),
  };
}

/** The pending get() of a CombinedWatcher. */
interface Waiter<T> {
  resolve(v: T): void;
  reject(err: unknown): void;
  filter: ((v: T) => boolean) | undefined;
  signal: AbortSignal | undefined;
}

/**
 * Pull-based: source watchers are only asked for updates while a combined
 * get() runs, and a source get() that is still pending when the combined one
 * ends (aborted, or satisfied by another source) is simply kept for the next
 * combined get(), so no update is lost and nothing runs in the background.
 */
class CombinedWatcher<T> implements Watcher<T> {
  /** Latest value of inputs[i]; meaningful once has[i]. */
  private readonly values: unknown[];
  private readonly has: boolean[];
  /** Whether a get() on inputs[i] is in flight. */
  private readonly inFlight: boolean[];
  /** Number of inputs that have not delivered a first value yet. */
  private missing: number;
  /** An input changed since the last delivered (or filtered-out) object. */
  private changed: boolean;
  /** Errors from inputs not yet returned by a get(). */
  private readonly errors: unknown[] = [];
  private waiter: Waiter<T> | undefined;
  private closed = false;
  /** Only the settle scheduled last runs; see scheduleSettle. */
  private settleGeneration = 0;

  constructor(
    private readonly keys: string[],
    private readonly inputs: Watcher<unknown>[],
  ) {
    this.inFlight = inputs.map(() => false);
    this.values = inputs.map(() => undefined);
    this.has = inputs.map(() => false);
    this.missing = inputs.length;
    // With no inputs, the empty object is complete from the start.
    this.changed = inputs.length === 0;
  }

  get(opts?: GetOptions<T>): Promise<T> {
    if (this.closed) return Promise.reject(new WatcherClosedError());
    if (this.waiter !== undefined) return Promise.reject(new ConcurrentGetError());
    const signal = opts?.signal;
    if (signal?.aborted) return Promise.reject(signal.reason);
    const promise = new Promise<T>((resolve, reject) => {
      this.waiter = { resolve, reject, filter: opts?.filter, signal };
    });
    signal?.addEventListener("abort", this);
    // Refresh every input before deciding: an input that changed since its
    // last delivery answers with an already resolved promise, whose callback
    // runs before the settle scheduled after it.
    for (let i = 0; i < this.inputs.length; i++) this.request(i);
    this.scheduleSettle();
    return promise;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const input of this.inputs) input.close();
    this.finish()?.reject(WatcherClosedError.atClose());
  }

  /** The abort listener of the pending get(): the watcher itself, so that no closure is made per get(). */
  handleEvent(): void {
    const signal = this.waiter?.signal;
    if (signal !== undefined) this.finish()?.reject(signal.reason);
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    return iterateWatcher(this);
  }

  private request(i: number): void {
    if (this.inFlight[i]) return;
    this.inFlight[i] = true;
    this.inputs[i].get().then(
      (v) => this.onValue(i, v),
      (err: unknown) => this.onError(i, err),
    );
  }

  private onValue(i: number, v: unknown): void {
    this.inFlight[i] = false;
    if (this.closed) return;
    if (!this.has[i]) {
      this.has[i] = true;
      this.missing--;
    }
    this.values[i] = v;
    this.changed = true;
    if (this.waiter === undefined) return;
    this.request(i);
    this.scheduleSettle();
  }

  private onError(i: number, err: unknown): void {
    this.inFlight[i] = false;
    // Our own close() rejects the inputs' pending gets; that is not news.
    if (this.closed) return;
    this.errors.push(err);
    this.scheduleSettle();
  }

  /**
   * Settles in a microtask rather than in the input's callback, so that inputs
   * set together (synchronously, one after the other) are delivered as one
   * object. Every input callback postpones the settle behind itself, so an
   * input that answers a re-request at once (it changed again meanwhile) is
   * also counted. Inputs that are themselves derived take several microtasks to
   * answer, so a change to several of those at once may arrive as two objects.
   */
  private scheduleSettle(): void {
    const generation = ++this.settleGeneration;
    queueMicrotask(() => {
      if (generation === this.settleGeneration) this.settle();
    });
  }

  /** Completes the pending get() if there is an error to report or a new object that passes its filter. */
  private settle(): void {
    const waiter = this.waiter;
    if (waiter === undefined) return;
    if (this.errors.length > 0) {
      this.finish();
      waiter.reject(this.errors.shift());
      return;
    }
    if (!this.changed || this.missing > 0) return;
    this.changed = false;
    // fromEntries defines properties, so a key such as "__proto__" is kept as data.
    const snapshot = Object.fromEntries(this.keys.map((k, i) => [k, this.values[i]])) as T;
    if (waiter.filter !== undefined) {
      let pass: boolean;
      try {
        pass = waiter.filter(snapshot);
      } catch (err) {
        this.finish();
        waiter.reject(err);
        return;
      }
      if (!pass) return;
    }
    this.finish();
    waiter.resolve(snapshot);
  }

  /** Clears the pending get() and returns it. */
  private finish(): Waiter<T> | undefined {
    const waiter = this.waiter;
    this.waiter = undefined;
    waiter?.signal?.removeEventListener("abort", this);
    return waiter;
  }
}
