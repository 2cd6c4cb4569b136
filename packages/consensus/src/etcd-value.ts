/**
 * The etcd implementation of `EtcdValue` from `@metropolis/event`: a key or
 * key range read through the common `Watcher` contract.
 *
 * Each watcher, from its first `get()` until `close()`, keeps a copy of what
 * etcd holds that it has not yet delivered: a Get of the current state at
 * revision R, then an etcd watch from R + 1 whose events are folded into that
 * copy per key. Whenever the etcd watch is lost (compaction, a broken stream,
 * a member gone) the watcher reads the whole state again and diffs it against
 * what it delivered, so readers see the newest state and never a gap.
 */
import {
  BacklogDone,
  ConcurrentGetError,
  DecoderError,
  WatcherClosedError,
  type EtcdGetOptions,
  type EtcdValue,
  type EtcdValueOptions,
  type EtcdWatcher,
  iterateWatcher,
} from "@metropolis/event";
import {
  ClientClosedError,
  type IRangeResponse,
  type Namespace,
  type Watcher as EtcdWatchStream,
} from "etcd3";
import { abortableSleep } from "@metropolis/supervisor";

/**
 * What an etcd-backed value reads through: an `Etcd3` client or a
 * `Namespace` of one (as handed out by `ConsensusClient.kv`). Keys in options
 * and passed to the decoder are relative to the namespace.
 */
export type EtcdReader = Pick<Namespace, "get" | "getAll" | "watch">;

/**
 * Retry delays of the Get that (re)reads the state while etcd is unreachable.
 * Short at first because most failures are a member restarting or a leader
 * election (~100 ms), capped low because a reader is waiting; etcd3's own
 * circuit breaker already keeps a dead host from being hammered.
 */
const RETRY_INITIAL_MS = 50;
const RETRY_MAX_MS = 2_000;
/** Spreads the retries of many watchers that lost etcd at the same moment. */
const RETRY_JITTER = 0.25;
/**
 * Deadline of one Get. gRPC calls have none by default, and a Get can hang
 * on a member that is gone (grpc-js then waits for a name re-resolution it
 * rate-limits to one per 30 s) or partitioned; after this it is retried.
 */
const READ_TIMEOUT_MS = 5_000;

/**
 * A value stored in etcd under `options.key`, or under every key of
 * `[options.key, options.rangeEnd)` when `rangeEnd` is set (etcd range
 * semantics; `"\0"` means every key from `key` on, within the namespace).
 *
 * Watchers follow the `EtcdValue` contract: the first `get()` returns the
 * current state (a missing single key as `decoder(key, null)`; for a range,
 * each existing key once), later ones the newest change per key since, with
 * unchanged bytes dropped. etcd failures are not reported: `get()` waits
 * while etcd is unreachable and the watcher re-syncs once it is back.
 *
 * A watcher costs nothing until its first `get()`; from then until `close()`
 * it holds one etcd watch and the last delivered bytes of each key.
 *
 * @example
 * const roles = etcdValue(curator.kv, {
 *   key: `/nodes/${nodeId}`,
 *   decoder: (_key, bytes) => (bytes === null ? undefined : Node.decode(bytes)),
 * });
 * for await (const node of roles.watch()) apply(node);
 */
export function etcdValue<T>(kv: EtcdReader, options: EtcdValueOptions<T>): EtcdValue<T> {
  if (options.rangeEnd === undefined && options.key === "") {
    throw new RangeError("etcd value: key must not be empty (etcd has no empty key)");
  }
  if (options.rangeEnd === "") {
    throw new RangeError(
      'etcd value: rangeEnd must not be empty; omit it to watch a single key, or use "\\0"',
    );
  }
  const opts: EtcdValueOptions<T> = {
    key: options.key,
    rangeEnd: options.rangeEnd,
    decoder: options.decoder,
  };
  return { watch: () => new EtcdBackedWatcher(kv, opts) };
}

/** The get() a watcher is serving. */
interface Waiter<T> {
  resolve: (v: T) => void;
  reject: (err: unknown) => void;
  filter: ((v: T) => boolean) | undefined;
  backlogOnly: boolean;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
}

