/**
 * What the observer's server needs from a cluster: the upstreams of its
 * feeds and the owner's actions. {@link ClusterBackend} is the real one
 * (gRPC, the owner's credentials); tests give the server their own.
 */
import type { ClusterUpdate } from "./cluster-feed";
import type {
  ConsensusSnapshot,
  LabelsChange,
  LogsQuery,
  ObservedLogEntry,
  ObservedReport,
  RolesChange,
  TreeSnapshot,
} from "./observer-protocol";

/** The cluster as the observer sees it; every stream ends when its signal aborts. */
export interface ObserverBackend {
  /** The cluster's nodes and leader, then their changes (the whole cluster again when it starts over). */
  cluster(signal: AbortSignal): AsyncIterable<ClusterUpdate>;
  /** The etcd members and the curator leader with its term: now, then after every change. */
  consensus(signal: AbortSignal): AsyncIterable<ConsensusSnapshot>;
  /** Node `id`'s supervision tree: now, then after every change. */
  tree(id: string, signal: AbortSignal): AsyncIterable<TreeSnapshot>;
  /** Node `id`'s supervisor reports: the kept ones, then new ones. */
  reports(id: string, signal: AbortSignal): AsyncIterable<ObservedReport[]>;
  /** Node `id`'s log lines matching `query`: the backlog, then (following) new ones. */
  logs(id: string, query: LogsQuery, signal: AbortSignal): AsyncIterable<ObservedLogEntry[]>;
  /** Approves NEW node `id`; resolves to what happened, in words. */
  approve(id: string): Promise<string>;
  /** Gives or takes roles of node `id`. */
  setRoles(id: string, change: RolesChange): Promise<string>;
  /** Sets and removes labels of node `id`. */
  setLabels(id: string, change: LabelsChange): Promise<string>;
  /** Closes every connection. */
  close(): void;
}
