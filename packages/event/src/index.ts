/**
 * @metropolis/event: observable values, the way Metropolis-TS services hand
 * state to each other.
 *
 * A service publishes its state as a `Value` (the cluster manager its status,
 * the network service its addresses) and any number of other services watch
 * it: the roleserver reacts to the node's roles, launchers wait for the
 * combination of values they need before starting a workload. Values live in
 * memory (`MemoryValue`) or in etcd (`EtcdValue`, implemented by the consensus
 * package); readers use the same `Watcher` for both.
 *
 * Guarantees, for every watcher: the first `get()` returns the current value;
 * each later `get()` waits for a newer update and returns only the latest one
 * (a slow reader never accumulates a backlog); a `get()` can be aborted with
 * an `AbortSignal` without spoiling the watcher; and a closed watcher is
 * released by its source. Combinators (`map`, `combine`, `waitFor`) build
 * derived values without background tasks.
 */
export type { GetOptions, Value, Watchable, Watcher } from "./watcher";
export { MemoryValue } from "./memory-value";
export { iterateWatcher } from "./watcher-iterator";
export { Followers } from "./followers";
export {
  BacklogDone,
  ConcurrentGetError,
  DecoderError,
  EventError,
  WatcherClosedError,
} from "./errors";
export { combine } from "./combine";
export type { Combined } from "./combine";
export { map } from "./map";
export { waitFor } from "./wait-for";
export type {
  EtcdDecoder,
  EtcdGetOptions,
  EtcdValue,
  EtcdValueOptions,
  EtcdWatcher,
} from "./etcd-value";
