/**
 * Node health from heartbeats, kept in the leader's memory. A new leader
 * knows nothing of earlier heartbeats: a node it has not heard from is
 * UNKNOWN while the leader is younger than the heartbeat timeout (the node
 * may simply not have beaten yet), and HEARTBEAT_TIMEOUT after that (a live
 * node would have beaten by then) — so a node that died with the old leader
 * does not stay UNKNOWN forever.
 *
 * The timeout is the cluster configuration's `heartbeat_timeout_ms` when it
 * sets one ({@link HeartbeatTracker.configure}: at leader start, and on every
 * ConfigureCluster change), else this curator's local default.
 */
import { common } from "@metropolis/proto";

export class HeartbeatTracker {
  private readonly last = new Map<string, number>();
  /** When this tracker (this leadership) started. */
  private readonly since: number;
  /** The cluster configuration's timeout, when it sets one. */
  private configured: number | undefined;

  constructor(
    /** A node that has not sent a heartbeat for this long is HEARTBEAT_TIMEOUT. Default 10 s. */
    private readonly defaultTimeoutMs = 10_000,
    private readonly now: () => number = Date.now,
  ) {
    this.since = now();
  }

  /** The timeout in force. */
  get timeoutMs(): number {
    return this.configured ?? this.defaultTimeoutMs;
  }

  /** Follows the cluster configuration: its `heartbeat_timeout_ms`, 0 for the local default. */
  configure(config: common.ClusterConfiguration | undefined): void {
    const ms = config?.heartbeatTimeoutMs ?? 0;
    this.configured = ms > 0 ? ms : undefined;
  }

  /** Records a heartbeat of `nodeId` now. */
  beat(nodeId: string): void {
    this.last.set(nodeId, this.now());
  }

  health(nodeId: string): common.NodeHealth {
    const at = this.last.get(nodeId);
    if (at === undefined) {
      return this.now() - this.since > this.timeoutMs
        ? common.NodeHealth.HEARTBEAT_TIMEOUT
        : common.NodeHealth.UNKNOWN;
    }
    return this.now() - at > this.timeoutMs
      ? common.NodeHealth.HEARTBEAT_TIMEOUT
      : common.NodeHealth.HEALTHY;
  }

  /** Milliseconds since the last heartbeat of `nodeId`, or undefined if none was seen. */
  sinceLast(nodeId: string): number | undefined {
    const at = this.last.get(nodeId);
    return at === undefined ? undefined : this.now() - at;
  }

  /** Forgets a deleted node. */
  forget(nodeId: string): void {
    this.last.delete(nodeId);
  }
}