class EtcdBackedWatcher<T> implements EtcdWatcher<T> {
  private readonly single: boolean;
  private started = false;
  private closed = false;
  /** Aborted by close(): ends the sync loop, its backoff waits and its etcd watch at once. */
  private readonly stop = new AbortController();
  /**
   * The bytes last delivered, per key. For a range, a key absent here was
   * never delivered or was last delivered as deleted: both mean "null".
   * For a single key, absence means nothing was delivered yet, so that the
   * first get() delivers even a missing key.
   */
  private readonly delivered = new Map<string, Buffer | null>();
  /**
   * The net change of each key since its delivery, not yet delivered, in the
   * order the keys first changed. An entry whose bytes equal the delivered
   * ones is removed rather than kept: that is how unchanged bytes are dropped.
   */
  private readonly pending = new Map<string, Buffer | null>();
  /**
   * Keys of the first Get not yet delivered: what `backlogOnly` gets return.
   * Undefined until the first Get is done. Always a subset of `pending`.
   */
  private backlog: Set<string> | undefined;
  private waiter: Waiter<T> | undefined;

  constructor(
    private readonly kv: EtcdReader,
    private readonly options: EtcdValueOptions<T>,
  ) {
    this.single = options.rangeEnd === undefined;
  }

  get(opts?: EtcdGetOptions<T>): Promise<T> {
    if (this.closed) return Promise.reject(new WatcherClosedError());
    if (this.waiter !== undefined) return Promise.reject(new ConcurrentGetError());
    const signal = opts?.signal;
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (!this.started) {
      this.started = true;
      void this.run();
    }
    return new Promise<T>((resolve, reject) => {
      const waiter: Waiter<T> = {
        resolve,
        reject,
        filter: opts?.filter,
        backlogOnly: opts?.backlogOnly ?? false,
        signal,
        onAbort: undefined,
      };
      if (signal !== undefined) {
        waiter.onAbort = () => this.settle(waiter, false, signal.reason);
        signal.addEventListener("abort", waiter.onAbort, { once: true });
      }
      this.waiter = waiter;
      this.serve();
    });
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.stop.abort();
    const waiter = this.waiter;
    if (waiter !== undefined) this.settle(waiter, false, new WatcherClosedError());
    this.pending.clear();
    this.delivered.clear();
    this.backlog = undefined;
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    return iterateWatcher(this);
  }

  /** Hands the pending get() the next change, if there is one it may return. */
  private serve(): void {
    const waiter = this.waiter;
    if (waiter === undefined) return;
    for (;;) {
      let key: string | undefined;
      if (waiter.backlogOnly) {
        if (this.backlog === undefined) return;
        key = first(this.backlog);
        if (key === undefined) {
          this.settle(waiter, false, new BacklogDone());
          return;
        }
      } else {
        key = first(this.pending.keys());
        if (key === undefined) return;
      }
      const bytes = this.pending.get(key) as Buffer | null;
      this.forget(key);
      if (bytes === null && !this.single) this.delivered.delete(key);
      else this.delivered.set(key, bytes);

      let v: T;
      try {
        v = this.options.decoder(key, bytes);
      } catch (err) {
        this.settle(waiter, false, new DecoderError(key, err));
        return;
      }
      // The decoder or filter may have closed the watcher or aborted the get().
      if (this.waiter !== waiter) return;
      if (waiter.filter !== undefined) {
        let pass: boolean;
        try {
          pass = waiter.filter(v);
        } catch (err) {
          this.settle(waiter, false, err);
          return;
        }
        if (this.waiter !== waiter) return;
        if (!pass) continue;
      }
      this.settle(waiter, true, v);
      return;
    }
  }

  private settle(waiter: Waiter<T>, ok: boolean, result: unknown): void {
    if (this.waiter !== waiter) return;
    this.waiter = undefined;
    if (waiter.onAbort !== undefined) waiter.signal?.removeEventListener("abort", waiter.onAbort);
    if (ok) waiter.resolve(result as T);
    else waiter.reject(result);
  }

  /** Records that `key` now holds `bytes` (null: absent) in etcd. */
  private update(key: string, bytes: Buffer | null): void {
    if (this.isDelivered(key, bytes)) this.forget(key);
    else this.pending.set(key, bytes);
  }

  private isDelivered(key: string, bytes: Buffer | null): boolean {
    const last = this.delivered.get(key);
    if (last === undefined) return !this.single && bytes === null;
    if (last === null || bytes === null) return last === bytes;
    return last.equals(bytes);
  }

  private forget(key: string): void {
    this.pending.delete(key);
    this.backlog?.delete(key);
  }

