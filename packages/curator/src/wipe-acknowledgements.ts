/**
 * Which nodes acknowledged, on their heartbeat, the wipe their record asks
 * for (`wipe_acknowledged`), kept in the leader's memory for
 * DecommissionNode with `wipe`: it revokes the node's certificate only once
 * the node acknowledged (or a deadline passed), since a revoked node can no
 * longer watch its record and so can never learn of the wipe.
 *
 * A new leader knows no acknowledgement: a decommission retried on it waits
 * for the next heartbeat of the node (which repeats the acknowledgement
 * until it stops). Bounded by the number of nodes: only an authenticated,
 * current node acknowledges, for itself; forgotten with the node's
 * heartbeats (`HeartbeatTracker.forget`).
 */
/** Wipe acknowledgements of nodes; see the module comment. */
export class WipeAcknowledgements {
  private readonly acknowledged = new Set<string>();
  private readonly waiters = new Map<string, Set<() => void>>();

  /** Records that `nodeId` acknowledged its wipe, and wakes whoever waits for it. */
  acknowledge(nodeId: string): void {
    if (this.acknowledged.has(nodeId)) return;
    this.acknowledged.add(nodeId);
    const waiting = this.waiters.get(nodeId);
    this.waiters.delete(nodeId);
    for (const wake of waiting ?? []) wake();
  }

  /** Whether `nodeId` acknowledged its wipe (to this leader). */
  has(nodeId: string): boolean {
    return this.acknowledged.has(nodeId);
  }

  /** Forgets `nodeId`'s acknowledgement (its certificate is revoked, or it is deleted). */
  forget(nodeId: string): void {
    this.acknowledged.delete(nodeId);
  }

  /**
   * Resolves true once `nodeId` acknowledged its wipe (at once if it did
   * already), false after `timeoutMs` without. Rejects with the signal's
   * reason when `signal` aborts first.
   */
  async wait(nodeId: string, timeoutMs: number, signal: AbortSignal): Promise<boolean> {
    if (this.acknowledged.has(nodeId)) return true;
    signal.throwIfAborted();
    return new Promise<boolean>((resolve, reject) => {
      const done = (outcome: () => void) => {
        clearTimeout(timer);
        signal.removeEventListener("abort", aborted);
        const waiting = this.waiters.get(nodeId);
        waiting?.delete(wake);
        if (waiting?.size === 0) this.waiters.delete(nodeId);
        outcome();
      };
      const wake = () => done(() => resolve(true));
      const aborted = () => done(() => reject(signal.reason));
      const timer = setTimeout(() => done(() => resolve(false)), timeoutMs);
      signal.addEventListener("abort", aborted, { once: true });
      let waiting = this.waiters.get(nodeId);
      if (waiting === undefined) {
        waiting = new Set();
        this.waiters.set(nodeId, waiting);
      }
      waiting.add(wake);
    });
  }
}
