/**
 * The contract of values stored in etcd. Only the types live here; the
 * implementation is in the consensus package, which owns the etcd client, so
 * that this package and its users do not depend on etcd.
 */
import type { GetOptions, Watchable, Watcher } from "./watcher";

/**
 * Turns the bytes stored at `key` into a value. `value` is null when the key
 * does not exist or was deleted, so a decoder decides what absence means (e.g.
 * `undefined`, or a tombstone for a range). A throw is reported to the reader
 * as a `DecoderError` from `get()`; it does not stop the watcher.
 */
export type EtcdDecoder<T> = (key: string, value: Buffer | null) => T;

/** What an etcd-backed value watches and how it decodes it. */
export interface EtcdValueOptions<T> {
  /** The key watched, or the start of the range watched when `rangeEnd` is set. */
  key: string;
  /**
   * When set, the value watches every key in `[key, rangeEnd)` (etcd range
   * semantics) instead of the single `key`, and each `get()` returns the
   * update of one key.
   */
  rangeEnd?: string;
  decoder: EtcdDecoder<T>;
}

/** Options of `EtcdWatcher.get()`. */
export interface EtcdGetOptions<T> extends GetOptions<T> {
  /**
   * Only return what existed when the watcher started: each such key once,
   * then reject with `BacklogDone` instead of waiting for live updates. Meant
   * for syncing a key range into a local map: call `get({ backlogOnly: true })`
   * until `BacklogDone`, then (optionally) keep calling plain `get()` for the
   * updates since. Every `get()` of such a sequence must pass the option.
   */
  backlogOnly?: boolean;
}

/** A watcher of an `EtcdValue`; `get()` also accepts `backlogOnly`. */
export interface EtcdWatcher<T> extends Watcher<T> {
  get(opts?: EtcdGetOptions<T>): Promise<T>;
}

/**
 * A value stored in etcd under one key or a key range, read through the
 * common `Watcher` contract so that code reacting to cluster state (the
 * roleserver reacting to the node's roles, say) is the same as code reacting
 * to in-memory state, and can be tested against a `MemoryValue`. It is
 * read-only: writes go through etcd transactions elsewhere.
 *
 * Contract of every implementation:
 * - **Initial state, then changes.** A watcher's first `get()` reads the
 *   current state with an etcd Get at some revision R (a missing single key
 *   is delivered as `decoder(key, null)`), then watches from revision R + 1,
 *   so no change is missed and none is delivered twice.
 * - **Re-sync.** If the etcd watch is cancelled or its start revision was
 *   compacted, the watcher re-reads the current state with a new Get and
 *   watches again from there; readers see the newest state, never a gap
 *   hidden as "no change".
 * - **Latest wins.** As with any watcher, changes arriving between two
 *   `get()`s are collapsed: for a single key only the newest value is
 *   returned; for a range, only the newest value of each changed key
 *   (a delete as `decoder(key, null)`).
 * - **Unchanged bytes are dropped.** An update whose stored bytes are equal
 *   to the bytes last delivered for that key (e.g. a rewrite of the same
 *   value, or the re-sync Get) is not delivered.
 * - **Decoder errors are per update.** If the decoder throws, `get()` rejects
 *   with a `DecoderError` naming the key; the watcher stays usable and later
 *   updates still arrive.
 * - **Backlog mode.** `get({ backlogOnly: true })` returns the state at the
 *   start (each key in range once) and then rejects with `BacklogDone`.
 * - **Cancellation and release** follow `Watcher`: `signal` rejects the
 *   current `get()` with its reason; `close()` cancels the etcd watch.
 */
export interface EtcdValue<T> extends Watchable<T> {
  watch(): EtcdWatcher<T>;
}