  /**
   * The sync loop: read the state, follow it with an etcd watch until that
   * watch is lost, repeat; until close(). It never throws: etcd errors only
   * delay it.
   */
  private async run(): Promise<void> {
    const stop = this.stop.signal;
    let retry = RETRY_INITIAL_MS;
    const backOff = async (): Promise<boolean> => {
      const ms = retry * (1 + RETRY_JITTER * (2 * Math.random() - 1));
      retry = Math.min(retry * 2, RETRY_MAX_MS);
      try {
        await abortableSleep(ms, stop);
        return true;
      } catch {
        return false;
      }
    };
    while (!stop.aborted) {
      let connected = false;
      try {
        const state = await this.read();
        if (stop.aborted) return;
        this.applyState(state);
        connected = await this.follow(BigInt(state.header.revision) + 1n);
      } catch (err) {
        // Only the client's owner closes it, for good: retrying cannot succeed,
        // and the watcher waits (as with any etcd failure) until it is closed.
        if (err instanceof ClientClosedError) return;
      }
      if (connected) retry = RETRY_INITIAL_MS;
      // Nothing read, or a watch that failed before it connected (revision
      // compacted already, etcd unreachable): back off rather than spin.
      else if (!(await backOff())) return;
    }
  }

  /** A linearizable Get of the key or range. */
  private read(): Promise<IRangeResponse> {
    const { key, rangeEnd } = this.options;
    const callOptions = { deadline: Date.now() + READ_TIMEOUT_MS };
    if (rangeEnd === undefined) return this.kv.get(key).options(callOptions).exec();
    return this.kv.getAll().inRange({ start: key, end: rangeEnd }).options(callOptions).exec();
  }

  /**
   * Folds a full read of the state into `pending`: every key read is an
   * update, and every key known to this watcher but not read was deleted
   * meanwhile (this matters after a re-sync, whose gap may hide deletes).
   */
  private applyState(state: IRangeResponse): void {
    const { key } = this.options;
    if (this.single) {
      // SingleRangeBuilder.exec() does not strip the namespace from the
      // returned key, so the key is taken from the options.
      this.update(key, state.kvs.length > 0 ? state.kvs[0].value : null);
    } else {
      const read = new Set<string>();
      for (const kv of state.kvs) {
        const k = kv.key.toString();
        read.add(k);
        this.update(k, kv.value);
      }
      for (const k of [...this.delivered.keys(), ...this.pending.keys()]) {
        if (!read.has(k)) this.update(k, null);
      }
    }
    this.backlog ??= new Set(this.pending.keys());
    this.serve();
  }

  /**
   * Follows changes from `startRevision` until the etcd watch is lost or the
   * watcher is closed. Resolves with whether the watch ever connected.
   */
  private follow(startRevision: bigint): Promise<boolean> {
    const stop = this.stop.signal;
    const { key, rangeEnd } = this.options;
    const builder = this.kv.watch();
    if (rangeEnd === undefined) builder.key(key);
    else builder.inRange({ start: key, end: rangeEnd });
    // watcher() rather than create(): it attaches the listeners below before
    // any event can be emitted, where create() resolves only after connecting
    // (and never while etcd is unreachable) and leaves a window in which an
    // 'error' without listener would throw inside etcd3.
    const stream: EtcdWatchStream = builder.startRevision(startRevision.toString()).watcher();
    return new Promise<boolean>((resolve) => {
      let connected = false;
      let done = false;
      const end = (cancel: boolean): void => {
        if (done) return;
        done = true;
        stop.removeEventListener("abort", onStop);
        // Errors of a cancel only mean the stream is gone already.
        if (cancel) stream.cancel().catch(() => undefined);
        resolve(connected);
      };
      const onStop = (): void => end(true);
      stream.on("connected", () => (connected = true));
      stream.on("put", (kv) => {
        if (!done) this.update(kv.key.toString(), kv.value);
      });
      stream.on("delete", (kv) => {
        if (!done) this.update(kv.key.toString(), null);
      });
      // 'data' follows the put/delete events of one etcd response: serving
      // once per response, not per event, lets a waiting get() see the newest
      // value of a batch rather than its first.
      stream.on("data", () => {
        if (!done) this.serve();
      });
      // etcd cancelled the watch (start revision compacted, ...). etcd3 has
      // dropped it already; a cancel of ours would ask etcd about an unknown
      // watch id, so none is sent. The listener stays after `done` so that a
      // late 'error' is never an unhandled EventEmitter error.
      stream.on("error", () => end(false));
      // The stream broke. etcd3 would resume it from the revision in the
      // header of the last response, which for a watch still catching up is
      // past events it has not sent yet; reading the state again loses
      // nothing. etcd3 is reconnecting, so cancel() just forgets the watch.
      stream.on("disconnected", () => end(true));
      stream.on("end", () => end(false));
      if (stop.aborted) end(true);
      else stop.addEventListener("abort", onStop);
    });
  }
}

function first<K>(keys: Iterable<K>): K | undefined {
  for (const k of keys) return k;
  return undefined;
}
