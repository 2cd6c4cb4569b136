/**
 * Node health from heartbeats, kept in the leader's memory. A new leader
 * knows nothing of earlier heartbeats: a node it has not heard from is
 * UNKNOWN while the leader is younger than the heartbeat timeout (the node
 * may simply not have beaten yet), and HEARTBEAT_TIMEOUT after that (a live
 * node would have beaten by then) — so a node that died with the old leader
 * does not stay UNKNOWN forever.
 */
import { common } from "@metropolis/proto";

export class HeartbeatTracker {
  private readonly last = new Map<string, number>();
  /** When this tracker (this leadership) started. */
  private readonly since: number;

  constructor(
    /** A node that has not sent a heartbeat for this long is HEARTBEAT_TIMEOUT. Default 10 s. */
    readonly timeoutMs = 10_000,
    private readonly now: () => number = Date.now,
  ) {
    this.since = now();
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
