/**
 * Node health from heartbeats, kept in the leader's memory: a new leader
 * starts with every node UNKNOWN until it hears from it, which is the honest
 * answer (Monogon does the same).
 */
import { common } from "@metropolis/proto";

export class HeartbeatTracker {
  private readonly last = new Map<string, number>();

  constructor(
    /** A node that has not sent a heartbeat for this long is HEARTBEAT_TIMEOUT. Default 10 s. */
    readonly timeoutMs = 10_000,
    private readonly now: () => number = Date.now,
  ) {}

  /** Records a heartbeat of `nodeId` now. */
  beat(nodeId: string): void {
    this.last.set(nodeId, this.now());
  }

  health(nodeId: string): common.NodeHealth {
    const at = this.last.get(nodeId);
    if (at === undefined) return common.NodeHealth.UNKNOWN;
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
