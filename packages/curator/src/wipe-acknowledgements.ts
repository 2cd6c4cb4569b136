/**
 * The wipe acknowledgements of nodes (`wipe_acknowledged` on their
 * heartbeat), as this leader recorded them in their records, for
 * DecommissionNode with `wipe`: it revokes the node's certificate only once
 * the node acknowledged (or a deadline passed), since a revoked node can no
 * longer watch its record and so can never learn of the wipe.
 *
 * The acknowledgement itself is kept in the node's record
 * (`private.Node.wipe_acknowledged`, `recordWipeAcknowledgement` in
 * curator-service.ts), written before the heartbeat is answered: any leader
 * reads it there — a `--wipe` asked again after one that completed, or
 * retried on a new leader after the one that heard the node lost its
 * leadership. What this class keeps in memory is only how a waiting
 * DecommissionNode learns that this leader wrote it: a wait, woken by
 * {@link WipeAcknowledgements.acknowledge}, and the write under way for a
 * node, which a repeated acknowledgement joins instead of writing again.
 * Bounded by the number of nodes: only an authenticated, current node
 * acknowledges, for itself; forgotten with the node's heartbeats
 * (`HeartbeatTracker.forget`).
 */
/** Wipe acknowledgements this leader recorded; see the module comment. */
export class WipeAcknowledgements {
  private readonly acknowledged = new Set<string>();
  private readonly waiters = new Map<string, Set<() => void>>();
  private readonly writing = new Map<string, Promise<boolean>>();

  /**
   * Records `nodeId`'s acknowledgement with `write` (the guarded write of its
   * record, resolving whether the record now holds it), unless this leader
   * recorded it already or is recording it now (then that write's outcome is
   * the answer). Wakes the waits of `nodeId` once the record holds it.
   */
  async record(nodeId: string, write: () => Promise<boolean>): Promise<boolean> {
    if (this.acknowledged.has(nodeId)) return true;
    const under = this.writing.get(nodeId);
    if (under !== undefined) return under;
    const written = (async () => {
      try {
        const held = await write();
        if (held) this.acknowledge(nodeId);
        return held;
      } finally {
        this.writing.delete(nodeId);
      }
    })();
    this.writing.set(nodeId, written);
    return written;
  }

  /** Notes that `nodeId`'s record holds its acknowledgement, and wakes whoever waits for it. */
  acknowledge(nodeId: string): void {
    if (this.acknowledged.has(nodeId)) return;
    this.acknowledged.add(nodeId);
    const waiting = this.waiters.get(nodeId);
    this.waiters.delete(nodeId);
    for (const wake of waiting ?? []) wake();
  }

  /** Whether this leader recorded `nodeId`'s acknowledgement. */
  has(nodeId: string): boolean {
    return this.acknowledged.has(nodeId);
  }

  /** Forgets `nodeId`'s acknowledgement (its certificate is revoked, or it is deleted); its record keeps it. */
  forget(nodeId: string): void {
    this.acknowledged.delete(nodeId);
  }

  /**
   * Resolves true once this leader recorded `nodeId`'s acknowledgement (at
   * once if it did already), false after `timeoutMs` without. Rejects with
   * the signal's reason when `signal` aborts first. The caller reads the
   * record first: an acknowledgement another leader recorded is only there.
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
